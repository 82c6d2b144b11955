"""Wiring shared by the tabs: model pickers, loading, messages in the page, the GPU decorator.

Every event handler is wrapped by :func:`handler` (or :func:`shows_errors`): a ValueError from
the core (bad input, a model that cannot load, a request too big) becomes a message IN the output
area, replacing what the last run showed, and the same message is what an API client receives;
anything unexpected is logged on the server and shown as a short sentence, never as Python text.
User text (candidates, prompts, model names, messages that quote them) is always escaped: it is
shown as text, never interpreted as Markdown or HTML.
"""

import functools
import html
import inspect
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import gradio as gr
from gradio.context import LocalContext  # the request being served (Gradio sets it per event)

from ..app.catalog import Catalog, standin_note
from ..app.deployment import Deployment
from ..app.limits import RUNS
from ..paths import ASSETS
from ..settings import AppSettings

log = logging.getLogger("demo.ui")
UNEXPECTED = ("Something went wrong on the server with this input (the details are in the server's "
              "log). Try another input or model; the app keeps working for everyone.")
OUT_OF_MEMORY = "Out of memory: pick a smaller model or a shorter input."


class _HandsOverAnyValue:
    """Widgets that hand any value an API call sends to the handler: the settings dataclass then
    says in words what is wrong ("seed must be a whole number ..."), where Gradio's own check
    would answer with Python text ("type str doesn't define __round__") or, unshown, nothing."""

    def preprocess(self, payload):
        try:
            return super().preprocess(payload)
        except Exception:  # noqa: BLE001 (any value goes on to be checked, and explained, there)
            return payload


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


def _sentence(err: Exception, name: str) -> str:
    if isinstance(err, ValueError):  # the core's way of saying "bad input", worded for people
        return str(err)
    if isinstance(err, MemoryError) or "out of memory" in str(err).lower():
        return OUT_OF_MEMORY
    log.exception("handler %s failed", name)  # a bug or a broken model: for the maintainers
    return UNEXPECTED


def shows_errors(error_outputs):
    """Decorator: on an exception, return ``error_outputs(message_html)`` instead of raising, so
    the message replaces the stale output (also for generator handlers that stream). For an event
    with an output record (demo.ui.outputs), ``error_outputs`` is the record's ``showing``."""

    def decorate(fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def streaming(*args, **kwargs):
                try:
                    yield from fn(*args, **kwargs)
                except Exception as err:  # noqa: BLE001 (every failure becomes a page message)
                    yield error_outputs(message(_sentence(err, fn.__name__)))
            return streaming

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001
                return error_outputs(message(_sentence(err, fn.__name__)))
        return wrapper

    return decorate


def on_gpu(fn, runs=None, estimate=None, models=("model_name",)):
    """ZeroGPU's ``spaces.GPU`` when that package is installed (a Space), else the function itself.

    The GPU is asked for as long as this request needs (:func:`gpu_seconds`; ``runs`` and
    ``estimate`` as for :func:`handler`): ZeroGPU serves shorter requests first, so a ranking does
    not wait behind a long grid's reservation. On other machines ``demo.engine.models.load_model``
    already puts models on CUDA when there is one.
    """
    try:
        import spaces
    except ImportError:
        return fn
    return spaces.GPU(duration=gpu_seconds(fn, runs, estimate, models))(fn)


GPU_GFLOPS = 20_000.0  # sustained float32 speed assumed on a ZeroGPU slice (an A100 share)
GPU_SECONDS = (15, 120)  # the least asked for (loading a model, moving it) and the most


def gpu_seconds(fn, runs=None, estimate=None, models=("model_name",)):
    """A function of the handler's own arguments: the seconds its request needs, from the work
    its ``estimate`` declares for each model it loads (as for :func:`handler`; the catalog's
    parameter count, else 1B) times the model runs one request makes; the least when it declares
    none."""
    signature = inspect.signature(fn)

    def seconds(*args, **kwargs) -> int:
        given = signature.bind_partial(*args, **kwargs).arguments
        low, high = GPU_SECONDS
        if estimate is None:
            return low
        work = 0.0
        for argument in models:
            entry = deployment().catalog.entry(str(given.get(argument) or ""))
            kind = entry.kind if entry else "masked"  # unknown: the costlier kind
            parameters = _parameters(entry.size if entry else "") or 1e9
            work += estimate(given, kind, parameters).seconds(GPU_GFLOPS)
        return int(min(high, low + max(0.0, _runs(runs, given) * work)))
    return seconds


def _runs(runs, given: dict) -> int:
    """How many model runs one call is: ``runs(arguments)``, or one."""
    return runs(given) if runs else 1


def _parameters(size: str) -> float | None:
    """ "150M" -> 1.5e8, "1.5B" -> 1.5e9 (the catalog's sizes); None if not given."""
    scale = {"M": 1e6, "B": 1e9}.get(size[-1:].upper())
    try:
        return float(size[:-1]) * scale if scale else None
    except ValueError:
        return None


def number_or(value, default: float) -> float:
    """A finite number from an unchecked argument, else ``default`` (the handler refuses it later):
    for work estimates, made before the handler checks its arguments."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


# The app imports torch and the engines in a background thread once the page is served
# (import_core_in_background). A request arriving meanwhile must wait: importing transformers from
# two threads at once can fail ("cannot import name 'AutoConfig'") on its lazy module.
_CORE_IMPORT = threading.Lock()


CORE_READY_MESSAGE = "demo: core imported"  # printed once done (benchmarks/bench_app.py waits for it)


def _import_core(settings: AppSettings) -> None:
    start = time.perf_counter()
    try:
        from ..engine import generation, models, pll  # noqa: F401
        from ..evaluation import haystack  # noqa: F401
        models.CACHE.bound(settings.max_models, settings.max_model_gb)  # the deployment's bounds
        print(f"{CORE_READY_MESSAGE} in {time.perf_counter() - start:.1f} s", flush=True)
    except Exception:  # the handler will import again and show the error in the page
        log.exception("background import of the core failed")
    finally:
        _CORE_IMPORT.release()  # taken by import_core_in_background (a Lock may be released here)


def import_core_in_background(settings: AppSettings) -> threading.Thread:
    """Start importing torch, transformers and the engines, and bound the model cache as
    ``settings`` say; handlers wait until it is done."""
    _CORE_IMPORT.acquire()  # taken before the thread starts: no request can slip in between
    thread = threading.Thread(target=_import_core, args=(settings,), name="import-core", daemon=True)
    thread.start()
    return thread


def _first(check):
    """Decorator: ``check(arguments)`` runs before the handler (before a streaming one's first
    output); ``arguments`` are the call's, by name."""
    def decorate(fn):
        signature = inspect.signature(fn)

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def streaming(*args, **kwargs):
                check(signature.bind_partial(*args, **kwargs).arguments)
                yield from fn(*args, **kwargs)
            return streaming

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            check(signature.bind_partial(*args, **kwargs).arguments)
            return fn(*args, **kwargs)
        return wrapper
    return decorate


def _core_imported(arguments):
    if not _CORE_IMPORT.acquire(blocking=False):  # the first request after start-up: say why it waits
        _say("starting: importing the model libraries (first request only)")
        _CORE_IMPORT.acquire()
    _CORE_IMPORT.release()


def _say(line: str) -> None:
    """Show ``line`` as the request's progress, without a percentage (nothing to count yet): it
    stays until the request's first counted step (a model's "Loading weights", generation's steps)."""
    progress = LocalContext.progress.get(None)  # the handler's, set by Gradio for this request
    if progress is not None:
        progress(None, desc=line)


def _counts_runs(runs):
    """The check that a call's model runs (``runs`` as for :func:`handler`) count against its
    visitor's share on a public Space (``limits.RUNS``)."""
    def check(arguments):
        settings = deployment().settings
        if settings.public:
            request = LocalContext.request.get(None)
            for _ in range(_runs(runs, arguments)):
                RUNS.check(request, settings.runs_per_minute)
    return check


def with_arguments(arguments: str):
    """Decorator: append an "Args:" block shared by several handlers to each one's docstring (it
    documents their parameters as MCP tools), so that it is written once."""
    def decorate(fn):
        fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n    Args:\n" + arguments
        return fn
    return decorate


def handler(error_outputs, runs=None, estimate=None, models=("model_name",)):
    """What every model-running handler gets: messages in its outputs (``error_outputs`` maps the
    message to them), a per-visitor share on a public Space, a GPU slot on ZeroGPU, and a wait
    for the background import of the core.

    ``runs``, a function of the handler's arguments by name, says how many model runs one call
    makes (default one): each counts against the visitor's share and the GPU time asked for.
    ``estimate(arguments, kind, parameters)`` declares the work of one run (a ``budget.Work``),
    estimated before the model loads, from which ZeroGPU's time is asked (default: the least);
    ``models``: the arguments that name the models one run loads (the work is estimated for each).
    """
    return lambda fn: shows_errors(error_outputs)(
        _first(_counts_runs(runs))(_first(_core_imported)(on_gpu(fn, runs, estimate, models))))


def load(name: str, kind: str | None, emd: str = "auto"):
    """Load a model from the picker's value (a catalog entry or what the user typed); ``kind``
    "masked" or "causal", or None for the model's natural kind; ``emd`` as the
    :func:`emd_radio` says. The deployment says which names the page may load
    (``demo.app.deployment``)."""
    if emd not in ("auto", "off"):
        raise ValueError("The DeBERTa head is 'auto' (the enhanced mask decoder, where the checkpoint "
                         "holds what it needs) or 'off' (the last layer, as transformers reads it).")
    # only when the model is not in memory (a first request waits tens of seconds for it)
    return deployment().load(name, kind, emd=emd, loading=lambda: _say(f"loading {str(name).strip()} (first use)"))


def emd_radio(elem_id: str, masked_picker):
    """What a DeBERTa masked LM's head reads (``ModelSettings.emd``), shown while the masked LM
    picked may be a DeBERTa (a listed one is, or a name the catalog does not know); other
    families ignore it."""
    def maybe_deberta(name) -> bool:
        entry = deployment().catalog.entry(name) if name else None
        return entry is None or not entry.family or entry.family.startswith("deberta")

    from ..settings import ModelSettings
    from .settings_form import widget  # (it builds on this module's widgets)

    radio = widget(ModelSettings, "emd", only=("auto", "off"), elem_id=elem_id,
                   visible=maybe_deberta(masked_picker.value))
    run_ends("model-pick", masked_picker.change(lambda name: gr.update(visible=maybe_deberta(name)), masked_picker,
                                                radio, api_visibility="private", concurrency_limit=None,
                                                show_progress="hidden", js=run_starts("model-pick")))
    return radio


_DEPLOYMENT: list[Deployment] = []  # the deployment the app serves, set once when it is built


def use(given: Deployment | None) -> None:
    """Serve ``given`` (``build_app`` calls this once); None: this machine's, read at first use."""
    _DEPLOYMENT[:] = [given] if given is not None else []


def deployment() -> Deployment:
    """The deployment the app serves: its settings and catalog, read once, never per request."""
    if not _DEPLOYMENT:
        _DEPLOYMENT.append(Deployment.current(check_hub=True))
    return _DEPLOYMENT[0]


class ModelPicker(gr.Dropdown):
    """A model dropdown whose API schema accepts what the picker accepts: any name, with the app's
    models as examples. Gradio's Dropdown schema lists its choices as an enum even when a value
    may be typed in, so a client that checks the schema (every MCP client) would refuse a Hub id
    before the app could answer; an unusable name is refused by :func:`load`, in a sentence."""

    is_template = True  # drawn by the page as the Dropdown it is (Gradio's mark for such subclasses)

    def api_info_as_input(self) -> dict:
        return {"type": "string", "examples": [value for _, value in self.choices if value]}


def model_picker(catalog: Catalog, kind: str, label: str, elem_id: str, with_none: bool = False,
                 any_kind: bool = False):
    """Dropdown of the catalog's models of ``kind`` (first, and the default) or, with
    ``any_kind``, followed by those of the other kind; a Hub id may be typed in."""
    other = "causal" if kind == "masked" else "masked"
    choices = catalog.choices(kind) + (catalog.choices(other) if any_kind else [])
    if with_none:
        choices = choices + [("(none: skip this side)", "")]
    what = "masked LM (BERT-like)" if kind == "masked" else "causal LM (GPT-like)"
    if any_kind:
        what += " or any other masked or causal LM"
    return ModelPicker(
        choices=choices, value=getattr(catalog.default(kind), "name", None), label=label, elem_id=elem_id,
        allow_custom_value=True, filterable=True,
        info=f"A {what}. " + ("Offline: local models and Hub models downloaded before; a typed Hub id "
                              "loads only if it was downloaded too." if catalog.offline else
                              "'local' models load offline; Hub models download on first use. "
                              "You may also type a Hugging Face Hub id (owner/name)."))


def pair_picker(catalog: Catalog, elem_id: str, masked, causal):
    """A dropdown of the catalog's model pairs that sets both model pickers together (shown where
    the catalog lists pairs), and a note on the two models chosen: why a listed pair is a fair
    comparison, or what else differs between two models chosen apart (call after the two pickers
    exist). Choosing a model by hand leaves the pair unless the two chosen are one."""
    defaults = tuple(getattr(catalog.default(kind), "name", None) for kind in ("masked", "causal"))
    chosen = next((p for p in catalog.pairs if (p.masked, p.causal) == defaults), None)

    def note_of(pair, masked_name, causal_name) -> str:
        if pair is not None:
            return message(catalog.pair_note(pair), "note")
        if not masked_name or not causal_name:  # a side left out: nothing compared
            return ""
        return message(catalog.free_pair_note(masked_name, causal_name), "note")

    picker = gr.Dropdown(
        choices=[("(choose the two models yourself)", "")] + [(p.name, p.name) for p in catalog.pairs],
        value=chosen.name if chosen else "", label="Model pair", elem_id=elem_id, visible=bool(catalog.pairs),
        info="The listed pairs are a masked LM and a causal LM trained alike, so their differences come from "
             "the objective (fill in blanks vs continue the text), not from data or size.")
    note = gr.HTML(note_of(chosen, *defaults), elem_id=f"{elem_id}-note", elem_classes=["demo-hide-empty"])

    def choose(name, masked_name, causal_name):
        pair = catalog.pair(name)
        if pair is None:  # back to choosing freely: the pickers stay as they are
            return gr.update(), gr.update(), note_of(None, masked_name, causal_name)
        return pair.masked, pair.causal, note_of(pair, pair.masked, pair.causal)

    def picked(masked_name, causal_name):
        pair = next((p for p in catalog.pairs if (p.masked, p.causal) == (masked_name, causal_name)), None)
        return (pair.name if pair else ""), note_of(pair, masked_name, causal_name)

    quick = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden", js=run_starts("pair"))
    run_ends("pair", picker.change(choose, [picker, masked, causal], [masked, causal, note], **quick),
             *(side.input(picked, [masked, causal], [picker, note], **quick)  # a model chosen by hand
               for side in (masked, causal)))
    return picker


def model_note(lm) -> str:
    """One line (HTML) under an output: which model, how big, where it runs; a caveat for the
    offline stand-in, so nobody reads its weak answers as what masked LMs can do."""
    where = "local" if lm.local else "Hub"
    name = deployment().catalog.shown_name(lm.name, lm.local)
    line = (f"<code>{escape(name)}</code> · {lm.kind} · "
            f"{escape(lm.family.name)} · {lm.n_parameters / 1e6:,.0f}M parameters · {where} · "
            f"{lm.device.type} · {str(lm.dtype).removeprefix('torch.')}")
    if getattr(lm, "emd", False):
        line += " · head: enhanced mask decoder"
    caveat = standin_note(lm.name)
    notes = [note for note in (caveat, getattr(lm, "emd_note", None)) if note]
    return line + "".join(message(note, "note") for note in notes)


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


# The page marks when a run has ended. The text of its outputs is no such sign: a run streams
# its outputs, its chain's events fill them one after another, and the last run's text stays
# until this one's replaces it. The first event of each chain of a run counts the chain in
# flight (data-running-NAME on the page's body), its last event counts it out, a task after its
# outputs arrived (so they are drawn); when none of NAME's chains is in flight, data-runs-NAME
# goes up by one. A burst of runs (a filter's change events as a tab is first drawn) thus ends
# once, when its last chain does, and a next chain that starts as one ends keeps it in flight.
_RUN_RECORD_JS = """const runs = (window.demoRuns = window.demoRuns || {});
  const run = (runs[__NAME__] = runs[__NAME__] || {running: 0, ended: 0});
  const show = () => {
    document.body.setAttribute(`data-running-${__NAME__}`, String(run.running));
    document.body.setAttribute(`data-runs-${__NAME__}`, String(run.ended));
  };"""
RUN_STARTS_JS = """(...inputs) => {
  __RECORD__
  run.running += 1;
  show();
  return __FIRST__;
}"""
RUN_ENDS_JS = """async () => {
  await new Promise((drawn) => setTimeout(drawn));
  __RECORD__
  run.running -= 1;
  if (run.running === 0) run.ended += 1;
  show();
}"""


def _run_js(template: str, name: str, first: str = "") -> str:
    return (template.replace("__RECORD__", _RUN_RECORD_JS).replace("__FIRST__", first)
            .replace("__NAME__", json.dumps(name)))


def run_starts(name: str, js: str | None = None) -> str:
    """The ``js=`` of the first event of each chain of run ``name``: counts the chain in flight,
    then hands the event's inputs on (to ``js``, the event's own browser function, if any)."""
    return _run_js(RUN_STARTS_JS, name, f"({js.strip()})(...inputs)" if js else "inputs")


def run_ends(name: str, *last_events) -> None:
    """After each of ``last_events`` (the last event of each chain of run ``name``, each begun
    with :func:`run_starts`), the page counts that chain out. In the browser only: no API."""
    for event in last_events:
        event.then(None, None, None, js=_run_js(RUN_ENDS_JS, name), api_visibility="private",
                   show_progress="hidden")


class TabParts(NamedTuple):
    """What a tab's ``build()`` hands the page besides its components."""
    first_view: tuple | None = None  # (function, inputs, outputs) run when a page opens (not an API)
    lesson_fields: tuple = ()  # the inputs a lesson step fills (demo.ui.lesson) ...
    lesson_values: Callable[[dict], list] | None = None  # ... and their values for a step
    openers: tuple = ()  # closed sections a lesson step may open (its "opens": their elem_ids)


def read_presets(name: str) -> list[dict]:
    """The presets of ``assets/presets/<name>.json`` (an empty list if the file is missing)."""
    path = ASSETS / "presets" / f"{name}.json"
    if not path.is_file():
        return []
    return json.loads(path.read_text(encoding="utf-8"))["presets"]


def preset_named(presets: list[dict], name) -> dict | None:
    """The preset a picker names (None for a name no preset has)."""
    return next((p for p in presets if p["name"] == name), None)


def reproduce_block(elem_id: str) -> list:
    """A collapsed "Reproduce" block under a result: its Python call and its command line, each
    with a copy button (fill with :func:`reproduction`)."""
    with gr.Accordion("Reproduce: the Python call and the command line", open=False, elem_id=elem_id):
        python = gr.Code(language="python", label="Python", interactive=False, elem_id=f"{elem_id}-python")
        shell = gr.Code(language="shell", label="Command line", interactive=False, elem_id=f"{elem_id}-shell")
    return [python, shell]


def reproduction(command: str, model_name: str, kind: str | None, settings, emd: str = "auto",
                 **inputs) -> tuple[str, str]:
    """(Python, command line) for a result, from the settings object its handler ran with; for a
    local model they say what a shell or notebook without this app's settings needs to find it
    (a public app's paths stay unshown)."""
    from ..app.reproduce import command_line, local_setup, python_call
    entry = deployment().catalog.local_entry(model_name) if model_name else None
    local = local_setup(entry, show_path=not deployment().settings.public) if entry else None
    return (python_call(command, model_name, kind, settings, emd, local, **inputs),
            command_line(command, model_name, kind, settings, emd, local, **inputs))
