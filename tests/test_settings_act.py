"""Every setting of every request endpoint either changes the answer for some request or is said:
a walk over each endpoint's settings (``settings_form.Setting`` arguments), each set to its other
values on small requests of the offline pair, against the same request at the page's values. A
setting passes when some value changes the answer (the text, the playback's steps, the scores;
never the timings or the Reproduce code), or its line says it "acts only" elsewhere and leaves it
out of the Reproduce code, or every other value is refused in words on these models (a chat turn
on a model without a chat template).
"""

import html
import re

import pytest

from demo.declared import choices_of, kind_of, schema
from demo.ui.settings_form import Setting, widget_range
from tests.conftest import STANDIN_MLM, needs_shared

pytestmark = [needs_shared, pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="no stand-in MLM")]

MLM, CAUSAL = STANDIN_MLM.name, "smollm2"
GENERATION = dict(prompt="one two three one two three one two", strategy="greedy", max_new_tokens=10, seed=0)
SAMPLED = dict(strategy="sample", temperature=1.0, seed=1)
LINES = dict(prompt="Monday\nTuesday\nWednesday\nThursday\n", strategy="greedy", max_new_tokens=10, seed=0)
TEXTS = dict(context="My body cast a shadow over the grass because",
             candidates="the sun was rising.\nthe grass was cut.", answer="")
LONG = dict(TEXTS, candidates="the sun was rising slowly over the hills behind the old farm house that morning.\n"
                              "the grass had been cut very short by the gardener on the previous afternoon.")


def _endpoints() -> dict:
    """endpoint name -> (handler, the requests it is walked on)."""
    from demo.ui import infill_tab, prompting, ranking
    fill = dict(text="The [blank] said that she would be [blank:2].")
    def writing(model: str) -> list[dict]:
        return [dict(GENERATION, model_name=model), dict(GENERATION, model_name=model, **SAMPLED),
                dict(LINES, model_name=model)]
    return {
        "generate_masked": (prompting.generate_masked, writing(MLM)),
        "generate_any_order": (prompting.generate_any_order, writing(MLM)),
        "generate_causal": (prompting.generate_causal, writing(CAUSAL)),
        "infill_masked": (infill_tab.infill_masked, [dict(fill, model_name=MLM)]),
        "infill_causal": (infill_tab.infill_causal, [dict(fill, model_name=CAUSAL)]),
        "rank_masked": (ranking.rank_masked, [dict(TEXTS, model_name=MLM), dict(LONG, model_name=MLM)]),
        "rank_causal": (ranking.rank_causal, [dict(TEXTS, model_name=CAUSAL)]),
    }


def _answer(outputs) -> str:
    """What a request answers, without its timings, run ids and Reproduce code."""
    parts = []
    for name in ("text", "trace", "filled_text", "scores", "compare"):
        value = getattr(outputs, name, None)
        if value is not None:
            parts.append(re.sub(r"\b[0-9a-f]{12}\b|\d+(\.\d+)? (s|ms)\b", "", str(value)))
    return "\n".join(parts)


def _said(outputs) -> str:
    return html.unescape(str(getattr(outputs, "stats", "")) + str(getattr(outputs, "summary", "")))


def _refused(outputs) -> bool:
    return 'class="demo-error"' in str(getattr(outputs, "stats", "")) + str(getattr(outputs, "summary", ""))


def _other_values(taken: Setting, current) -> list:
    """The values the walk sets: each other choice, the other flag, a number's least and largest
    the page offers and one in between (a few of them)."""
    cls, name = taken.cls, taken.name
    kind, _ = kind_of(cls, name)
    if kind == "choice":
        return [v for v in (taken.only or choices_of(cls, name)) if v != current]
    if kind == "boolean":
        return [not current]
    if kind in ("integer", "number"):
        said = schema(cls, name)
        low, high = widget_range(cls, name)
        high = min(high if high is not None else 8, 8)
        low = low if low is not None else 0
        near_low = low + (high - low) / 20 if kind == "number" else low + 1
        values = [low, near_low, (low + high) / 2 if kind == "number" else (low + high) // 2, high]
        if isinstance(said.get("off"), str):  # an optional count's dropdown: its counts as text
            values = [str(int(v)) for v in values]
        return [v for v in values if v != current]
    if kind == "string":
        return ["Answer:"]
    return []


# Settings no small request of the offline pair shows acting (the stand-in MLM never writes a line
# break), with the test that shows each acting on a model that does
WITNESSED_ELSEWHERE = {("generate_masked", "stop_at_newline"): "tests/test_generate_together.py",
                       ("generate_any_order", "stop_at_newline"): "tests/test_unmasking.py"}


@pytest.mark.parametrize("endpoint", sorted(_endpoints()))
def test_every_setting_changes_the_answer_or_is_said(endpoint):
    handler, requests = _endpoints()[endpoint]
    settings = [t for t in handler.takes if isinstance(t, Setting)]
    silent = []
    for taken in settings:
        acted, tried, refused = False, 0, 0
        for request in requests:
            base = handler(**request)
            assert not _refused(base), (endpoint, request, _said(base)[:300])
            current = request.get(taken.argument, handler.__signature__.parameters[taken.argument].default)
            for value in _other_values(taken, current):
                changed = handler(**dict(request, **{taken.argument: value}))
                tried += 1
                if _refused(changed):
                    refused += 1
                    continue
                label = schema(taken.cls, taken.name).get("label", taken.name)
                said = any(label in line and "acts only" in line for line in _said(changed).split("</div>"))
                if _answer(changed) != _answer(base) or said:
                    acted = True
                    break
            if acted:
                break
        if not acted and (refused < tried or not tried) and (endpoint, taken.argument) not in WITNESSED_ELSEWHERE:
            silent.append(taken.argument)
    assert not silent, f"{endpoint}: these settings changed nothing and said nothing: {silent}"
