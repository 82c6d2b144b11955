"""What every model-running handler of the page gets (:func:`handler`): its errors as messages in
its outputs, never Python text; a per-visitor share on a public Space; a GPU slot as long as its
work needs on ZeroGPU; and a wait for the background import of the core. Also the one way the
page loads a model (:func:`load`).
"""

import functools
import inspect
import logging
import threading
import time

from gradio.context import LocalContext  # the request being served (Gradio sets it per event)

from ..app.limits import RUNS
from ..app.shared_results import Abandoned
from ..app_settings import AppSettings
from .common import deployment, message
from .loading import say
from .sharing import shares
from .turns import takes_turns

log = logging.getLogger("demo.ui")
UNEXPECTED = ("Something went wrong on the server with this input (the details are in the server's "
              "log). Try another input or model; the app keeps working for everyone.")
OUT_OF_MEMORY = "Out of memory: pick a smaller model or a shorter input."


def _sentence(err: Exception, name: str) -> str:
    if isinstance(err, ValueError):  # the core's way of saying "bad input", worded for people
        return str(err)
    if isinstance(err, Abandoned):  # nobody waits for this answer any more
        return "Cancelled."
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


# A handler's model argument and the kind it loads, unless the handler names others
ONE_MASKED_LM = {"model_name": "masked"}


def on_gpu(fn, runs=None, estimate=None, models=ONE_MASKED_LM):
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


def gpu_seconds(fn, runs=None, estimate=None, models=ONE_MASKED_LM):
    """A function of the handler's own arguments: the seconds its request needs, from the work
    its ``estimate(settings, arguments, kind, parameters)`` declares for each model it loads (as for :func:`handler`; the catalog's
    parameter count, else 1B) times the model runs one request makes; the least when it declares
    none, or when the request's settings are refused (the handler says why, before any run)."""
    signature = inspect.signature(fn)

    def seconds(*args, **kwargs) -> int:
        bound = signature.bind_partial(*args, **kwargs)
        bound.apply_defaults()  # what the handler itself would be called with
        given, (low, high) = bound.arguments, GPU_SECONDS
        if estimate is None:
            return low
        work = 0.0
        try:  # the request's settings object, as its handler builds it (settings_form.endpoint)
            settings = fn.settings(given) if hasattr(fn, "settings") else None
        except ValueError:  # settings the handler refuses before any run: the least
            return low
        for argument in models:
            entry = deployment().catalog.entry(str(given.get(argument) or ""))
            kind = entry.kind if entry else "masked"  # unknown: the costlier kind
            parameters = _parameters(entry.size if entry else "") or 1e9
            try:
                work += estimate(settings, given, kind, parameters).seconds(GPU_GFLOPS)
            except ValueError:
                return low
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
        print(f"demo: {precision_line(settings)}", flush=True)
    except Exception:  # the handler will import again and show the error in the page
        log.exception("background import of the core failed")
    finally:
        _CORE_IMPORT.release()  # taken by import_core_in_background (a Lock may be released here)


def precision_line(settings: AppSettings) -> str:
    """The precision models load in here, and why (for the start-up log)."""
    import torch

    from ..engine.precision import decide
    if torch.cuda.is_available():
        return f"models load in {settings.gpu_dtype} on the GPU (DEMO_GPU_DTYPE)"
    if settings.cpu_dtype != "auto":
        return f"models load in {settings.cpu_dtype} on the CPU (DEMO_CPU_DTYPE)"
    chosen = decide("cpu")  # decided here, before any model work, and kept for every model
    return f"CPU precision auto (DEMO_CPU_DTYPE), decided once for every model: {chosen.dtype}; {chosen.why}"


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
        say("starting: importing the model libraries (first request only)")
        _CORE_IMPORT.acquire()
    _CORE_IMPORT.release()


def _checked(fn):
    """The check of every argument of an endpoint (``settings_form.endpoint``'s ``check``), first:
    a value refused there never reaches a share, a batch key, a visitor's count or a model."""
    return getattr(fn, "check", lambda arguments: None)


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


def handler(group: str, error_outputs, runs=None, estimate=None, models=ONE_MASKED_LM, shareable=None,
            batches=False):
    """What every model-running handler gets: messages in its outputs (``error_outputs`` maps the
    message to them), its arguments checked before anything else (an endpoint's), a per-visitor share on a public Space, its answer shared with identical
    requests (:func:`shares`), a turn among the model runs of its ``group`` (:func:`takes_turns`;
    its events' ``concurrency_id`` is the handler's ``.group``), a GPU slot on ZeroGPU (neither
    taken for a shared answer), and a wait for the background import of the core.

    ``runs``, a function of the handler's arguments by name, says how many model runs one call
    makes (default one): each counts against the visitor's share and the GPU time asked for.
    ``estimate(settings, arguments, kind, parameters)`` declares the work of one run (a
    ``budget.Work``) from the request's settings object (``settings_form.endpoint``'s) and its
    arguments, estimated before the model loads, from which ZeroGPU's time is asked (default: the least);
    ``models``: the arguments that name the models one run loads, with the kind each loads as
    (default ``{"model_name": "masked"}``; the work is estimated for each, the answer shared per
    model as loaded). ``shareable(arguments)``: whether the answer is the same for every identical
    request (default :func:`reproducible`). ``batches``: the handler runs its model through
    ``turns.together``, which takes the turn (and gathers distinct requests into one batch); it
    takes none itself unless batching is off.
    """
    def decorate(fn):
        wrapped = shows_errors(error_outputs)(_first(_checked(fn))(_first(_counts_runs(runs))(_first(_core_imported)(
            shares(error_outputs, models, shareable)(takes_turns(group, batches)(on_gpu(fn, runs, estimate, models)))))))
        wrapped.group = group
        return wrapped
    return decorate
