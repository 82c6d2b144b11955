"""The app at a phone's width (400 px) and a desktop's (1400 px), in headless Chromium: every figure
the lesson's steps draw keeps its title, axis titles and legend inside the figure and off its tick
labels, and every dropdown opens wherever its box is tapped, not only on its line of text.

The app, its offline models and the browser are test_browser.py's (its fixtures, imported here).
Screenshots go to artifacts/screenshots/narrow-*.png (each figure's: narrow-<its id>-<width>.png).
"""

import itertools

import pytest

from demo.ui.lesson import TAB_NAMES, steps
from tests import test_browser as browser
from tests.test_browser import SCREENSHOTS, _fresh_view, _open, _open_tab, _press, _wait_runs

# test_browser's fixtures (the app with the offline models, the browser) and its reasons to skip
page, server, smollm2_path, tiny_pair = browser.page, browser.server, browser.smollm2_path, browser.tiny_pair
pytestmark = browser.pytestmark

WIDTHS = [400, 1400]

# The run button a step's tab is pressed with, and the run it marks (a step with no button loads
# its view by itself: the Results filters).
RUNS = {"ranking": ("#rank-run", "rank"), "length": ("#probe-run", "probe"), "sweep": ("#sweep-run", "sweep")}

# Every figure shown, once plotly has drawn it at its final width (its own, or its box's).
FIGURES_DRAWN_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter((p) => p.offsetParent !== null)
  .every((p) => { const svg = p.querySelector('svg.main-svg');
                  return p._fullLayout && svg && Math.abs(p._fullLayout.width - (p.layout.width || p.clientWidth)) <= 1
                         && Math.abs(svg.getBoundingClientRect().width - p._fullLayout.width) <= 1; })"""

# A figure's box (its drawing, which may be wider than the screen, scrolled) and the boxes of its
# title, axis titles, legend entries and tick labels, in viewport pixels.
FIGURE_PARTS_JS = """(plot) => {
  const root = document.querySelector(plot);
  const box = (e) => { const r = e.getBoundingClientRect();
                       return {text: e.textContent.slice(0, 50), left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
  const shown = (selector) => [...root.querySelectorAll(selector)].map(box).filter((b) => b.right > b.left && b.bottom > b.top);
  return {figure: box(root.querySelector('svg.main-svg')),
          titles: shown('text.gtitle, text[class^="x"][class$="title"], text[class^="y"][class$="title"]'),
          legend: shown('g.legend g.traces'),
          ticks: shown('g[class$="tick"] text')};
}"""


def _apart(one: dict, other: dict) -> bool:
    return (one["right"] <= other["left"] + 1 or other["right"] <= one["left"] + 1
            or one["bottom"] <= other["top"] + 1 or other["bottom"] <= one["top"] + 1)


def _figures_read(view, where: str, width: int) -> None:
    """Every shown figure: its titles and legend entries inside its box, none over another or over
    a tick label. Each one's screenshot goes to artifacts/screenshots/narrow-<id>-<width>.png."""
    view.wait_for_function(FIGURES_DRAWN_JS)
    plots = view.evaluate("() => [...document.querySelectorAll('[id$=plot], [id*=plot-]')].filter((p) =>"
                          " p.offsetParent !== null && p.querySelector('.js-plotly-plot')).map((p) => '#' + p.id)")
    assert plots, where
    for plot in plots:
        view.locator(plot).screenshot(path=str(SCREENSHOTS / f"narrow-{plot[1:]}-{width}.png"))
        parts = view.evaluate(FIGURE_PARTS_JS, plot)
        figure, labels = parts["figure"], parts["titles"] + parts["legend"]
        assert parts["titles"], (where, plot)
        for label in labels:
            inside = (figure["left"] - 1 <= label["left"] and label["right"] <= figure["right"] + 1
                      and figure["top"] - 1 <= label["top"] and label["bottom"] <= figure["bottom"] + 1)
            assert inside, (where, plot, label, figure)
        for one, other in itertools.combinations(labels, 2):
            assert _apart(one, other), (where, plot, one, other)
        for label, tick in itertools.product(labels, parts["ticks"]):
            assert _apart(label, tick), (where, plot, label, tick)


def _load(view, step: dict) -> None:
    """Load a lesson step and wait until its tab shows it (a Results step's view looked up too)."""
    if not view.locator("#lesson-step").is_visible():  # closed on a page just opened
        view.get_by_role("button", name="Lesson:").click()
    view.get_by_label(step["title"]).check()
    view.locator("#lesson-card").filter(has_text=f"{TAB_NAMES[step['tab']]} tab").wait_for()
    _press(view, "#lesson-load", "lesson")


@pytest.mark.parametrize("width", WIDTHS)
def test_every_lesson_figure_reads_at_phone_and_desktop_width(page, server, width):
    """Each lesson step of a tab with figures, loaded and run: every figure then shown keeps its
    title, axis titles and legend entries inside it and clear of each other and of its tick labels."""
    with _fresh_view(page, width) as view:
        _open(view, server)
        for step in steps():
            if step["tab"] not in ("ranking", "length", "results"):
                continue  # (the Prompting and Infill tabs draw no figure)
            _load(view, step)
            run = RUNS.get("sweep" if "sweep" in step else step["tab"])
            if run:
                _press(view, *run)
            _figures_read(view, step["title"], width)
            number = step["title"].split(".")[0]
            view.screenshot(path=str(SCREENSHOTS / f"narrow-step-{number}-{width}.png"), full_page=True)


# Each dropdown shown: its id, the box it is drawn as (the part a person sees as the control), a
# point of its line of text and its arrow's centre, relative to that box.
DROPDOWNS_JS = """() => [...document.querySelectorAll('input[role=combobox]')].map((input) => {
  const box = input.closest('.wrap').getBoundingClientRect();
  const arrow = input.closest('.wrap').querySelector('.dropdown-arrow').getBoundingClientRect();
  const text = input.getBoundingClientRect();
  return {id: input.closest('.block').id, width: box.width, height: box.height,
          text: {x: text.left + 10 - box.left, y: text.top + text.height / 2 - box.top},
          arrow: {x: arrow.left + arrow.width / 2 - box.left, y: arrow.top + arrow.height / 2 - box.top}};
}).filter((d) => d.width > 0 && d.height > 0)"""

OPENED_JS = """(id) => { const input = document.querySelector('#' + id + ' input[role=combobox]');
  const list = document.getElementById(input.getAttribute('aria-controls'));
  return input.getAttribute('aria-expanded') === 'true' && list !== null && list.getBoundingClientRect().height > 0; }"""

CLOSED_JS = """(id) => { const input = document.querySelector('#' + id + ' input[role=combobox]');
  return input.getAttribute('aria-expanded') !== 'true' && document.getElementById(input.getAttribute('aria-controls')) === null; }"""


def _opens_at(view, dropdown: dict, point: dict) -> bool:
    """Tap ``dropdown``'s box at ``point``: whether its options open (then closed again)."""
    box = view.locator(f"#{dropdown['id']} .wrap:has(input[role=combobox])")
    box.click(position=point, force=True)  # (force: the tap lands there, whatever is on top)
    try:
        view.wait_for_function(OPENED_JS, arg=dropdown["id"], timeout=2_000)
        opened = True
    except Exception:  # playwright's TimeoutError: it did not open
        opened = False
    view.keyboard.press("Escape")
    view.evaluate("() => document.activeElement && document.activeElement.blur()")
    view.wait_for_function(CLOSED_JS, arg=dropdown["id"])  # (a list still fading out takes the next tap)
    return opened


@pytest.mark.parametrize("width", WIDTHS)
def test_every_dropdown_opens_from_anywhere_in_its_box(page, server, width):
    """On every tab, every opener opened: each dropdown opens when its box is tapped near its
    bottom-left corner, near its top edge and on its arrow, not only on its line of text."""
    missed = []
    with _fresh_view(page, width) as view:
        _open(view, server)
        for tab in TAB_NAMES.values():
            _open_tab(view, tab)
            for header in view.locator(".label-wrap:not(.open)").all():  # every closed opener, opened
                if header.is_visible():
                    header.click()
            _wait_runs(view, {})
            dropdowns = view.evaluate(DROPDOWNS_JS)
            assert dropdowns, tab
            for dropdown in dropdowns:
                w, h = dropdown["width"], dropdown["height"]
                if not _opens_at(view, dropdown, dropdown["text"]):
                    continue  # no list anywhere, its line of text too: nothing to offer yet (choices come with a run)
                points = {"bottom-left corner": {"x": 5, "y": h - 4}, "top edge": {"x": w * 0.6, "y": 4},
                          "arrow": dropdown["arrow"]}
                missed += [f"{tab} #{dropdown['id']} ({w:.0f} x {h:.0f}): {name}"
                           for name, point in points.items() if not _opens_at(view, dropdown, point)]
            view.screenshot(path=str(SCREENSHOTS / f"narrow-dropdowns-{tab.split()[0].lower()}-{width}.png"),
                            full_page=True)
    assert not missed, "\n".join(missed)
