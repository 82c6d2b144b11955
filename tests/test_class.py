"""A class on one app, served in this process so the engine's calls can be counted: students who ask
the same thing at once get one run's answer; a request cancelled while it waits never runs;
distinct rankings that wait together run as one batch, each answered as alone."""

import threading
import time
from contextlib import contextmanager

import pytest

from benchmarks.app_process import free_port
from tests import floats
from tests.conftest import STANDIN_MLM

gradio_client = pytest.importorskip("gradio_client")
pytestmark = pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in MLM) is "
                                "not beside this clone")
PROMPT = "The capital of France is Paris. The capital of Italy is"
HOLD = "Hold the queue: "


@contextmanager
def _serving(release: threading.Event):
    """The app, built and served in this process: its URL; ``release`` set when it closes."""
    from demo.ui.app import build_app, serve
    app = build_app()
    serve(app, server_port=free_port(), quiet=True)
    try:
        yield app.local_url
    finally:
        release.set()
        app.close()


@pytest.fixture
def served(monkeypatch):
    """(the app's URL, the prompts the engine's generate_together() was called with, and ``calls``:
    each call's prompts and settings); a call with a prompt starting with HOLD waits in the engine
    until ``release`` is set."""
    import demo.engine.generation as generation

    prompts, calls, release, real = [], [], threading.Event(), generation.generate_together

    def counted(lm, batch, settings=None, **kwargs):
        prompts.extend(batch)
        calls.append((list(batch), settings))
        if any(prompt.startswith(HOLD) for prompt in batch):
            release.wait(timeout=60)
        return real(lm, batch, settings, **kwargs)
    monkeypatch.setattr(generation, "generate_together", counted)
    with _serving(release) as url:
        yield url, prompts, release, calls


@pytest.fixture
def scoring(monkeypatch):
    """(the app's URL, each call of the engine's score_choices as (rankings, settings, scores));
    a call with a ranking whose context starts with HOLD waits in the engine until ``release``."""
    import demo.engine.pll as pll

    calls, release, real = [], threading.Event(), pll.score_choices

    def counted(lm, choice_sets, settings=None, **kwargs):
        if any(choices[0].context.startswith(HOLD) for choices in choice_sets):
            calls.append((choice_sets, settings, None))
            release.wait(timeout=60)
            return real(lm, choice_sets, settings, **kwargs)
        scores = real(lm, choice_sets, settings, **kwargs)
        calls.append((choice_sets, settings, scores))
        return scores
    monkeypatch.setattr(pll, "score_choices", counted)
    with _serving(release) as url:
        yield url, calls, release


def _request(prompt: str) -> dict:
    return dict(prompt=prompt, model_name=STANDIN_MLM.name, strategy="greedy", max_new_tokens=4, num_beams=1,
                temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0, padding_masks="default",
                stop_at_newline=True, seed=0)


def test_students_asking_the_same_at_once_get_one_runs_answer(served):
    url, prompts, _, _ = served
    students = [gradio_client.Client(url, verbose=False) for _ in range(6)]
    jobs = [s.submit(**_request(PROMPT), api_name="/generate_mlm") for s in students]
    answers = [job.result(timeout=120) for job in jobs]
    assert prompts == [PROMPT]  # the engine ran once for the six
    assert len({a[0] for a in answers}) == 1 and answers[0][0]
    assert sum("Shared result: computed once" in a[1] for a in answers) == 5


def _knows_its_event(job) -> None:
    """Wait until a gradio_client job has its event's id from the server: its ``cancel()`` sends
    that id, and does nothing without it (on busy cores the server can start the request before the
    client has read the id). The client signals nothing when it reads it, so its state is asked
    every 10 ms, for at most a minute."""
    deadline, asked = time.monotonic() + 60, threading.Event()
    while job.communicator.event_id is None:
        assert time.monotonic() < deadline, "the client never learnt its event's id"
        asked.wait(0.01)


def test_a_request_cancelled_while_it_waits_never_runs(served):
    url, prompts, release, _ = served
    from demo.ui.turns import _turns
    kind = _turns("generate")
    first, second = (gradio_client.Client(url, verbose=False) for _ in range(2))
    running = first.submit(**_request(HOLD + PROMPT), api_name="/generate_mlm")
    with kind.changed:  # the first request holds the generating turn
        assert kind.changed.wait_for(lambda: kind.running == 1, timeout=60), "the first request never started"
    waiting = second.submit(**_request("Cancelled: " + PROMPT), api_name="/generate_mlm")
    with kind.changed:  # queued behind the first
        assert kind.changed.wait_for(lambda: len(kind.line) == 1, timeout=60)
    _knows_its_event(waiting)
    waiting.cancel()
    with kind.changed:  # it leaves the line before the turn is free
        assert kind.changed.wait_for(lambda: not kind.line, timeout=60)
    release.set()
    running.result(timeout=120)
    assert prompts == [HOLD + PROMPT]


def test_the_lesson_says_which_steps_are_ready_in_words():
    from demo.ui.warm_up import Progress, line
    assert line(None) == ""
    progress = Progress(["ready", "ready", "computing", "failed: its run answered with a message instead of a result"],
                        started=100.0)
    assert line(progress) == ("Ready in advance: steps 1, 2 of 4; computing step 3 now; not computed in advance: "
                              "step 4 (its run answered with a message instead of a result) (it runs when pressed).")
    progress.loading = "loading smollm2: converting its weights from GGUF on first use, about a minute"
    assert line(progress) == f"Getting the lesson ready: {progress.loading}."
    progress.loading, progress.states, progress.finished = "", ["ready"] * 4, 141.0
    assert line(progress) == ("All 4 steps are ready, computed in advance in 41 s: a class's first press of each "
                              "is answered at once.")


def _behind_a_held_run(url, endpoint: str, arguments: dict, release, group: str, asks: list[tuple]) -> list:
    """A request to ``endpoint`` sent first and held in the engine until ``release`` is set, holding
    its ``group``'s turn; then each of ``asks`` (an endpoint and its arguments, by name or in order)
    from a student of its own, waiting in line for the turn behind it (the line says when each
    comes). Their answers, once the held run is let go."""
    from demo.ui.turns import _turns
    kind = _turns(group)
    running = gradio_client.Client(url, verbose=False).submit(**arguments, api_name=endpoint)
    with kind.changed:  # the first request has the turn
        assert kind.changed.wait_for(lambda: kind.running == 1, timeout=60), "the first request never started"
    jobs = [gradio_client.Client(url, verbose=False).submit(*([] if isinstance(a, dict) else a),
                                                            **(a if isinstance(a, dict) else {}), api_name=e)
            for e, a in asks]
    with kind.changed:  # all of them wait for the turn
        assert kind.changed.wait_for(lambda: len(kind.line) == len(asks), timeout=60)
    release.set()
    running.result(timeout=120)
    return [job.result(timeout=120) for job in jobs]


def test_distinct_generations_waiting_together_run_as_one_batch_each_as_it_is_alone(served):
    """Students' own prompts that wait for the generating turn together are written in one batch,
    each answered with the text it writes alone and told it was batched, with how many."""
    from demo.engine.generation import generate
    from demo.engine.models import load_model
    url, prompts, release, calls = served
    mine = [f"{name} wrote: {PROMPT}" for name in ("Ada", "Grace", "Alan")]
    answers = _behind_a_held_run(url, "/generate_mlm", _request(HOLD + PROMPT), release, "generate",
                                 [("/generate_mlm", _request(p)) for p in mine])
    assert [sorted(batch) for batch, _ in calls] == [[HOLD + PROMPT], sorted(mine)]
    lm, settings = load_model(str(STANDIN_MLM)), calls[1][1]
    for prompt, answer in zip(mine, answers):
        assert answer[0] == generate(lm, prompt, settings).text
        assert "Written in one batch with 2 other requests" in answer[1]


CONTEXT = "My body cast a shadow over the grass because"


def _ranking(context: str) -> dict:
    return dict(context=context, candidates="the sun was rising.\nthe grass was cut.\nthe moon was out.",
                model_name=STANDIN_MLM.name, method="right_masks", right_masks=2, normalize=False,
                scope="completion", unconditional="", answer="")


def test_distinct_rankings_waiting_together_run_as_one_batch_each_as_it_is_alone(scoring):
    import re

    from demo.engine.counting import counting
    from demo.engine.models import load_model
    from demo.engine.pll import score_choices  # the engine's own, not the counted one
    url, calls, release = scoring
    contexts = [f"{name} wrote: {CONTEXT}" for name in ("Ada", "Grace", "Alan")]
    answers = _behind_a_held_run(url, "/rank_mlm", _ranking(HOLD + CONTEXT), release, "score",
                                 [("/rank_mlm", _ranking(c)) for c in contexts])
    assert [len(choice_sets) for choice_sets, *_ in calls] == [1, 3]
    batched, settings, batch_scores = calls[1]
    assert sorted(choices[0].context for choices in batched) == sorted(contexts)
    lm = load_model(str(STANDIN_MLM))
    for choices, scores in zip(batched, batch_scores):
        with counting() as reads:
            [alone] = score_choices(lm, [choices], settings)
        for a, b in zip(alone, scores):
            assert [(t.token, t.position) for t in b.tokens] == [(t.token, t.position) for t in a.tokens]
            assert b.score == floats.total(a.score, len(a.tokens), lm)
        summary = answers[contexts.index(choices[0].context)][0]
        assert "Scored in one batch with 2 other rankings" in summary
        shown = re.search(r"([\d,]+) forward passes · ([\d,]+) tokens read", summary).groups()
        assert [int(n.replace(",", "")) for n in shown] == [reads.passes, reads.tokens]


def test_distinct_fills_waiting_together_run_as_one_batch_each_as_it_is_alone(served, monkeypatch):
    """Students' own texts to fill, waiting for the generating turn together, are filled in one
    batch, each with the fill it gets alone, and told so."""
    import demo.engine.infill as engine_infill
    url, prompts, release, _ = served
    batches, real = [], engine_infill.infill_together

    def counted(lm, texts, settings=None):
        batches.append((list(texts), settings))
        return real(lm, texts, settings)
    monkeypatch.setattr(engine_infill, "infill_together", counted)
    texts = [f"{name} said the capital of France is [blank]." for name in ("Ada", "Grace", "Alan")]
    answers = _behind_a_held_run(url, "/generate_mlm", _request(HOLD + PROMPT), release, "generate",
                                 [("/infill_mlm", (text, STANDIN_MLM.name)) for text in texts])
    assert [sorted(texts_) for texts_, _ in batches] == [sorted(texts)]
    from demo.engine.models import load_model
    lm, settings = load_model(str(STANDIN_MLM)), batches[0][1]
    for text, answer in zip(texts, answers):
        alone = engine_infill.infill(lm, text, settings)
        assert answer[0].endswith(f'is <mark class="demo-fill">{alone.fills[0]}</mark>.</div>')
        assert "Filled in one batch with 2 other requests" in answer[1]
