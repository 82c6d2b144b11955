"""What a request's settings do on its model (demo.app.in_effect): a setting that does nothing for
the request goes back to its default and is said, at every endpoint that takes it; a seed is
drawn where one acts and none was given. Expected sentences are written out here."""

import html

import pytest

from demo.app.in_effect import in_effect
from demo.settings import GenerationSettings, InfillSettings, ScoringSettings
from tests.conftest import needs_shared

LEFT_OUT = "left out of this run and of its Reproduce code."


def test_sampling_settings_of_a_greedy_run_go_back_to_their_defaults_and_are_said():
    settings, lines = in_effect(GenerationSettings(temperature=0.7, top_k=5, min_p=0.1), "masked")
    assert settings == GenerationSettings()
    assert lines == [f"Temperature (0.7), Top-k (5) and Min-p (0.1) act only when sampling: {LEFT_OUT}"]


def test_a_seed_is_drawn_where_one_acts_and_none_was_given():
    sampled, lines = in_effect(GenerationSettings(strategy="sample", seed=None), "causal", seed=lambda: 1234)
    assert sampled.seed == 1234 and lines == [
        "No seed was given: this run drew seed 1234, which its Reproduce code uses, so it reruns to the same answer."]
    greedy, lines = in_effect(GenerationSettings(seed=None), "causal", seed=lambda: 1234)
    assert greedy.seed == 0 and lines == []  # none acts: nothing drawn, nothing to say
    random_order, _ = in_effect(InfillSettings(order="random", seed=None), "masked", seed=lambda: 5)
    assert random_order.seed == 5


@pytest.mark.parametrize("settings, kind, line", [
    (ScoringSettings(method="right_masks", elbo_samples=8), "masked",
     f"ELBO: masking patterns (8) acts only with the masked diffusion ELBO: {LEFT_OUT}"),
    (ScoringSettings(method="salazar", elbo_seed=3), "masked",
     f"ELBO: seed (3) acts only with the masked diffusion ELBO: {LEFT_OUT}"),
    (ScoringSettings(method="elbo", right_masks=4), "masked",
     f"Right masks (4) acts only with the right-masks variant: {LEFT_OUT}"),
    (ScoringSettings(right_masks=4), "causal", f"Right masks (4) acts only with the right-masks variant: {LEFT_OUT}"),
    (GenerationSettings(cache_refresh=4), "masked", f"Refresh every (prefix cache) (4) acts only with the prefix "
                                                    f"cache: {LEFT_OUT}"),
    (GenerationSettings(num_beams=2), "masked", f"Beams (2) acts only in beam search: {LEFT_OUT}"),
])
def test_each_setting_that_does_nothing_is_named(settings, kind, line):
    assert in_effect(settings, kind)[1] == [line]


def test_a_setting_acting_for_the_request_is_kept():
    settings = ScoringSettings(method="elbo", elbo_samples=8, elbo_seed=3)
    assert in_effect(settings, "masked") == (settings, [])


ARGUMENTS = dict(model_name="minilm-l6-mlm-standin")


@needs_shared
@pytest.mark.parametrize("handler, arguments, said", [
    ("prompting.generate_masked", dict(prompt="The capital of France is", max_new_tokens=2, min_p=0.2, top_k=3,
                                       temperature=0.5, cache_refresh=4, parallel_threshold=0.5),
     ["Temperature (0.5), Top-k (3) and Min-p (0.2) act only when sampling",
      "Refresh every (prefix cache) (4) and Parallel unmasking (prefix cache) (0.5) act only with the prefix cache"]),
    ("prompting.generate_any_order", dict(prompt="The capital of France is", max_new_tokens=2, num_beams=2),
     ["Beams (2) acts only in beam search"]),
    ("ranking.rank_masked", dict(context="The sky is", candidates="blue.\ngreen.", method="right_masks",
                                 elbo_samples=8, elbo_seed=2),
     ["ELBO: masking patterns (8) and ELBO: seed (2) act only with the masked diffusion ELBO"]),
    ("ranking.rank_masked", dict(context="The sky is", candidates="blue.\ngreen.", method="salazar", right_masks=3),
     ["Right masks (3) acts only with the right-masks variant"]),
    ("infill_tab.infill_masked", dict(text="The [blank:2] is blue.", blank_tokens=3),
     ["Tokens per [blank] (3) acts only for a [blank] or ____ without a size of its own"]),
])
def test_every_endpoint_names_what_does_nothing_for_its_request(handler, arguments, said):
    import importlib
    module, name = handler.split(".")
    outputs = getattr(importlib.import_module(f"demo.ui.{module}"), name)(**ARGUMENTS, **arguments)
    shown = html.unescape(" ".join(part for part in outputs if isinstance(part, str)))
    assert "demo-error" not in shown, shown
    for line in said:
        assert f"{line}: {LEFT_OUT}" in shown, (line, shown)
