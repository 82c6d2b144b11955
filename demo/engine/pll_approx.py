"""The approximate PLL's two decisions about a ranking: which tokens its candidates share, and
which candidates it scores again, exactly (the near-ties). Plain functions of token ids and
scores; the copies and the scoring are ``demo.engine.pll``'s.

- Shared tokens: the approximate PLL (``ScoringSettings.stride``) merges the copies of the tokens
  every candidate shares (an ARC question, a HellaSwag context) apart from the copies of the
  tokens where the candidates differ, so a shared token never sees masks on another candidate's
  words and its error is nearly the same in every candidate.
- Near-ties: the merged copies make every score a little too low, by different amounts for
  different candidates, and the rankings they get wrong are near-ties. So, as the prefix cache
  redoes a step whose top two tokens are close, a ranking scores again, exactly, every candidate
  whose approximate score lies within ``rescore_band`` of its best: when the exact winner is
  among them, the top of the ranking is the exact one.

- Fast scoring (``ScoringSettings.fast``): which setting a ranking gets, by the scored length of
  its longest candidate, from the bands where ``benchmarks/bench_pll_approx.py`` measured one that
  keeps the exact ranking (``FAST_PLL``, a table that benchmark writes); no band: exact.

How much each keeps, at what cost: ``benchmarks/bench_pll_approx.py``, docs/method.md section 3.
"""

import csv
import hashlib
from dataclasses import dataclass, fields
from functools import cache

from ..paths import FAST_PLL


@dataclass(frozen=True)
class FastBand:
    """A band of scored lengths and the approximate PLL setting measured to keep its rankings
    (one row of ``FAST_PLL``)."""
    span_min: int  # the longest candidate's scored tokens, from span_min to span_max
    span_max: int
    stride: int
    rescore_band: float  # nats
    rankings: int  # measured on this many rankings of the shipped ranked tasks
    agreement: float  # share whose top candidate was the exact PLL's
    low: float  # its 95% Wilson interval
    high: float
    speedup: float  # wall clock, exact / this setting
    model: str  # the model measured


@cache
def fast_bands() -> tuple[FastBand, ...]:
    """The measured bands (none where the table has no row: fast scoring is then exact)."""
    if not FAST_PLL.is_file():
        return ()
    with FAST_PLL.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return tuple(FastBand(**{x.name: x.type(row[x.name]) for x in fields(FastBand)}) for row in rows)


def fast_table_id() -> str:
    """A short digest of the measured table: runs with fast scoring name it, so a run made with
    another table never resumes into one made with this."""
    return hashlib.sha1(FAST_PLL.read_bytes() if FAST_PLL.is_file() else b"").hexdigest()[:6]


def fast_band(span: int) -> FastBand | None:
    """The band for a ranking whose longest candidate scores ``span`` tokens, if one was measured."""
    return next((b for b in fast_bands() if b.span_min <= span <= b.span_max), None)


def near_ties(scores: list[float], band: float) -> list[int]:
    """Indices of the scores within ``band`` of the best (the best included), in order; empty
    when the best stands alone: nothing to re-score."""
    if len(scores) < 2:
        return []
    best = max(scores)
    close = [k for k, score in enumerate(scores) if score >= best - band]
    return close if len(close) > 1 else []


def shared_tokens(ids: list[list[int]]) -> list[set[int]]:
    """Per token list, the positions in the common start or the common end of all of them (one
    list shares all its positions)."""
    start = 0
    while all(len(row) > start for row in ids) and len({row[start] for row in ids}) == 1:
        start += 1
    end = 0  # never reaching into the common start (one list may be a prefix of another)
    while all(len(row) > start + end for row in ids) and len({row[-1 - end] for row in ids}) == 1:
        end += 1
    return [set(range(start)) | set(range(len(row) - end, len(row))) for row in ids]
