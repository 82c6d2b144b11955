"""Masked-LM scoring: the batched engine against a naive loop and against minicons.

The naive reference is written out plainly here: one forward pass of the full model per masked
copy, full logits, log_softmax, no batching, no padding, masks chosen by the paper's rules.
"""

import pytest
import torch

import tests.floats as floats
from demo.engine import batching
from demo.engine.pll import score_batch
from demo.settings import ScoringSettings
from tests.conftest import MASKED_FAMILIES

pytestmark = pytest.mark.floats

METHODS = ["salazar", "right_masks", "within_word_l2r", "whole_word"]

# Different lengths (padding), a long multi-subword word, punctuation, double spaces, a newline.
ITEMS = [
    ("The cat sat", " on the mat."),
    ("Supercalifragilistic expialidocious", " is a rather long word, isn't it?"),
    ("", "A  short one.\nThen another line."),
]


def model_text(lm, text: str) -> str:
    return text if lm.newline_survives else text.replace("\n", "\\n ")


def masked_positions(method, i, word_ids, special, right_masks=2):
    """Which input positions are masked when token i is scored (the methods' definitions)."""
    if method == "salazar":
        return [i]
    if method == "right_masks":  # the scored token and the next `right_masks` non-special ones
        return [i] + [j for j in range(i + 1, i + 1 + right_masks) if j < len(special) and not special[j]]
    if method == "within_word_l2r":  # the scored token and later subwords of its word
        return [i] + [j for j in range(i + 1, len(word_ids)) if word_ids[j] == word_ids[i]]
    if method == "whole_word":  # every subword of its word
        return [j for j in range(len(word_ids)) if word_ids[j] == word_ids[i]]
    raise AssertionError(method)


def rank_range(logprobs, true_id, lm):
    """Ranks (1 = top) the true token may get when values within float32's bound of it count as
    ties (two computations may order near-equal values either way)."""
    true = logprobs[true_id]
    tol = floats.bound(lm) * (1 + abs(float(true)))
    return int((logprobs > true + tol).sum()) + 1, int((logprobs > true - tol).sum())


@torch.no_grad()
def naive_scores(lm, context, completion, method, scope="completion", right_masks=2):
    """[(position, logprob, (lowest, highest) rank, masked)], one full forward pass per token.

    The text is what the model reads: the paper's marker for each newline where the tokenizer
    loses them (written out plainly here; the items have no spaces around their newlines)."""
    context, completion = model_text(lm, context), model_text(lm, completion)
    tokenizer = lm.tokenizer
    encoding = tokenizer(context + completion, return_special_tokens_mask=True)
    ids, special, word_ids = encoding["input_ids"], encoding["special_tokens_mask"], encoding.word_ids()
    # Context tokens = the context tokenized alone, minus its trailing [SEP] (junction is a space).
    first = len(tokenizer(context)["input_ids"]) - 1 if scope == "completion" and context else 1
    out = []
    for i in range(first, len(ids)):
        if special[i]:
            continue
        masked = masked_positions(method, i, word_ids, special, right_masks)
        copy = torch.tensor(ids)
        copy[masked] = tokenizer.mask_token_id
        logprobs = lm.model(input_ids=copy[None]).logits[0, i].log_softmax(-1)
        out.append((i, float(logprobs[ids[i]]), rank_range(logprobs, ids[i], lm), masked))
    return out


def assert_matches_naive(lm, method, items, reference=None, **kwargs):
    """``lm``'s batched scores of ``items`` equal the naive loop's on ``reference`` (the same model
    read another way; default: ``lm`` itself)."""
    reference = reference or lm
    # A tiny token budget forces many sub-batches of mixed texts and padding.
    ours = score_batch(lm, items, ScoringSettings(method=method, token_budget=96, **kwargs))
    for (context, completion), result in zip(items, ours):
        expected = naive_scores(reference, context, completion, method, **kwargs)
        assert [t.position for t in result.tokens] == [e[0] for e in expected]
        for token, (_, logprob, (best, worst), masked) in zip(result.tokens, expected):
            assert token.logprob == floats.logprobs(logprob, reference), (method, token)
            assert best <= token.rank <= worst
            assert sorted(token.masked) == sorted(masked)
        assert result.total == floats.total(sum(e[1] for e in expected), len(expected), reference)


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
@pytest.mark.parametrize("method", METHODS)
def test_batched_equals_naive_loop_random_weights(tiny_model, family, method):
    assert_matches_naive(tiny_model(family), method, ITEMS)


@pytest.mark.parametrize("method", METHODS)
def test_batched_equals_naive_loop_trained_mlm(standin_mlm, method):
    assert_matches_naive(standin_mlm, method, ITEMS[:2])


@pytest.mark.parametrize("right_masks", [0, 1, 4])
def test_right_mask_count_is_a_parameter(tiny_model, right_masks):
    assert_matches_naive(tiny_model("bert"), "right_masks", ITEMS[:2], right_masks=right_masks)


def test_full_scope_scores_every_token(tiny_model, monkeypatch):
    monkeypatch.setattr(batching, "HEAD_ROWS", 3)  # the vocabulary projection in several chunks
    assert_matches_naive(tiny_model("roberta"), "right_masks", ITEMS[:2], scope="full")


# ---------------------------------------------------------------- against minicons

SENTENCES = [
    "The cat sat on the mat.",
    "Supercalifragilistic words are rarely heard in church, aren't they?",
    "She put the milk in the refrigerator before leaving for work.",
]


@pytest.fixture(scope="module")
def minicons_scorer(standin_mlm):
    scorer_module = pytest.importorskip("minicons.scorer")
    scorer = scorer_module.MaskedLMScorer(standin_mlm.model, tokenizer=standin_mlm.tokenizer, device="cpu")
    # minicons 0.3.39 calls batch_encode_plus, which transformers 5 removed (docs/method.md, section 7).
    type(scorer.tokenizer).batch_encode_plus = lambda self, *a, **k: self(*a, **k)
    return scorer


@pytest.mark.parametrize("ours, theirs", [("salazar", "original"), ("within_word_l2r", "within_word_l2r")])
def test_full_sentence_pll_equals_minicons(standin_mlm, minicons_scorer, ours, theirs):
    expected = minicons_scorer.sequence_score(SENTENCES, reduction=lambda x: x.sum(0).item(),
                                              PLL_metric=theirs)
    got = score_batch(standin_mlm, [("", s) for s in SENTENCES], ScoringSettings(method=ours, scope="full"))
    assert [r.total for r in got] == [floats.total(e, len(r.tokens), standin_mlm) for e, r in zip(expected, got)]
    if ours == "within_word_l2r":  # the methods differ on the multi-subword word
        salazar = score_batch(standin_mlm, [("", SENTENCES[1])], ScoringSettings(method="salazar", scope="full"))
        assert abs(salazar[0].total - got[1].total) > 0.1


@pytest.mark.parametrize("ours, theirs", [("salazar", "original"), ("within_word_l2r", "within_word_l2r")])
def test_conditional_pll_equals_minicons(standin_mlm, minicons_scorer, ours, theirs):
    prefixes = ["The cat sat", "Supercalifragilistic", "She put the milk"]
    stimuli = ["on the mat.", "expialidocious words are rare.", "in the refrigerator."]
    expected = minicons_scorer.conditional_score(prefixes, stimuli, reduction=lambda x: x.sum(0).item(),
                                                 PLL_metric=theirs)
    got = score_batch(standin_mlm, [(p, " " + s) for p, s in zip(prefixes, stimuli)], ScoringSettings(method=ours))
    assert [r.total for r in got] == [floats.total(e, len(r.tokens), standin_mlm) for e, r in zip(expected, got)]


def test_trained_model_prefers_the_sensible_sentence(standin_mlm):
    good, bad = score_batch(standin_mlm, [("", "The cat sat on the mat."), ("", "The mat sat on the cat.")],
                            ScoringSettings(method="right_masks", scope="full"))
    assert good.total > bad.total


def test_bfloat16_is_close_to_float32(family_folder):
    from demo.engine.models import random_model
    lm32 = random_model(family_folder("bert"), seed=1)
    lm16 = random_model(family_folder("bert"), seed=1)
    lm16.model.to(torch.bfloat16)
    items = ITEMS[:2]
    full, half = (score_batch(lm, items, ScoringSettings(method="salazar")) for lm in (lm32, lm16))
    for a, b in zip(full, half):  # bfloat16 keeps 8 significant bits (u = 2**-9), not float32's 24
        assert lm16.dtype == torch.bfloat16
        assert [t.logprob for t in b.tokens] == pytest.approx([t.logprob for t in a.tokens], abs=0.1)
