"""The approximate PLL's two decisions about a ranking: which tokens its candidates share, and
which candidates it re-scores exactly (the near-ties). Plain functions of numbers; the copies and
the scoring are ``demo.engine.pll``'s.

Shared tokens: ``demo.engine.pll`` merges the copies of the tokens all candidates share apart from
the copies of the tokens where they differ. Measured on the stand-in MLM's rankings (COPA, PIQA,
HellaSwag, WSC, Winograd, ARC), at the same stride this lifts agreement with the exact ranking
most where the candidates share most (ARC's question: 0.75 to 0.89 at stride 12).

Near-ties:
the strided PLL (``ScoringSettings.stride``) makes every score a little too
low, by different amounts for different candidates; the rankings it gets wrong are near-ties
(``docs/method.md``, section 3). So, as the prefix cache redoes a step whose top two tokens are
close, a ranking re-scores exactly every candidate whose approximate score lies within
``rescore_band`` of its best: when the exact winner is among them (its approximate score fell less
than the band below the best's), the top of the ranking is the exact one. Which band keeps how
many rankings, at what cost, is measured on held-out items by ``benchmarks/bench_pll_approx.py``.
"""


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
