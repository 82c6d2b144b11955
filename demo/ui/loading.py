"""The page's one way to load a model (:func:`load`), and what a request waiting is told
(:func:`say`): the words show as the request's progress in the page."""

import threading
import time

from gradio.context import LocalContext  # the request being served (Gradio sets it per event)

from .common import deployment

_LOADS = threading.local()  # the seconds each thread has spent loading models for their first use
_LOADING_NOW: set[int] = set()  # the threads loading a model for its first use now


def say(line: str, done: float = 0.0) -> None:
    """Show ``line`` as the request's progress in the output it fills (``done``: the share of
    the wait behind it, which Gradio draws as a bar; without one Gradio shows no line at all).
    It stays until the request's next line or first counted step (a model's "Loading weights",
    generation's steps)."""
    progress = LocalContext.progress.get(None)  # the handler's, set by Gradio for this request
    if progress is not None:
        progress(done, desc=line)


def load(name: str, kind: str | None, emd: str = "auto"):
    """Load a model from the picker's value (a catalog entry or what the user typed); ``kind``
    "masked" or "causal", or None for the model's natural kind; ``emd`` as the
    :func:`emd_radio` says. The deployment says which names the page may load
    (``demo.app.deployment``)."""
    if emd not in ("auto", "off"):
        raise ValueError("The DeBERTa head is 'auto' (the enhanced mask decoder, where the checkpoint "
                         "holds what it needs) or 'off' (the last layer, as transformers reads it).")
    began, loaded = time.perf_counter(), []

    def loading():  # only when the model is not in memory (a first request waits tens of seconds for it)
        loaded.append(True)
        _LOADING_NOW.add(threading.get_ident())
        say(loading_words(name))
    try:
        return deployment().load(name, kind, emd=emd, loading=loading)
    finally:
        if loaded:
            _LOADING_NOW.discard(threading.get_ident())
            _LOADS.seconds = loading_seconds() + time.perf_counter() - began


def loading_now(thread: int) -> bool:
    """Whether ``thread`` (an ident) is loading a model for its first use now."""
    return thread in _LOADING_NOW


def loading_seconds() -> float:
    """Seconds this thread has spent loading models for their first use (``turns.run_clock``
    leaves them out of a run's pace)."""
    return getattr(_LOADS, "seconds", 0.0)


def loading_words(name: str) -> str:
    """What a request waiting for a model's first load is told."""
    name = str(name).strip()
    if name.endswith(".gguf") or deployment().catalog.location(name).endswith(".gguf"):
        return f"loading {name}: converting its weights from GGUF on first use, about a minute"
    return f"loading {name} (first use)"
