"""The lesson above the tabs (demo.ui.lesson, assets/presets/lesson.json): every step loads its
tab's inputs, and each step's request, sent as the page sends it after loading, runs on the
offline models without a message."""

import json

import pytest

from tests.conftest import needs_shared

pytest.importorskip("gradio")
from demo.paths import ASSETS  # noqa: E402
from demo.ui import lesson  # noqa: E402

REQUESTS = {"prompting": ["generate_mlm", "generate_causal", "generate_mlm_any_order"], "infill": ["infill_mlm", "infill_causal"], "ranking": ["rank_mlm", "rank_causal"],
            "length": ["probe_mlm", "probe_second"], "results": ["results"]}


def presets(tab: str) -> dict:
    return {p["name"]: p for p in json.loads((ASSETS / "presets" / f"{tab}.json").read_text())["presets"]}


@pytest.fixture(scope="module")
def app():
    from demo.ui.app import build_app
    return build_app()


def handler(app, name):
    return next(f for f in app.fns.values() if f.api_name == name or getattr(f.fn, "__name__", "") == name)


def test_the_lesson_has_about_six_steps_each_with_a_question():
    steps = lesson.steps()
    assert 6 <= len(steps) <= 10 and len({s["title"] for s in steps}) == len(steps)
    assert [s["tab"] for s in steps] == ["infill"] + ["prompting"] * 3 + ["ranking"] * 3 + ["length"] * 2 + ["results"]
    for step in steps:
        assert step["do"] and step["look"] and step["question"].endswith("?")
        if step["tab"] in ("prompting", "infill", "ranking"):
            assert step["preset"] in presets(step["tab"]), step["preset"]


def test_loading_a_step_opens_its_tab_with_its_inputs(app):
    load = handler(app, "load")
    for step in lesson.steps():
        tabs, *values = load.fn(step["title"])
        assert tabs.selected == step["tab"]
        loaded = {c.elem_id: v for c, v in zip(load.outputs[1:], values) if not _skipped(v)}
        if step["tab"] == "prompting":
            preset = presets("prompting")[step["preset"]]
            assert loaded["gen-preset"] == step["preset"] and loaded["gen-prompt"] == preset["prompt"]
            assert loaded["gen-max"] == preset["settings"]["max_new_tokens"]
            assert loaded["gen-any-order"] == step.get("any_order", False)
        elif step["tab"] == "infill":
            assert loaded["fill-preset"] == step["preset"]
            assert loaded["fill-text"] == presets("infill")[step["preset"]]["text"]
        elif step["tab"] == "ranking":
            preset = presets("ranking")[step["preset"]]
            assert loaded["rank-context"] == preset["context"]
            assert loaded["rank-candidates"] == "\n".join(preset["candidates"])
            assert (loaded["rank-variant"], loaded["rank-compare"]) == (step.get("method", "right_masks"),
                                                                        step.get("compare", "salazar"))
        elif step["tab"] == "length" and "sweep" in step:
            sweep = step["sweep"]
            assert loaded["sweep"] == {"__type__": "update", "open": True}
            assert [loaded[f"sweep-{k}"] for k in ("task", "values", "shots", "limit")] == \
                [sweep[k] for k in ("task", "values", "shots", "limit")]
        elif step["tab"] == "length":
            assert (loaded["probe-lengths"], loaded["probe-depths"]) == (step["lengths"], step["depths"])
        else:
            assert loaded["results-paper"] == step["papers"]
        filled = [c for c, v in zip(load.outputs[1:], values) if not _skipped(v)]
        assert {tab_of(c) for c in filled} == {step["tab"]}  # the other tabs keep what they show


def tab_of(component) -> str:
    import gradio as gr
    while not isinstance(component, gr.Tab):
        component = component.parent
    return component.id


def _skipped(value) -> bool:
    return isinstance(value, dict) and value.get("__type__") == "update" and len(value) == 1


@needs_shared
def test_every_step_runs_on_the_offline_models(app):
    """Load, then press the tab's button: each request, with the page's other inputs as they are."""
    load = handler(app, "load")
    for step in lesson.steps():
        _, *values = load.fn(step["title"])
        loaded = {c: v for c, v in zip(load.outputs[1:], values) if not _skipped(v)}
        for name in ["sweep_masks"] if "sweep" in step else REQUESTS[step["tab"]]:
            request = handler(app, name)
            arguments = [loaded.get(c, c.value) for c in request.inputs]
            outputs = request.fn(*arguments)
            if not isinstance(outputs, tuple):  # a streaming handler (the needle grid): its last view
                outputs = list(outputs)[-1]
            shown = " ".join(str(o) for o in outputs)
            assert "demo-error" not in shown, (step["title"], name, shown[:600])
            assert any(o not in ("", None) for o in outputs), (step["title"], name)
