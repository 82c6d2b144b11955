"""Model runs taking turns (demo.ui.turns), checked with plain threads and a counted ``run_all``:
items that wait together with one key run as one batch; a lone item runs at once; one item's
failure stays its own request's; different keys never share a batch."""

import threading
import types

import pytest

pytest.importorskip("gradio")


class Engine:
    """A ``run_all`` that records each batch it is given, holds while ``hold`` is clear for a batch
    holding "first", and fails every batch holding "bad"."""

    def __init__(self):
        self.batches, self.hold, self.started = [], threading.Event(), threading.Event()

    def __call__(self, items):
        self.batches.append(list(items))
        self.started.set()
        if "first" in items:
            self.hold.wait(timeout=30)
        if "bad" in items:
            raise ValueError("bad item")
        # an item the engine refuses on its own is answered by its error; "short" loses its answer
        answers = [ValueError(f"{item} refused") if item.startswith("refused") else item.upper() for item in items]
        return [a for item, a in zip(items, answers) if item != "short"]


def _asking(group, key, item, engine, answers):
    from demo.ui.turns import together
    try:
        answers[item] = together(group, key, item, engine)
    except (ValueError, RuntimeError) as err:
        answers[item] = err


def _line_holds(group: str, count: int) -> None:
    """Wait until ``count`` requests wait in ``group``'s line (told by the line as each comes)."""
    from demo.ui.turns import _turns
    turns = _turns(group)
    with turns.changed:
        assert turns.changed.wait_for(lambda: len(turns.line) >= count, timeout=30)


def _paced(seconds: float):
    """A pace of runs of one request taking ``seconds`` each."""
    from demo.ui.turns import Pace
    pace = Pace()
    pace.add(1, seconds)
    return pace


def _class_behind_first(group, keyed_items, engine):
    """``first`` running in the engine, then every (key, item) asked while it holds; the answers."""
    answers = {}
    first = threading.Thread(target=_asking, args=(group, "k", "first", engine, answers))
    first.start()
    engine.started.wait(timeout=30)
    others = [threading.Thread(target=_asking, args=(group, key, item, engine, answers)) for key, item in keyed_items]
    for thread in others:
        thread.start()
    _line_holds(group, len(others))  # all of them wait for the turn
    engine.hold.set()
    for thread in [first, *others]:
        thread.join(timeout=30)
    return answers


def test_items_waiting_together_with_one_key_run_as_one_batch():
    engine = Engine()
    answers = _class_behind_first("test-batch", [("k", "a"), ("k", "b"), ("k", "c")], engine)
    assert engine.batches[0] == ["first"] and sorted(engine.batches[1]) == ["a", "b", "c"]
    assert len(engine.batches) == 2
    assert answers == {"first": ("FIRST", 1), "a": ("A", 3), "b": ("B", 3), "c": ("C", 3)}


def test_other_keys_and_no_key_run_apart():
    engine = Engine()
    answers = _class_behind_first("test-keys", [("k", "a"), ("other", "b"), (None, "c"), (None, "d")], engine)
    assert sorted(map(sorted, engine.batches[1:])) == [["a"], ["b"], ["c"], ["d"]]
    assert all(batch == 1 for _, batch in answers.values())


def test_one_items_failure_stays_its_own():
    engine = Engine()
    answers = _class_behind_first("test-fail", [("k", "a"), ("k", "bad"), ("k", "c")], engine)
    assert sorted(engine.batches[1]) == ["a", "bad", "c"]  # failed together, then each alone
    assert sorted(map(sorted, engine.batches[2:])) == [["a"], ["bad"], ["c"]]
    assert isinstance(answers["bad"], ValueError)
    assert answers["a"] == ("A", 1) and answers["c"] == ("C", 1)


def test_an_item_run_all_refuses_is_refused_in_its_own_request_only():
    engine = Engine()
    answers = _class_behind_first("test-refused", [("k", "a"), ("k", "refused-b")], engine)
    assert len(engine.batches) == 2  # one batch: nothing ran again
    assert str(answers["refused-b"]) == "refused-b refused" and answers["a"] == ("A", 2)


def test_a_batch_answered_short_fails_its_requests_instead_of_leaving_them_waiting():
    engine = Engine()
    answers = _class_behind_first("test-short", [("k", "a"), ("k", "short")], engine)
    assert answers["a"] == ("A", 1)  # run again alone once the batch's answers did not add up
    assert "short" in answers and isinstance(answers["short"], Exception)


def test_batches_hold_at_most_the_deployments_size(monkeypatch):
    monkeypatch.setenv("DEMO_BATCH_REQUESTS", "2")
    engine = Engine()
    _class_behind_first("test-size", [("k", x) for x in "abcde"], engine)
    assert sorted(len(b) for b in engine.batches[1:]) == [1, 2, 2]


def test_a_lone_item_runs_at_once_without_batching(monkeypatch):
    from demo.ui.turns import together
    monkeypatch.setenv("DEMO_BATCH_REQUESTS", "1")
    engine = Engine()
    assert together("test-off", "k", "a", engine) == ("A", 1)
    assert engine.batches == [["a"]]


def test_a_waiting_request_is_told_its_place_and_the_wait_at_the_recent_pace(monkeypatch):
    from demo.ui import turns
    said = []
    monkeypatch.setattr(turns, "say", lambda line, done=0.0: said.append((line, done)))
    engine = Engine()
    engine.hold.set()
    turns.together("test-pace", "k", "a", engine)
    assert turns._turns("test-pace").pace.seconds(1) < 1.0  # a run that returns at once
    kind = turns._turns("test-pace")
    kind.pace = _paced(30.0)  # as if runs had taken 30 s each
    kind.paces.clear()
    engine.hold.clear()
    _class_behind_first("test-pace", [(None, "b")], engine)
    assert said == [("Waiting for a turn to run: 1 run ahead of this one, about 30 s", 0.0)]


def test_each_run_ahead_counts_at_its_own_models_pace(monkeypatch):
    """Runs of a slow model ahead of a request make its wait longer than runs of a fast one."""
    from demo.ui import turns
    said, told = [], threading.Condition()

    def say(line, done=0.0):
        with told:
            said.append(line)
            told.notify_all()
    monkeypatch.setattr(turns, "say", say)
    kind = turns._turns("test-paces")
    kind.pace = _paced(2.0)
    kind.paces.update(slow=_paced(30.0), fast=_paced(5.0))
    engine, answers = Engine(), {}
    first = threading.Thread(target=_asking, args=("test-paces", "slow", "first", engine, answers))
    first.start()
    engine.started.wait(timeout=30)
    others = []
    for key, item in [("fast", "b"), ("other", "c")]:  # each asks once the one before it is told
        others.append(threading.Thread(target=_asking, args=("test-paces", key, item, engine, answers)))
        others[-1].start()
        with told:
            assert told.wait_for(lambda: len(said) >= len(others), timeout=30)
    engine.hold.set()
    for thread in [first, *others]:
        thread.join(timeout=30)
    assert said[:2] == ["Waiting for a turn to run: 1 run ahead of this one, about 30 s",
                        "Waiting for a turn to run: 2 runs ahead of this one, about 35 s"]


def test_a_models_first_load_is_left_out_of_the_pace(monkeypatch):
    """A run that loads its model first (tens of seconds, once) sets the pace by its run alone."""
    from demo.ui import loading, turns
    clock = [100.0]
    fake_time = types.SimpleNamespace(perf_counter=lambda: clock[0])
    monkeypatch.setattr(turns, "time", fake_time)
    monkeypatch.setattr(loading, "time", fake_time)
    monkeypatch.setattr(loading, "loading_words", str)
    monkeypatch.setattr(loading, "say", lambda line, done=0.0: None)

    class FirstUse:
        def load(self, name, kind, emd, loading):
            loading()
            clock[0] += 30.0
            return name
    monkeypatch.setattr(loading, "deployment", FirstUse)

    def run_all(items):
        loading.load("a model", "masked")
        clock[0] += 1.5
        return items
    turns.together("test-load", "k", "a", run_all)
    assert turns._turns("test-load").pace.seconds(1) == 1.5


def test_a_request_behind_a_model_loading_for_its_first_use_is_told_so(monkeypatch):
    """No time is said for a turn that loads its model first (its pace is of runs, not loads)."""
    from demo.ui import loading, turns
    said, told, loads, loaded = [], threading.Event(), threading.Event(), threading.Event()
    monkeypatch.setattr(turns, "say", lambda line, done=0.0: (said.append(line), told.set()))
    monkeypatch.setattr(loading, "loading_words", str)
    monkeypatch.setattr(loading, "say", lambda line, done=0.0: loads.set())

    class FirstUse:
        def load(self, name, kind, emd, loading):
            loading()
            loaded.wait(timeout=30)
            return name
    monkeypatch.setattr(loading, "deployment", FirstUse)
    kind = turns._turns("test-loading")
    kind.pace = _paced(1.0)

    def run_all(items):
        if "first" in items:
            loading.load("a model", "masked")
        return items
    first = threading.Thread(target=turns.together, args=("test-loading", "k", "first", run_all))
    first.start()
    assert loads.wait(timeout=30)
    second = threading.Thread(target=turns.together, args=("test-loading", "j", "second", run_all))
    second.start()
    assert told.wait(timeout=30)
    loaded.set()
    for thread in (first, second):
        thread.join(timeout=30)
    assert said == ["Waiting for a turn to run: 1 run ahead of this one, one of them loading its model "
                    "for the first use"]


@pytest.mark.parametrize("running_left, before, runs, expected", [
    ([1.5], [], 1, 1.5),  # the running turn's time left
    ([1.5], [2.0, 1.0], 1, 4.5),  # and two runs after it
    ([], [], 1, 0.0),  # a turn free
    ([1.5], [], 2, 0.0),
    ([1.5], [2.0], 2, 1.5),  # the free turn taken by the one before, the running one ends first
    ([1.5], [2.0, 2.0], 2, 2.0),  # then the one taken at 0 s ends
    ([], [2.0, 1.0, 3.0], 2, 2.0),
])
def test_the_expected_wait_hands_the_turns_on_in_order(running_left, before, runs, expected):
    from demo.ui.turns import expected_wait
    assert expected_wait(running_left, before, runs) == pytest.approx(expected)


def test_requests_in_line_with_one_key_count_as_one_turn_before_a_request():
    """As a batch gathers them: every request with the key of an earlier one runs in its turn, so
    a request whose key is ahead waits only for the turns before that one."""
    from demo.ui.turns import _InLine, _Turns
    kind = _Turns(1)
    kind.pace = _paced(1.0)
    kind.paces.update(k1=_paced(2.0), k2=_paced(3.0))
    a, b, c, alone, d, e = _InLine("k1"), _InLine("k2"), _InLine("k1"), _InLine(None), _InLine("k3"), _InLine("k2")
    kind.line = [a, b, c, alone, d, e]
    assert kind._turns_before(d) == [4.0, 6.0, 1.0]  # k1 twice, k2 twice, the one alone
    assert kind._turns_before(c) == []  # in a's turn
    assert kind._turns_before(e) == [4.0]


def test_a_turns_time_is_a_fixed_part_and_a_part_per_request():
    """Two batch sizes fit a line exactly (1 request 1.0 s, 3 requests 2.0 s: 0.5 s + 0.5 s
    each), whatever their weights; one size alone gives its time per request."""
    from demo.ui.turns import Pace
    pace = Pace()
    pace.add(2, 3.0)
    assert pace.seconds(4) == pytest.approx(6.0)
    pace = Pace()
    for requests, seconds in [(1, 1.0), (3, 2.0), (1, 1.0)]:
        pace.add(requests, seconds)
    assert [pace.seconds(n) for n in (1, 5)] == pytest.approx([1.0, 3.0])


def test_the_paces_of_only_the_recently_used_keys_are_kept():
    """Keys come and go (a drawn seed, a request alone): the paces kept stay bounded."""
    from demo.ui.turns import PACES_KEPT, _Running, _Turns
    kind = _Turns(1)
    for n in range(PACES_KEPT + 10):
        kind.taken.append(_Running(("alone", n), 0.0))
        kind.give_back(1.0, 1, ("alone", n))
    assert len(kind.paces) == PACES_KEPT and ("alone", PACES_KEPT + 9) in kind.paces and ("alone", 0) not in kind.paces


def test_a_wait_is_said_in_tenths_under_ten_seconds():
    from demo.ui.turns import about
    assert [about(s) for s in (0.3, 4.26, 31.4)] == ["less than a second", "about 4.3 s", "about 31 s"]


def test_waiting_requests_take_their_turns_in_the_order_they_came():
    """First come, first served: requests that wait for a kind's one turn run in the order they
    asked, not in whichever order their threads wake."""
    from demo.ui import turns
    order, hold = [], threading.Event()

    @turns.takes_turns("test-order")
    def run(name):
        order.append(name)
        if name == "first":
            hold.wait(timeout=30)
    threads = [threading.Thread(target=run, args=("first",))]
    threads[0].start()
    kind = turns._turns("test-order")
    with kind.changed:  # the first has its turn before any other asks
        assert kind.changed.wait_for(lambda: kind.running == 1, timeout=30)
    for i in range(8):  # each asks once the one before it is in line
        threads.append(threading.Thread(target=run, args=(f"r{i}",)))
        threads[-1].start()
        _line_holds("test-order", i + 1)
    hold.set()
    for thread in threads:
        thread.join(timeout=30)
    assert order == ["first"] + [f"r{i}" for i in range(8)]
