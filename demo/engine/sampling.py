"""How the token written at a position is drawn, for both ways a model writes: transformers'
``generate()`` (the paper's decoder, a causal LM) and the unmasking loop (``demo.engine.unmasking``).

One reading of ``SamplingSettings``: transformers' own logits processors, in ``generate()``'s
order and with its semantics. The penalty acts on the scores a step's log-probabilities are read
from (the likelihood and the trace report them); the warpers only shape the distribution a
sample is drawn from.
"""

from typing import NamedTuple

import torch
from transformers import LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from ..settings import SamplingSettings


class Processors(NamedTuple):
    penalty: LogitsProcessorList  # on the scores the log-probabilities are read from
    warpers: LogitsProcessorList  # on the distribution a sample is drawn from (sampling only)


def logits_processors(s: SamplingSettings) -> Processors:
    """The processors ``s`` asks for: none where it asks for nothing (greedy, no penalty)."""
    penalty = [RepetitionPenaltyLogitsProcessor(s.repetition_penalty)] if s.repetition_penalty != 1.0 else []
    warpers = []
    if s.strategy == "sample":
        warpers.append(TemperatureLogitsWarper(s.temperature))
        if s.top_k:
            warpers.append(TopKLogitsWarper(s.top_k))
        if s.top_p < 1:
            warpers.append(TopPLogitsWarper(s.top_p))
        if s.min_p:
            warpers.append(MinPLogitsWarper(s.min_p))
        if s.typical_p < 1:
            warpers.append(TypicalLogitsWarper(s.typical_p))
    return Processors(LogitsProcessorList(penalty), LogitsProcessorList(warpers))


def generator(seed: int | None, device: torch.device | str = "cpu") -> torch.Generator:
    """A request's own random draws: from ``seed``, or from fresh entropy without one."""
    drawn = torch.Generator(device=device)
    if seed is not None:
        drawn.manual_seed(seed)
    else:
        drawn.seed()
    return drawn


class Draw(LogitsProcessor):
    """Sampling inside ``generate()``, each row from its own generator: the warpers shape the
    row's distribution, one token is drawn from it as ``generate()`` draws (softmax, multinomial),
    and every other token is ruled out, so ``generate()`` run greedy takes the drawn one.
    ``generate()``'s own sampling draws the whole batch from the global generator, so a request's
    sample would depend on the batch it ran in."""

    def __init__(self, warpers: LogitsProcessorList, generators: list[torch.Generator]):
        self.warpers, self.generators = warpers, generators

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        probs = self.warpers(input_ids, scores).softmax(-1)
        drawn = torch.cat([torch.multinomial(probs[row:row + 1], 1, generator=g)
                           for row, g in enumerate(self.generators)])
        return torch.full_like(scores, float("-inf")).scatter_(1, drawn, 0.0)
