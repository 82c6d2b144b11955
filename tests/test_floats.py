"""The float bounds of ``tests/floats.py`` hold on this CPU: each float32 log-probability is within
half the bound (one computation's share) of the same model's float64 value, for every family,
two scoring methods and two batchings. CI runs this with AVX2 kernels and one thread too."""

import copy

import pytest
import torch

import tests.floats as floats
from demo.engine.pll import score_batch
from demo.settings import ScoringSettings
from tests.conftest import MASKED_FAMILIES

pytestmark = pytest.mark.floats

ITEMS = [
    ("The cat sat", " on the mat."),
    ("Supercalifragilistic expialidocious", " is a rather long word, isn't it?"),
    ("", "A  short one.\nThen another line."),
    ("Question: What is the capital of France?\nAnswer:", " Paris, on the Seine, with two million people."),
]


def float64_copy(lm):
    double = copy.copy(lm)
    double.model = copy.deepcopy(lm.model).to(torch.float64)
    return double


def assert_within_half_the_bound(lm, methods):
    reference_lm = float64_copy(lm)
    half = floats.PER_LAYER * floats.layers(lm)
    for method in methods:
        reference = score_batch(reference_lm, ITEMS, ScoringSettings(method=method, scope="full"))
        for token_budget in (96, 100_000):  # many small sub-batches with padding; one batch
            ours = score_batch(lm, ITEMS, ScoringSettings(method=method, scope="full", token_budget=token_budget))
            for got, exact in zip(ours, reference):
                errors = [abs(a.logprob - b.logprob) / (1 + abs(b.logprob)) for a, b in zip(got.tokens, exact.tokens)]
                assert max(errors) <= half, (method, token_budget, max(errors) / (floats.U * floats.layers(lm)))
                assert abs(got.total - exact.total) <= half * (len(exact.tokens) + abs(exact.total))


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
def test_masked_families_within_the_bound(tiny_model, family):
    assert_within_half_the_bound(tiny_model(family), ["right_masks"])


def test_gpt2_within_the_bound(tiny_model):
    assert_within_half_the_bound(tiny_model("gpt2"), ["causal"])


def test_trained_models_within_the_bound(standin_mlm, smollm2):
    assert_within_half_the_bound(standin_mlm, ["salazar", "right_masks"])
    assert_within_half_the_bound(smollm2, ["causal"])


def test_the_bound_can_fail(standin_mlm):
    """A real difference (one more right mask) is far outside it."""
    a, b = (score_batch(standin_mlm, ITEMS[:1], ScoringSettings(method="right_masks", right_masks=n))[0]
            for n in (2, 3))
    assert a.total != floats.total(b.total, len(b.tokens), standin_mlm)
