"""The work a request did, counted as its forward passes run: passes, and the tokens they read.

Every place where the engine runs a model calls :func:`count_pass` with exactly what that pass
reads: a masked LM's window or masked copy (``demo.engine.reading.hidden_at``), the prefix cache's
whole window or only its tail (``demo.engine.prefix_cache``), a causal LM's text when scoring
(``demo.engine.pll``) and, when generating, what ``generate()`` feeds it at each step: the prompt
once, then the one new token its key/value cache lacks (``demo.engine.generation``). Whoever
wants the count opens :func:`counting` around the work; the engines do so and return the count
with their results (``GenerationResult.reads``, ``InfillResult.reads``, ...).

Counters nest: a pass is charged to every counter open around it, so an infilling's count holds
the scoring of its [blank:auto] tries, and each step of a playback can have its own.

A pass is counted per row it reads: a batch of k texts (beams, masked copies) is k passes, since
batching is how they run together, not less reading. Padding is not read (the attention mask
hides it), so it is not counted. ``demo.app.budget`` predicts the same numbers from a formula
before the request runs; the tests hold the two equal.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator


@dataclass
class Reads:
    passes: int = 0  # forward passes, one per row read
    tokens: int = 0  # tokens those passes read together (padding excluded)

    def __add__(self, other: "Reads") -> "Reads":
        return Reads(self.passes + other.passes, self.tokens + other.tokens)


# the counters open in this context (a thread or task of its own starts with none)
_OPEN: ContextVar[tuple[Reads, ...]] = ContextVar("open_counters", default=())


@contextmanager
def counting(reads: Reads | None = None) -> Iterator[Reads]:
    """A counter of the passes run while it is open (in this thread or task): ``reads``, or a
    new one (``reads`` is for a caller that hands the counter to someone before it opens)."""
    reads = Reads() if reads is None else reads
    token = _OPEN.set(_OPEN.get() + (reads,))
    try:
        yield reads
    finally:
        _OPEN.reset(token)


def count_pass(input_ids, attention_mask=None) -> None:
    """Charge a forward pass over ``input_ids`` (rows, length) to every open counter: a pass per
    row, and the tokens the attention mask lets it read (all of them without one)."""
    counters = _OPEN.get()
    if not counters:
        return
    rows = int(input_ids.shape[0])
    tokens = int(attention_mask.sum()) if attention_mask is not None else int(input_ids.numel())
    for reads in counters:
        reads.passes += rows
        reads.tokens += tokens
