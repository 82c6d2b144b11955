"""The decoder's own likelihood (``method="decoder"``): against a naive loop, and against generation.

The naive reference is written out plainly here: for each scored token, the window generation
reads ([CLS], the text before the token, [MASK] and p padding masks, [SEP]), one forward pass of
the full model, full logits, the tokens the decoder never writes left out (the specials other
than the end token, rows beyond the tokenizer), log_softmax. No batching, no padding.
"""

import math

import pytest
import torch

import tests.floats as floats
from demo.engine.counting import Reads, counting
from demo.engine.generation import generate
from demo.engine.models import InputTooLong
from demo.engine.pll import Choice, check_choices, input_length, score_batch, tokens_read
from demo.settings import ScoringSettings
from tests.conftest import MASKED_FAMILIES
from tests.conftest import tokens_read as embedded_reads
from tests.test_generation import PROMPT
from tests.test_pll import ITEMS, model_text, rank_range

pytestmark = pytest.mark.floats


@torch.no_grad()
def naive_decoder(lm, context, completion, p, scope="completion"):
    """[(position, logprob, (lowest, highest) rank, window's mask positions)], one window and one
    full forward pass per scored token."""
    context, completion = model_text(lm, context), model_text(lm, completion)
    tok = lm.tokenizer
    encoding = tok(context + completion, return_special_tokens_mask=True)
    ids, special = encoding["input_ids"], encoding["special_tokens_mask"]
    # Context tokens = the context tokenized alone, minus its trailing [SEP] (junction is a space).
    first = len(tok(context)["input_ids"]) - 1 if scope == "completion" and context else 1
    banned = [i for i in tok.all_special_ids if i != tok.sep_token_id]
    out = []
    for i in range(first, len(ids)):
        if special[i]:
            continue
        # ids[0] is [CLS] (<s>) for every family here: ids[1:i] is the text before token i
        window = [tok.cls_token_id] + ids[1:i] + [tok.mask_token_id] * (1 + p) + [tok.sep_token_id]
        logits = lm.model(input_ids=torch.tensor([window])).logits[0, i]
        logits[banned] = float("-inf")
        logits[len(tok):] = float("-inf")
        logprobs = logits.log_softmax(-1)
        out.append((i, float(logprobs[ids[i]]), rank_range(logprobs, ids[i], lm), list(range(i, i + 1 + p))))
    return out


def assert_matches_naive(lm, items, p, reference=None, **kwargs):
    """Our batched scores (a tiny token budget: many sub-batches, mixed lengths, padding) against
    the naive loop run on ``reference`` (default: the model itself)."""
    reference = reference or lm
    ours = score_batch(lm, items, ScoringSettings(method="decoder", token_budget=96, **kwargs))
    for (context, completion), result in zip(items, ours):
        expected = naive_decoder(reference, context, completion, p, kwargs.get("scope", "completion"))
        assert [t.position for t in result.tokens] == [e[0] for e in expected]
        for token, (_, logprob, (best, worst), masked) in zip(result.tokens, expected):
            assert token.logprob == floats.logprobs(logprob, reference), token
            assert best <= token.rank <= worst
            assert token.masked == masked
        assert result.total == floats.total(sum(e[1] for e in expected), len(expected), reference)


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
def test_batched_equals_naive_loop_random_weights(tiny_model, family):
    lm = tiny_model(family)
    assert_matches_naive(lm, ITEMS, lm.padding_masks)  # the family's default, as generation's


def test_batched_equals_naive_loop_trained_mlm(standin_mlm):
    assert_matches_naive(standin_mlm, ITEMS[:2], standin_mlm.padding_masks)


@pytest.mark.parametrize("p", [0, 3])
def test_padding_masks_are_a_setting(tiny_model, p):
    assert_matches_naive(tiny_model("bert"), ITEMS[:2], p, padding_masks=p)


def test_full_scope_scores_the_first_token_from_masks_alone(tiny_model):
    lm = tiny_model("roberta")
    assert_matches_naive(lm, ITEMS[:2], lm.padding_masks, scope="full")


# ---------------------------------------------------------------- the likelihood generation writes


@pytest.mark.parametrize("p", [0, 2])
def test_greedy_output_scores_the_sum_of_its_steps_log_probs(standin_mlm, p):
    """Scored after its prompt, a greedy output gets, token by token, the log-probability the
    trace shows its step chose it with, and every token is the decoder's top choice."""
    lm = standin_mlm
    result = generate(lm, PROMPT, max_new_tokens=8, padding_masks=p, trace=True, trace_top_k=1)
    prompt_ids = lm.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    # the output reads back as the tokens it was written as (else they would be other windows)
    assert lm.tokenizer(PROMPT + result.text, add_special_tokens=False)["input_ids"] == \
        prompt_ids + result.token_ids
    chosen = [math.log(step.top[0][1]) for step in result.steps[:len(result.token_ids)]]
    [score] = score_batch(lm, [(PROMPT, result.text)], ScoringSettings(method="decoder", padding_masks=p))
    assert [t.logprob for t in score.tokens] == floats.logprobs(chosen, lm)
    assert score.total == floats.total(sum(chosen), len(chosen), lm)
    assert all(t.rank == 1 for t in score.tokens)


@pytest.mark.parametrize("family", ["modernbert", "deberta-v2"])
def test_greedy_output_on_random_weights(tiny_model, family):
    """The same on random weights (ModernBERT; DeBERTa-v2 with p = 2). Random text need not read
    back as the tokens it was written as, so the windows are compared where it does."""
    lm = tiny_model(family)
    result = generate(lm, PROMPT, max_new_tokens=6, trace=True, trace_top_k=1)
    prompt_ids = lm.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    read_back = lm.tokenizer(PROMPT + result.text, add_special_tokens=False)["input_ids"]
    same = 0
    while same < len(result.token_ids) and read_back[len(prompt_ids) + same] == result.token_ids[same]:
        same += 1
    assert read_back[:len(prompt_ids)] == prompt_ids and same > 0
    chosen = [math.log(step.top[0][1]) for step in result.steps[:same]]
    [score] = score_batch(lm, [(PROMPT, result.text)], ScoringSettings(method="decoder"))
    assert [t.logprob for t in score.tokens[:same]] == floats.logprobs(chosen, lm)


# ---------------------------------------------------------------- length and work


def test_the_longest_window_must_fit_an_absolute_position_model(tiny_model):
    """The last token's window is p + 1 tokens longer than the text before it with [CLS] and
    [SEP]: a text that fits the model for the PLL can be refused for the decoder, in words."""
    lm = tiny_model("bert", max_position_embeddings=24)
    text = " ".join(["word"] * 22)  # 22 tokens + [CLS] + [SEP] = 24
    pll, decoder = ScoringSettings(), ScoringSettings(method="decoder")
    assert input_length(lm, text, pll) == 24
    assert input_length(lm, text, decoder) == 24 + lm.padding_masks
    score_batch(lm, [("", text)], pll)
    for refused in (lambda: score_batch(lm, [("", text)], decoder),
                    lambda: check_choices(lm, [Choice("", text, text)], decoder)):
        with pytest.raises(InputTooLong, match=r"window that predicts its last token .* 25 tokens long"):
            refused()
    shorter = " ".join(["word"] * (22 - lm.padding_masks))
    assert input_length(lm, shorter, decoder) == 24
    score_batch(lm, [("", shorter)], decoder)


def test_work_is_one_window_per_scored_token(standin_mlm):
    """The engine's count, tokens_read's and the count at the input embeddings agree: one pass
    per scored token, each as long as its window (the text before it, p + 1 masks, 2 specials)."""
    lm = standin_mlm
    choices = [[Choice("The cat sat", " on the mat.", "on the mat."),
                Choice("The cat sat", " on the warm windowsill.", "on the warm windowsill.")]]
    settings = ScoringSettings(method="decoder")
    from demo.engine.pll import score_choices
    with counting() as reads:
        rows, tokens = embedded_reads(lm, lambda: score_choices(lm, choices, settings))
    n_context = len(lm.tokenizer("The cat sat", add_special_tokens=False)["input_ids"])
    n_candidates = [len(lm.tokenizer(c.completion, add_special_tokens=False)["input_ids"]) for c in choices[0]]
    windows = [n_context + k + lm.padding_masks + 3 for n in n_candidates for k in range(n)]
    assert reads == Reads(sum(n_candidates), sum(windows)) == Reads(rows, tokens)
    assert tokens_read(lm, choices, settings) == sum(windows)
