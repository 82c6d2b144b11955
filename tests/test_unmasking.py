"""The any-order unmasking loop (demo.engine.unmasking) against naive loops written plainly here:
the whole window through the model's own forward pass, every step."""

import math

import pytest
import torch

import tests.floats as floats
from demo.engine.decoding import suppressed_ids
from demo.engine.generation import generate
from demo.engine.pll import score_batch
from demo.engine.text import prompt_ids_of
from demo.engine.unmasking import Growth, write
from demo.settings import GenerationSettings, ScoringSettings
from tests.conftest import needs_shared
from tests.test_emd import naive

PROMPT = "The capital of France is Paris. The capital of Italy is"
FAMILIES = ["bert", "roberta", "deberta-v2", "modernbert"]


def _write(lm, window, masks, tokens_per_step, order="left_to_right", remask=False, new=8, prompt=PROMPT,
           threshold=None):
    end = lm.tokenizer.sep_token_id
    how = GenerationSettings(order=order, tokens_per_step=tokens_per_step, remask=remask, confidence_threshold=threshold)
    out, begin = write(lm, prompt_ids_of(lm, prompt), how, Growth(window, masks, new, end),
                       suppressed_ids(lm, [end]))
    return out, begin


def naive_confidence(model, tok, prompt_ids, block, k, remask, new, banned, threshold=None, left_masked=None):
    """Blocks of ``block`` masks after the prompt; each step: the whole window through the model;
    a proposal (argmax) at every mask; with ``remask`` the block's written tokens compete too, at
    the log-prob they were written with; the k + (written) surest hold a token afterwards (ties: leftmost); the
    rest is masked; with ``threshold`` at least every mask whose proposal has that probability is
    written (Fast-dLLM's rule). An end token written ends the text there. -> (final window, log-prob
    of each written position at its last writing, the pass that wrote it last); ``left_masked``, a
    list, gets each pass's surest guess it read and left masked (None where it wrote every mask)."""
    mask, end = tok.mask_token_id, tok.sep_token_id
    window = [tok.cls_token_id] + prompt_ids + [end]
    begin, logprob, appended, step_of, passes = len(prompt_ids) + 1, {}, 0, {}, 0
    ended = False
    while appended < new and not ended:
        n = min(block, new - appended)
        first = len(window) - 1
        window[first:first] = [mask] * n
        appended += n
        block_positions = range(first, first + n)
        while any(window[i] == mask for i in block_positions):  # (masks typed in the prompt are read)
            with torch.no_grad():
                logits = model(torch.tensor([window])).logits[0].float()
            logits[:, banned] = float("-inf")
            logp = logits.log_softmax(-1)
            masks = [i for i in block_positions if window[i] == mask]
            written = [i for i in block_positions if window[i] != mask] if remask else []
            proposals = {i: int(logp[i].argmax()) for i in masks}
            sure = {i: float(logp[i, proposals[i]]) for i in masks} | {i: logprob[i] for i in written}
            passing = sum(1 for i in masks if threshold is not None and math.exp(sure[i]) >= threshold)
            keep = sorted(sure, key=lambda i: (-sure[i], i))[:max(min(k, len(masks)), passing) + len(written)]
            if left_masked is not None:
                left = [math.exp(sure[i]) for i in masks if i not in keep]
                left_masked.append(max(left) if left else None)
            for i in written:
                if i not in keep:
                    window[i] = mask
                    del logprob[i], step_of[i]
            for i in masks:
                if i in keep:
                    window[i], logprob[i], step_of[i] = proposals[i], sure[i], passes
            passes += 1
            if end in window[begin:-1]:  # the text ends there: nothing after it is read again
                cut = window.index(end, begin)
                window, ended = window[:cut + 1], True
                logprob = {i: v for i, v in logprob.items() if i <= cut}
                step_of = {i: v for i, v in step_of.items() if i <= cut}
                block_positions = range(first, min(first + n, cut + 1))
    return window, logprob, step_of


def _check_against_naive(lm, reference_model, k, remask, block=4, new=8, prompt=PROMPT, threshold=None):
    tok = lm.tokenizer
    out, begin = _write(lm, "block", block, k, "confidence", remask, new, prompt, threshold)
    banned = suppressed_ids(lm, [tok.sep_token_id])
    window, logprob, step_of = naive_confidence(reference_model, tok, prompt_ids_of(lm, prompt), block, k, remask,
                                                new, banned, threshold)
    assert out.ids == window
    assert out.written_at == step_of  # each token written at the same step
    assert sorted(out.logprobs) == sorted(logprob)
    assert [out.logprobs[i] for i in sorted(logprob)] == floats.logprobs([logprob[i] for i in sorted(logprob)], lm)
    return out


# ---------------------------------------------------------------- the paper's decoder


@pytest.mark.parametrize("family", FAMILIES)
def test_sliding_one_mask_a_step_left_to_right_is_the_papers_decoder(tiny_model, family):
    """M = 1 + p masks kept after the text, one token a step, left to right: token for token what
    generate() writes through transformers (greedy, the exact method)."""
    lm = tiny_model(family)
    paper = generate(lm, PROMPT, max_new_tokens=10)
    out, begin = _write(lm, "slide", 1 + lm.padding_masks, 1, new=10)
    text = out.ids[begin:begin + 10]
    assert text[:len(paper.token_ids)] == paper.token_ids
    assert len(out.order) == 10 or text[len(paper.token_ids)] == lm.tokenizer.sep_token_id


@needs_shared
@pytest.mark.parametrize("padding_masks", [0, 2])
def test_the_papers_decoder_on_the_standin(standin_mlm, padding_masks):
    paper = generate(standin_mlm, PROMPT, max_new_tokens=12, padding_masks=padding_masks)
    out, begin = _write(standin_mlm, "slide", 1 + padding_masks, 1, new=12)
    assert out.ids[begin:begin + len(paper.token_ids)] == paper.token_ids
    assert [len(step) for step in out.order] == [1] * len(out.order)


# ---------------------------------------------------------------- any order


@needs_shared
@pytest.mark.parametrize("remask", [False, True])
def test_most_confident_first_two_a_step_equals_a_naive_loop_on_the_standin(standin_mlm, remask):
    _check_against_naive(standin_mlm, standin_mlm.model, k=2, remask=remask)


@needs_shared
def test_re_masking_puts_masks_back_and_still_equals_the_naive_loop(standin_mlm):
    """Blocks of 8, one token a step: a written token can lose its place to a surer guess (this
    prompt has some), and the loop still writes what the naive loop writes."""
    out = _check_against_naive(standin_mlm, standin_mlm.model, k=1, remask=True, block=8, new=16)
    assert any(out.remasked)


@needs_shared
@pytest.mark.parametrize("threshold", [0.05, 0.3, 0.9])
def test_threshold_writing_equals_a_naive_loop_of_fast_dllms_rule(standin_mlm, threshold):
    """Every mask of the open block whose guess is at least ``threshold`` likely is written, and at
    least one (the surest): the same tokens, the same step for each, the same likelihood as the
    naive loop. A low threshold writes several tokens a pass, a high one about one."""
    out = _check_against_naive(standin_mlm, standin_mlm.model, k=1, remask=False, block=8, new=16,
                               threshold=threshold)
    tokens = sum(len(step) for step in out.order)
    assert len(out.order) <= tokens  # never fewer tokens than passes
    if threshold == 0.05:
        assert len(out.order) < tokens  # several a pass somewhere


@needs_shared
@pytest.mark.parametrize("threshold", [0.1, 0.3])
def test_threshold_writing_traces_the_surest_guess_each_pass_left_masked(standin_mlm, threshold):
    """Each pass's trace keeps the surest guess it read and did not write (None where it wrote every
    mask it read): the naive loop's, pass by pass, and below the threshold, which writes every
    guess that reaches it. The page's threshold line quotes it (demo.ui.prompting)."""
    tok = standin_mlm.tokenizer
    left: list = []
    naive_confidence(standin_mlm.model, tok, prompt_ids_of(standin_mlm, PROMPT), 8, 1, False, 16,
                     suppressed_ids(standin_mlm, [tok.sep_token_id]), threshold, left_masked=left)
    steps = generate(standin_mlm, PROMPT, GenerationSettings(
        max_new_tokens=16, window="block", block_length=8, order="confidence", confidence_threshold=threshold,
        stop_at_newline=False), trace=True).steps
    traced = [step.surest_unwritten for step in steps]
    assert [p is None for p in traced] == [p is None for p in left] and any(p is not None for p in left)
    assert ([math.log(p) for p in traced if p is not None]
            == floats.logprobs([math.log(p) for p in left if p is not None], standin_mlm))
    assert all(p < threshold for p in traced if p is not None)


@needs_shared
@pytest.mark.parametrize("remask", [False, True])
def test_masks_typed_into_the_prompt_are_read_never_written(standin_mlm, remask):
    """The model's own mask token typed into the prompt is text it reads: the loop writes only the
    masks it lays out (the naive loop writes its blocks only), and the typed ones stay masks."""
    prompt = "The capital of France is [MASK]. The capital of [MASK] is Rome. The capital of Italy is"
    out = _check_against_naive(standin_mlm, standin_mlm.model, k=2, remask=remask, prompt=prompt)
    mask, typed = standin_mlm.tokenizer.mask_token_id, prompt_ids_of(standin_mlm, prompt)
    assert typed.count(mask) == 2 and out.ids[1:1 + len(typed)] == typed
    assert sum(len(step) for step in out.order) - sum(len(step) for step in out.remasked) <= 8


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("remask", [False, True])
def test_most_confident_first_equals_a_naive_loop_random_weights(tiny_model, family, remask):
    lm = tiny_model(family)
    _check_against_naive(lm, lm.model, k=2, remask=remask)


def test_most_confident_first_with_debertas_enhanced_mask_decoder(tiny_model):
    lm = tiny_model("deberta-v2", emd=True)
    _check_against_naive(lm, naive(lm).model, k=2, remask=True)


def test_a_block_is_filled_before_the_next_is_read(tiny_model):
    lm = tiny_model("bert")
    out, begin = _write(lm, "block", 4, 2, "random", new=8)
    steps = [positions for positions in out.order if positions]
    blocks = [{(p - begin) // 4 for p in positions} for positions in steps]
    assert all(len(b) == 1 for b in blocks) and [min(b) for b in blocks] == sorted(min(b) for b in blocks)
    assert len(steps) == 4  # 8 tokens, 2 a step


def test_the_random_order_is_seeded(tiny_model):
    lm = tiny_model("bert")
    end = lm.tokenizer.sep_token_id

    def order(seed):
        out, _ = write(lm, prompt_ids_of(lm, PROMPT), GenerationSettings(order="random", seed=seed), Growth("block", 6, 6, end),
                       suppressed_ids(lm, [end]))
        return out.order

    assert order(3) == order(3) != order(4)
    assert order(3) != sorted(order(3))


def test_the_likelihood_under_the_order_written_sums_each_tokens_log_prob_at_its_step(tiny_model):
    """Greedy, left to right, sliding: each token's log-prob is the decoder's at that step (the
    full window through the model, as a naive loop reads it)."""
    lm = tiny_model("roberta")
    tok = lm.tokenizer
    p = lm.padding_masks
    out, begin = _write(lm, "slide", 1 + p, 1, new=6)
    banned = suppressed_ids(lm, [tok.sep_token_id])
    expected, ids = [], prompt_ids_of(lm, PROMPT)
    for position in sorted(out.logprobs):
        window = [tok.cls_token_id] + ids + [tok.mask_token_id] * (1 + p) + [tok.sep_token_id]
        with torch.no_grad():
            logits = lm.model(torch.tensor([window])).logits[0, len(ids) + 1].float()
        logits[banned] = float("-inf")
        expected.append(float(logits.log_softmax(-1)[out.ids[position]]))
        ids = ids + [out.ids[position]]
    assert [out.logprobs[i] for i in sorted(out.logprobs)] == floats.logprobs(expected, lm)


# ---------------------------------------------------------------- through generate()


@needs_shared
def test_generate_writes_in_any_order_through_the_loop(standin_mlm):
    """generate() with any-order settings gives what the loop writes, its steps traced (several
    tokens a step), and the log-likelihood under the order written."""
    lm = standin_mlm
    settings = GenerationSettings(max_new_tokens=8, window="block", block_length=8, tokens_per_step=2,
                                  order="confidence", trace=True)
    assert settings.any_order and not GenerationSettings().any_order
    result = generate(lm, PROMPT, settings)
    out, begin = _write(lm, "block", 8, 2, "confidence", new=8)
    written = out.ids[begin:begin + len(result.token_ids)]
    assert result.token_ids == written and result.steps_run == len(out.order) == 4
    assert [len(step.written) for step in result.steps] == [2, 2, 2, 2]
    ended = result.stop_reason == "eos"
    expected = [out.logprobs[begin + i] for i in range(len(result.token_ids) + ended)]
    assert result.log_likelihood == pytest.approx(sum(expected), abs=1e-9)


@needs_shared
def test_a_greedy_outputs_log_likelihood_is_its_decoder_likelihood(standin_mlm):
    """The paper's decoder, greedy: the log-likelihood generate() reports (from the scores it chose
    from) equals the decoder's own likelihood of that text (ScoringSettings method="decoder",
    scored afresh), and what the loop written step by step sums to."""
    lm = standin_mlm
    result = generate(lm, PROMPT, max_new_tokens=8)
    assert result.stop_reason == "max_new_tokens"
    [score] = score_batch(lm, [(PROMPT, result.text)], ScoringSettings(method="decoder"))
    n = len(result.token_ids)
    assert result.log_likelihood == floats.total(score.total, n, lm)
    out, begin = _write(lm, "slide", 1 + lm.padding_masks, 1, new=8)
    assert result.log_likelihood == floats.total(sum(out.logprobs[begin + i] for i in range(n)), n, lm)


def test_a_causal_lm_is_told_it_writes_left_to_right(tiny_model):
    with pytest.raises(ValueError, match="writes left to right"):
        generate(tiny_model("gpt2"), PROMPT, max_new_tokens=4, window="block")


@needs_shared
@pytest.mark.parametrize("writing", [
    dict(window="block", block_length=4, tokens_per_step=2, order="confidence"),
    dict(window="block", block_length=8, masks_ahead=True, order="confidence", confidence_threshold=0.2),
    dict(window="block", block_length=4, order="random", strategy="sample", seed=3),
    dict(window="slide", tokens_per_step=2, order="left_to_right", stop_at_newline=True),
    dict(window="block", block_length=4, tokens_per_step=2, order="confidence", remask=True),
    dict(window="block", block_length=6, tokens_per_step=3, strategy="sample", top_k=20, min_p=0.05,
         repetition_penalty=1.2, seed=5),
    dict(window="block", block_length=4, order="confidence", cache="prefix", cache_refresh=2),
], ids=["blocks", "ahead-threshold", "random-sampled", "sliding-stops", "remask", "left-sampled-penalty",
        "block-cache"])
def test_a_batch_of_8_prompts_writes_what_each_writes_alone(standin_mlm, writing):
    """Eight prompts of different lengths written together (one padded forward pass a step, each
    row stopping on its own: end token, stop, budget) give each prompt's own output, token for
    token, with its own steps and likelihood, and its own count of the work."""
    from demo.engine.generation import generate_together
    settings = GenerationSettings(max_new_tokens=12, stop_strings=[".", "\n"], **writing)
    prompts = [f"Q: What is {a} plus {b}?\nA:" for a, b in [(1, 2), (10, 20), (3, 4)]] + [
        "The capital of France is Paris. The capital of Italy is", "Once upon a time", "Cats and dogs are",
        "A list of fruit: apple, pear,", "Translate to French: the house is ->"]
    together = generate_together(standin_mlm, prompts, settings)
    for prompt, result in zip(prompts, together):
        alone = generate(standin_mlm, prompt, settings)
        assert (result.token_ids, result.text, result.stop_reason) == (alone.token_ids, alone.text, alone.stop_reason)
        assert result.steps_run == alone.steps_run and result.reads == alone.reads
        assert result.log_likelihood == floats.total(alone.log_likelihood, len(alone.token_ids) + 1, standin_mlm)
    assert len({r.steps_run for r in together}) > 1 or len({len(r.token_ids) for r in together}) > 1
