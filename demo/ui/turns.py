"""Model runs take turns: at most ``AppSettings.concurrency`` at a time of each kind (generating,
scoring, probing, so a long grid never holds up a ranking). Gradio's queue lets more requests of a
kind in at once (``AppSettings.answers_at_once``), so shared answers and refusals go out while a
model runs; only the requests that run a model wait here, told their place, and one cancelled or
left by its client meanwhile never runs.

Distinct requests that wait together and can run as one batch (the same model and settings,
other texts) take one turn together (:func:`together`): what continuous batching does in
text-generation servers, here at the granularity of a whole request, since the engine's batched
paths already give each row the answer it gets alone. Alone, a request runs at once; only those
that would have waited anyway are gathered, and they are answered together (the first in line
later than alone, the last sooner, all of them sooner on the whole).
"""

import functools
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from ..app.shared_results import Abandoned, doing, own_copy, waited
from .common import deployment, message
from .gradio_mends import still_wanted
from .loading import loading_now, loading_seconds, say

POLL_S = 0.1  # how often a waiting request asks whether its client still wants it
PACES_KEPT = 64  # batch keys whose recent turns are kept for the estimate (the least recently used go)


class Cancelled(Abandoned):
    """The request was cancelled, or its client left, while it waited for its turn (an identical
    request waiting for its answer computes it instead)."""


def on_zerogpu() -> bool:
    """Whether this is a ZeroGPU Space (the ``spaces`` package says so). There each request runs
    in a GPU worker of its own, so requests are not gathered into batches."""
    try:
        import spaces.config
    except ImportError:
        return False
    return bool(spaces.config.Config.zero_gpu)


def batching() -> bool:
    """Whether distinct requests that wait together run as one batch (:func:`together`)."""
    return deployment().settings.batch_requests > 1 and not on_zerogpu()


@dataclass(eq=False)
class _Waiting:
    """A request's item waiting to run in a batch, and, once run, its answer or error."""
    item: object
    done: threading.Event = field(default_factory=threading.Event)
    answer: object = None
    error: BaseException | None = None
    batch: int = 0  # requests in the batch it ran in

    def result(self):
        if self.error is not None:
            raise own_copy(self.error)
        return self.answer, self.batch


class Pace:
    """A turn's seconds as a fixed part plus a part per request in its batch (one alone costs more
    than its share of a batch), fitted by least squares to the recent turns, each turn weighing
    0.7 of the one after it. Hand-written: five running sums, where a regression library would
    refit over a kept history on every turn."""

    def __init__(self):
        self.weight = self.requests = self.squares = self.seconds_sum = self.products = 0.0

    def add(self, requests: int, seconds: float) -> None:
        self.weight = 0.7 * self.weight + 1
        self.requests = 0.7 * self.requests + requests
        self.squares = 0.7 * self.squares + requests ** 2
        self.seconds_sum = 0.7 * self.seconds_sum + seconds
        self.products = 0.7 * self.products + requests * seconds

    def seconds(self, requests: int) -> float:
        """The expected seconds of a turn of ``requests`` (proportional while one batch size has
        been seen)."""
        mean_requests, mean_seconds = self.requests / self.weight, self.seconds_sum / self.weight
        spread = self.squares / self.weight - mean_requests ** 2
        if spread < 1e-6 * mean_requests ** 2:
            return mean_seconds * requests / mean_requests
        each = max((self.products / self.weight - mean_requests * mean_seconds) / spread, 0.0)
        return max(mean_seconds - each * mean_requests, 0.0) + each * requests


@dataclass(eq=False)
class _InLine:
    """A request waiting in line for a turn, with its batch key (None: its handler's own)."""
    key: Hashable = None


@dataclass(eq=False)
class _Running:
    """A turn running: its batch key, the seconds it is expected to take, when it began and in
    which thread (where a model it loads for the first use is loaded)."""
    key: Hashable
    expected: float
    began: float = field(default_factory=time.perf_counter)
    thread: int = field(default_factory=threading.get_ident)

    def left(self) -> float:
        return max(self.expected - (time.perf_counter() - self.began), 0.0)


class _Turns:
    """A kind's turns: how many run, the requests waiting for one in the order they came, and the
    items waiting to be batched, by key."""

    def __init__(self, runs: int):
        self.runs = runs
        self.taken: list[_Running] = []  # the turns running now
        self.line: list[_InLine] = []  # the requests waiting for a turn, first come first
        self.changed = threading.Condition()  # a turn given back, a request come or gone, or a batch run
        self.waiting: dict[Hashable, list[_Waiting]] = {}
        self.pace = Pace()  # the kind's recent turns
        self.paces: OrderedDict[Hashable, Pace] = OrderedDict()  # the recent turns of each batch key, last used last

    @property
    def running(self) -> int:
        return len(self.taken)

    def take(self, answered: Callable[[], bool] = lambda: False, key: Hashable = None) -> bool:
        """True once a turn is this request's (first come, first served); False if ``answered()``
        comes true first (a batch ran its item). :class:`Cancelled` if nobody waits for the
        request any more. ``key``: its batch key, whose runs' pace its wait is estimated from."""
        me, began = _InLine(key), time.perf_counter()
        with self.changed:
            first = self.running + len(self.line)  # the runs ahead of this one when it came
            self.line.append(me)
            self.changed.notify_all()  # (for whoever watches the line)
        with self.changed:
            try:
                told = None
                while not answered() and not self._mine(me):
                    if not still_wanted():
                        raise Cancelled()
                    ahead = self.running + self.line.index(me)
                    if ahead != told:
                        told = ahead
                        self._tell(ahead, first, self._turns_before(me))
                    self.changed.wait(POLL_S)
                if answered():
                    return False
                if not still_wanted():
                    raise Cancelled()
                self.taken.append(_Running(key, self._seconds(key, max(len(self.waiting.get(key, [])), 1))))
                return True
            finally:
                self.line.remove(me)
                self.changed.notify_all()  # the next in line may go, or move up
                waited(time.perf_counter() - began)

    def _tell(self, ahead: int, first: int, before: list[float]) -> None:
        """Tell the waiting request its place (and those waiting for the same answer, where it
        is shared): the runs ahead of it and, once runs have been timed, about how long (the
        running turns' time left, then the ``before`` turns in line)."""
        runs = f"{ahead} run{'' if ahead == 1 else 's'}"
        if any(loading_now(turn.thread) for turn in self.taken):
            wait = ", one of them loading its model for the first use"
        elif not self.pace.weight:
            wait = ""
        else:
            wait = ", " + about(expected_wait([turn.left() for turn in self.taken], before, self.runs))
        say(f"Waiting for a turn to run: {runs} ahead of this one{wait}", done=(first - ahead) / max(first, 1))
        doing(f"waiting for its turn: {runs} ahead of it{wait}")

    def _seconds(self, key: Hashable, requests: int) -> float:
        """The expected seconds of a turn of ``requests`` with batch key ``key`` (0 before any run
        is timed: no wait is said then)."""
        pace = self.paces.get(key, self.pace)
        return pace.seconds(requests) if pace.weight else 0.0

    def _turns_before(self, me: "_InLine") -> list[float]:
        """The expected seconds of each turn to be taken before ``me``'s, in order: the requests
        in line with one batch key run in the turn of the first of them (as :meth:`gather`
        takes them), at its key's pace; a request without a key takes a turn alone."""
        turns: dict[Hashable, list[Hashable]] = {}  # each turn's requests' keys
        for other in self.line:
            turns.setdefault(other if other.key is None else other.key, []).append(other.key)
        order = list(turns)
        return [self._seconds(turns[turn][0], len(turns[turn]))
                for turn in order[:order.index(me if me.key is None else me.key)]]

    def _mine(self, me: "_InLine") -> bool:
        """Whether ``me`` is among the first in line for the turns free now."""
        return self.line.index(me) < self.runs - self.running

    def give_back(self, seconds: float, requests: int = 1, key: Hashable = None) -> None:
        """The turn back, after ``seconds`` of model run for ``requests`` requests with batch key
        ``key`` (a model's first load left out: :func:`run_clock`)."""
        with self.changed:
            if requests:  # (none: a batch had run its item before its turn came)
                self.pace.add(requests, seconds)
                self.paces.setdefault(key, Pace()).add(requests, seconds)
                self.paces.move_to_end(key)
                if len(self.paces) > PACES_KEPT:  # (keys come and go: a drawn seed, a lone request)
                    self.paces.popitem(last=False)
            self.taken.remove(next(turn for turn in self.taken if turn.key == key))  # (the key's oldest)
            self.changed.notify_all()

    def gather(self, key: Hashable, mine: _Waiting, most: int) -> list[_Waiting]:
        """``mine`` and up to ``most - 1`` items waiting with the same key, taken out of the wait
        (empty if a batch already took ``mine``)."""
        with self.changed:
            waiting = self.waiting.get(key, [])
            if mine not in waiting:
                return []
            batch = [mine] + [w for w in waiting if w is not mine][:most - 1]
            rest = [w for w in waiting if w not in batch]
            if rest:
                self.waiting[key] = rest
            else:
                del self.waiting[key]
            return batch

    def drop(self, key: Hashable, mine: _Waiting) -> None:
        with self.changed:
            if mine in self.waiting.get(key, []):
                self.waiting[key].remove(mine)
                if not self.waiting[key]:
                    del self.waiting[key]


def run_clock() -> float:
    """Seconds of this thread's model runs: a clock that stops while a model loads for its first
    use (tens of seconds, once), which would set the pace of the runs after it."""
    return time.perf_counter() - loading_seconds()


def expected_wait(running_left: list[float], before: list[float], runs: int) -> float:
    """Seconds until a turn is free for a request waiting in line: the turns running now end in
    ``running_left`` seconds, the requests before it in line each take theirs of ``before`` in
    order, and there are ``runs`` turns."""
    free_at = sorted(running_left + [0.0] * (runs - len(running_left)))
    for seconds in before:
        free_at = sorted(free_at[1:] + [free_at[0] + seconds])
    return free_at[0]


def about(seconds: float) -> str:
    """A wait in words: tenths under ten seconds, where a class's turns are counted."""
    if seconds < 0.5:
        return "less than a second"
    return f"about {seconds:.1f} s" if seconds < 10 else f"about {round(seconds)} s"


_KINDS: dict[str, _Turns] = {}
_KINDS_LOCK = threading.Lock()


def _turns(group: str) -> _Turns:
    with _KINDS_LOCK:
        if group not in _KINDS:
            _KINDS[group] = _Turns(deployment().settings.concurrency)
        return _KINDS[group]


def takes_turns(group: str, batches: bool = False):
    """Decorator: the handler runs when its ``group`` has a free turn; a streaming one holds its
    turn until its last update or until its client leaves. With ``batches``, a handler that runs
    its model through :func:`together` takes no turn itself while :func:`batching` is on."""
    def decorate(fn):
        if inspect.isgeneratorfunction(fn):
            assert not batches, "a streaming handler's updates go to its own request: it is not batched"

            @functools.wraps(fn)
            def streaming(*args, **kwargs):
                turns = _turns(group)
                turns.take()
                began = run_clock()
                try:
                    yield from fn(*args, **kwargs)
                finally:
                    turns.give_back(run_clock() - began)
            return streaming

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if batches and batching():
                return fn(*args, **kwargs)
            turns = _turns(group)
            turns.take()
            began = run_clock()
            try:
                return fn(*args, **kwargs)
            finally:
                turns.give_back(run_clock() - began)
        return wrapper
    return decorate


def together(group: str, key: Hashable | None, item, run_all: Callable[[list], list]) -> tuple[object, int]:
    """(``item``'s answer, how many requests ran in its batch): ``run_all(items)`` returns one
    answer per item, each the one it gets alone. Requests of ``group`` waiting for a turn with the
    same ``key`` (None: never batched) run as one batch (at most ``AppSettings.batch_requests``),
    in one turn. An answer that is an exception is raised in its request alone; a failing batch
    runs its items again one by one, so an error is only its own request's. Without
    :func:`batching` the caller's handler holds its turn already (its ``handler(batches=True)``
    took one), and the item runs alone."""
    mine = _Waiting(item)
    if not batching():
        _run([mine], run_all)
        return mine.result()
    turns = _turns(group)
    key = ("alone", id(mine)) if key is None else key
    with turns.changed:
        turns.waiting.setdefault(key, []).append(mine)
    try:
        if not turns.take(answered=mine.done.is_set, key=key):
            return mine.result()
    except BaseException:
        turns.drop(key, mine)
        raise
    began, batch = run_clock(), []
    try:
        batch = turns.gather(key, mine, deployment().settings.batch_requests)
        if batch:
            _run(batch, run_all)
    finally:
        turns.drop(key, mine)  # (not gathered: nobody runs it for a request that failed first)
        turns.give_back(run_clock() - began, len(batch), key)
    mine.done.wait()  # run by this batch, or by one that took it before this turn came
    return mine.result()


def batch_note(batch: int, seconds: float, verb: str, batchable: bool = True) -> str:
    """Said under an answer ``verb`` ("Written", "Filled") in one batch with other requests, or
    that could not be batched (HTML; empty where it ran alone as any request would)."""
    if batch == 1:
        return "" if batchable or not batching() else message(
            "Beam search, the prefix cache and parallel unmasking write one request at a time: requests of "
            "others waiting at the same time are not batched with this one.", "note")
    others = f"{batch - 1} other request{'' if batch == 2 else 's'}"
    return message(f"{verb} in one batch with {others} of this model and settings, waiting at the same time: "
                   f"{seconds:.2f} s for all of them. Its answer is what it gets alone; the work counts are its own.",
                   "note")


def _run(batch: list[_Waiting], run_all: Callable[[list], list]) -> None:
    try:
        answers = run_all([w.item for w in batch])
        if len(answers) != len(batch):
            raise RuntimeError(f"run_all gave {len(answers)} answers for {len(batch)} items")
    except BaseException as err:
        if len(batch) > 1 and isinstance(err, Exception):  # one request's failure is not the others'
            for w in batch:
                _run([w], run_all)
            return
        answers = [None] * len(batch)
        for w in batch:
            w.error = err
    for w, answer in zip(batch, answers):
        w.answer, w.batch = answer, len(batch)
        if isinstance(answer, Exception):  # an item refused on its own (run_all's way of saying so)
            w.error = answer
        w.done.set()
