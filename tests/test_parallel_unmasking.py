"""Parallel unmasking (demo.engine.parallel_unmasking) against a naive loop that spells it out."""

import pytest
import torch

from demo.engine.generation import generate
from demo.engine.parallel_unmasking import Guesses
from demo.settings import GenerationSettings
from demo.ui.playback import playback
from tests.conftest import MASKED_FAMILIES

PROMPT = "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is"


def naive_parallel_greedy(lm, prompt: str, new_tokens: int, p: int, threshold: float) -> list[int]:
    """One plain forward pass of [CLS] text [MASK]*(1 + p) [SEP]; the first mask's argmax is kept;
    then mask j's too, for j = 1, 2, ..., while the top probability of every mask up to j is at
    least the threshold and the token kept at mask j - 1 (j >= 2) was that mask's own top guess.
    Never [CLS]/[MASK]/[PAD]/[UNK]; stops at [SEP]."""
    tok = lm.tokenizer
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    banned = [i for i in tok.all_special_ids if i != tok.sep_token_id]
    out = []
    while len(out) < new_tokens:
        window = [tok.cls_token_id] + ids + out + [tok.mask_token_id] * (1 + p) + [tok.sep_token_id]
        at = len(ids) + len(out) + 1
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([window])).logits[0, at:at + 1 + p]
        kept = []
        for j in range(1 + p):
            if j >= 1 and float(logits[j].softmax(-1).max()) < threshold:
                break
            if j >= 2 and kept[-1] != int(logits[j - 1].argmax()):
                break
            allowed = logits[j].clone()
            allowed[banned] = float("-inf")
            allowed[len(tok):] = float("-inf")
            kept.append(int(allowed.argmax()))
        for token in kept:
            if token == tok.sep_token_id:
                return out
            out.append(token)
            if len(out) == new_tokens:
                break
    return out


def first_confidence(lm, prompt: str, p: int) -> float:
    """The top probability at the first padding mask of the prompt's first window."""
    tok = lm.tokenizer
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    window = [tok.cls_token_id] + ids + [tok.mask_token_id] * (1 + p) + [tok.sep_token_id]
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([window])).logits[0, len(ids) + 2]
    return float(logits.softmax(-1).max())


def test_which_steps_a_pass_answers_hand_computed():
    """Two rows (texts [5, 6] and [5, 7]), a vocabulary of 4, two padding masks. Row 0 guesses
    token 2 at mask 1 (p = 0.97) and token 3 at mask 2 (p = 0.97); row 1 guesses at mask 1 with
    p = 0.4 only."""
    sure = [torch.log(torch.tensor([0.01, 0.01, 0.97, 0.01])), torch.log(torch.tensor([0.01, 0.01, 0.01, 0.97]))]
    first = torch.zeros(4)
    logits = torch.stack([torch.stack([first, *sure]),
                          torch.stack([first, torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1])), sure[1]])])
    windows = torch.arange(2 * 7).view(2, 7)
    guesses = Guesses.of(torch.tensor([[5, 6], [5, 7]]), windows, logits, threshold=0.9)
    assert guesses.confident.tolist() == [2, 0]

    def read(*rows):
        return guesses.next_logits(torch.tensor(rows))

    logits_1, source, j = read([5, 6, 0])  # any token at the predicted mask; mask 1 answers next
    assert j == 1 and torch.equal(logits_1, logits[[0], 1]) and torch.equal(source, windows[[0]])
    logits_2, _, j = read([5, 6, 1, 2])  # mask 1's guess (2) was kept: mask 2 answers
    assert j == 2 and torch.equal(logits_2, logits[[0], 2])
    assert read([5, 6, 1, 3]) is None  # another token than mask 1's guess was kept
    assert read([5, 6, 1, 2, 3]) is None  # no mask 3
    assert read([5, 6]) is None  # the pass's own text: a new pass
    assert read([5, 7, 0]) is None  # row 1's mask 1 is not confident
    assert read([5, 8, 0]) is None  # extends no row of the pass
    both, source, _ = read([5, 6, 0], [5, 6, 1])  # beams: one row twice
    assert torch.equal(both, logits[[0, 0], 1]) and torch.equal(source, windows[[0, 0]])
    assert read([5, 6, 0], [5, 7, 0]) is None  # every row must be answered, or the pass runs


@pytest.mark.parametrize("p", [1, 3])
def test_greedy_equals_naive_loop_standin(standin_mlm, p):
    result = generate(standin_mlm, PROMPT, max_new_tokens=16, padding_masks=p, parallel_threshold=0.05)
    assert result.token_ids == naive_parallel_greedy(standin_mlm, PROMPT, 16, p, 0.05)
    assert 0 < result.guessed < 16  # both kinds of step were taken
    exact = generate(standin_mlm, PROMPT, max_new_tokens=16, padding_masks=p)
    assert exact.guessed is None and result.token_ids != exact.token_ids  # an approximation


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
def test_greedy_equals_naive_loop_random_weights(tiny_model, family):
    lm, p = tiny_model(family), 2
    # a threshold just under the first window's guess at its first padding mask: that one passes
    threshold = 0.99 * first_confidence(lm, PROMPT, p)
    result = generate(lm, PROMPT, max_new_tokens=10, padding_masks=p, parallel_threshold=threshold)
    assert result.token_ids == naive_parallel_greedy(lm, PROMPT, 10, p, threshold)
    assert result.guessed >= 1


@pytest.mark.parametrize("p", [1, 3])
def test_with_the_prefix_cache_refreshed_every_pass_it_equals_the_naive_loop(standin_mlm, p):
    """The prefix cache reads the masks after the predicted one inside its own layers."""
    result = generate(standin_mlm, PROMPT, max_new_tokens=16, padding_masks=p, parallel_threshold=0.05,
                      cache="prefix", cache_refresh=1)
    assert result.token_ids == naive_parallel_greedy(standin_mlm, PROMPT, 16, p, 0.05)


def test_off_and_unreachable_thresholds_change_nothing(standin_mlm):
    exact = generate(standin_mlm, PROMPT, max_new_tokens=12, padding_masks=3)
    never = generate(standin_mlm, PROMPT, max_new_tokens=12, padding_masks=3, parallel_threshold=1.0)
    assert never.token_ids == exact.token_ids and never.guessed == 0


def test_beam_with_one_beam_equals_greedy(standin_mlm):
    greedy = generate(standin_mlm, PROMPT, max_new_tokens=12, padding_masks=2, parallel_threshold=0.05)
    beam = generate(standin_mlm, PROMPT, max_new_tokens=12, padding_masks=2, parallel_threshold=0.05,
                    strategy="beam", num_beams=1)
    assert beam.token_ids == greedy.token_ids and beam.guessed == greedy.guessed


def test_beam_search_and_sampling_run(standin_mlm):
    for strategy in ("beam", "sample"):
        result = generate(standin_mlm, PROMPT, max_new_tokens=10, padding_masks=2, parallel_threshold=0.05,
                          strategy=strategy, num_beams=3, trace=True)
        assert "".join(step.chosen for step in result.steps)[:len(result.text)] == result.text


def test_trace_shows_the_window_a_guess_was_read_from(standin_mlm):
    p = 3
    result = generate(standin_mlm, PROMPT, max_new_tokens=16, padding_masks=p, parallel_threshold=0.05,
                      trace=True)
    steps = result.steps
    assert sum(step.read_from > 0 for step in steps) == result.guessed
    n = result.prompt_tokens
    for t, step in enumerate(steps):
        j = step.read_from
        source = steps[t - j]
        assert source.read_from == 0 and step.window == source.window  # no pass of its own
        # the masks of that window start where step t - j's token goes; this step reads mask j
        assert step.mask_positions == list(range(n + t - j + 1, n + t - j + 2 + p))
        assert step.window[step.mask_positions[j]] == standin_mlm.tokenizer.mask_token
    html = playback(steps, "masked", "run")
    assert html.count("no pass of its own") == result.guessed


def test_causal_lms_ignore_it(tiny_model):
    lm = tiny_model("gpt2")
    plain = generate(lm, PROMPT, max_new_tokens=6)
    asked = generate(lm, PROMPT, max_new_tokens=6, parallel_threshold=0.5)
    assert asked.token_ids == plain.token_ids and asked.guessed is None


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, 1.5, True, float("nan"), "0.9"])
def test_bad_thresholds_are_refused(bad):
    with pytest.raises(ValueError, match="parallel_threshold"):
        GenerationSettings(parallel_threshold=bad)
