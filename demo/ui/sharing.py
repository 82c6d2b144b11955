"""Identical requests answered once: a handler's answer is shared by every request with its
identity (the endpoint, each model as loaded, every argument; ``demo.evaluation.identity``),
through the app's store of answers (:data:`RESULTS`, ``demo.app.shared_results``). Only what is
the same each time is shared (:func:`reproducible`); the requests that did not compute it see a
line saying when it was computed, in how long, and for how many."""

import functools
import inspect
import time

from ..app.downloads import KEEP_SECONDS
from ..app.shared_results import Abandoned, SharedResults
from ..app_settings import AppSettings
from ..evaluation.identity import model_identity, request_identity
from .common import deployment, message
from .gradio_mends import still_wanted
from .loading import say

# The answers identical requests share, kept less long than the downloads they name
RESULTS = SharedResults(AppSettings().shared_results, max_age_s=KEEP_SECONDS / 2)


def reproducible(arguments: dict) -> bool:
    """Whether a request's answer is the same each time: nothing drawn at random, or drawn from a
    given seed (an empty seed box means a new draw each time)."""
    random = arguments.get("strategy") == "sample" or arguments.get("order") == "random"
    return not random or arguments.get("seed") not in (None, "")


def _models(models: dict, arguments: dict) -> dict:
    """The identity of each model a request loads, by argument name (none for an empty picker:
    that side skips), found without loading it: where it is in memory, the model as loaded
    (``model_identity``); where it is not, as asked for (its name, kind and head, and the
    deployment's precision), so identical requests still share one run while it loads, inside a
    turn, and a request's identity never loads a model outside one."""
    emd, dtype = arguments.get("emd", "auto"), deployment().dtype()
    identities = {}
    for name, kind in models.items():
        if arguments.get(name):
            head = emd if kind == "masked" else "auto"
            lm = deployment().in_memory(str(arguments[name]), kind, emd=head)
            identities[name] = model_identity(lm) if lm is not None else {
                "asked": str(arguments[name]), "kind": kind, "emd": head, "dtype": dtype}
    return identities


def shares(error_outputs, models: dict, shareable=None, said: bool = True):
    """Decorator: the handler's answer shared by identical requests (``demo.app.shared_results``):
    keyed by the request's identity (the endpoint, each of ``models`` as loaded, every argument),
    computed once, and, where ``said``, shown to the others with a line saying so (in the field
    ``error_outputs`` puts messages in). ``shareable(arguments)`` as for :func:`handler`. A
    streaming handler's updates go to the request computing it; the others get its last."""
    return lambda fn: _sharing(fn, error_outputs, models, shareable or reproducible, said)


def _sharing(fn, error_outputs, models: dict, shareable, said: bool):
    signature = inspect.signature(fn)
    noted = functools.partial(_noted, error_outputs=error_outputs) if said else lambda shared: shared.value

    def key_of(args, kwargs) -> str | None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {k: v for k, v in bound.arguments.items() if k != "progress"}
        if not deployment().settings.share_results or not shareable(arguments):
            return None
        return request_identity(fn.__name__, _models(models, arguments), arguments).digest

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def streaming(*args, **kwargs):
            key = key_of(args, kwargs)
            if key is None:
                yield from fn(*args, **kwargs)
                return
            claim = RESULTS.claim(key)
            while not claim.leader:
                try:
                    yield noted(claim.wait(still_wanted, _told))
                    return
                except Abandoned:
                    if not still_wanted():
                        raise
                    claim = RESULTS.claim(key)
            yield from claim.lead(fn(*args, **kwargs))
        return streaming

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        key = key_of(args, kwargs)
        if key is None:
            return fn(*args, **kwargs)
        return noted(RESULTS.get(key, lambda: fn(*args, **kwargs), still_wanted, _told))
    return wrapper


def _told(leader_doing: str) -> None:
    """What a request waiting for an identical one's answer is told (as its progress)."""
    say("Another student asked for this same run just before you: its answer will be yours. "
        + (f"That run is {leader_doing}." if leader_doing else "It is being computed."))


def _noted(shared, error_outputs):
    """A shared answer as this request shows it: computed for it, as it is; otherwise with a line
    in its message field saying when it was computed, how long it took and for how many."""
    if shared.computed:
        return shared.value
    marker = object()
    showing = error_outputs(marker)
    waiting = f", after {shared.waited:.1f} s waiting for its turn" if shared.waited >= 0.05 else ""
    note = message(f"Shared result: computed once at {time.strftime('%H:%M:%S', time.localtime(shared.computed_at))} "
                   f"in {shared.seconds - shared.waited:.1f} s{waiting}, for {shared.served} identical requests so "
                   f"far (the work counts are that run's). Change any setting or input to compute anew.", "note")
    if showing is marker:  # a handler whose one output is its message
        return note + shared.value
    fields = [note + value if shown is marker else value for shown, value in zip(showing, shared.value)]
    return type(shared.value)(*fields) if hasattr(shared.value, "_fields") else type(shared.value)(fields)
