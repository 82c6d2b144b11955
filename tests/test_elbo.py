"""The masked diffusion ELBO (``method="elbo"``: demo.engine.elbo through demo.engine.pll) against its
definition, written out here: every masking pattern of a short candidate through the model's own
forward pass, each weighted by its probability under the bound (a number of masks k uniform in
1..L, then k of the L scored tokens uniform), its log-probabilities scaled by L / k."""

import math
import statistics
from itertools import combinations

import pytest
import torch

import tests.floats as floats
from demo.engine.elbo import patterns
from demo.engine.pll import score_batch, score_candidates
from demo.settings import ScoringSettings

ITEMS = [("The cat sat on the", " mat."), ("Paris is the capital of", " France"), ("", "A short one.")]


def scored_positions(lm, context: str, completion: str) -> tuple[list[int], list[int]]:
    """(the text's ids, the completion's positions: the tokens after the context's own, specials aside)."""
    tokenizer = lm.tokenizer
    encoding = tokenizer(context + completion, return_special_tokens_mask=True)
    ids, special = encoding["input_ids"], encoding["special_tokens_mask"]
    first = len(tokenizer(context)["input_ids"]) - 1 if context else 1
    return ids, [i for i in range(first, len(ids)) if not special[i]]


@torch.no_grad()
def naive_elbo(lm, context: str, completion: str) -> tuple[float, int]:
    """(the exact expectation over every masking pattern, L)."""
    ids, scored = scored_positions(lm, context, completion)
    n, total = len(scored), 0.0
    for k in range(1, n + 1):
        for masked in combinations(scored, k):
            copy = torch.tensor(ids)
            copy[list(masked)] = lm.tokenizer.mask_token_id
            logprobs = lm.model(input_ids=copy[None]).logits[0].log_softmax(-1)
            value = n / k * sum(float(logprobs[i, ids[i]]) for i in masked)
            total += value / (n * math.comb(n, k))
    return total, n


@pytest.mark.floats
@pytest.mark.parametrize("family", ["bert", "roberta", "deberta-v2"])
def test_every_pattern_of_a_short_candidate_gives_the_exact_expectation(tiny_model, family):
    """Candidates of at most 4 scored tokens have at most 15 patterns, fewer than the 64 samples:
    the engine scores every pattern once, at its probability, and equals the expectation computed
    here pattern by pattern; the standard error is 0 and the tokens' shares add up to the score."""
    lm = tiny_model(family)
    items = [item for item in ITEMS if len(scored_positions(lm, *item)[1]) <= 4]
    assert len(items) >= 2
    results = score_batch(lm, items, ScoringSettings(method="elbo", token_budget=64))
    for item, result in zip(items, results):
        expected, n = naive_elbo(lm, *item)
        assert result.total == floats.total(expected, n, lm)
        assert result.stderr == 0 and len(result.tokens) == n
        assert sum(t.logprob for t in result.tokens) == pytest.approx(result.total, abs=1e-9)


def test_sampled_patterns_draw_the_number_of_masks_then_the_masks():
    """More patterns than samples: each draw is k ~ U{1..L} masks at random, scaled by L / k, each
    with weight 1 / samples; the draw is the seed's (the same text, the same patterns)."""
    scored = list(range(1, 14))  # 8191 patterns
    drawn = patterns(scored, 2600, "0:text")
    assert len(drawn) == 2600 and patterns(scored, 2600, "0:text") == drawn  # (2^13 - 1 patterns: more)
    assert patterns(scored, 2600, "1:text") != drawn
    counts = [sum(1 for p in drawn if len(p.masked) == k) for k in range(1, 14)]
    assert min(counts) > 130 and max(counts) < 270  # about 200 each
    assert all(p.scale == 13 / len(p.masked) and p.weight == 1 / 2600 for p in drawn)
    every = patterns(list(range(4)), 64, "0:text")
    assert len(every) == 15 == 2**4 - 1 and sum(p.weight for p in every) == pytest.approx(1)


@pytest.mark.floats
def test_a_sampled_estimate_lies_within_its_standard_errors_of_the_expectation(tiny_model):
    """A candidate of 6 or more tokens (63 patterns or more) scored from 8 samples: an estimate whose standard error
    is the spread of the samples' values; over seeds the estimates average to the expectation."""
    lm = tiny_model("bert")
    item = ("The cat sat on the", " big green mat in the sun")
    expected, n = naive_elbo(lm, *item)
    assert n >= 6
    estimates = []
    for seed in range(12):
        [result] = score_batch(lm, [item], ScoringSettings(method="elbo", elbo_samples=8, elbo_seed=seed))
        assert result.stderr > 0 and abs(result.total - expected) < 5 * result.stderr
        estimates.append(result.total)
    spread = statistics.stdev(estimates) / math.sqrt(len(estimates))
    assert abs(statistics.mean(estimates) - expected) < 4 * spread
    again = score_batch(lm, [item], ScoringSettings(method="elbo", elbo_samples=8, elbo_seed=0))[0]
    assert again.total == score_batch(lm, [item, ("x", " y")], ScoringSettings(method="elbo", elbo_samples=8))[0].total


def test_a_ranking_by_elbo_goes_through_the_same_door(tiny_model):
    """score_candidates ranks by the ELBO like any other method; its settings are refused in words
    where they make no sense."""
    lm = tiny_model("bert")
    scores = score_candidates(lm, "The capital of France is", ["Paris.", "a cat."], ScoringSettings(method="elbo"))
    assert [s.stderr for s in scores] == [0, 0] and all(s.score == s.total for s in scores)
    with pytest.raises(ValueError, match="method=elbo reads its own copies"):
        ScoringSettings(method="elbo", stride=4)
    with pytest.raises(ValueError, match="elbo_samples must be a whole number from 1 to 4096"):
        ScoringSettings(method="elbo", elbo_samples=0)


@pytest.mark.parametrize("samples", [64, 5])
def test_the_work_budget_counts_the_elbos_copies(tiny_model, samples):
    """A masked copy per pattern (every pattern where they are few, else one per sample): the
    budget's count before the run equals the engine's as it runs."""
    from demo.app.budget import ranking_work
    from demo.engine.counting import counting
    lm = tiny_model("bert")
    settings = ScoringSettings(method="elbo", elbo_samples=samples)
    context, candidates = "The capital of France is", ["Paris.", "a big green cat."]
    with counting() as reads:
        score_candidates(lm, context, candidates, settings)
    work = ranking_work(lm, context, candidates, settings)
    assert (work.passes, work.tokens) == (reads.passes, reads.tokens) and "masking pattern" in work.what


def test_the_standard_error_is_in_the_units_of_the_score(tiny_model):
    """Ranked by the mean per token, the score and its ± are both per token: the same patterns'
    error over the total, divided by the tokens scored."""
    lm = tiny_model("bert")
    item = ("The cat sat on the", " big green mat in the sun")
    summed, = score_batch(lm, [item], ScoringSettings(method="elbo", elbo_samples=8))
    mean, = score_batch(lm, [item], ScoringSettings(method="elbo", elbo_samples=8, reduction="mean"))
    assert mean.score == pytest.approx(summed.total / len(summed.tokens))
    assert mean.stderr == pytest.approx(summed.stderr / len(summed.tokens)) and summed.stderr > 0
