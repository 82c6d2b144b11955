"""The lesson: a guided path through the app in a few steps, in an opener above the tabs.

The steps are data (``assets/presets/lesson.json``): each says what to do, what to look at and one
question for students, and names its tab and what to fill there (a preset, the grid's lengths and
depths, the Results filters). "Load this step" opens that tab with its inputs filled; the student
then presses the tab's own button, so every step runs the tab's usual, checked request. The
teacher's notes (timing, expected answers, what the offline stand-in shows) are in docs/lesson.md.
"""

from typing import NamedTuple

import gradio as gr

from . import sharing, warm_up
from .common import TabParts, escape, message
from .presets import read_presets
from .run_marker import run_ends, run_starts

TAB_NAMES = {"prompting": "Prompting", "infill": "Infill", "ranking": "Ranking", "length": "Length probe", "results": "Results"}


def steps() -> list[dict]:
    return read_presets("lesson")


def step_card(step: dict) -> str:
    """A step as HTML: where it happens, what to do and look at, the question."""
    return (f'<div class="demo-lesson-step"><div class="demo-lesson-where">{TAB_NAMES[step["tab"]]} tab</div>'
            f'<p><b>Do:</b> {escape(step["do"])}</p><p><b>Look:</b> {escape(step["look"])}</p>'
            f'<p class="demo-lesson-question"><b>Question for the class:</b> {escape(step["question"])}</p></div>')


class LessonParts(NamedTuple):
    steps: list  # the lesson file's steps, read once
    opener: gr.Accordion  # the lesson itself: loading a step opens it, so a link to the page reopens it
    step: gr.Radio
    card: gr.HTML
    load: gr.Button
    next: gr.Button


def build() -> LessonParts | None:
    """The opener (call where it should appear, above the tabs); None without a lesson file."""
    lesson = steps()
    if not lesson:
        return None
    titles = [s["title"] for s in lesson]
    with gr.Accordion(f"Lesson: masked LMs as generative in-context learners, in {len(lesson)} steps",
                      open=False, elem_id="lesson") as opener:
        step = gr.Radio(choices=titles, value=titles[0], label="Step", elem_id="lesson-step",
                        info="Pick a step and load it: its tab opens with the inputs filled in. Teachers: "
                             "docs/lesson.md has the notes and the expected answers.")
        card = gr.HTML(step_card(lesson[0]), elem_id="lesson-card")
        with gr.Row():
            load = gr.Button("Load this step", variant="primary", elem_id="lesson-load", scale=2)
            following = gr.Button("Next step", elem_id="lesson-next", scale=1)
        ready = gr.HTML(elem_id="lesson-ready", elem_classes=["demo-hide-empty"])
        fresh = gr.Button("Compute every step anew", elem_id="lesson-fresh")
        gr.Markdown("<sub>Identical runs (the same step, settings and text) are computed once and shared by the "
                    "class; this button forgets the shared answers, so the next press of each step computes again."
                    "</sub>")
        _wire_readiness(ready, fresh)
    gr.HTML("", elem_id="lesson-link-scroll", visible="hidden", js_on_load=LINK_SCROLL_JS)
    return LessonParts(lesson, opener, step, card, load, following)


# A link to a view with the lesson open (the page's "Copy a link to this view") opens with the
# step's card in the first screen, not at the page's top: once the page has shown its first view
# and restored the link's values, the card, if shown, is scrolled to the top.
LINK_SCROLL_JS = """
if (new URLSearchParams(location.search).has('deep_link') && !window.demoLessonLink) {
  window.demoLessonLink = true;
  const started = Date.now();
  const look = () => {
    const card = document.querySelector('#lesson-card');
    const shown = Number(document.body.getAttribute('data-runs-first-view') || 0) > 0;
    if (shown && card && card.getBoundingClientRect().height > 0) {
      card.scrollIntoView({block: 'start'});
      document.body.setAttribute('data-lesson-link-scrolled', '1');
    } else if (Date.now() - started < 20000) {
      setTimeout(look, 250);
    }
  };
  look();
}
"""


def _wire_readiness(ready: gr.HTML, fresh: gr.Button) -> None:
    """The line saying which steps are computed in advance (refreshed until all are), and the
    teacher's button for fresh runs."""
    def readiness():
        progress = warm_up.progress()
        said = warm_up.line(progress)
        return (message(said, "note") if said else "",
                gr.Timer(active=progress is not None and not progress.done))

    def forget():
        dropped = sharing.RESULTS.forget()
        return message(f"Forgot {dropped} shared answer{'' if dropped == 1 else 's'}: the next press of each step "
                       f"computes anew.", "note")

    # polled only while the lesson is being computed: a page opened later asks once, when it opens
    timer = gr.Timer(2.0, active=False)
    quick = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden", queue=False)
    gr.on([timer.tick], readiness, None, [ready, timer], **quick)
    gr.on(None, readiness, None, [ready, timer], **quick)  # (no triggers: when the page opens)
    fresh.click(forget, None, ready, **quick)


def wire(parts: LessonParts | None, tabs: gr.Tabs, tab_parts: dict[str, TabParts]) -> None:
    """Connect the opener to the tabs (``tab_parts``: each tab's ``build()`` result, by tab id)."""
    if parts is None:
        return
    by_title = {s["title"]: s for s in parts.steps}
    titles = list(by_title)
    targets = {tab: p for tab, p in tab_parts.items() if p.lesson_values is not None}
    fields = [field for p in targets.values() for field in p.lesson_fields]
    openers = [opener for p in tab_parts.values() for opener in p.openers]

    def show(title):
        return step_card(by_title[title])

    def advance(title):
        return titles[min(titles.index(title) + 1, len(titles) - 1)]

    def load(title):
        """The step's tab selected, the lesson open (its step and question in view), the sections
        the step names opened, its inputs filled; every other tab as it is."""
        step = by_title[title]
        values = []
        for tab, p in targets.items():
            values += p.lesson_values(step) if tab == step["tab"] else [gr.skip()] * len(p.lesson_fields)
        opened = [gr.Accordion(open=True) if o.elem_id in step.get("opens", []) else gr.skip() for o in openers]
        return [gr.Tabs(selected=step["tab"]), gr.Accordion(open=True), *opened, *values]

    # nothing here runs a model: no queue slot, no API
    quick = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden")
    parts.step.change(show, parts.step, parts.card, **quick)
    parts.next.click(advance, parts.step, parts.step, **quick)
    loaded = parts.load.click(load, parts.step, [tabs, parts.opener, *openers, *fields], js=run_starts("lesson"),
                              **quick)
    for tab, p in targets.items():
        for fn, inputs, outputs in p.after_lesson:
            loaded = loaded.then(_for_steps_of(tab, by_title, fn, len(outputs)), [parts.step, *inputs], outputs,
                                 **quick)
    run_ends("lesson", loaded)


def _for_steps_of(tab: str, by_title: dict, fn, outputs: int):
    """``fn`` run after a step of ``tab`` is loaded; nothing after another tab's step."""
    def run(title, *values):
        if by_title[title]["tab"] == tab:
            return fn(*values)
        return gr.skip() if outputs == 1 else [gr.skip()] * outputs  # (one output takes its value, not a list)
    return run
