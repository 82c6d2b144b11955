"""What every tab uses: the deployment it serves, its widgets (which hand any API value on to be
checked in words), messages, the work line, the help block, presets and what a tab hands the page.

User text (candidates, prompts, model names, messages that quote them) is always escaped: it is
shown as text, never interpreted as Markdown or HTML. Errors become messages in the outputs
(``demo.ui.handlers``); models are picked in ``demo.ui.pickers``.
"""

import html
from collections.abc import Callable
from typing import NamedTuple

import gradio as gr

from ..app.deployment import Deployment


class _HandsOverAnyValue:
    """Widgets that hand any value an API call sends to the handler: the settings dataclass then
    says in words what is wrong ("seed must be a whole number ..."), where Gradio's own check
    would answer with Python text ("type str doesn't define __round__") or, unshown, nothing."""

    def preprocess(self, payload):
        try:
            return super().preprocess(payload)
        except Exception:  # noqa: BLE001 (any value goes on to be checked, and explained, there)
            return payload


class Textbox(gr.Textbox):
    """A text box that hands a value that is not text (a list, an object, a number sent to the
    API) to the handler as it came, whose check refuses it in words; Gradio's own would run on
    its Python text ("['a', 'b']")."""

    def preprocess(self, payload):
        return payload if payload is not None and not isinstance(payload, str) else super().preprocess(payload)


class Number(_HandsOverAnyValue, gr.Number):
    pass


class Slider(_HandsOverAnyValue, gr.Slider):
    pass


class Radio(_HandsOverAnyValue, gr.Radio):
    pass


class Dropdown(_HandsOverAnyValue, gr.Dropdown):
    pass


def escape(text) -> str:
    """User text as HTML that shows exactly that text."""
    return html.escape(str(text), quote=True)


def score_text(value: float) -> str:
    """A score or log-prob as the page prints it, in tables, summaries and views alike."""
    return f"{value:.2f}"


def message(text: str, kind: str = "error") -> str:
    """A sentence for the output area (kind "error" or "note"); the text is escaped."""
    role = ' role="alert"' if kind == "error" else ""
    return f'<div class="demo-{kind}"{role}>{escape(text)}</div>'


def notes(lines: list[str]) -> str:
    """Lines said under an answer, a note each (HTML; empty without any)."""
    return "".join(message(line, "note") for line in lines)


_DEPLOYMENT: list[Deployment] = []  # the deployment the app serves, set once when it is built


def use(given: Deployment | None) -> None:
    """Serve ``given`` (``build_app`` calls this once); None: this machine's, read at first use."""
    _DEPLOYMENT[:] = [given] if given is not None else []


def deployment() -> Deployment:
    """The deployment the app serves: its settings and catalog, read once, never per request."""
    if not _DEPLOYMENT:
        _DEPLOYMENT.append(Deployment.current(check_hub=True))
    return _DEPLOYMENT[0]


def work_text(reads) -> str:
    """The work a run did, in words (``demo.engine.counting.Reads``, as the engine counted it):
    "24 forward passes · 2,376 tokens read"."""
    return (f"{reads.passes:,} forward pass{'' if reads.passes == 1 else 'es'} · "
            f"{reads.tokens:,} token{'' if reads.tokens == 1 else 's'} read")


def work_line(reads, how: str, seconds: float | None = None) -> str:
    """One line (HTML) under an output, next to its time: the work it did and ``how`` (plain
    text) the model read, so the numbers can be explained from the method; with ``seconds``
    where no other line gives the time."""
    took = f" in {seconds:.2f} s" if seconds is not None else ""
    return (f'<div class="demo-work"><b>Work:</b> {work_text(reads)}{took} '
            f'<span class="demo-work-how">({escape(how)})</span></div>')


def tab_help(line: str, details: str, figure: str = "") -> None:
    """A tab's help: one line in the page, the rest (and a figure's HTML) in a closed "How does
    this work?" opener, so the page shows the method rather than paragraphs about it."""
    gr.Markdown(line)
    with gr.Accordion("How does this work?", open=False):
        if figure:
            gr.HTML(figure)
        gr.Markdown(details)


class TabParts(NamedTuple):
    """What a tab's ``build()`` hands the page besides its components."""
    first_view: tuple | None = None  # (function, inputs, outputs) run when a page opens (not an API)
    lesson_fields: tuple = ()  # the inputs a lesson step fills (demo.ui.lesson) ...
    lesson_values: Callable[[dict], list] | None = None  # ... and their values for a step
    openers: tuple = ()  # closed sections a lesson step may open (its "opens": their elem_ids)
    presses: Callable[[dict], tuple] | None = None  # the handlers a step's press of the tab's button runs, in order
    # (function, inputs, outputs) the lesson runs after filling the tab's fields: a view that follows its
    # inputs on the person's edits only (``input`` events), never on a value set by the page, which would
    # let two events that set each other's components run forever
    after_lesson: tuple = ()
