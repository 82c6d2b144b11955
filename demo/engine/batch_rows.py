"""Requests decoded together by ``generate()``, each as it runs alone.

``generate()`` takes texts of different lengths as one left-padded batch (every row's text ends at
the same column; the attention mask and the position ids it derives leave the padding out). What
is a request's own stays its own: its constraints, stops and step recorder see only its rows with
its padding cut off (:class:`RowProcessors`, :class:`RowStops`), as ``generate()`` would show them
to it alone, and where its text ended is kept (``generate()`` pads a finished row until the whole
batch is done). A request's beams (beam search) are its rows; requests with beams run alone.

No library does this: ``generate()``'s processors and criteria see the whole batch at once, and
ours were written for one request (its prompt length, its stop strings).
"""

from dataclasses import dataclass

import torch
from transformers import LogitsProcessor, StoppingCriteria


@dataclass(frozen=True)
class Batch:
    """Prompts as one left-padded batch, each request's rows ``beams`` at a time (``generate()``
    repeats each prompt once per beam)."""
    ids: torch.Tensor  # [requests, width]: the prompts, left-padded
    attention_mask: torch.Tensor  # 0 on the padding
    pads: tuple[int, ...]  # per request: the padding before its prompt
    beams: int

    @classmethod
    def of(cls, prompts: list[list[int]], pad_id: int, beams: int, device) -> "Batch":
        width = max(len(ids) for ids in prompts)
        pads = tuple(width - len(ids) for ids in prompts)
        ids = torch.tensor([[pad_id] * pad + list(p) for pad, p in zip(pads, prompts)], device=device)
        mask = torch.tensor([[0] * pad + [1] * len(p) for pad, p in zip(pads, prompts)], device=device)
        return cls(ids, mask, pads, beams)

    @property
    def width(self) -> int:
        return self.ids.shape[1]

    def rows(self, request: int) -> slice:
        return slice(request * self.beams, (request + 1) * self.beams)

    def own(self, request: int, ids: torch.Tensor) -> torch.Tensor:
        """A request's rows of ``ids`` as it would have them alone (its padding cut off)."""
        return ids[self.rows(request), self.pads[request]:]

    def written(self, output: torch.Tensor, request: int, length: int | None) -> list[int]:
        """What ``generate()`` wrote after a request's prompt (its first row: the best beam), up
        to ``length`` tokens where it ended earlier than the batch."""
        row = output[request * self.beams, self.width:].tolist()
        return row if length is None else row[:length]


class RowProcessors(LogitsProcessor):
    """Each request's own logits processors, in order, on its own rows (its padding cut off)."""

    def __init__(self, batch: Batch, processors: list[list]):
        self.batch, self.processors = batch, processors

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if len(self.processors) == 1:  # one request, unpadded: its processors on the whole batch, no copy
            for processor in self.processors[0]:
                scores = processor(input_ids, scores)
            return scores
        shaped = []
        for request, processors in enumerate(self.processors):
            own, ids = scores[self.batch.rows(request)], self.batch.own(request, input_ids)
            for processor in processors:
                own = processor(ids, own)
            shaped.append(own)
        return torch.cat(shaped)


class RowStops(StoppingCriteria):
    """Each request's own stopping criteria on its own rows, and, once a request is done (a stop,
    or an end id written without beams), how many tokens it had written: ``lengths``."""

    def __init__(self, batch: Batch, criteria: list, ends: list[int]):
        self.batch, self.criteria = batch, criteria
        self.ends = torch.tensor(ends, dtype=torch.long, device=batch.ids.device)
        self.lengths: list[int | None] = [None] * len(criteria)

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.BoolTensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for request, criteria in enumerate(self.criteria):
            rows, ids = self.batch.rows(request), self.batch.own(request, input_ids)
            for criterion in criteria:
                done[rows] |= criterion(ids, scores)
            done[rows] |= torch.isin(input_ids[rows, -1], self.ends)
            if self.lengths[request] is None and bool(done[rows].all()):
                self.lengths[request] = input_ids.shape[1] - self.batch.width
        return done
