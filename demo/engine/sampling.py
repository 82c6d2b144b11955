"""How the token written at a position is drawn, for both ways a model writes: transformers'
``generate()`` (the paper's decoder, a causal LM) and the unmasking loop (``demo.engine.unmasking``).

One reading of ``SamplingSettings``: transformers' own logits processors, in ``generate()``'s
order and with its semantics. The penalty acts on the scores a step's log-probabilities are read
from (the likelihood and the trace report them); the warpers only shape the distribution a
sample is drawn from.
"""

from typing import NamedTuple

from transformers import LogitsProcessorList
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from ..settings import SamplingSettings

# What ``generate()``'s own config says of sampling when these processors sample: nothing, said
# explicitly (a value left unset would be filled from the checkpoint's generation config)
NEUTRAL = dict(temperature=1.0, top_k=0, top_p=1.0)


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
    return Processors(LogitsProcessorList(penalty), LogitsProcessorList(warpers))
