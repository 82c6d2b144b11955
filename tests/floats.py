"""How far apart two float32 computations of the same number may legitimately land: the tests'
float bounds, in one place.

Every log-probability the engines give comes out of a float32 forward pass. Two computations of
the same value (batched vs one masked copy at a time, our engine vs minicons or lm-eval's HFLM,
AVX2 vs AVX-512 kernels, one thread vs two) add the same products in different orders and round
differently. How much they may differ follows from float32 arithmetic:

- **Depth.** u = 2**-24 is float32's unit roundoff. Each layer's matmuls, softmax and layer norm
  add a relative rounding error of a few u to the residual stream, which carries it to the
  logits: after L layers (+ 1 for the embeddings and the head) a logit's relative error is
  about c (L + 1) u. Measured against float64 copies of the same models (the stand-in MLM,
  SmolLM2's 30 layers, every random-weight family; default and AVX2 kernels, 1 and 2 threads:
  ``tests/test_floats.py``), c was at most 4.1. We take c = 16 for one computation
  (``PER_LAYER``), so two computations may differ by twice that.
- **Size.** A log-probability is a logit minus log-sum-exp, each carrying that relative error:
  the bound for one value lp is t (1 + |lp|).
- **Terms.** A total of n log-probabilities carries the error of every term (no cancellation
  assumed): sum of t (1 + |lp_i|) = t (n + |total|), every lp_i being <= 0. The summation's own
  rounding (n u |total|) is far below that. A mean of n terms keeps the per-value form.

A bare ``abs=1e-5`` on a total of dozens of log-probabilities is what these replace: it holds on
one CPU and fails on the next. Numbers that are not float noise (a percentage rounded for a
table, an exact count) are compared exactly or at their rounding, not here.
"""

import pytest

U = 2.0 ** -24  # float32 unit roundoff
PER_LAYER = 16 * U  # one float32 computation's relative error per layer (measured worst: 4.1 u)


def layers(lm) -> int:
    """Layers a value passes through: the transformer's layers + 1 (embeddings and head)."""
    model = getattr(lm, "model", lm)  # a LoadedModel or a bare transformers model
    return model.config.num_hidden_layers + 1


def bound(lm) -> float:
    """t: two float32 computations of a log-probability lp differ by at most t (1 + |lp|)."""
    return 2 * PER_LAYER * layers(lm)


def tokens_in(text: str, lm) -> int:
    """Terms of a total over ``text``'s tokens where only the text is at hand: its tokens, plus one
    for a token that joins it to its context."""
    return len(lm.tokenizer(text, add_special_tokens=False)["input_ids"]) + 1


def logprobs(expected, lm):
    """``expected`` (a log-probability, a mean of some, or a list of either) as pytest.approx
    within the bound of each value."""
    t = bound(lm)
    if isinstance(expected, (list, tuple)):
        return [pytest.approx(e, abs=t * (1 + abs(e))) for e in expected]
    return pytest.approx(expected, abs=t * (1 + abs(expected)))


def total_bound(expected: float, n_terms: int, lm) -> float:
    """How far two float32 computations of a sum of ``n_terms`` log-probabilities may differ."""
    return bound(lm) * (n_terms + abs(expected))


def total(expected: float, n_terms: int, lm):
    """A sum of ``n_terms`` log-probabilities, within the sum of their bounds."""
    return pytest.approx(expected, abs=total_bound(expected, n_terms, lm))


def difference(a: float, n_a: int, b: float, n_b: int, lm):
    """``a - b`` of two totals of n_a and n_b log-probabilities (e.g. GPT-3's unconditional
    normalisation): each brings its own bound."""
    return pytest.approx(a - b, abs=total_bound(a, n_a, lm) + total_bound(b, n_b, lm))


def probabilities(expected, lm):
    """Probabilities p = exp(lp): |dp| <= p |d lp| <= t (p + p |lp|) <= t (1 + 1/e) < 2 t."""
    return pytest.approx(expected, abs=2 * bound(lm))


def same_sum(expected: float, n_terms: int):
    """The same float64 numbers (Python floats, e.g. read back from a CSV) summed or divided in
    another order: each of the n operations rounds by at most u64 = 2**-53 of the running sum."""
    return pytest.approx(expected, abs=(n_terms + 1) * 2.0 ** -53 * abs(expected))


def states(lm, reference) -> dict:
    """``torch.testing.assert_close`` bounds for hidden states, keys or values: each element is a
    dot product whose rounding is relative to the largest magnitudes it sums, so the absolute
    bound follows the reference tensor's scale."""
    t = bound(lm)
    return dict(rtol=t, atol=t * float(reference.abs().max()))
