"""Identical requests computed once: a class pressing Run on the same lesson step shares one run.

A request's key is its run identity (``demo.evaluation.identity.request_identity``: the endpoint,
each model as loaded, every argument). :meth:`SharedResults.get` runs ``compute()`` for the first
request of a key and hands its answer to every identical request: those arriving while it runs
wait for it (single flight, as a CDN collapses requests for one object), those arriving later get
the stored answer. Only deterministic work is shared (the caller says which: greedy, beams,
seeded sampling); a run cut short by the time limit (:func:`cut_short`) is handed to those
waiting for it but not kept. At most ``max_entries`` answers are kept, the least recently used
dropped first, but those computed :func:`pinned` (a lesson computed in advance) stay;
:meth:`forget` drops them all (a teacher asking for fresh runs).

No library does this for us: Gradio caches examples, not requests, and functools' caches neither
wait for a call in flight nor say who shared an answer.
"""

import copy
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

WANTED_POLL_S = 0.2  # how often a request waiting for an identical one's answer asks if it is still wanted
# set by a handler whose run stopped early (a time limit): its answer is not kept for others
_CUT_SHORT: ContextVar[list | None] = ContextVar("cut_short", default=None)
# set around work whose answers stay until forgotten (pinned): a lesson computed in advance
_PINNING: ContextVar[bool] = ContextVar("pinning", default=False)
# the entry a leader computes: where it reports its waits and what it is doing, for those waiting on it
_COMPUTING: ContextVar["_Entry | None"] = ContextVar("computing", default=None)


@contextmanager
def pinned():
    """Answers first computed inside are kept until :meth:`SharedResults.forget`, however many
    others come after (what a lesson will ask, computed before the class asks)."""
    token = _PINNING.set(True)
    try:
        yield
    finally:
        _PINNING.reset(token)


def waited(seconds: float) -> None:
    """Say that the request being computed waited ``seconds`` (for a turn at the model): its
    answer's time is told apart from its waiting."""
    entry = _COMPUTING.get()
    if entry is not None:
        entry.waited += seconds


def doing(line: str) -> None:
    """Say what the request being computed is doing now ("waiting: 2 runs ahead"): the identical
    requests waiting for its answer are told (:meth:`Claim.wait`)."""
    entry = _COMPUTING.get()
    if entry is not None:
        entry.doing = line


def cut_short() -> None:
    """Say that the request being computed stopped early, so its answer is not stored."""
    flags = _CUT_SHORT.get()
    if flags is not None:
        flags.append(True)


@dataclass
class Shared:
    """An answer and how it was had: ``computed_at`` (wall clock), ``seconds`` it took, of which
    ``waited`` waiting for a turn, how many requests it has ``served`` (the first included), and
    whether this request ``computed`` it."""
    value: Any
    computed_at: float
    seconds: float
    served: int
    computed: bool
    waited: float = 0.0


class Abandoned(Exception):
    """The request computing an answer went away before it finished (its client left)."""


def own_copy(error: BaseException) -> BaseException:
    """An error handed to several waiting requests, as one of them raises it: a copy of its own,
    so one request's traceback and context are never written into the others'."""
    try:
        return copy.copy(error)
    except Exception:  # noqa: BLE001 (an exception class that cannot be copied: its message)
        return RuntimeError(str(error))


@dataclass
class _Entry:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None
    computed_at: float = 0.0
    started: float = 0.0
    seconds: float = 0.0
    waited: float = 0.0  # of the seconds, those spent waiting for a turn
    doing: str = ""  # what the leader says it is doing now
    served: int = 0
    cut_short: list = field(default_factory=list)
    pinned: bool = False


@dataclass
class Claim:
    """A request's place for ``key``: the ``leader`` computes it (then :meth:`finish` or
    :meth:`fail`), every other request :meth:`wait`s for the leader's answer."""
    results: "SharedResults"
    key: str
    entry: _Entry
    leader: bool

    @contextmanager
    def computing(self):
        """Open around (each part of) the leader's work: :func:`cut_short` inside it marks the
        answer as not to be kept. The clock starts the first time."""
        if not self.entry.started:
            self.entry.started, self.entry.computed_at = time.perf_counter(), time.time()
        token, computing = _CUT_SHORT.set(self.entry.cut_short), _COMPUTING.set(self.entry)
        try:
            yield
        finally:
            _COMPUTING.reset(computing)
            _CUT_SHORT.reset(token)

    def lead(self, updates: Iterator) -> Iterator:
        """The leader's streamed ``updates`` passed on, the last one its answer. Each update is
        computed in a context of its own (a server may run each in another thread), so each is
        opened with :meth:`computing`. If the consumer stops early (its client left), the
        requests waiting get :class:`Abandoned` and one of them computes it anew."""
        last, settled = None, False
        try:
            while True:
                try:
                    with self.computing():
                        last = next(updates)
                except StopIteration:
                    settled = True
                    self.finish(last)
                    return
                except BaseException as err:
                    settled = True
                    self.fail(err)
                    raise
                yield last
        finally:
            if not settled:
                self.fail(Abandoned())

    def finish(self, value) -> Shared:
        self.entry.value = value
        return self.results._settle(self, computed=True)

    def fail(self, error: BaseException) -> None:
        self.entry.error = error
        self.results._settle(self, computed=True)

    def wait(self, wanted: Callable[[], bool] = lambda: True,
             told: Callable[[str], None] = lambda line: None) -> Shared:
        """The leader's answer (raises the leader's error; :class:`Abandoned` if it went away, or
        if ``wanted()`` turns false while waiting: this request's own client left). ``told(line)``
        whenever the leader says what it is doing (:func:`doing`), first at once."""
        said = None
        while True:
            if self.entry.doing != said:
                said = self.entry.doing
                told(said)
            if self.entry.done.wait(WANTED_POLL_S):
                break
            if not wanted():
                raise Abandoned()
        if self.entry.error is not None:
            raise own_copy(self.entry.error)
        return self.results._settle(self, computed=False)


class SharedResults:
    """Answers by key, each computed once (see the module's docstring)."""

    def __init__(self, max_entries: int, max_age_s: float = float("inf")):
        self.max_entries, self.max_age_s = max_entries, max_age_s
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.computed = 0  # answers computed (not shared), for tests and the benchmark

    def claim(self, key: str) -> Claim:
        """This request's :class:`Claim` on ``key``: the leader's if no answer is stored or being
        computed (or the stored one is older than ``max_age_s``)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.done.is_set() and time.time() - entry.computed_at > self.max_age_s:
                entry = None
            leader = entry is None
            if leader:
                entry = self._entries[key] = _Entry(pinned=_PINNING.get())
            self._entries.move_to_end(key)
            return Claim(self, key, entry, leader)

    def get(self, key: str, compute: Callable[[], Any], wanted: Callable[[], bool] = lambda: True,
            told: Callable[[str], None] = lambda line: None) -> Shared:
        """The answer for ``key``: computed now, awaited from the identical request computing it,
        or the stored one. An error is raised to every request that waited for that run, and not
        stored (the next request tries again); if the leader went away, a waiting request
        computes it itself. A request whose ``wanted()`` turns false stops waiting
        (:class:`Abandoned`); one waiting is ``told`` what the leader does (:meth:`Claim.wait`)."""
        while True:
            claim = self.claim(key)
            if not claim.leader:
                try:
                    return claim.wait(wanted, told)
                except Abandoned:
                    if not wanted():
                        raise
                    continue
            try:
                with claim.computing():
                    value = compute()
            except BaseException as err:
                claim.fail(err)
                raise
            return claim.finish(value)

    def _settle(self, claim: Claim, computed: bool) -> Shared:
        entry = claim.entry
        with self._lock:
            entry.served += entry.error is None
            if computed:
                self.computed += 1
                entry.seconds = time.perf_counter() - entry.started
                if entry.error is not None or entry.cut_short or self.max_entries <= 0:
                    if self._entries.get(claim.key) is entry:  # those waiting still get it; later ones compute
                        del self._entries[claim.key]
                self._bound()
                entry.done.set()
            return Shared(entry.value, entry.computed_at, entry.seconds, entry.served, computed, entry.waited)

    def _bound(self) -> None:
        """Drop the least recently used answers beyond ``max_entries``; pinned answers and runs in
        flight stay (they may keep it above the bound)."""
        excess = len(self._entries) - self.max_entries
        for key in [k for k, e in self._entries.items() if e.done.is_set() and not e.pinned][:max(excess, 0)]:
            del self._entries[key]

    def ready(self, key: str) -> bool:
        """Whether an answer for ``key`` is stored."""
        with self._lock:
            entry = self._entries.get(key)
            return entry is not None and entry.done.is_set()

    def forget(self) -> int:
        """Drop every stored answer (runs in flight finish for those waiting); how many were dropped."""
        with self._lock:
            stored = [key for key, entry in self._entries.items() if entry.done.is_set()]
            for key in stored:
                del self._entries[key]
            return len(stored)
