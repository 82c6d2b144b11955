"""The lesson ready before the class: at start-up, in the background, the default pair loads and
every lesson step's requests run once, so their answers wait in the shared answers
(``demo.ui.sharing.RESULTS``) and a class's first press of each step is answered at once.

A step's requests are the ones its tab's button starts after "Load this step", with the page's
values: each tab says which handlers a press runs (``TabParts.presses``), the step fills its
fields (``TabParts.lesson_values``), every other input keeps the value the page is built with, and
the outputs of one handler feed the next (a ranking's scores go to its difference view), as on
the page. The values take Gradio's round trip (``postprocess`` to the page, ``preprocess`` back),
so a request from the page has the same identity as the one computed here.
"""

import inspect
import logging
import threading
import time
from dataclasses import dataclass, field

import gradio as gr

from ..app.shared_results import pinned
from .common import TabParts

log = logging.getLogger("demo.ui")


@dataclass
class Progress:
    """Where the warm-up is: each step's state ("waiting", "computing", "ready" or "failed: ..."),
    and when it started and finished."""
    states: list[str]
    started: float | None = None
    finished: float | None = None
    loading: str = ""  # the model being loaded, while one is
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, step: int, state: str) -> None:
        with self.lock:
            self.states[step] = state

    @property
    def done(self) -> bool:
        return self.finished is not None


def page_values(app: gr.Blocks) -> dict:
    """Every component's value as the page is built (by component id)."""
    return {block._id: getattr(block, "value", None) for block in app.blocks.values()}


def _as_sent(component, value):
    """A value as a handler receives it from the page: Gradio's round trip to the browser and back."""
    if isinstance(component, gr.State):
        return value
    try:
        return component.preprocess(component.postprocess(value))
    except Exception:  # noqa: BLE001 (a value the component cannot show goes on as it is)
        return value


def _filled(values: dict, part: TabParts, step: dict) -> dict:
    """The page's values after "Load this step": the step's fields set (an update without a value,
    or a skip, leaves a field as it is)."""
    values = dict(values)
    for component, value in zip(part.lesson_fields, part.lesson_values(step)):
        if isinstance(value, dict):  # gr.update(...) / gr.skip()
            if "value" not in value:
                continue
            value = value["value"]
        values[component._id] = value
    return values


def _event_of(app: gr.Blocks, handler):
    """The page's event that runs ``handler``."""
    for block_fn in app.fns.values():
        if block_fn.fn is handler:
            return block_fn
    raise LookupError(f"no event of this page runs {handler.__name__}")


def api_requests(app: gr.Blocks, part: TabParts, step: dict) -> list[tuple[str, list]]:
    """A step's press as API calls (benchmarks/class_load.py): each public endpoint it runs and
    the values the page sends it (a ``gr.State`` input is not an API parameter; events the page
    alone runs, such as the ranking's difference view, are left out)."""
    values = _filled(page_values(app), part, step)
    calls = []
    for handler in part.presses(step):
        event = _event_of(app, handler)
        if event.api_name and event.api_visibility == "public":
            calls.append(("/" + event.api_name, [_as_sent(c, values[c._id]) for c in event.inputs
                                                 if not isinstance(c, gr.State)]))
    return calls


def run_step(app: gr.Blocks, part: TabParts, step: dict) -> str | None:
    """Run the requests a press of the step's button makes, one after another, as the page would
    (a streaming handler to its last update); the first message in words a request answered
    with instead of a result, if any."""
    values = _filled(page_values(app), part, step)
    for handler in part.presses(step):
        event = _event_of(app, handler)
        answer = handler(*(_as_sent(c, values[c._id]) for c in event.inputs))
        if inspect.isgenerator(answer):
            last = None
            for last in answer:
                pass
            answer = last
        outputs = answer if isinstance(answer, (tuple, list)) else [answer]
        for component, value in zip(event.outputs, outputs):
            if isinstance(value, str) and 'class="demo-error"' in value:
                return "its run answered with a message instead of a result"
            if not isinstance(value, dict):  # an update leaves the value as it is
                values[component._id] = value
    return None


_PLAN: list = []  # (app, steps, parts) of the page built last (prepare)
_PROGRESS: list[Progress] = []  # the warm-up started last (start)


def prepare(app: gr.Blocks, steps: list[dict], parts: dict[str, TabParts]) -> None:
    """Remember the page a later :func:`start` warms: its lesson ``steps`` and tabs (by tab id)."""
    _PLAN[:] = [(app, steps, parts)]


def prepared() -> tuple | None:
    """The page :func:`prepare` remembered: (app, lesson steps, tabs by id); None before."""
    return _PLAN[0] if _PLAN else None


def progress() -> Progress | None:
    """The warm-up's progress, None if none started."""
    return _PROGRESS[0] if _PROGRESS else None


def start(load_models, after: threading.Thread | None = None) -> Progress | None:
    """Warm the prepared page's lesson in a background thread (after ``after``, the core's import):
    ``load_models(progress)`` first, then each step. Returns its :class:`Progress` (None without
    a lesson)."""
    if not prepared() or not prepared()[1]:
        return None
    app, steps, parts = prepared()
    progress = Progress(["waiting"] * len(steps))
    _PROGRESS[:] = [progress]

    def warm():
        if after is not None:
            after.join()
        progress.started = time.time()
        try:
            load_models(progress)
        except Exception:  # noqa: BLE001 (the page says it; the app serves on)
            log.exception("warming the lesson: the default models did not load")
            progress.states[:] = ["failed: the default models did not load (the server's log says why)"] * len(steps)
            progress.finished = time.time()
            return
        finally:
            progress.loading = ""
        for index, step in enumerate(steps):
            part = parts.get(step["tab"])
            if part is None or part.presses is None:
                progress.set(index, "ready")  # a tab with nothing to compute
                continue
            progress.set(index, "computing")
            try:
                with pinned():  # kept however many other answers a class asks for meanwhile
                    problem = run_step(app, part, step)
                progress.set(index, f"failed: {problem}" if problem else "ready")
            except Exception:  # noqa: BLE001 (the page says it; the log says why)
                log.exception("warming lesson step %d", index + 1)
                progress.set(index, "failed: it could not be computed (the server's log says why)")
        progress.finished = time.time()
        print(f"demo: lesson ready: {len(steps)} steps in {progress.finished - progress.started:.1f} s "
              f"({sum(state == 'ready' for state in progress.states)} computed in advance)", flush=True)

    threading.Thread(target=warm, name="warm-lesson", daemon=True).start()
    return progress


def line(progress: Progress | None) -> str:
    """Where the warm-up is, in words (plain text); "" when none runs."""
    if progress is None:
        return ""
    states = list(progress.states)
    ready = [str(i + 1) for i, state in enumerate(states) if state == "ready"]
    failed = [f"step {i + 1} ({state.removeprefix('failed: ')})" for i, state in enumerate(states)
              if state.startswith("failed")]
    if progress.done and len(ready) == len(states):
        return (f"All {len(states)} steps are ready, computed in advance in "
                f"{progress.finished - progress.started:.0f} s: a class's first press of each is answered at once.")
    if progress.loading:
        return f"Getting the lesson ready: {progress.loading}."
    said = (f"Ready in advance: step{'s' if len(ready) > 1 else ''} {', '.join(ready)} of {len(states)}" if ready
            else "Getting the lesson ready")
    computing = [str(i + 1) for i, state in enumerate(states) if state == "computing"]
    if computing:
        said += f"; computing step {computing[0]} now"
    if failed:
        said += "; not computed in advance: " + "; ".join(failed) + " (it runs when pressed)"
    return said + "."
