"""Sampling, read once (``demo.engine.sampling``) for both ways a model writes: each filter against a
hand-computed case, and the limit where a sample is the greedy output, on both decoders."""

import math

import pytest
import torch

from demo.engine.generation import generate
from demo.engine.sampling import logits_processors
from demo.settings import GenerationSettings

PROMPT = "The capital of France is Paris. The capital of Italy is"


def test_min_p_keeps_the_tokens_at_least_that_share_as_likely_as_the_likeliest():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])  # min_p 0.5: kept where p >= 0.25, by hand
    warped = logits_processors(GenerationSettings(strategy="sample", min_p=0.5)).warpers(None, probs.log())
    assert torch.isfinite(warped).tolist() == [[True, True, False, False]]
    kept = warped.softmax(-1)[0, :2].tolist()
    assert kept == pytest.approx([0.5 / 0.8, 0.3 / 0.8])
    assert not logits_processors(GenerationSettings(strategy="greedy", min_p=0.5)).warpers  # greedy draws nothing


def test_typical_p_keeps_the_tokens_whose_surprise_is_closest_to_the_entropy():
    """By hand: p = (0.5, 0.3, 0.15, 0.05) has entropy 1.142 nats; the tokens' surprise (-log p) is
    0.693, 1.204, 1.897, 2.996, off by 0.449, 0.062, 0.755, 1.853; nearest first, 0.3 then 0.5 hold
    the mass 0.5."""
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    warped = logits_processors(GenerationSettings(strategy="sample", typical_p=0.5)).warpers(None, probs.log())
    assert torch.isfinite(warped).tolist() == [[True, True, False, False]]
    unshaped = logits_processors(GenerationSettings(strategy="sample")).warpers(None, probs.log())  # typical_p 1: all
    assert torch.isfinite(unshaped).all()


@pytest.mark.parametrize("writing", [dict(), dict(window="block", block_length=4, order="confidence",
                                                   tokens_per_step=2)], ids=["paper", "any_order"])
def test_sampling_with_min_p_one_writes_the_greedy_output(tiny_model, writing):
    """Only the likeliest token is as likely as the likeliest: every seed samples the greedy text,
    on the paper's decoder (transformers' generate()) and on the unmasking loop alike."""
    lm = tiny_model("bert")
    greedy = generate(lm, PROMPT, GenerationSettings(max_new_tokens=6, **writing))
    for seed in (0, 1, 2):
        sampled = generate(lm, PROMPT, GenerationSettings(max_new_tokens=6, strategy="sample", min_p=1.0, seed=seed,
                                                           **writing))
        assert sampled.token_ids == greedy.token_ids
        assert math.isclose(sampled.log_likelihood, greedy.log_likelihood, rel_tol=1e-6)
    loose = [generate(lm, PROMPT, GenerationSettings(max_new_tokens=6, strategy="sample", seed=seed, **writing))
             for seed in (0, 1, 2)]
    assert any(out.token_ids != greedy.token_ids for out in loose)  # (without it, random weights sample apart)


def test_lm_eval_passes_min_p_when_it_samples_and_drops_it_when_greedy():
    from demo.harness.model_args import generation_settings
    assert generation_settings({"do_sample": True, "min_p": 0.1}).min_p == 0.1
    assert generation_settings({"min_p": 0.1}).min_p == 0.0  # HFLM drops sampling flags of greedy requests
