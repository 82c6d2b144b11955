"""The approximate PLL (``ScoringSettings.stride``, ``rescore_band``): its copies against copies
written by hand and run one forward pass each, its exact setting against the exact engine bit for
bit, the near-ties it re-scores (by hand, and end to end), its settings' validation.

The naive reference is written out plainly: the masked copies of a short text listed by hand,
one full forward pass of the model per copy, full logits, log_softmax.
"""

import pytest
import torch

import tests.floats as floats
from demo.engine import pll
from demo.engine.pll import CandidateScore, Choice, score_batch, score_choices
from demo.engine.pll_approx import near_ties, shared_tokens
from demo.settings import ScoringSettings
from tests.conftest import MASKED_FAMILIES
from tests.test_pll import ITEMS, masked_positions

pytestmark = pytest.mark.floats

TEXT = "The cat sat on the mat."  # [CLS] the cat sat on the mat . [SEP] in BERT's uncased WordPiece

# Stride 3, one right mask, every token scored: copy c scores tokens c, c+3, ... (positions 1-7),
# each with the next token masked too, unless that is [SEP] (position 8).
BY_HAND = [
    {"targets": [1, 4, 7], "masked": [1, 2, 4, 5, 7]},
    {"targets": [2, 5], "masked": [2, 3, 5, 6]},
    {"targets": [3, 6], "masked": [3, 4, 6, 7]},
]


@torch.no_grad()
def copy_logprobs(lm, ids: list[int], masked: list[int], targets: list[int]) -> dict[int, float]:
    """log P(true token) at each target of one copy: one full forward pass, no batching."""
    copy = torch.tensor(ids)
    copy[masked] = lm.tokenizer.mask_token_id
    logprobs = lm.model(input_ids=copy[None]).logits[0].log_softmax(-1)
    return {j: float(logprobs[j, ids[j]]) for j in targets}


def test_strided_copies_equal_copies_written_by_hand(standin_mlm):
    lm = standin_mlm
    ids = lm.tokenizer(TEXT)["input_ids"]
    assert len(ids) == 9  # the copies above are written for this tokenization
    expected = {}
    for copy in BY_HAND:
        expected.update(copy_logprobs(lm, ids, copy["masked"], copy["targets"]))
    result = score_batch(lm, [("", TEXT)], ScoringSettings(method="right_masks", right_masks=1,
                                                           stride=3, scope="full"))[0]
    assert [t.position for t in result.tokens] == list(range(1, 8))
    for token in result.tokens:
        assert token.logprob == floats.logprobs(expected[token.position], lm), token
        copy = next(c for c in BY_HAND if token.position in c["targets"])
        assert token.masked == copy["masked"]
    assert result.total == floats.total(sum(expected.values()), 7, lm)
    exact = score_batch(lm, [("", TEXT)], ScoringSettings(method="right_masks", right_masks=1, scope="full"))[0]
    assert result.total < exact.total - 1  # the others' masks hide context: scores drop


def naive_strided(lm, context: str, completion: str, method: str, stride: int, right_masks=2):
    """{position: logprob}: the method's masks per scored token (per word for whole_word), every
    stride-th unit's masks merged into one copy, one forward pass per copy."""
    encoding = lm.tokenizer(context + completion, return_special_tokens_mask=True)
    ids, special, word_ids = encoding["input_ids"], encoding["special_tokens_mask"], encoding.word_ids()
    first = len(lm.tokenizer(context)["input_ids"]) - 1 if context else 1
    scored = [i for i in range(first, len(ids)) if not special[i]]
    if method == "whole_word":  # one unit per word
        units = [[i for i in scored if word_ids[i] == w] for w in dict.fromkeys(word_ids[i] for i in scored)]
    else:
        units = [[i] for i in scored]
    out = {}
    for c in range(stride):
        group = units[c::stride]
        targets = [i for unit in group for i in unit]
        masked = sorted({j for i in targets for j in masked_positions(method, i, word_ids, special, right_masks)})
        if targets:
            out.update(copy_logprobs(lm, ids, masked, targets))
    return out


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
@pytest.mark.parametrize("method, stride", [("right_masks", 2), ("right_masks", 5), ("salazar", 3),
                                            ("within_word_l2r", 4), ("whole_word", 2)])
def test_strided_engine_equals_naive_loop(tiny_model, family, method, stride):
    lm = tiny_model(family)
    items = [(c, x) for c, x in ITEMS[:2]]  # no newline: the naive loop reads the text as typed
    # a tiny token budget: several sub-batches, strided copies of several texts padded together
    ours = score_batch(lm, items, ScoringSettings(method=method, stride=stride, token_budget=96))
    for (context, completion), result in zip(items, ours):
        expected = naive_strided(lm, context, completion, method, stride)
        assert [t.position for t in result.tokens] == sorted(expected)
        for token in result.tokens:
            assert token.logprob == floats.logprobs(expected[token.position], lm), (method, token)


@pytest.mark.parametrize("method", ["salazar", "right_masks", "within_word_l2r", "whole_word"])
def test_stride_one_is_the_exact_engine_bit_for_bit(tiny_model, method):
    lm = tiny_model("bert")
    exact = score_batch(lm, ITEMS, ScoringSettings(method=method))
    again = score_batch(lm, ITEMS, ScoringSettings(method=method, stride=1))
    assert again == exact


def test_a_stride_as_long_as_the_text_is_exact(tiny_model):
    """Every token has a copy of its own when the stride reaches the scored tokens' count."""
    lm = tiny_model("bert")
    exact = score_batch(lm, [("The cat", " sat.")])[0]  # two scored tokens
    strided = score_batch(lm, [("The cat", " sat.")], ScoringSettings(stride=2))[0]
    assert [t.masked for t in strided.tokens] == [t.masked for t in exact.tokens]
    assert strided.total == floats.total(exact.total, 2, lm)


# ---------------------------------------------------------------- tokens a ranking's candidates share


def test_shared_tokens_are_the_common_start_and_end():
    assert shared_tokens([[1, 2, 3, 9], [1, 2, 4, 5, 9]]) == [{0, 1, 3}, {0, 1, 4}]
    assert shared_tokens([[1, 2, 3], [1, 2, 3, 3]]) == [{0, 1, 2}, {0, 1, 2}]  # a prefix of the other
    assert shared_tokens([[7, 8], [5, 6]]) == [set(), set()]
    assert shared_tokens([[1, 2, 3]]) == [{0, 1, 2}]  # alone: it shares everything


# [CLS] the cat/dog sat on the mat . [SEP]: only position 2 differs. Stride 2, one right mask: the
# shared tokens (1, 3-7) are merged among themselves, the differing one (2) gets a copy of its own.
RANKING = ["The cat sat on the mat.", "The dog sat on the mat."]
SHARED_BY_HAND = [
    {"targets": [1, 4, 6], "masked": [1, 2, 4, 5, 6, 7]},
    {"targets": [3, 5, 7], "masked": [3, 4, 5, 6, 7]},
    {"targets": [2], "masked": [2, 3]},
]


def test_a_rankings_shared_tokens_and_the_others_never_share_a_copy(standin_mlm):
    lm = standin_mlm
    settings = ScoringSettings(method="right_masks", right_masks=1, stride=2, scope="full")
    results = score_choices(lm, [[Choice("", text, text) for text in RANKING]], settings)[0]
    for text, result in zip(RANKING, results):
        ids = lm.tokenizer(text)["input_ids"]
        assert len(ids) == 9
        expected = {}
        for copy in SHARED_BY_HAND:
            expected.update(copy_logprobs(lm, ids, copy["masked"], copy["targets"]))
        for token in result.tokens:
            assert token.logprob == floats.logprobs(expected[token.position], lm), (text, token)
            assert token.masked == next(c["masked"] for c in SHARED_BY_HAND if token.position in c["targets"])
    # the same text scored alone shares everything: plain stride 2 (tokens 1, 3, 5, 7 in one copy)
    alone = score_batch(lm, [("", RANKING[0])], settings)[0]
    assert alone.tokens[0].masked == [1, 2, 3, 4, 5, 6, 7]


def test_one_text_in_two_rankings_is_scored_for_each(standin_mlm):
    """Its shared tokens depend on its ranking; each ranking gets the copies its own candidates
    make, whatever else is scored in the same call."""
    lm = standin_mlm
    settings = ScoringSettings(right_masks=1, stride=2, scope="full")
    first = [Choice("", text, text) for text in RANKING]
    second = [Choice("", RANKING[0], RANKING[0]), Choice("", "A bird.", "A bird.")]
    together = score_choices(lm, [first, second], settings)
    for ranking, got in zip([first, second], together):
        alone = score_choices(lm, [ranking], settings)[0]  # other batches: float noise only
        for a, b in zip(alone, got):
            assert [t.masked for t in b.tokens] == [t.masked for t in a.tokens]
            assert [t.logprob for t in b.tokens] == floats.logprobs([t.logprob for t in a.tokens], lm)
    assert together[0][0].tokens[0].masked != together[1][0].tokens[0].masked


def test_tokens_read_counts_the_copies_lengths(standin_mlm):
    ranking = [[Choice("", text, text) for text in RANKING]]
    exact = ScoringSettings(right_masks=1, scope="full")
    assert pll.tokens_read(standin_mlm, ranking, exact) == 2 * 7 * 9  # 7 copies of 9 tokens each
    approximate = ScoringSettings(right_masks=1, stride=2, scope="full")
    assert pll.tokens_read(standin_mlm, ranking, approximate) == 2 * len(SHARED_BY_HAND) * 9
    with_neutral = ScoringSettings(right_masks=1, scope="full", unconditional_context="Answer:")
    neutral = sum(len(standin_mlm.tokenizer("Answer: " + text)["input_ids"]) ** 2 - 2 * len(
        standin_mlm.tokenizer("Answer: " + text)["input_ids"]) for text in RANKING)  # n-2 copies of n
    assert pll.tokens_read(standin_mlm, ranking, with_neutral) == 2 * 7 * 9 + neutral


# ---------------------------------------------------------------- near-ties, re-scored exactly


def test_near_ties_by_hand():
    scores = [-10.0, -10.4, -12.0, -10.9]
    assert near_ties(scores, 0.5) == [0, 1]
    assert near_ties(scores, 1.0) == [0, 1, 3]
    assert near_ties(scores, 0.1) == []  # the best stands alone
    assert near_ties([-3.0, -1.0], 2.0) == [0, 1]  # the bounds belong to the band
    assert near_ties([-1.0], 5.0) == [] and near_ties([], 5.0) == []


def test_the_near_ties_and_only_they_are_scored_again_exactly(monkeypatch):
    """A made-up ranking: the approximate scores say which candidates are close to the best;
    exactly those are scored again, with stride 1, and their exact scores replace the others."""
    approximate = {"a": -10.0, "b": -10.4, "c": -12.0, "d": -10.9, "e": -5.0, "f": -9.0}
    exact = {"a": -9.0, "b": -8.5, "c": -11.0, "d": -9.9, "e": -4.0, "f": -8.0}
    calls = []

    def fake_score_batch(lm, items, settings, **kwargs):
        calls.append((settings.stride, [x for _, x in items]))
        table = exact if settings.stride == 1 else approximate
        return [CandidateScore(x, x, [], table[x], table[x], table[x]) for _, x in items]

    class FakeMasked:
        kind, label = "masked", "a masked LM"

    monkeypatch.setattr(pll, "score_batch", fake_score_batch)
    sets = [[Choice("", x, x) for x in "abcd"], [Choice("", x, x) for x in "ef"]]
    results = score_choices(FakeMasked(), sets, ScoringSettings(stride=4, rescore_band=1.0))
    assert calls == [(4, list("abcdef")), (1, ["a", "b", "d"])]  # e stands 4 nats above f
    assert [[r.score for r in ranking] for ranking in results] == [[-9.0, -8.5, -12.0, -9.9], [-5.0, -9.0]]
    assert max(results[0], key=lambda r: r.score).candidate == "b"  # the exact winner


@pytest.mark.parametrize("unconditional", [None, "Answer:"])
def test_a_band_that_covers_every_candidate_gives_the_exact_ranking(tiny_model, unconditional):
    lm = tiny_model("bert")
    sets = [pll.choices_for("The cat sat", [" on the mat.", " under the old table, quietly.", " up."]),
            pll.choices_for("", ["Supercalifragilistic words are rare.", "Short ones are not."])]
    exact = score_choices(lm, sets, ScoringSettings(unconditional_context=unconditional))
    everything = score_choices(lm, sets, ScoringSettings(unconditional_context=unconditional,
                                                         stride=2, rescore_band=1e9))
    assert everything == exact
    approximate = score_choices(lm, sets, ScoringSettings(unconditional_context=unconditional, stride=2))
    assert approximate != exact


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize("values, message", [
    (dict(rescore_band=-1.0), "rescore_band"),
    (dict(rescore_band=float("nan")), "rescore_band"),
    (dict(rescore_band="wide"), "rescore_band"),
    (dict(stride=0), "stride"),
    (dict(stride=1.5), "stride"),
    (dict(stride=65), "stride"),
    (dict(stride=True), "stride"),
    (dict(fast="yes"), "fast"),
    (dict(fast=True, stride=4), "fast scoring picks its own stride"),
    (dict(fast=True, rescore_band=1.0), "fast scoring picks its own stride"),
])
def test_bad_approximation_settings_are_refused(values, message):
    with pytest.raises(ValueError, match=message):
        ScoringSettings(**values)


# ---------------------------------------------------------------- fast scoring: a setting per length band

FAST_TABLE = """span_min,span_max,stride,rescore_band,rankings,agreement,low,high,speedup,model
5,8,2,0.5,100,0.99,0.95,1.0,2.0,a model
9,1000000000,3,0,100,0.99,0.95,1.0,3.0,a model
"""


@pytest.fixture
def fast_table(tmp_path, monkeypatch):
    """A made-up table of two bands: 5-8 scored tokens get stride 2 and a band, 9+ stride 3."""
    from demo.engine import pll_approx
    path = tmp_path / "fast_pll.csv"
    path.write_text(FAST_TABLE)
    monkeypatch.setattr(pll_approx, "FAST_PLL", path)
    pll_approx.fast_bands.cache_clear()
    yield path
    pll_approx.fast_bands.cache_clear()


def test_fast_scoring_gives_each_ranking_its_bands_setting(tiny_model, fast_table):
    """Rankings of three lengths, scored together with fast: each equals the ranking scored alone
    with its band's stride and band (the shortest, below every band, exactly); a single candidate
    is scored exactly whatever its length."""
    lm = tiny_model("bert")
    sets = [pll.choices_for("The cat", [" sat.", " ran."]),  # below every band
            pll.choices_for("The cat", [" sat on the old mat", " ran under a table"]),
            pll.choices_for("The cat", [" sat on the old mat by the door today, as cats do every day",
                                        " ran"]),
            pll.choices_for("The cat", [" sat on the old mat by the door today"])]  # one candidate
    spans = [pll.scored_span(lm, choices, ScoringSettings()) for choices in sets]
    assert spans[0] < 5 and 5 <= spans[1] <= 8 and spans[2] >= 9 and spans[3] >= 9
    fast = ScoringSettings(fast=True)
    assert [b and b.stride for b in pll.fast_plan(lm, sets, fast)] == [None, 2, 3, None]
    expected = [score_choices(lm, [sets[0]])[0],
                score_choices(lm, [sets[1]], ScoringSettings(stride=2, rescore_band=0.5))[0],
                score_choices(lm, [sets[2]], ScoringSettings(stride=3))[0],
                score_choices(lm, [sets[3]])[0]]
    got = score_choices(lm, sets, fast)
    for ranking, reference in zip(got, expected):
        for a, b in zip(ranking, reference):
            assert [t.masked for t in a.tokens] == [t.masked for t in b.tokens]
            assert [t.logprob for t in a.tokens] == floats.logprobs([t.logprob for t in b.tokens], lm)
    assert pll.tokens_read(lm, sets, fast) == sum(
        pll.tokens_read(lm, [choices], s) for choices, s in zip(sets, [
            ScoringSettings(), ScoringSettings(stride=2), ScoringSettings(stride=3), ScoringSettings()]))


def test_scored_span_is_the_longest_candidates_scored_tokens(tiny_model):
    lm = tiny_model("bert")
    choices = pll.choices_for("Once upon a time", [" a cat", " three small dogs barked loudly"])
    for scope in ("completion", "full"):
        settings = ScoringSettings(scope=scope)
        assert pll.scored_span(lm, choices, settings) == max(
            len(r.tokens) for r in score_choices(lm, [choices], settings)[0])


def test_fast_without_a_table_is_exact(tiny_model, tmp_path, monkeypatch):
    from demo.engine import pll_approx
    monkeypatch.setattr(pll_approx, "FAST_PLL", tmp_path / "absent.csv")
    pll_approx.fast_bands.cache_clear()
    lm = tiny_model("bert")
    sets = [pll.choices_for("The cat", [" sat on the old mat by the door today", " ran"])]
    assert pll.fast_plan(lm, sets, ScoringSettings(fast=True)) == [None]
    assert score_choices(lm, sets, ScoringSettings(fast=True)) == score_choices(lm, sets)
    pll_approx.fast_bands.cache_clear()


def test_the_shipped_fast_table_reads_and_its_bands_do_not_overlap():
    from demo.engine.pll_approx import fast_bands
    bands = sorted(fast_bands(), key=lambda b: b.span_min)
    for band in bands:
        assert 1 <= band.span_min <= band.span_max and band.stride > 1 and band.rescore_band >= 0
        assert band.low >= 0.95 and band.agreement >= 0.98  # the bar a band must pass to ship
    assert all(a.span_max < b.span_min for a, b in zip(bands, bands[1:]))
