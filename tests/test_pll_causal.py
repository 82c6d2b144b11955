"""Causal LMs: exact log-likelihood against a hand-written loop (full logits, one text at a time)."""

import pytest
import torch

import tests.floats as floats
from demo.engine import batching
from demo.engine.pll import score_batch, score_candidates
from demo.settings import ScoringSettings
from tests.test_pll import model_text, rank_range

pytestmark = pytest.mark.floats

ITEMS = [
    ("The capital of France is", " Paris."),
    ("Question: What do cows drink?\nAnswer:", " Water, mostly; sometimes milk when they are calves."),
    ("", "Hello there."),
]


@torch.no_grad()
def hand_written_loglikelihood(lm, context, completion, scope="completion"):
    """[(logprob, rank range)] per scored token: log P(token | everything before), with lm-eval's
    HFLM convention for the start token: it precedes the text only when the text's first token is
    scored (an empty context, or every token scored), never before a context that is only read."""
    context, completion = model_text(lm, context), model_text(lm, completion)
    tokenizer = lm.tokenizer  # (GPT-2's and SmolLM2's tokenizers add no special tokens)
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    first_scored = not context or scope == "full"
    ids = [start] * first_scored + tokenizer(context + completion)["input_ids"]
    n_context = 1 if first_scored else len(tokenizer(context)["input_ids"])
    logprobs = lm.model(input_ids=torch.tensor([ids])).logits[0].float().log_softmax(-1)
    out = []
    for t in range(n_context, len(ids)):
        out.append((float(logprobs[t - 1, ids[t]]), rank_range(logprobs[t - 1], ids[t], lm)))
    return out


def assert_matches_loop(lm, items, **kwargs):
    ours = score_batch(lm, items, ScoringSettings(token_budget=64, **kwargs))
    for (context, completion), result in zip(items, ours):
        expected = hand_written_loglikelihood(lm, context, completion, **kwargs)
        assert len(result.tokens) == len(expected)
        assert [t.logprob for t in result.tokens] == floats.logprobs([e[0] for e in expected], lm)
        assert all(best <= t.rank <= worst for t, (_, (best, worst)) in zip(result.tokens, expected))
        assert all(t.masked == [] for t in result.tokens)
        assert result.total == floats.total(sum(e[0] for e in expected), len(expected), lm)


@pytest.mark.parametrize("scope", ["completion", "full"])
def test_gpt2_random_weights_equals_loop(tiny_model, scope, monkeypatch):
    monkeypatch.setattr(batching, "HEAD_ROWS", 5)  # the vocabulary projection in several chunks
    assert_matches_loop(tiny_model("gpt2"), ITEMS, scope=scope)


@pytest.mark.parametrize("scope", ["completion", "full"])
def test_smollm2_equals_loop(smollm2, scope):
    assert smollm2.kind == "causal"
    assert_matches_loop(smollm2, ITEMS, scope=scope)


def test_smollm2_ranks_the_sensible_answer_first(smollm2):
    paris, banana = score_candidates(smollm2, "The capital of France is", ["Paris.", "banana."])
    assert paris.score > banana.score
    assert paris.tokens[0].rank <= 5  # " Paris" is among SmolLM2's top guesses
