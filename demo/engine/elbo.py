"""The masked diffusion ELBO: how masked diffusion LMs (MDLM, LLaDA, dLLM's BERT-Chat) score a text.

A masked diffusion LM is trained to fill any share of masked tokens; its likelihood is bounded
below by the ELBO, which LLaDA and dLLM estimate to rank an answer (LLaDA's eq. 6, the lower-variance
form of MDLM's bound). For the L scored tokens x of a text (the context stays as written):

    log p(x) >= E_{k ~ U{1..L}} E_{S: k of the L tokens} [ (L / k) sum_{i in S} log p(x_i | x, S masked) ]

Each masking pattern S is one masked copy of the text through the model (``demo.engine.pll`` runs
them with the PLL's copies). The expectation is estimated from ``samples`` patterns drawn with a
seed, each with its (L / k) scale, their mean the score and their standard error said with it; a
text whose patterns number no more than ``samples`` (2^L - 1: L <= 6 at 64 samples) is scored
exactly, every pattern once at its probability (standard error 0).

A token's share of the score is its term summed over the patterns that mask it, so the per-token
heatmap adds up to the score, as the PLL's does. Torch-free: the work estimate counts patterns too.
"""

import math
import random
import statistics
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class Pattern:
    """One masking pattern of a text: the scored positions it masks, its (L / k) scale and its
    probability (1 / samples drawn; L^-1 C(L, k)^-1 enumerated)."""
    masked: tuple[int, ...]
    scale: float
    weight: float


def enumerated(n_scored: int, samples: int) -> bool:
    """Whether a text of ``n_scored`` scored tokens is scored exactly: its patterns are no more
    than ``samples``."""
    return 2 ** n_scored - 1 <= samples


def patterns(scored: list[int], samples: int, seed: str) -> list[Pattern]:
    """Every pattern of ``scored`` at its probability where they number at most ``samples``, else
    ``samples`` patterns drawn: a number of masks k ~ U{1..L}, then k of the positions. ``seed``
    names the draw (the settings' seed and the text), so a text scores the same in any batch."""
    n = len(scored)
    if enumerated(n, samples):
        return [Pattern(masked, n / k, 1 / (n * math.comb(n, k)))
                for k in range(1, n + 1) for masked in combinations(scored, k)]
    draw = random.Random(seed)
    drawn = []
    for _ in range(samples):
        k = draw.randint(1, n)
        drawn.append(Pattern(tuple(sorted(draw.sample(scored, k))), n / k, 1 / samples))
    return drawn


def estimate(drawn: list[Pattern], logprobs: list[list[float]], sampled: bool) -> tuple[dict[int, float], float]:
    """(each scored position's share of the ELBO, the estimate's standard error: 0 unless
    ``sampled``) from each pattern's log-probabilities of the tokens it masks (``logprobs[k]`` in
    the order of ``drawn[k].masked``). The shares add up to the ELBO."""
    shares: dict[int, float] = {}
    values = []
    for pattern, lps in zip(drawn, logprobs):
        for position, lp in zip(pattern.masked, lps):
            shares[position] = shares.get(position, 0.0) + pattern.weight * pattern.scale * lp
        values.append(pattern.scale * sum(lps))
    return shares, statistics.stdev(values) / math.sqrt(len(values)) if sampled and len(values) > 1 else 0.0
