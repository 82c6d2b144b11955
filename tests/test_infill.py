"""Infilling (demo.engine.infill, demo.engine.infill_causal): against naive loops, generation, PLL."""

import copy
import dataclasses
from types import SimpleNamespace

import pytest
import torch

import tests.floats as floats
from demo.cli import main
from demo.engine.generation import generate
from demo.engine.infill import infill, parse_blanks
from demo.engine.infill_causal import causal_infill, has_fim, rank_fills
from demo.engine.pll import score_batch
from demo.settings import InfillSettings, ScoringSettings
from tests.conftest import STANDIN_MLM, needs_shared
from tests.test_emd import naive

pytestmark = needs_shared

TWO_BLANKS = "The [blank:2] of France is [blank:3], a city on the river Seine."
FAMILIES = ["bert", "roberta", "deberta-v2", "modernbert"]


def window_by_hand(tok, pieces: list[str | int]) -> list[int]:
    """[CLS] piece ... [SEP]: a string is tokenized as it is, a number is that many masks."""
    ids = [tok.cls_token_id]
    for piece in pieces:
        ids += [tok.mask_token_id] * piece if isinstance(piece, int) else tok(piece, add_special_tokens=False)["input_ids"]
    return ids + [tok.sep_token_id]


TWO_BLANKS_BY_HAND = ["The", 2, " of France is", 3, ", a city on the river Seine."]


def naive_fill(model, tok, window: list[int], order: str) -> tuple[list[int], list[int]]:
    """Read the whole window with the model, pick the leftmost mask (left_to_right) or the mask
    whose best token is likeliest (confidence; ties: the leftmost), write its argmax; repeat.
    Specials and rows past the tokenizer are never written. -> (final window, filled positions)."""
    window, order_filled = list(window), []
    while tok.mask_token_id in window:
        masks = [i for i, t in enumerate(window) if t == tok.mask_token_id]
        with torch.no_grad():
            logits = model(torch.tensor([window])).logits[0, masks].float()
        logits[:, tok.all_special_ids] = float("-inf")
        logits[:, len(tok):] = float("-inf")
        best, token = logits.softmax(-1).max(-1)
        pick = 0
        if order == "confidence":
            for i in range(len(masks)):
                if best[i] > best[pick]:
                    pick = i
        window[masks[pick]] = int(token[pick])
        order_filled.append(masks[pick])
    return window, order_filled


def check_against_naive(lm, reference_model, order: str):
    tok = lm.tokenizer
    result = infill(lm, TWO_BLANKS, InfillSettings(order=order))
    window = window_by_hand(tok, TWO_BLANKS_BY_HAND)
    assert [p for blank in result.blanks for p in blank] == [i for i, t in enumerate(window) if t == tok.mask_token_id]
    final, order_filled = naive_fill(reference_model, tok, window, order)
    assert result.order == order_filled
    assert result.token_ids == [[final[p] for p in blank] for blank in result.blanks]
    assert (result.reads.passes, result.reads.tokens) == (5, 5 * len(window))  # one pass over the window per mask
    return result


# ---------------------------------------------------------------- against naive loops


@pytest.mark.parametrize("order", ["left_to_right", "confidence"])
def test_equals_a_naive_loop_on_the_standin(standin_mlm, order):
    result = check_against_naive(standin_mlm, standin_mlm.model, order)
    if order == "left_to_right":
        assert result.order == sorted(result.order)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("order", ["left_to_right", "confidence"])
def test_equals_a_naive_loop_random_weights(tiny_model, family, order):
    lm = tiny_model(family)
    check_against_naive(lm, lm.model, order)


@pytest.mark.parametrize("order", ["left_to_right", "confidence"])
def test_equals_a_naive_loop_with_debertas_enhanced_mask_decoder(tiny_model, order):
    lm = tiny_model("deberta-v2", emd=True)
    assert lm.emd
    check_against_naive(lm, naive(lm).model, order)  # the reference: Microsoft's decoder written out


@pytest.mark.parametrize("order, rows", [("left_to_right", [1] * 5), ("confidence", [5, 4, 3, 2, 1])])
def test_vocabulary_projection_runs_at_the_positions_read_only(tiny_model, order, rows):
    lm = tiny_model("bert")
    seen = []
    handle = lm.model.get_output_embeddings().register_forward_hook(
        lambda module, args, output: seen.append(output.numel() // output.shape[-1]))
    try:
        infill(lm, TWO_BLANKS, InfillSettings(order=order))
    finally:
        handle.remove()
    assert seen == rows


# ---------------------------------------------------------------- against generation


@pytest.mark.parametrize("k", [1, 3])
def test_a_blank_at_the_end_is_appended_mask_generation(standin_mlm, k):
    """Documented difference: infilling's window loses a mask per step (the blank shrinks) where
    generation keeps p + 1. So step t of a k-token blank at the end equals one generation step
    with p = k - 1 - t padding masks: the same window, the same token (where generation does not
    end: next test)."""
    prompt = "The capital of France is Paris. The capital of Germany is"
    result = infill(standin_mlm, prompt + " [blank:%d]" % k, InfillSettings(trace=True))
    assert len(result.steps) == k
    for t, step in enumerate(result.steps):
        so_far = prompt + "".join(s.chosen for s in result.steps[:t])
        generated = generate(standin_mlm, so_far, max_new_tokens=1, padding_masks=k - 1 - t, trace=True)
        assert step.window == generated.steps[0].window
        assert step.predicted == step.mask_positions[0] == generated.steps[0].mask_positions[0]
        assert step.chosen == generated.tokens[0]


def test_where_generation_ends_infilling_writes_its_best_other_token(tiny_model):
    """The documented difference at the end token: a random BERT made to favour [SEP] ends its
    generation there; infilling the same window writes the runner-up."""
    lm = tiny_model("bert")
    model = copy.deepcopy(lm.model)
    model.get_output_embeddings().bias.data[lm.tokenizer.sep_token_id] += 20  # (not so far that the rest underflow)
    ending = dataclasses.replace(lm, model=model)
    prompt = "The capital of France is Paris. The capital of Germany is"
    generated = generate(ending, prompt, max_new_tokens=1, padding_masks=0, trace=True)
    assert generated.stop_reason == "eos" and generated.steps[0].top[0][0] == "[SEP]"
    result = infill(ending, prompt + " [blank]", InfillSettings(trace=True))
    assert result.steps[0].window == generated.steps[0].window
    assert result.steps[0].chosen == generated.steps[0].top[1][0] == result.steps[0].top[0][0]


# ---------------------------------------------------------------- the right context


def test_the_text_after_the_blank_decides_the_masked_fill_not_the_causal_one(standin_mlm, smollm2):
    texts = ["The capital of [blank] is Paris.", "The capital of [blank] is Berlin."]
    masked = [infill(standin_mlm, t) for t in texts]
    assert masked[0].fills != masked[1].fills, [m.fills for m in masked]
    assert masked[0].filled == texts[0].replace("[blank]", masked[0].fills[0])
    causal = [causal_infill(smollm2, t, InfillSettings(fim="off")) for t in texts]
    assert causal[0].fills == causal[1].fills and causal[0].fills[0]
    assert causal[0].mode == "left" and "invisible" in causal[0].notes[0]
    rankings = rank_fills([standin_mlm, smollm2], [masked[0].filled, causal[0].filled])
    for lm, ranking in zip([standin_mlm, smollm2], rankings):
        expected = [s.total for s in score_batch(lm, [("", masked[0].filled), ("", causal[0].filled)],
                                                 ScoringSettings(scope="full"))]
        assert ranking.scores == expected and ranking.best == expected.index(max(expected))
        assert ranking.kind == lm.kind


@pytest.fixture(scope="module")
def fim_model(family_folder):
    """A random GPT-2 whose tokenizer has StarCoder's fill-in-the-middle tokens (SmolLM2's GGUF has none)."""
    from transformers import AutoTokenizer

    from demo.engine.models import random_model
    tokenizer = AutoTokenizer.from_pretrained(family_folder("gpt2"))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<fim_prefix>", "<fim_middle>", "<fim_suffix>"]})
    return random_model(family_folder("gpt2"), tokenizer=tokenizer)


def test_fill_in_the_middle_shows_the_text_after_the_blank(fim_model, smollm2):
    assert has_fim(fim_model.tokenizer) and not has_fim(smollm2.tokenizer)
    prompts = []
    handle = fim_model.model.register_forward_pre_hook(
        lambda module, args, kwargs: prompts.append(kwargs["input_ids"][0].tolist()), with_kwargs=True)
    try:
        result = causal_infill(fim_model, "The capital of [blank:2] is Paris, and [blank] is", InfillSettings(trace=True))
    finally:
        handle.remove()
    assert result.mode == "fim" and "after each blank" in result.notes[0]
    tok = fim_model.tokenizer
    first = tok("<fim_prefix>The capital of<fim_suffix> is Paris, and<fim_middle>")["input_ids"]
    assert prompts[0] == first  # the first blank's prompt: the text after it, up to the next blank
    second = tok(f"<fim_prefix>The capital of {result.fills[0]} is Paris, and<fim_suffix> is<fim_middle>")["input_ids"]
    assert second in [p[:len(second)] for p in prompts]  # the second: the first one filled
    # the trace: one step per forward pass the hook saw, each blank's window opening with its prompt
    assert len(result.steps) == len(prompts)
    windows = [s.window[:s.prompt_length] for s in result.steps]
    assert windows[0] == tok.convert_ids_to_tokens(first)
    assert tok.convert_ids_to_tokens(second) in windows
    assert causal_infill(fim_model, "The capital of [blank] is Paris.", InfillSettings(fim="off")).mode == "left"


@pytest.mark.floats
def test_the_causal_lm_keeps_the_prefix_of_its_continuation_it_scores_best(smollm2):
    result = causal_infill(smollm2, "She [blank:auto] to the shop because he was hungry.", InfillSettings(max_blank_tokens=3))
    continued = generate(smollm2, "She", max_new_tokens=3)
    assert [t.fill for t in result.tries] == ["".join(continued.tokens[:n]).strip() for n in (1, 2, 3)]
    for tried in result.tries:
        assert tried.text == f"She {tried.fill} to the shop because he was hungry."
        scored = score_batch(smollm2, [("", tried.text)], ScoringSettings(scope="full"))[0]
        assert tried.score == floats.total(scored.total, len(scored.tokens), smollm2)
    assert result.fills == [max(result.tries, key=lambda t: t.score).fill]


# ---------------------------------------------------------------- orders, sampling, lengths


def test_random_order_is_seeded_and_not_left_to_right(standin_mlm):
    text = "The [blank:3] of France is [blank:3]."
    a = infill(standin_mlm, text, InfillSettings(order="random", seed=3))
    b = infill(standin_mlm, text, InfillSettings(order="random", seed=3))
    assert a.order == b.order and a.token_ids == b.token_ids
    assert sorted(a.order) == infill(standin_mlm, text).order != a.order
    assert infill(standin_mlm, text, InfillSettings(order="random", seed=4)).order != a.order


def test_sampling_is_seeded_and_top_k_one_is_greedy(standin_mlm):
    sample = InfillSettings(strategy="sample", temperature=1.5, seed=7)
    assert infill(standin_mlm, TWO_BLANKS, sample).fills == infill(standin_mlm, TWO_BLANKS, sample).fills
    for order in ("left_to_right", "confidence"):
        greedy = infill(standin_mlm, TWO_BLANKS, InfillSettings(order=order))
        top1 = infill(standin_mlm, TWO_BLANKS, dataclasses.replace(sample, order=order, top_k=1))
        assert top1.token_ids == greedy.token_ids and top1.order == greedy.order


def test_the_trace_records_each_step(standin_mlm):
    result = infill(standin_mlm, TWO_BLANKS, InfillSettings(order="confidence", trace=True, trace_top_k=3))
    remaining = sorted(result.order)
    for step, position in zip(result.steps, result.order):
        assert step.predicted == position and step.mask_positions == remaining and step.prompt_length == 0
        assert [i for i, t in enumerate(step.window) if t == "[MASK]"] == remaining
        assert step.chosen == step.top[0][0] and len(step.top) == 3 and step.beams is None
        remaining.remove(position)


@pytest.mark.floats
def test_an_auto_blank_keeps_the_length_the_model_scores_best(standin_mlm):
    settings = InfillSettings(max_blank_tokens=3)
    result = infill(standin_mlm, "The [blank:auto] is the capital of France.", settings)
    assert [t.tokens for t in result.tries] == [1, 2, 3]
    copies = 0
    for tried in result.tries:
        fixed = infill(standin_mlm, f"The [blank:{tried.tokens}] is the capital of France.", settings)
        assert tried.text == fixed.filled and tried.fill == fixed.fills[0]
        scored = score_batch(standin_mlm, [("", fixed.filled)], ScoringSettings(scope="full"))[0]
        assert tried.score == floats.total(scored.total, len(scored.tokens), standin_mlm)  # batched apart
        copies += len(scored.tokens)  # scoring a try: a masked copy per token
    best = max(result.tries, key=lambda t: t.score)
    assert result.filled == best.text and len(result.token_ids[0]) == best.tokens
    assert result.reads.passes == 1 + 2 + 3 + copies  # a pass per masked token of each try, then the scoring


def test_blanks_are_read_as_the_parser_says():
    settings = InfillSettings(blank_tokens=2)
    blanks = parse_blanks("a ____ b [BLANK:3] c [blank:auto] d [blank] e ___ f", settings)
    assert [b.tokens for b in blanks] == [2, 3, None, 2]


# ---------------------------------------------------------------- refused in words


@pytest.mark.parametrize("text, settings, message", [
    ("No blank here.", InfillSettings(), "has no blank"),
    ("   ", InfillSettings(), "The text is empty"),
    ("A [blank:0] b", InfillSettings(), "is not a blank"),
    ("A [blank:many] b", InfillSettings(), "is not a blank"),
    ("A [blank:²] b", InfillSettings(), "'\\[blank:²\\]' is not a blank"),  # a digit, not an ASCII one
    ("A [blank] b\ud800", InfillSettings(), "The text holds a broken character \\(U\\+D800"),
    ("\u200b\u200b", InfillSettings(), "The text is only invisible characters"),
    ("[blank] [blank] [blank]", InfillSettings(max_blanks=2), "3 blanks; at most 2"),
    ("[blank:40] [blank:30]", InfillSettings(), "70 masked tokens together; at most 64"),
    ("[blank:auto] and [blank:auto]", InfillSettings(), "Only one blank can be"),
])
def test_bad_texts_are_refused_in_words(standin_mlm, text, settings, message):
    with pytest.raises(ValueError, match=message):
        infill(standin_mlm, text, settings)


def test_the_wrong_model_is_refused_in_words(tiny_model):
    with pytest.raises(ValueError, match="is a causal LM: it reads only the text before a blank"):
        infill(tiny_model("gpt2"), "The [blank] is red.")
    with pytest.raises(ValueError, match="is a masked LM"):
        causal_infill(tiny_model("bert"), "The [blank] is red.")
    no_mask = SimpleNamespace(kind="masked", label="x", tokenizer=SimpleNamespace(mask_token_id=None))
    with pytest.raises(ValueError, match="has no mask token"):
        infill(no_mask, "The [blank] is red.")
    with pytest.raises(ValueError, match="no fill-in-the-middle tokens"):
        causal_infill(tiny_model("gpt2"), "The [blank] is red.", InfillSettings(fim="on"))


@pytest.mark.parametrize("values, message", [
    (dict(order="backwards"), "Unknown infilling order"), (dict(strategy="beam"), "Unknown infilling strategy"),
    (dict(strategy="sample", temperature=0), "temperature"), (dict(blank_tokens=0), "blank_tokens"),
    (dict(max_blank_tokens=65), "max_blank_tokens"), (dict(fim="yes"), "fim mode")])
def test_bad_settings_are_refused_with_the_setting_named(values, message):
    with pytest.raises(ValueError, match=message):
        InfillSettings(**values)


# ---------------------------------------------------------------- the command line


def test_the_command_line_fills_offline(standin_mlm, capsys):
    text = "The capital of [blank] is Paris."
    assert main(["infill", "--model", str(STANDIN_MLM), "--text", text, "--order", "confidence", "--trace",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == infill(standin_mlm, text, InfillSettings(order="confidence")).filled
    assert "<<[MASK]>>" in out and "step   0" in out


def test_the_command_line_lists_the_settings(capsys):
    with pytest.raises(SystemExit):
        main(["infill", "--help"])
    out = capsys.readouterr().out
    for option in ("--text", "--order", "--blank-tokens", "--max-blank-tokens", "--max-blanks",
                   "--max-masked-tokens", "--fim", "--top-p"):
        assert option in out


@pytest.mark.floats
@pytest.mark.parametrize("extra", [dict(order="left_to_right"), dict(order="confidence"),
                                   dict(order="random", seed=4), dict(strategy="sample", order="confidence", seed=2)],
                         ids=["left-to-right", "confidence", "random", "sampled"])
def test_texts_filled_together_are_each_filled_as_alone(standin_mlm, extra):
    """Texts of different lengths and blanks, filled in one padded pass a step (one with a
    [blank:auto], which fills alone): each text's fill, order, steps and work are its own."""
    from demo.engine.infill import infill_together
    settings = InfillSettings(trace=True, **extra)
    texts = ["The capital of France is [blank].", "I [blank:2] to the shop and bought [blank] apples.",
             "She [blank:auto] that the door was open.", "Water boils at ____ degrees when it is [blank:3]."]
    for text, together in zip(texts, infill_together(standin_mlm, texts, settings)):
        alone = infill(standin_mlm, text, settings)
        assert (together.fills, together.token_ids, together.order, together.reads) == \
               (alone.fills, alone.token_ids, alone.order, alone.reads), text
        assert [(s.window, s.predicted, s.chosen) for s in together.steps] == \
               [(s.window, s.predicted, s.chosen) for s in alone.steps]
        for mine, its in zip(together.steps, alone.steps):
            assert [p for _, p in mine.top] == floats.probabilities([p for _, p in its.top], standin_mlm)
