"""Wiring shared by the tabs: model pickers, loading with readable errors, GPU decorator.

Every event handler is wrapped by :func:`shows_errors`: a ValueError from the core (bad input,
model that cannot load, text too long) becomes a message in the page (``gr.Error``); anything
unexpected is logged on the server and shown as a short message, never as a stack trace, and
the app keeps serving.
"""

import functools
import json
import logging
import threading
import time
from pathlib import Path

import gradio as gr

from ..catalog import Catalog

ASSETS = Path(__file__).resolve().parents[2] / "assets"
log = logging.getLogger("demo.ui")


def shows_errors(fn):
    """Turn exceptions into page messages (gr.Error); keep the signature for gr.Progress."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except ValueError as err:  # the core's way of saying "bad input", worded for people
            raise gr.Error(str(err), title="Cannot do that", print_exception=False) from None
        except MemoryError:
            raise gr.Error("Out of memory: pick a smaller model or a shorter input.") from None
        except Exception as err:  # a bug or a broken model: log it, say it briefly, keep serving
            if "out of memory" in str(err).lower():
                raise gr.Error("Out of memory: pick a smaller model or a shorter input.") from None
            log.exception("handler %s failed", fn.__name__)
            raise gr.Error(f"Something went wrong ({type(err).__name__}: {str(err)[:300]}). "
                           f"Try another input or model; the app keeps working.") from None

    return wrapper


def on_gpu(fn):
    """ZeroGPU's ``spaces.GPU`` when that package is installed (a Space), else the function itself.

    On other machines ``demo.models.load_model`` already puts models on CUDA when there is one.
    """
    try:
        import spaces
    except ImportError:
        return fn
    return spaces.GPU(duration=120)(fn)


# The app imports torch and the engines in a background thread once the page is served
# (import_core_in_background). A request arriving meanwhile must wait: importing transformers from
# two threads at once can fail ("cannot import name 'AutoConfig'") on its lazy module.
_CORE_IMPORT = threading.Lock()


CORE_READY_MESSAGE = "demo: core imported"  # printed once done (benchmarks/bench_app.py waits for it)


def _import_core() -> None:
    start = time.perf_counter()
    try:
        from .. import generation, haystack, models, pll  # noqa: F401
        print(f"{CORE_READY_MESSAGE} in {time.perf_counter() - start:.1f} s", flush=True)
    except Exception:  # the handler will import again and show the error in the page
        log.exception("background import of the core failed")
    finally:
        _CORE_IMPORT.release()  # taken by import_core_in_background (a Lock may be released here)


def import_core_in_background() -> threading.Thread:
    """Start importing torch, transformers and the engines; handlers wait until it is done."""
    _CORE_IMPORT.acquire()  # taken before the thread starts: no request can slip in between
    thread = threading.Thread(target=_import_core, name="import-core", daemon=True)
    thread.start()
    return thread


def _wait_for_core(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _CORE_IMPORT:
            pass
        return fn(*args, **kwargs)

    return wrapper


def handler(fn):
    """What every model-running handler gets: page errors, a GPU slot on ZeroGPU, and a wait for
    the background import of the core."""
    return shows_errors(_wait_for_core(on_gpu(fn)))


def load(name: str, kind: str | None):
    """Load a model from the picker's value (a catalog entry or what the user typed); ``kind``
    "masked" or "causal", or None for the model's natural kind."""
    from ..models import REMOTE_CODE_ALLOWLIST, load_model  # torch: imported on first use

    if not name or not str(name).strip():
        raise ValueError("Pick a model first.")
    name = str(name).strip()
    return load_model(name, kind=kind, trust_remote_code=name in REMOTE_CODE_ALLOWLIST)


def model_picker(catalog: Catalog, kind: str, label: str, elem_id: str, with_none: bool = False,
                 any_kind: bool = False):
    """Dropdown of the catalog's models of ``kind`` (first, and the default) or, with
    ``any_kind``, followed by those of the other kind; a Hub id or local path may be typed in."""
    other = "causal" if kind == "masked" else "masked"
    choices = catalog.choices(kind) + (catalog.choices(other) if any_kind else [])
    if with_none:
        choices = choices + [("(none: skip this side)", "")]
    what = "masked LM (BERT-like)" if kind == "masked" else "causal LM (GPT-like)"
    if any_kind:
        what += " or any other masked or causal LM"
    return gr.Dropdown(
        choices=choices, value=catalog.default(kind).name, label=label, elem_id=elem_id,
        allow_custom_value=True, filterable=True,
        info=f"A {what}. 'local' models load offline; Hub models download on first use. "
             f"You may also type a Hub id or a local folder path.")


def model_note(lm) -> str:
    """One line under an output: which model, how big, where it runs."""
    where = "local" if lm.local else "Hub"
    return (f"`{Path(lm.name).name if lm.local else lm.name}` · {lm.kind} · {lm.family.name} · "
            f"{lm.n_parameters / 1e6:,.0f}M parameters · {where} · {lm.device.type}")


def read_presets(name: str) -> list[dict]:
    """The presets of ``assets/presets/<name>.json`` (an empty list if the file is missing)."""
    path = ASSETS / "presets" / f"{name}.json"
    if not path.is_file():
        return []
    return json.loads(path.read_text(encoding="utf-8"))["presets"]
