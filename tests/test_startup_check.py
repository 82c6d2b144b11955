"""The start-up check (demo.app.self_check) and its opener in the page (demo.ui.startup_check):
it reports what ``check_model`` finds for each default model, a model that cannot load is said in
words while the others are still checked, and the page shows it escaped, opened on a failure."""

import os

import pytest

from demo.app import self_check
from demo.app.deployment import Deployment
from demo.evaluation.model_check import Check, check_model
from tests.conftest import STANDIN_MLM, needs_shared


@needs_shared
def test_it_reports_what_check_model_finds_for_each_default_model(monkeypatch, standin_mlm, smollm2):
    from demo.engine.sources import smollm2_gguf
    monkeypatch.setenv("DEMO_LOCAL_MODELS", f"{STANDIN_MLM}{os.pathsep}{smollm2_gguf()}")
    deployment = Deployment.current()
    state = self_check.StartupCheck()
    state.run(deployment, items=4)
    assert state.done and not state.running
    assert [(r.name, r.kind) for r in state.reports] == [
        ("minilm-l6-mlm-standin", "masked"), (smollm2_gguf().stem, "causal")]
    for report, lm in zip(state.reports, (standin_mlm, smollm2)):
        assert report.error == "" and report.checks == tuple(check_model(lm, lm.name, 4))
        assert not report.failed  # both are read right (tests/test_model_check.py)


@needs_shared
def test_a_model_that_does_not_load_is_said_and_the_others_are_still_checked(monkeypatch):
    load = Deployment.load

    def causal_fails(self, name, kind=None, **options):
        if kind == "causal":  # what a Hub model does offline, or a checkpoint with a missing file
            raise OSError(f"{name} is not here")
        return load(self, name, kind, **options)

    monkeypatch.setattr(Deployment, "load", causal_fails)
    state = self_check.StartupCheck()
    state.run(Deployment.current(), items=2)
    masked, causal = state.reports
    assert not masked.failed and len(masked.checks) == 7
    assert causal.failed and causal.checks == () and causal.error == "OSError: smollm2 is not here"


def test_a_deployment_without_it_or_on_zerogpu_says_why_it_does_not_run(monkeypatch):
    monkeypatch.setattr(self_check, "STARTUP", self_check.StartupCheck())
    self_check.start(Deployment.current())
    assert "switched off" in self_check.STARTUP.skipped
    monkeypatch.setenv("SPACE_ID", "someone/mlm-icl")  # a Space checks by itself...
    monkeypatch.setattr(self_check, "STARTUP", self_check.StartupCheck())
    self_check.start(Deployment.current(), on_zerogpu=True)  # ...but ZeroGPU lends no GPU to it
    assert "ZeroGPU" in self_check.STARTUP.skipped and not self_check.STARTUP.done


def test_the_page_shows_the_checks_escaped_and_opens_on_a_failure(monkeypatch):
    pytest.importorskip("gradio")
    from demo.ui import startup_check
    state = self_check.StartupCheck(done=True, reports=[
        self_check.ModelReport("<b>mine</b>", "masked", (Check("<script>x</script>", "e", "m", "fail", "w"),)),
        self_check.ModelReport("other", "causal", error="OSError: no such model")])
    monkeypatch.setattr(self_check, "STARTUP", state)
    opener, html, timer = startup_check.view()
    assert opener.open and "<b>mine</b>, other failed" in opener.label
    assert "&lt;script&gt;" in html and "<script>" not in html and "&lt;b&gt;mine" in html
    assert "Could not be checked: OSError: no such model" in html and "FAIL" in html
    assert timer.active is False  # done: the page stops asking
    running = self_check.StartupCheck(running="minilm-l6-mlm-standin")
    monkeypatch.setattr(self_check, "STARTUP", running)
    opener, html, timer = startup_check.view()
    assert "checking minilm-l6-mlm-standin" in opener.label and not opener.open and timer.active


def test_the_opener_is_in_the_page_only_where_the_check_runs(monkeypatch):
    pytest.importorskip("gradio")
    from demo.ui import common
    from demo.ui.app import build_app

    def ids(app):
        return {c.get("props", {}).get("elem_id") for c in app.config["components"]}

    assert "startup-check" not in ids(build_app())
    monkeypatch.setenv("DEMO_SELF_CHECK", "true")
    common.use(None)
    assert "startup-check" in ids(build_app())
