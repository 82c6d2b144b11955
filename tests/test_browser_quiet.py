"""A page that goes quiet: once what a person did has ended, the page sends the server nothing.

Events between components that set each other's values (a filter's change narrowing the other
filters, whose change looks the view up again...) can run for as long as the page is open: a
class of such pages is a class-sized load on the server. For every lesson step and every tab, at
desktop and phone width, the test waits for the page's end-of-run marker, then counts the page's
requests to the server for a while: none.

The app runs without the lesson's warm-up and the start-up check, whose progress lines poll the
server until they are done (and then stop): what is counted here is what never stops.
"""

from pathlib import Path

import pytest

from benchmarks.app_process import running_app
from tests.conftest import STANDIN_MLM
from tests.test_browser import ARGS, CHROMIUM, SCREENSHOTS, _fresh_view, _open, _run, _screenshot, playwright_api

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed "
                       "(apt-get install -y chromium)"),
    pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in MLM) "
                       "is not beside this clone"),
]

QUIET_MS = 3_000  # after each step and tab: a loop between events sends several requests a second
LAST_QUIET_MS = 10_000  # and once at the end, for longer


@pytest.fixture(scope="module")
def quiet_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("quiet") / "app.log"
    try:
        with running_app([str(STANDIN_MLM)], log, timeout=60, DEMO_WARM_LESSON="False",
                         DEMO_SELF_CHECK="False") as app:
            yield app.url
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


class _Requests:
    """The page's requests to the server (its API, not the static files a view may load)."""

    def __init__(self, view):
        self.sent: list[str] = []
        view.on("request", lambda r: self.sent.append(f"{r.method} {r.url.split('/gradio_api/')[-1][:60]} "
                                                      f"{(r.post_data or '')[:120]}")
                if "/gradio_api/" in r.url else None)

    def during(self, view, ms: int) -> list[str]:
        """The requests sent while the page waits ``ms`` (it waits on the page's clock, and the
        count is what the page did meanwhile)."""
        before = len(self.sent)
        view.wait_for_timeout(ms)
        return self.sent[before:]


def _load_step(view, title: str) -> None:
    if not view.locator("#lesson-step").is_visible():
        view.get_by_role("button", name="Lesson:").click()
    view.get_by_label(title).check()
    _run(view, "lesson", lambda: view.click("#lesson-load"))


@pytest.mark.parametrize("width", [1400, 400])
def test_the_page_goes_quiet_after_every_lesson_step_and_tab(browser, quiet_server, width):
    from demo.ui.lesson import TAB_NAMES, steps

    with _fresh_view(browser, width) as view:
        requests = _Requests(view)
        _open(view, quiet_server)
        noisy = {}
        for step in steps():
            _load_step(view, step["title"])
            sent = requests.during(view, QUIET_MS)
            if sent:
                noisy[step["title"]] = sent
        for name in TAB_NAMES.values():
            tab = view.get_by_role("tab", name=name)
            if tab.get_attribute("aria-selected") != "true":
                _run(view, "tab", tab.click)
            sent = requests.during(view, QUIET_MS)
            if sent:
                noisy[f"the {name} tab"] = sent
        sent = requests.during(view, LAST_QUIET_MS)
        if sent:
            noisy["at the end"] = sent
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        _screenshot(view, f"quiet-{width}")
        assert not noisy, "the page kept sending requests after its runs ended:\n" + "\n".join(
            f"{where}: {len(sent)} requests, first {sent[:3]}" for where, sent in noisy.items())


def test_counting_requests_sees_a_page_that_keeps_asking(browser, quiet_server):
    """The count can fail: a page that polls (here the page itself, asking for its config every
    half second) is seen."""
    with _fresh_view(browser, 1400) as view:
        requests = _Requests(view)
        _open(view, quiet_server)
        view.evaluate("() => { window.demoPoll = setInterval(() => fetch('gradio_api/info'), 500); }")
        assert len(requests.during(view, 2_000)) >= 2
        view.evaluate("() => clearInterval(window.demoPoll)")
