"""The prefix cache (demo.engine.prefix_cache) against independent references: the model's own forward
pass, the exact method, and a naive loop that spells the approximation out with attention masks."""

import re

import pytest
import torch

import tests.floats as floats
from demo.engine.generation import GenerationResult, first_difference, generate
from demo.engine.mlm_decoder import WindowSpecials, build_windows
from demo.engine.prefix_cache import FRESH, Prefix, encoder_of
from demo.engine.text import encode_newlines
from demo.settings import GenerationSettings
from tests.conftest import FAMILY_VARIANTS

PROMPT = "The capital of France is Paris. The capital of Germany is"
LONG = ("Q: What is the capital of Italy?\nA: Rome.\n\nQ: What is the capital of Spain?\nA: Madrid."
        "\n\nQ: What is the capital of Japan?\nA: Tokyo.\n\nQ: What is the capital of Peru?\nA:")

# The families' variants (FAMILY_VARIANTS), and ModernBERT with a short local window (so its
# sliding layers cut through the prompt) and DeBERTa-v2 with separate position projections and no
# log buckets
VARIANTS = {
    **FAMILY_VARIANTS,
    "modernbert": ("modernbert", {"local_attention": 16}),
    "deberta-v2-own-position-projections": ("deberta-v2", {"share_att_key": False, "position_buckets": -1}),
}


@pytest.fixture(params=list(VARIANTS))
def variant(request, tiny_model):
    family, overrides = VARIANTS[request.param]
    return tiny_model(family, **overrides)


def window_of(lm, text: str, generated: int, padding_masks: int) -> tuple[torch.Tensor, int]:
    """A window [CLS] text masks [SEP] whose last `generated` text tokens stand for generated
    ones; and the prefix length ([CLS] + the text before them)."""
    ids = torch.tensor([lm.tokenizer(text, add_special_tokens=False)["input_ids"]])
    windows = build_windows(ids, WindowSpecials.of(lm.tokenizer), padding_masks)
    return windows, ids.shape[1] - generated + 1


# ---------------------------------------------------------------- positions of the tail


@pytest.mark.floats
@pytest.mark.parametrize("generated", [0, FRESH + 3])  # + 3: a tail as long as they get
def test_a_tail_on_its_own_refresh_reproduces_the_full_forward_pass(variant, generated):
    """When the prefix was cached from the very window the tail belongs to, nothing is stale, so
    tail + cache must give the model's own hidden states: positions, rotary angles, sliding
    windows, relative buckets (c2p and p2c), the convolution's left neighbour all as in the
    full window."""
    lm, p = variant, 1
    windows, start = window_of(lm, LONG, generated, p)
    assert windows.shape[1] > 2 * 8 + 4  # longer than ModernBERT's local window here
    encode, room = encoder_of(lm.model), windows.shape[1] - start
    with torch.no_grad():
        full = lm.model.base_model(input_ids=windows).last_hidden_state
        refreshed, layers, shared = encode(lm.model, windows, 0, None, start, room)
        cached = Prefix(windows[:, 1:start], start, layers, shared, query_base=start)
        tail, rolled, _ = encode(lm.model, windows, start, cached, start + 1, room)
        # the cache a tail step passes on (one position longer) is what a refresh would keep
        _, kept, _ = encode(lm.model, windows, 0, None, start + 1, room - 1)
        # a step reads its predicted mask only (the last layer skips the other rows)
        at = windows.shape[1] - p - 2
        read_refresh, _, _ = encode(lm.model, windows, 0, None, start, room, at)
        read_tail, _, _ = encode(lm.model, windows, start, cached, start + 1, room, at)
    close = floats.states(lm, full)
    torch.testing.assert_close(refreshed, full, **close)
    torch.testing.assert_close(tail, full[:, start:], **close)
    for read in (read_refresh, read_tail):
        assert read.shape[1] == 1
        torch.testing.assert_close(read[:, 0], full[:, at], **close)
    assert len(rolled) == len(kept)
    for rolled_layer, kept_layer in zip(rolled, kept):
        for k, (a, b) in enumerate(zip(rolled_layer, kept_layer)):
            if k == 2:  # DeBERTa's p2c rows: queries from start on, resp. from start + 1 on
                a = a[:, :, 1:]
            expected = held(b, k, start + 1)
            torch.testing.assert_close(held(a, k, start + 1), expected, **floats.states(lm, expected))


def held(cached: torch.Tensor, kind: int, positions: int) -> torch.Tensor:
    """A cached tensor's first ``positions`` positions: key/value buffers (kinds 0, 1) have room
    after them along dim 2, DeBERTa's p2c scores (kind 2) along dim 3; what keeps a window
    (ModernBERT's local layers, DeBERTa's convolution input) is returned whole."""
    dim = 3 if kind == 2 else 2
    return (cached.narrow(dim, 0, positions) if cached.dim() == 4 and cached.shape[dim] > positions
            else cached)


# ---------------------------------------------------------------- R = 1 is the exact method


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_refresh_every_step_equals_the_exact_method(variant, strategy):
    exact = generate(variant, LONG, max_new_tokens=8, strategy=strategy, num_beams=3)
    fast = generate(variant, LONG, max_new_tokens=8, strategy=strategy, num_beams=3,
                    cache="prefix", cache_refresh=1)
    assert fast.token_ids == exact.token_ids and fast.text == exact.text


@pytest.mark.parametrize("p", [0, 2])
def test_refresh_every_step_equals_the_exact_method_standin(standin_mlm, p):
    exact = generate(standin_mlm, LONG, max_new_tokens=10, padding_masks=p)
    fast = generate(standin_mlm, LONG, max_new_tokens=10, padding_masks=p, cache="prefix",
                    cache_refresh=1)
    assert fast.token_ids == exact.token_ids


# ---------------------------------------------------------------- the approximation, spelled out


def naive_prefix_greedy(lm, prompt: str, new_tokens: int, p: int, refresh: int):
    """The prefix cache by its definition, with the model's plain forward pass, one per step.

    A refresh step reads the whole window W0 and caches its positions before the last FRESH text
    tokens. Every later step k reads a block: the window from the first uncached position on (the
    last FRESH text tokens, the masks, [SEP]); it sees the cached positions and itself, and its
    first position joins the cache. So step k is one forward pass over W0, block 1, ..., block k
    side by side at their true positions, where each block attends to W0's cached positions, to
    the first position of each block before it and to itself (W0 to itself only): each block's
    states are then those it had at its own step. BERT takes position ids and a 4-D mask. Stops
    at [SEP], bans the other specials. Returns the tokens and each step's three highest
    probabilities."""
    tok = lm.tokenizer
    ids = tok(encode_newlines(prompt, lm.newline_survives), add_special_tokens=False)["input_ids"]
    banned = [i for i in tok.all_special_ids if i != tok.sep_token_id]
    out, tops = [], []
    for step in range(new_tokens):
        window = [tok.cls_token_id] + ids + out + [tok.mask_token_id] * (1 + p) + [tok.sep_token_id]
        at = len(ids) + len(out) + 1  # the predicted mask
        if step % refresh == 0:
            blocks = [(window, 0)]  # (tokens, first position)
            cached = max(at + 1 - FRESH, 1)  # W0's cached positions: [0, cached)
        else:
            start = cached + len(blocks) - 1
            blocks.append((window[start:], start))
        sequence = [t for block, _ in blocks for t in block]
        positions = [first + j for block, first in blocks for j in range(len(block))]
        mask = torch.zeros(len(sequence), len(sequence), dtype=torch.bool)
        offset = 0
        for k, (block, _) in enumerate(blocks):
            rows = slice(offset, offset + len(block))
            mask[rows, rows] = True
            if k:
                mask[rows, :cached] = True  # W0's cached positions
                for j in range(1, k):  # the first position of every block before
                    mask[rows, len(blocks[0][0]) + sum(len(b) for b, _ in blocks[1:j])] = True
            offset += len(block)
        predicted = len(sequence) - len(blocks[-1][0]) + (at - blocks[-1][1])
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([sequence]), attention_mask=mask[None, None],
                              position_ids=torch.tensor([positions]),
                              token_type_ids=torch.zeros(1, len(sequence), dtype=torch.long)
                              ).logits[0, predicted]
        logits[banned] = float("-inf")
        tops.append(logits.softmax(-1).topk(3).values.tolist())
        nxt = int(logits.argmax())
        if nxt == tok.sep_token_id:
            break
        out.append(nxt)
    return out, tops


@pytest.mark.floats
def test_greedy_prefix_cache_equals_its_definition_standin(standin_mlm):
    lm, refresh = standin_mlm, 5  # refreshes at steps 0, 5, 10
    fast = generate(lm, LONG, max_new_tokens=12, cache="prefix", cache_refresh=refresh, trace=True,
                    trace_top_k=3, cache_margin=0)
    tokens, tops = naive_prefix_greedy(lm, LONG, 12, lm.padding_masks, refresh)
    assert fast.token_ids == tokens and len(tokens) == 12
    for step, top in zip(fast.steps, tops):
        assert [p for _, p in step.top] == floats.probabilities(top, lm)
    # ... and it is an approximation: between refreshes it is not the exact method
    exact = generate(lm, LONG, max_new_tokens=12, trace=True, trace_top_k=3)
    same_text = [t for t in range(12) if exact.token_ids[:t] == tokens[:t] and t % refresh]
    assert any(exact.steps[t].top[0][1] != floats.probabilities(tops[t][0], lm) for t in same_text)


class EncoderCalls:
    """Counts the encoder's calls and the tokens each reads (its embeddings see every block
    encoded, refresh or tail)."""

    def __init__(self, model):
        self.lengths = []
        self.handle = model.base_model.embeddings.register_forward_pre_hook(
            lambda module, args, kwargs: self.lengths.append(kwargs["input_ids"].shape), with_kwargs=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def test_beams_find_their_cached_rows(standin_mlm):
    """Beam search reorders and duplicates rows between steps; every beam still extends a cached
    row, so only the planned steps re-encode the whole window."""
    with EncoderCalls(standin_mlm.model) as calls:
        result = generate(standin_mlm, LONG, max_new_tokens=10, strategy="beam", num_beams=4,
                          cache="prefix", cache_refresh=4, cache_margin=0)
    steps = len(calls.lengths)
    assert steps >= 5 and all(rows == 4 for rows, _ in calls.lengths)
    tail = FRESH + (1 + standin_mlm.padding_masks) + 1  # the last FRESH text tokens, masks, [SEP]
    full = [i for i, (_, width) in enumerate(calls.lengths) if width != tail]
    assert full == list(range(0, steps, 4))  # refreshes at steps 0, 4, 8 only
    assert len(result.token_ids) <= 10 and result.refreshes == len(full)


def test_doubtful_steps_are_refreshed(standin_mlm):
    """Refresh on doubt: with a margin no two logits clear, every step is a refresh, so the
    output is the exact method's however rarely R refreshes; with no margin, only R's."""
    exact = generate(standin_mlm, LONG, max_new_tokens=10)
    always = generate(standin_mlm, LONG, max_new_tokens=10, cache="prefix", cache_refresh=64,
                      cache_margin=1e9)
    never = generate(standin_mlm, LONG, max_new_tokens=10, cache="prefix", cache_refresh=64,
                     cache_margin=0)
    assert always.token_ids == exact.token_ids
    assert always.refreshes == len(exact.token_ids) + (exact.stop_reason == "eos")
    assert never.refreshes == 1 and exact.refreshes is None



# ---------------------------------------------------------------- everything else keeps working


def test_decoding_features_work_with_the_prefix_cache(standin_mlm):
    lm = standin_mlm
    fast = dict(cache="prefix", cache_refresh=4)
    sampled = [generate(lm, LONG, strategy="sample", top_k=64, top_p=0.9, temperature=0.7,
                        max_new_tokens=8, seed=3, **fast).token_ids for _ in range(2)]
    assert sampled[0] == sampled[1] and sampled[0]
    digits = generate(lm, "Remember the number 482913. The number to remember is", digits=6,
                      strategy="beam", **fast)
    assert re.fullmatch(r" [0-9]{6}", digits.text) and digits.stop_reason == "digits"
    choice = generate(lm, PROMPT, choices=("the city of berlin", "the capital", "munich"), **fast)
    assert choice.text in ("the city of berlin", "the capital", "munich")
    stopped = generate(lm, PROMPT, max_new_tokens=20, stop_strings=("capital",), **fast)
    assert "capital" not in stopped.text and stopped.stop_reason == "stop_string"
    traced = generate(lm, LONG, max_new_tokens=6, strategy="beam", num_beams=2, trace=True, **fast)
    assert "".join(s.chosen for s in traced.steps[:len(traced.tokens)]) == traced.text
    tok = lm.tokenizer
    ids = tok(encode_newlines(LONG, lm.newline_survives), add_special_tokens=False)["input_ids"]
    for t, step in enumerate(traced.steps):  # the trace shows the whole window, cached or not
        assert step.window == (["[CLS]"] + tok.convert_ids_to_tokens(ids + traced.token_ids[:t])
                               + ["[MASK]", "[MASK]", "[SEP]"])


def test_causal_lms_ignore_the_setting(tiny_model):
    gpt2 = tiny_model("gpt2")
    assert (generate(gpt2, PROMPT, max_new_tokens=5, cache="prefix").token_ids
            == generate(gpt2, PROMPT, max_new_tokens=5).token_ids)


def test_unsupported_families_and_bad_settings_are_refused(tiny_model):
    with pytest.raises(ValueError, match="supports the bert, roberta, albert, modernbert, deberta-v2 "
                                         "families, not distilbert"):
        generate(tiny_model("distilbert"), PROMPT, cache="prefix")
    with pytest.raises(ValueError, match="Unknown cache 'fast'"):
        GenerationSettings(cache="fast")
    with pytest.raises(ValueError, match="cache_refresh"):
        GenerationSettings(cache="prefix", cache_refresh=0)


def test_first_difference_says_where_two_outputs_part():
    def result(ids):
        return GenerationResult(prompt="", text="", tokens=[], stop_reason="eos", steps=[], seconds=1.0,
                                seconds_per_step=1.0, prompt_tokens=1, token_ids=ids)

    assert first_difference(result([1, 2, 3]), result([1, 2, 3])) is None
    assert first_difference(result([1, 2, 3]), result([1, 5, 3])) == 1
    assert first_difference(result([1, 2]), result([1, 2, 3])) == 2
