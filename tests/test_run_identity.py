"""Nothing mixed: every command that saves and resumes its work (evaluate, probe's needle grid, the
mask sweep, score) treats a rerun with another precision, revision, DeBERTa head, token limit or
number of padding masks as another run: it computes it anew and keeps both results. An
interrupted run resumed with another precision starts over (a run of its own) or is refused, and
never ends as a mixture (``demo.evaluation.identity``)."""

import copy
import dataclasses
import json

import pandas as pd
import pytest

from demo.engine.models import DTYPES
from demo.evaluation import evaluate as E
from demo.evaluation import runs
from demo.evaluation.identity import differences
from demo.evaluation.results import add_runs, load_ours
from demo.evaluation_settings import GridSettings, RunSettings, SweepSettings
from demo.settings import ModelSettings, ScoringSettings
from demo.tasks import get_task
from tests.conftest import SHARED, needs_shared

DATA = str(SHARED / "data")
BASE = ModelSettings(model="tiny-deberta", device="cpu", emd="off")
# Each rerun changes one thing about the model; the settings' own changes are per command below
MODEL_CHANGES = {"dtype": dict(dtype="bfloat16"), "revision": dict(revision="0123456789abcdef"),
                 "emd": dict(emd="on")}


@pytest.fixture
def load(tiny_model):
    """A tiny DeBERTa-v2 loaded as ``ModelSettings`` asks: its precision, its head (the enhanced mask
    decoder on or off) and the Hub commit a revision would resolve to; counts its loads."""
    def load(side: ModelSettings, progress: bool):
        lm = tiny_model("deberta-v2", emd=side.emd == "on")
        load.calls += 1
        return dataclasses.replace(lm, model=copy.deepcopy(lm.model).to(DTYPES[side.dtype]), revision=side.revision)
    load.calls = 0
    return load


def quiet(_text):
    pass


def interrupted_after_one(work):
    """``work`` that does its first chunk, then stops the run as Ctrl-C would."""
    done = []

    def interrupted(*args):
        if done:
            raise KeyboardInterrupt
        done.append(1)
        return work(*args)
    return interrupted


@needs_shared
def test_evaluate_reruns_with_any_setting_changed_are_runs_of_their_own(load, tmp_path):
    ranked, generated = get_task("copa"), get_task("ii_singular_to_plural")
    settings = RunSettings(shots=1, limit=2, data_root=DATA)
    decoder = ScoringSettings(method="decoder")

    def run(side=BASE, scoring=decoder, task=ranked, s=settings):
        runs.evaluate_tasks([(task, s)], [side], scoring, load, tmp_path, progress=False, say=quiet)

    for task in (ranked, generated):
        run(task=task)
    for change in MODEL_CHANGES.values():
        run(dataclasses.replace(BASE, **change))
    run(scoring=dataclasses.replace(decoder, padding_masks=3))
    run(task=generated, s=dataclasses.replace(settings, max_new_tokens=2))
    run()  # the first run again: resumed, nothing new
    summary = pd.read_csv(tmp_path / "summary.csv")
    ranked_runs = summary[summary["task"] == "copa"]
    assert ranked_runs["run"].nunique() == 1 + len(MODEL_CHANGES) + 1  # every change its own run
    assert summary[summary["task"] == generated.name]["run"].nunique() == 2
    assert len(list(tmp_path.glob("*.jsonl"))) == summary["run"].nunique()  # each its own file, all kept
    assert sorted(summary["dtype"].unique()) == ["bfloat16", "float32"]
    for path in tmp_path.glob("*.jsonl"):  # each file holds its own run's items once
        assert len(path.read_text().splitlines()) == 2
    said = differences(ranked_runs["identity"].tolist())
    assert any("model.dtype=bfloat16" in s for s in said) and any("model.emd=true" in s for s in said)
    assert any("scoring.padding_masks=3" in s for s in said)

    add_runs(tmp_path / "summary.csv", tmp_path / "ours.csv")  # the Results tab: both, told apart
    ours = load_ours(tmp_path / "ours.csv")
    variants = ours[ours["task"] == "copa"]["variant"].tolist()
    assert len(variants) == len(set(variants)) == ranked_runs["run"].nunique()
    assert "decoder2 / example / model.dtype=bfloat16" in variants and "decoder2 / example" in variants, variants


@needs_shared
def test_an_interrupted_evaluation_resumed_with_another_precision_starts_over(load, tmp_path, monkeypatch):
    """The float32 run stops after its first chunk; resumed in bfloat16 it is another run, which
    evaluates every item itself: its file holds bfloat16 records only, and the float32 run's saved
    chunk stays in its own parts, to be finished by the float32 command."""
    task, settings = get_task("copa"), RunSettings(shots=0, limit=4, chunk_size=2, data_root=DATA)
    chunk = E._evaluate_chunk
    monkeypatch.setattr(E, "_evaluate_chunk", interrupted_after_one(chunk))
    with pytest.raises(KeyboardInterrupt):
        runs.evaluate_tasks([(task, settings)], [BASE], ScoringSettings(), load, tmp_path, progress=False, say=quiet)
    monkeypatch.setattr(E, "_evaluate_chunk", chunk)
    bf16 = dataclasses.replace(BASE, dtype="bfloat16")
    runs.evaluate_tasks([(task, settings)], [bf16], ScoringSettings(), load, tmp_path, progress=False, say=quiet)
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["dtype"].tolist() == ["bfloat16"] and summary["n"].tolist() == [4]
    [records] = [p for p in tmp_path.glob("*.jsonl")]
    assert len(records.read_text().splitlines()) == 4
    [parts] = list(tmp_path.glob("*.jsonl.parts"))  # the float32 run's chunk, kept for its own resume
    assert parts.name != records.name + ".parts"


@needs_shared
def test_the_needle_grid_reruns_with_any_setting_changed_beside_the_first(load, tmp_path):
    output, grid = tmp_path / "grid.csv", GridSettings(lengths=[160], depths=[0.0, 1.0], repetitions=1)

    def probe(side=BASE, g=grid):
        runs.probe_file(runs.ProbeFiles(output), [side], g, load, progress=False, say=quiet)

    probe()
    first = pd.read_csv(output, dtype={"needle": str, "answer": str})
    for change in MODEL_CHANGES.values():
        probe(dataclasses.replace(BASE, **change))
    probe(g=dataclasses.replace(grid, padding_masks=4))
    probe()  # the first again: nothing to do
    saved = pd.read_csv(output, dtype={"needle": str, "answer": str})
    assert saved["run"].nunique() == 1 + len(MODEL_CHANGES) + 1 and len(saved) == 2 * saved["run"].nunique()
    assert sorted(saved["dtype"].unique()) == ["bfloat16", "float32"]
    pd.testing.assert_frame_equal(saved[saved["run"] == first["run"].iloc[0]].reset_index(drop=True), first)


@needs_shared
def test_the_mask_sweep_reruns_with_any_setting_changed_beside_the_first(load, tmp_path):
    output = tmp_path / "sweep.csv"
    sweep = SweepSettings(sweep="padding_masks", values=[0, 1], task="ii_singular_to_plural", shots=1, limit=2,
                          max_new_tokens=2, data_root=DATA)

    def run(side=BASE, s=sweep):
        runs.sweep_file(runs.ProbeFiles(output), [side], s, load, progress=False, say=quiet)

    run()
    first = pd.read_csv(output)
    for change in MODEL_CHANGES.values():
        run(dataclasses.replace(BASE, **change))
    run(s=dataclasses.replace(sweep, max_new_tokens=4))
    saved = pd.read_csv(output)
    assert saved["run"].nunique() == 1 + len(MODEL_CHANGES) + 1
    assert sorted(saved["dtype"].unique()) == ["bfloat16", "float32"]
    pd.testing.assert_frame_equal(saved[saved["run"] == first["run"].iloc[0]].reset_index(drop=True), first)


def test_score_refuses_to_resume_another_runs_parts_and_never_overwrites(load, tmp_path, tiny_model, monkeypatch):
    """An interrupted float32 ``score`` resumed in bfloat16, or with another head or padding masks, is
    refused with what to do; the finished output is never replaced by a rerun without --overwrite;
    a rerun into another file of the same folder computes its own scores."""
    tiny_model("deberta-v2")  # (needs the shared folder: skips without it)
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps({"context": f"Item {i}:", "candidates": [" yes", " no"]})
                                for i in range(4)) + "\n")
    files = runs.ScoreFiles(source, tmp_path / "scores.json", chunk_size=2)
    decoder = ScoringSettings(method="decoder")
    chunk = runs._score_chunk
    monkeypatch.setattr(runs, "_score_chunk", interrupted_after_one(chunk))
    with pytest.raises(KeyboardInterrupt):
        runs.score_file(files, BASE, [BASE], decoder, load, progress=False, say=quiet)
    monkeypatch.setattr(runs, "_score_chunk", chunk)
    parts = sorted((tmp_path / "scores.json.parts").iterdir())
    before = [p.read_bytes() for p in parts]
    for side, scoring in [(dataclasses.replace(BASE, dtype="bfloat16"), decoder),
                          (dataclasses.replace(BASE, emd="on"), decoder),
                          (BASE, dataclasses.replace(decoder, padding_masks=4))]:
        with pytest.raises(ValueError, match="holds parts of another run"):
            runs.score_file(files, side, [side], scoring, load, progress=False, say=quiet)
    assert [p.read_bytes() for p in parts] == before and not files.output.exists()

    runs.score_file(files, BASE, [BASE], decoder, load, progress=False, say=quiet)  # resumed, finished
    first = files.output.read_bytes()
    bf16 = dataclasses.replace(BASE, dtype="bfloat16")
    with pytest.raises(ValueError, match="exists; pass --overwrite"):
        runs.score_file(files, bf16, [bf16], decoder, load, progress=False, say=quiet)
    other = dataclasses.replace(files, output=tmp_path / "scores-bf16.json")
    runs.score_file(other, bf16, [bf16], decoder, load, progress=False, say=quiet)
    assert files.output.read_bytes() == first
    assert json.loads(other.output.read_text())["model"]["dtype"] == "bfloat16"
    scores = [json.loads(f.read_text())["results"][0]["candidates"][0]["score"] for f in (files.output, other.output)]
    assert scores[0] != scores[1]  # computed anew in bfloat16


@needs_shared
def test_a_larger_limit_or_more_repetitions_extend_the_same_run(load, tmp_path, monkeypatch):
    """Which items and repetitions a run covers is no part of it: each record is kept under its
    (repetition, item), so a larger --limit or more --repetitions compute only what is new."""
    task, settings = get_task("copa"), RunSettings(shots=1, limit=2, data_root=DATA)
    chunk, computed = E._evaluate_chunk, []

    def counting(lm, task, run, s, pairs):
        computed.extend(pairs)
        return chunk(lm, task, run, s, pairs)

    monkeypatch.setattr(E, "_evaluate_chunk", counting)
    for s in (settings, dataclasses.replace(settings, limit=4), dataclasses.replace(settings, limit=4, repetitions=2)):
        runs.evaluate_tasks([(task, s)], [BASE], ScoringSettings(), load, tmp_path, progress=False, say=quiet)
    assert len(computed) == 2 + 2 + 4 and len({(rep, e.index) for rep, e in computed}) == 8
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert len(summary) == 1 and summary["n"].tolist() == [4] and summary["repetitions"].tolist() == [2]
