"""Students who wait are told so, in the page they look at: three students on phones press lesson
step 2 while the first one's run is still loading its causal LM (its first use, tens of seconds):
one who edited the text is told its place in line, one who asked for the same run is told that
another student's run will answer it. Gradio's own estimate (the mean of every past run of the
event) is not shown. Screenshots of both waits at 400 px go to artifacts/screenshots/.
"""

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
    _screenshot,
    _wait_runs,
    playwright_api,
    pytestmark,
    smollm2_path,
)

SHOWS = "(text) => document.body.innerText.includes(text)"


@pytest.fixture(scope="module")
def cold_server(smollm2_path, tmp_path_factory):  # noqa: F811
    """An app that has computed nothing yet: the first press loads the models."""
    log = tmp_path_factory.mktemp("app") / "app.log"
    with running_app([str(STANDIN_MLM), str(smollm2_path)], log, timeout=60, DEMO_WARM_LESSON="False") as app:
        yield app.url


def test_students_waiting_behind_a_run_are_told_their_place_or_that_they_share_it(cold_server):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        first, own, same = (browser.new_context(viewport={"width": 400, "height": 900}).new_page() for _ in range(3))
        for view in (first, own, same):
            view.set_default_timeout(30_000)
            _open(view, cold_server)
            _load_step(view, "2. Generate by appending masks", "Prompting")
        prompt = own.locator("#gen-prompt textarea")
        prompt.fill(prompt.input_value() + " (Ben)")

        first.click("#gen-run")
        first.wait_for_function(SHOWS, arg="converting its weights from GGUF on first use", timeout=MODEL_WAIT_MS)
        own.click("#gen-run")
        same.click("#gen-run")
        own.wait_for_function("() => /Waiting for your turn: \\d+ runs? of other students ahead of yours/"
                              ".test(document.body.innerText)", timeout=MODEL_WAIT_MS)
        _screenshot(own, "waiting-own-text-400")
        same.wait_for_function(SHOWS, arg="Another student asked for this same run just before you: its answer "
                                          "will be yours.", timeout=MODEL_WAIT_MS)
        _screenshot(same, "waiting-same-run-400")
        for view in (first, own, same):  # the time waited, never Gradio's "3.4/0.5s"
            assert not re.search(r"\d/\d+(\.\d+)?s", view.locator("body").inner_text())

        for view in (first, own, same):
            _wait_runs(view, {"gen": 1})
        assert "Shared result: computed once" in same.locator("body").inner_text()
        assert "Shared result" not in own.locator("body").inner_text()
        browser.close()
