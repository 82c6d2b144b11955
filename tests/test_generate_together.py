"""Requests decoded together by ``generate()`` (``demo.engine.decoding.decode_together``): prompts of
different lengths in one left-padded batch, each answer the one it gets alone, run one at a time
(the reference: the same ``generate()`` with one prompt)."""

import floats
import pytest

from demo.engine.generation import generate, generate_together
from demo.settings import GenerationSettings

PROMPTS = ["Q: What is 1 plus 2?\nA:", "The capital of France is Paris. The capital of Italy is", "Once upon a time",
           "Cats and dogs are", "A list of fruit: apple, pear,", "Translate to French: the house is ->",
           "My body cast a shadow over the grass because (Ada)", "Hi"]
SETTINGS = [
    dict(),
    dict(stop_at_newline=True, stop_strings=["."]),
    dict(strategy="sample", seed=3, top_k=20, temperature=0.9),
    dict(strategy="sample", seed=0, top_p=0.9, min_p=0.05, repetition_penalty=1.3),
    dict(repetition_penalty=1.5, padding_masks=0),
]
IDS = ["greedy", "stops", "sampled-top-k", "sampled-top-p-min-p-penalty", "penalty"]


def _same_as_alone(lm, settings: GenerationSettings, prompts=PROMPTS):
    together = generate_together(lm, prompts, settings)
    for prompt, result in zip(prompts, together):
        alone = generate(lm, prompt, settings)
        assert (result.token_ids, result.text, result.stop_reason) == (alone.token_ids, alone.text, alone.stop_reason), prompt
        assert result.reads == alone.reads and result.steps_run == alone.steps_run
        assert result.log_likelihood == (None if alone.log_likelihood is None else  # (none for beams)
                                         floats.total(alone.log_likelihood, len(alone.token_ids) + 1, lm))
        if settings.trace:
            assert [(s.window, s.mask_positions, s.chosen, s.reads) for s in result.steps] == \
                   [(s.window, s.mask_positions, s.chosen, s.reads) for s in alone.steps]
            for mine, its in zip(result.steps, alone.steps):
                assert [t for t, _ in mine.top] == [t for t, _ in its.top]
                assert [p for _, p in mine.top] == floats.probabilities([p for _, p in its.top], lm)
    return together


@pytest.mark.floats
@pytest.mark.parametrize("extra", SETTINGS, ids=IDS)
def test_the_papers_decoder_batched_writes_what_each_writes_alone(standin_mlm, extra):
    """The masked LM's windows ([CLS] text [MASK]... [SEP], each its own length) read in one
    padded pass a step: each prompt's tokens, stop, steps, trace and work are its own."""
    together = _same_as_alone(standin_mlm, GenerationSettings(max_new_tokens=8, trace=True, **extra))
    if extra.get("stop_at_newline"):  # rows that end before the batch does are cut where they ended
        assert len({len(r.token_ids) for r in together}) > 1


@pytest.mark.floats
@pytest.mark.parametrize("extra", SETTINGS[:4], ids=IDS[:4])
def test_causal_generation_batched_writes_what_each_writes_alone(smollm2, extra):
    """A causal LM's left-padded batch through ``generate()`` with its cache: each prompt's own."""
    _same_as_alone(smollm2, GenerationSettings(max_new_tokens=8, trace=True, **extra), PROMPTS[:5])


def test_what_cannot_batch_runs_one_at_a_time(standin_mlm):
    """Beam search and the prefix cache keep state for one request: their prompts run one after
    the other, each as alone."""
    from demo.engine.decoding import batches
    for extra in (dict(strategy="beam", num_beams=2), dict(cache="prefix"), dict(cache="prefix", parallel_threshold=0.9)):
        s = GenerationSettings(max_new_tokens=5, **extra)
        assert not batches("masked", s)
        _same_as_alone(standin_mlm, s, PROMPTS[:3])
    assert batches("masked", GenerationSettings()) and batches("causal", GenerationSettings(strategy="sample"))


def test_padded_windows_are_each_rows_own_window():
    """A left-padded batch's windows: each row's text, its padding left out, between [CLS] and its
    masks and [SEP], right-padded (a hand-written expectation)."""
    import torch

    from demo.engine.mlm_decoder import WindowSpecials, build_padded_windows
    cls, sep, mask = 101, 102, 103
    ids = torch.tensor([[0, 0, 7, 8], [5, 6, 7, 8]])
    windows, attention, at = build_padded_windows(ids, torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]]),
                                                  WindowSpecials(cls, sep, mask), 1)
    assert windows[0, :6].tolist() == [cls, 7, 8, mask, mask, sep] and attention[0].tolist() == [1] * 6 + [0] * 2
    assert windows[1].tolist() == [cls, 5, 6, 7, 8, mask, mask, sep] and attention[1].tolist() == [1] * 8
    assert at.tolist() == [3, 5]
