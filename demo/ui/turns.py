"""Model runs take turns: at most ``AppSettings.concurrency`` at a time of each kind (generating,
scoring, probing, so a long grid never holds up a ranking). Gradio's queue lets more requests of a
kind in at once (``AppSettings.answers_at_once``), so shared answers and refusals go out while a
model runs; only the requests that run a model wait here, told their place, and one cancelled or
left by its client meanwhile never runs."""

import functools
import inspect
import threading

from ..app.shared_results import Abandoned
from .common import deployment
from .gradio_mends import still_wanted
from .loading import say


class Cancelled(Abandoned):
    """The request was cancelled, or its client left, while it waited for its turn (an identical
    request waiting for its answer computes it instead)."""


class _Turns:
    """A kind's turns: a semaphore, and how many requests hold or wait for one."""

    def __init__(self, runs: int):
        self.free = threading.BoundedSemaphore(runs)
        self.lock = threading.Lock()
        self.asking = 0  # running or waiting

    def take(self) -> None:
        """A turn, once free (:class:`Cancelled` if nobody waits for the request any more)."""
        with self.lock:
            ahead, self.asking = self.asking, self.asking + 1
        try:
            if not self.free.acquire(blocking=False):
                say(f"waiting for its turn: {ahead} request{'' if ahead == 1 else 's'} of this kind "
                    f"ahead, running or waiting")
                while not self.free.acquire(timeout=0.1):
                    if not still_wanted():
                        raise Cancelled()
            if not still_wanted():
                self.free.release()
                raise Cancelled()
        except BaseException:
            self._left()
            raise

    def give_back(self) -> None:
        self.free.release()
        self._left()

    def _left(self) -> None:
        with self.lock:
            self.asking -= 1


_KINDS: dict[str, _Turns] = {}
_KINDS_LOCK = threading.Lock()


def _turns(group: str) -> _Turns:
    with _KINDS_LOCK:
        if group not in _KINDS:
            _KINDS[group] = _Turns(deployment().settings.concurrency)
        return _KINDS[group]


def takes_turns(group: str):
    """Decorator: the handler runs when its ``group`` has a free turn; a streaming one holds its
    turn until its last update or until its client leaves."""
    def decorate(fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def streaming(*args, **kwargs):
                turns = _turns(group)
                turns.take()
                try:
                    yield from fn(*args, **kwargs)
                finally:
                    turns.give_back()
            return streaming

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            turns = _turns(group)
            turns.take()
            try:
                return fn(*args, **kwargs)
            finally:
                turns.give_back()
        return wrapper
    return decorate
