"""A class's lesson in a real browser, on an app that computes the lesson at start-up (as it does
unless told not to): the lesson says when every step is ready, a step's press shows the answer
computed in advance and says so, and the teacher's button makes the next press compute anew.
On an app that has computed nothing yet, students waiting behind a run are told their place, or
that they share it. Screenshots at 1400 and 400 px go to artifacts/screenshots/."""

import re

import pytest

from benchmarks.app_process import running_app
from tests.conftest import STANDIN_MLM
from tests.test_browser import (  # noqa: F401 (smollm2_path: a fixture)
    ARGS,
    CHROMIUM,
    MODEL_WAIT_MS,
    SCREENSHOTS,
    _load_step,
    _open,
    _press,
    _screenshot,
    _wait_runs,
    playwright_api,
    pytestmark,
    smollm2_path,
)

SHARED_NOTE = "Shared result: computed once"
SHOWS = "(text) => document.body.innerText.includes(text)"
FITS = "(id) => [...document.querySelectorAll(id + ', ' + id + ' *')].every((e) => e.scrollWidth <= e.clientWidth + 1)"


def _serving(gguf, tmp_path_factory, warm: bool):
    folder = tmp_path_factory.mktemp("app")
    # an empty cache: the causal LM's first load converts its GGUF file, as on a fresh machine (seconds)
    with running_app([str(STANDIN_MLM), str(gguf)], folder / "app.log", timeout=60, DEMO_WARM_LESSON=str(warm),
                     MLM_ICL_CACHE=str(folder / "cache")) as app:
        yield app.url


@pytest.fixture(scope="module")
def warm_server(smollm2_path, tmp_path_factory):  # noqa: F811
    yield from _serving(smollm2_path, tmp_path_factory, warm=True)


@pytest.fixture(scope="module")
def cold_server(smollm2_path, tmp_path_factory):  # noqa: F811
    """An app that has computed nothing yet: the first press loads the models."""
    yield from _serving(smollm2_path, tmp_path_factory, warm=False)


@pytest.fixture(scope="module")
def browser():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def _view(browser, width: int):
    view = browser.new_context(viewport={"width": width, "height": 900}).new_page()
    view.set_default_timeout(30_000)
    return view


def test_the_lesson_is_ready_before_the_class_and_says_so(browser, warm_server):
    view = _view(browser, 1400)
    _open(view, warm_server)
    view.get_by_role("button", name="Lesson:").click()
    ready = view.locator("#lesson-ready")
    ready.filter(has_text="All 10 steps are ready").wait_for(timeout=MODEL_WAIT_MS)
    _screenshot(view, "lesson-ready-1400")
    _load_step(view, "5. Rank answers by PLL", "Ranking")
    _press(view, "#rank-run", "rank")
    assert SHARED_NOTE in view.locator("#rank-mlm-summary").inner_text()
    assert SHARED_NOTE in view.locator("#rank-causal-summary").inner_text()
    assert "one masked copy per scored token" in view.locator("#rank-mlm-summary").inner_text()

    view.get_by_role("button", name="Compute every step anew").click()
    ready.filter(has_text="the next press of each step computes anew").wait_for()
    _press(view, "#rank-run", "rank")
    assert SHARED_NOTE not in view.locator("#rank-mlm-summary").inner_text()
    assert "one masked copy per scored token" in view.locator("#rank-mlm-summary").inner_text()


def test_a_second_student_gets_the_first_ones_answer_at_phone_width(browser, warm_server):
    first, second = _view(browser, 1400), _view(browser, 400)
    for view in (first, second):
        _open(view, warm_server)
        _load_step(view, "2. Generate by appending masks", "Prompting")  # (opens the lesson)
    view = second
    view.locator("#lesson-ready").filter(has_text="ready").wait_for(timeout=MODEL_WAIT_MS)
    _screenshot(view, "lesson-ready-400")
    box = view.locator("#lesson-fresh").bounding_box()
    assert box["width"] >= 44 and box["height"] >= 44, box  # a finger's size
    assert view.evaluate(FITS, "#lesson-ready"), "the readiness line overflows its box at 400 px"
    _press(first, "#gen-run", "gen")
    _press(second, "#gen-run", "gen")
    assert first.locator("#gen-mlm-text textarea").input_value() == second.locator("#gen-mlm-text textarea").input_value()
    assert SHARED_NOTE in second.locator("#gen-mlm-stats").inner_text()
    assert view.evaluate(FITS, "#gen-mlm-stats"), "the shared-result line overflows its box at 400 px"
    _screenshot(second, "shared-answer-400")


def test_students_waiting_behind_a_run_are_told_their_place_or_that_they_share_it(browser, cold_server):
    """Three students on phones press step 2 while the first one's run is still loading its causal
    LM (its first use, tens of seconds): one who edited the text is told its place in line and
    that a model is loading ahead of it (no time: runs are timed, not loads), one who
    asked for the same run is told that another student's run will answer it. Gradio's own
    estimate (the mean of every past run of the event) is not shown."""
    first, own, same = (_view(browser, 400) for _ in range(3))
    for view in (first, own, same):
        _open(view, cold_server)
        _load_step(view, "2. Generate by appending masks", "Prompting")
    prompt = own.locator("#gen-prompt textarea")
    prompt.fill(prompt.input_value() + " (Ben)")

    first.click("#gen-run")
    first.wait_for_function(SHOWS, arg="converting its weights from GGUF on first use", timeout=MODEL_WAIT_MS)
    own.click("#gen-run")
    same.click("#gen-run")
    own.wait_for_function("() => /Waiting for a turn to run: \\d+ runs? ahead of this one, one of "
                          "them loading its model for the first use/.test(document.body.innerText)",
                          timeout=MODEL_WAIT_MS)
    _screenshot(own, "waiting-own-text-400")
    same.wait_for_function(SHOWS, arg="Another student asked for this same run just before you: its answer "
                                      "will be yours.", timeout=MODEL_WAIT_MS)
    _screenshot(same, "waiting-same-run-400")
    for view in (first, own, same):  # the time waited, never Gradio's "3.4/0.5s"
        assert not re.search(r"\d/\d+(\.\d+)?s", view.locator("body").inner_text())

    for view in (first, own, same):
        _wait_runs(view, {"gen": 1})
    assert SHARED_NOTE in same.locator("body").inner_text()
    assert "Shared result" not in own.locator("body").inner_text()
