"""Scoring API: offsets for heatmaps, word aggregation, candidates, normalisation, bad input."""

import re

import pytest

import tests.floats as floats
from demo.engine import pll
from demo.engine.pll import score_batch, score_candidates
from demo.settings import ScoringSettings
from tests.conftest import MASKED_FAMILIES
from tests.test_pll import model_text, naive_scores

pytestmark = pytest.mark.floats

TRICKY = [
    ("Café au lait", " (très chaud)!  Done.\nNext line's end, 42%."),
    ("He said:", "  \"Supercalifragilistic\" -- twice 😀 ok"),
    ("", "Plain text with   odd\tspacing ."),
]


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert", "bert-cased", "gpt2"])
@pytest.mark.parametrize("scope", ["completion", "full"])
def test_offsets_slice_back_to_exactly_the_scored_text(tiny_model, family, scope):
    lm = tiny_model(family)
    method = "causal" if lm.kind == "causal" else "salazar"
    for (context, completion), result in zip(TRICKY, score_batch(lm, TRICKY, ScoringSettings(method=method, scope=scope))):
        context, completion = model_text(lm, context), model_text(lm, completion)  # what it read
        assert result.text == context + completion
        previous_end = 0
        for token in result.tokens:
            assert token.token == result.text[token.start:token.end]
            assert token.start >= previous_end and token.end >= token.start  # ordered, no overlap
            previous_end = token.end
        covered = "".join(t.token for t in result.tokens)
        assert squeeze(covered) == squeeze(completion if scope == "completion" else result.text)


def test_offsets_of_known_tokens(tiny_model):
    result = score_batch(tiny_model("bert"), [("The cat", " sat on (the) mat.")])[0]
    assert [(t.token, t.start) for t in result.tokens] == [
        ("sat", 8), ("on", 12), ("(", 15), ("the", 16), (")", 19), ("mat", 21), (".", 24)]


def test_word_level_sums_tokens_per_word(standin_mlm):
    result = score_batch(standin_mlm, [("", "Supercalifragilistic cats sat.")],
                         ScoringSettings(scope="full", word_level=True))[0]
    assert [(w.word, w.n_tokens) for w in result.words] == [
        ("Supercalifragilistic", 6), ("cats", 1), ("sat", 1), (".", 1)]
    first_six = sum(t.logprob for t in result.tokens[:6])
    assert result.words[0].logprob == floats.same_sum(first_six, 6)
    assert sum(w.logprob for w in result.words) == floats.same_sum(result.total, len(result.tokens))
    assert score_batch(standin_mlm, [("", "Cats.")])[0].words is None


def test_total_mean_and_normalised_score(tiny_model):
    lm = tiny_model("bert")
    expected = naive_scores(lm, "The cat sat", " on the mat.", "right_masks")
    plain, normed = (score_batch(lm, [("The cat sat", " on the mat.")], ScoringSettings(reduction=r))[0]
                     for r in ("sum", "mean"))
    total = sum(e[1] for e in expected)
    assert plain.total == floats.total(total, len(expected), lm) and plain.score == plain.total
    assert normed.mean == floats.logprobs(total / len(expected), lm) and normed.score == normed.mean


def test_candidates_joined_with_one_space_and_unconditional_normalisation(tiny_model):
    lm = tiny_model("bert")
    results = score_candidates(lm, "Question: where? Answer:", ["home", " the park"],
                               ScoringSettings(unconditional_context="Answer:", method="salazar"))
    assert [r.text for r in results] == ["Question: where? Answer: home", "Question: where? Answer: the park"]
    for result, completion in zip(results, [" home", " the park"]):
        conditional = sum(e[1] for e in naive_scores(lm, "Question: where? Answer:", completion, "salazar"))
        unconditional = sum(e[1] for e in naive_scores(lm, "Answer:", completion, "salazar"))
        n_tokens = len(result.tokens)  # the candidate's tokens, scored after either context
        assert result.total == floats.total(conditional, n_tokens, lm)
        assert result.unconditional == floats.total(unconditional, n_tokens, lm)
        assert result.score == floats.difference(conditional, n_tokens, unconditional, n_tokens, lm)


def test_duplicates_scored_once_and_reported_for_each(tiny_model, monkeypatch):
    calls = []
    real = pll._tokenize
    monkeypatch.setattr(pll, "_tokenize", lambda lm, c, x, *rest: calls.append(x) or real(lm, c, x, *rest))
    results = score_candidates(tiny_model("bert"), "I like", ["tea", "coffee", "tea"])
    assert sorted(calls) == [" coffee", " tea"]
    assert [r.candidate for r in results] == ["tea", "coffee", "tea"]
    assert results[0].total == results[2].total != results[1].total


@pytest.mark.parametrize("candidates, message", [
    ([], "at least one candidate"),
    ("tea", "at least one candidate"),
    (["tea", ""], "non-whitespace"),
    (["tea", "  \n"], "non-whitespace"),
    (["tea", None], "non-whitespace"),
])
def test_bad_candidates(tiny_model, candidates, message):
    with pytest.raises(ValueError, match=message):
        score_candidates(tiny_model("bert"), "I like", candidates)


def test_text_too_long_names_the_limit(tiny_model):
    lm = tiny_model("bert")
    with pytest.raises(ValueError, match="at most 512 tokens"):
        score_batch(lm, [("", " word" * 600)])
    # relative positions: no limit to hit (a long context, a short completion to keep it quick)
    result = score_batch(tiny_model("deberta-v2"), [("word" * 600, " end.")])[0]
    assert result.tokens[-1].position > 512


@pytest.mark.parametrize("family, kwargs, message", [
    ("bert", dict(method="nonsense"), "Unknown scoring method"),
    ("bert", dict(method="causal"), "needs a causal LM"),
    ("gpt2", dict(method="right_masks"), "causal LM"),
    ("bert", dict(scope="middle"), "scope"),
    ("bert", dict(right_masks=-1), "right_masks"),
    ("bert", dict(token_budget=0), "token_budget"),
])
def test_bad_options(tiny_model, family, kwargs, message):
    with pytest.raises(ValueError, match=message):
        score_batch(tiny_model(family), [("A", " b.")], ScoringSettings(**kwargs))


def test_whitespace_completion_in_a_batch_is_refused(tiny_model):
    with pytest.raises(ValueError, match="The candidate '' has nothing to score"):
        score_batch(tiny_model("bert"), [("A", "   ")])
    with pytest.raises(ValueError, match="The candidate is only invisible characters"):
        score_batch(tiny_model("bert"), [("A", " \x00\x00")])
    with pytest.raises(ValueError, match=r"The context holds a broken character \(U\+D800"):
        score_batch(tiny_model("bert"), [("A\ud800", " b")])


def test_many_candidate_sets_batched_together(tiny_model):
    lm = tiny_model("roberta")
    requests = [("I like", ["tea", "green tea"]), ("The sky is", ["blue.", "tea"])]
    results = pll.score_candidate_sets(lm, requests, ScoringSettings(method="within_word_l2r"))
    assert [[r.candidate for r in rs] for rs in results] == [c for _, c in requests]
    for (context, candidates), scores in zip(requests, results):
        for candidate, result in zip(candidates, scores):
            expected = naive_scores(lm, context, " " + candidate, "within_word_l2r")
            assert result.total == floats.total(sum(e[1] for e in expected), len(expected), lm)
