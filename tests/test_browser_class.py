"""A class's lesson in a real browser, on an app that computes the lesson at start-up (as it does
unless told not to): the lesson says when every step is ready, a step's press shows the answer
computed in advance and says so, and the teacher's button makes the next press compute anew.
Screenshots of the lesson at 1400 and 400 px go to artifacts/screenshots/."""

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
    playwright_api,
    pytestmark,
    smollm2_path,
)

SHARED_NOTE = "Shared result: computed once"
FITS = "(id) => [...document.querySelectorAll(id + ', ' + id + ' *')].every((e) => e.scrollWidth <= e.clientWidth + 1)"


@pytest.fixture(scope="module")
def warm_server(smollm2_path, tmp_path_factory):  # noqa: F811
    log = tmp_path_factory.mktemp("app") / "app.log"
    with running_app([str(STANDIN_MLM), str(smollm2_path)], log, timeout=60, DEMO_WARM_LESSON="True") as app:
        yield app.url


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
