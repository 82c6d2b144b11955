"""How many masks? The sweep's points against the evaluator run by hand at each setting, the
engine's own record of the masks it was given and the work it did, an interrupted sweep resumed,
bad values refused in words, and the Length probe tab's handler on the stand-in."""

import types
from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
import pytest
from conftest import SHARED, STANDIN_MLM, needs_shared

import demo.engine.generation as generation
import demo.engine.pll as pll
from demo.cli import main
from demo.evaluation import mask_sweep as S
from demo.evaluation.evaluate import evaluate
from demo.evaluation.plots import mask_sweep_plot
from demo.evaluation_settings import RunSettings, SweepSettings
from demo.settings import ScoringSettings
from demo.tasks import get_task

DATA = str(SHARED / "data")
RANKED = SweepSettings(sweep="right_masks", task="copa", values=[0, 3], shots=1, limit=3, data_root=DATA)
COMPARED = ["model", "task", "shots", "setting", "value", "metric", "score", "stderr", "n", "paper_value"]


def _recording(monkeypatch, module, name: str, field: str) -> list:
    """Wrap ``module.name`` (an engine entry point) to record its settings' ``field`` per call."""
    seen, real = [], getattr(module, name)

    def wrapped(lm, inputs, settings=None, **kwargs):
        seen.append(getattr(settings, field))
        return real(lm, inputs, settings, **kwargs)
    monkeypatch.setattr(module, name, wrapped)
    return seen


@needs_shared
def test_a_right_masks_point_is_the_evaluator_run_with_that_scoring(standin_mlm, tmp_path, monkeypatch):
    seen = _recording(monkeypatch, pll, "score_choices", "right_masks")
    table = S.run_sweep(standin_mlm, RANKED)
    assert sorted(set(seen)) == [0, 3]  # each point's chunks scored with its own number of masks
    for value in RANKED.values:
        by_hand = evaluate(standin_mlm, "copa", tmp_path / str(value),
                           RunSettings(shots=1, limit=3, data_root=DATA),
                           ScoringSettings(method="right_masks", right_masks=value))[0]
        point = table[table["value"] == value].iloc[0]
        assert (point["metric"], point["score"], point["stderr"], point["n"], point["shots"]) == \
               (by_hand["metric"], by_hand["value"], by_hand["stderr"], by_hand["n"], by_hand["shots"])
    assert list(table["paper_value"].unique()) == [2]  # the paper's N = 2


@needs_shared
def test_a_padding_masks_point_generates_with_them_as_the_evaluator_does(standin_mlm, tmp_path, monkeypatch):
    sweep = SweepSettings(sweep="padding_masks", values=[0, 2], shots=1, limit=1, max_new_tokens=3, data_root=DATA)
    seen = _recording(monkeypatch, generation, "generate_together", "padding_masks")
    table = S.run_sweep(standin_mlm, sweep)
    assert seen == [0, 2]  # one item at each value, generated with that many padding masks
    task = get_task("ii_singular_to_plural")
    for value in sweep.values:
        by_hand = evaluate(standin_mlm, replace(task, generation={**task.generation, "padding_masks": value}),
                           tmp_path / str(value), RunSettings(shots=1, limit=1, max_new_tokens=3, data_root=DATA))[0]
        point = table[table["value"] == value].iloc[0]
        assert (point["metric"], point["score"], point["n"]) == ("ii_exact_match", by_hand["value"], 1)
    assert list(table["paper_value"].unique()) == [standin_mlm.padding_masks] == [1]  # BERT's family default


@needs_shared
def test_the_budget_counts_what_a_ranked_sweep_reads(standin_mlm):
    from demo.app.budget import sweep_work
    from demo.engine.counting import counting
    with counting() as reads:
        S.run_sweep(standin_mlm, RANKED)
    work = sweep_work(standin_mlm, RANKED)
    assert (work.tokens, work.passes) == (reads.tokens, reads.passes) and reads.passes > 0


@needs_shared
def test_an_interrupted_sweep_resumes_to_the_same_table(standin_mlm, tmp_path, monkeypatch):
    sweep = replace(RANKED, values=[0, 1, 2], limit=2)
    whole = S.run_sweep(standin_mlm, sweep, output=tmp_path / "whole.csv")
    output = tmp_path / "resumed.csv"
    real, done = S.Sweep.rows, []

    def stops_at_2(self, value, progress=False):
        if value == 2:
            raise KeyboardInterrupt
        done.append(value)
        return real(self, value, progress)
    monkeypatch.setattr(S.Sweep, "rows", stops_at_2)
    with pytest.raises(KeyboardInterrupt):
        S.run_sweep(standin_mlm, sweep, output=output)
    assert done == [0, 1] and not output.exists() and (tmp_path / "resumed.csv.parts").is_dir()
    done.clear()
    monkeypatch.setattr(S.Sweep, "rows", lambda self, value, progress=False: done.append(value) or
                        real(self, value, progress))
    resumed = S.run_sweep(standin_mlm, sweep, output=output)
    assert done == [2]  # only what the interruption left
    assert not (tmp_path / "resumed.csv.parts").exists()
    pd.testing.assert_frame_equal(resumed[COMPARED], whole[COMPARED])
    pd.testing.assert_frame_equal(pd.read_csv(output)[COMPARED], pd.read_csv(tmp_path / "whole.csv")[COMPARED])
    monkeypatch.setattr(S.Sweep, "rows", stops_at_2)  # interrupted again; then a run with other settings
    with pytest.raises(KeyboardInterrupt):
        S.run_sweep(standin_mlm, sweep, output=tmp_path / "other.csv")
    done.clear()
    with pytest.raises(KeyboardInterrupt):
        S.run_sweep(standin_mlm, replace(sweep, limit=1), output=tmp_path / "other.csv")
    assert done == [0, 1]  # computed anew: the first run's saved values are not this run's
    assert len(list((tmp_path / "other.csv.parts").glob("*.jsonl"))) == 2  # each run's parts kept apart


def test_bad_values_are_refused_in_sentences():
    cases = [(dict(values="0, x"), "Each number of masks must be a whole number from 0 to 16, not 'x'."),
             (dict(values=""), "Give at least one number of masks to evaluate."),
             (dict(values=[1.5]), "Each number of masks must be a whole number from 0 to 16, not 1.5."),
             (dict(values=[17], sweep="right_masks"), "Each number of masks must be a whole number from 0 to 16, not 17."),
             (dict(sweep="left_masks"), "Unknown sweep 'left_masks'; use one of padding_masks, right_masks."),
             (dict(limit=0), "limit must be a whole number >= 1, not 0.")]
    for given, said in cases:
        with pytest.raises(ValueError) as err:
            SweepSettings(**given)
        assert str(err.value) == said
    assert SweepSettings(values="3, 1 1,0").values == [0, 1, 3]
    causal = types.SimpleNamespace(kind="causal", label="SmolLM2")
    with pytest.raises(ValueError, match="^Say what to sweep: padding_masks"):
        S.sweep_of(causal, SweepSettings())
    with pytest.raises(ValueError, match="^SmolLM2 is a causal LM: it reads no masks"):
        S.sweep_of(causal, SweepSettings(sweep="right_masks"))
    masked = types.SimpleNamespace(kind="masked", label="BERT")
    with pytest.raises(ValueError, match=r"^Padding masks act on a generated task, and 'copa' is ranked: pick"):
        S.sweep_of(masked, SweepSettings(sweep="padding_masks", task="copa"))


def test_probe_refuses_the_other_probes_options_in_words(tmp_path, capsys):
    output = str(tmp_path / "x.csv")
    assert main(["probe", "--model", str(STANDIN_MLM), "--output", output, "--values", "1", "2"]) == 2
    assert "--values is an option of the mask sweep: add --sweep padding_masks" in capsys.readouterr().err
    assert main(["probe", "--model", str(STANDIN_MLM), "--output", output, "--sweep", "right_masks",
                 "--lengths", "64"]) == 2
    assert "--lengths is an option of the needle grid, not of the mask sweep" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # argparse's own words for a number that is not one
        main(["probe", "--model", str(STANDIN_MLM), "--output", output, "--sweep", "right_masks",
              "--values", "1", "x"])
    assert exited.value.code == 2 and "argument --values: invalid int value: 'x'" in capsys.readouterr().err


def test_the_plot_marks_the_papers_choice():
    table = pd.DataFrame(dict(model="m", task="copa", shots=4, setting="right_masks", value=[0, 2, 4],
                              metric="accuracy", score=[50.0, 60.0, 55.0], stderr=[5.0, 4.0, None], n=20,
                              seconds=1.0, paper_value=2))
    figure = mask_sweep_plot(table)
    stars = [t for t in figure.data if t.marker.symbol == "star"]
    assert [list(t.x) for t in stars] == [[2]] and [list(t.y) for t in stars] == [[60.0]]
    assert any("N = 2" in a.text for a in figure.layout.annotations)
    assert figure.layout.xaxis.title.text == "extra masks right of<br>each scored token (N)"  # (a phone's width)
    assert figure.layout.yaxis.title.text == "accuracy (%)"
    # a phone's width holds about 40 characters of a title: the stand-in's on two lines, each in it
    title = mask_sweep_plot(table.assign(model="minilm-l6-mlm-standin")).layout.title.text
    assert [len(line) <= 40 for line in title.split("<br>")] == [True, True], title


@needs_shared
def test_the_length_probe_tabs_sweep_gives_a_plot_a_table_and_the_command(monkeypatch):
    from demo.ui.mask_sweep import sweep_masks, task_choices
    assert "copa" in [name for _, name in task_choices("right_masks")]
    assert "ii_singular_to_plural" in [name for _, name in task_choices("padding_masks")]
    assert "copa" not in [name for _, name in task_choices("padding_masks")]
    last = list(sweep_masks(str(STANDIN_MLM), "right_masks", "copa", "1, 2", 0, 2))[-1]
    assert isinstance(last.plot, go.Figure) and last.table["value"].tolist() == [1, 2]
    assert "best accuracy" in last.summary and "the paper's choice N = 2" in last.summary
    assert "mlm-icl probe" in last.shell and "--sweep right_masks" in last.shell and "--values 1 2" in last.shell
    assert "run_sweep(lm" in last.python and len(last.files) == 2
    refused = list(sweep_masks(str(STANDIN_MLM), "right_masks", "copa", "1, x", 0, 2))[-1]
    assert "Each number of masks must be a whole number" in refused.summary and refused.plot is None
    too_many = list(sweep_masks(str(STANDIN_MLM), "right_masks", "copa", "1", 0, 41))[-1]
    assert "limit may be at most 40 per request here (mask sweep: items" in too_many.summary


@pytest.mark.parametrize("scores, said", [
    ([40.0, 50.0, 50.0, 40.0], "best accuracy 50.0, a tie at N = 1, 2 · the paper's choice N = 2: 50.0 (tied for best)"),
    ([40.0, 50.0, 45.0, 40.0], "best accuracy 50.0, at N = 1 · the paper's choice N = 2: 45.0"),
    ([50.0, 40.0, 40.0, 50.0], "best accuracy 50.0, a tie at N = 0, 3 · the paper's choice N = 2: 40.0"),
])
def test_the_sweeps_summary_calls_a_tie_a_tie(monkeypatch, scores, said):
    """The summary names every value that reaches the best score, never the first of them alone."""
    from demo.ui import mask_sweep as ui
    monkeypatch.setattr(ui, "model_note", lambda lm: "")
    table = pd.DataFrame(dict(task="copa", shots=2, value=[0, 1, 2, 3], metric="accuracy", score=scores, n=10,
                              paper_value=2))
    assert said in ui._summary(None, table, SweepSettings(sweep="right_masks", task="copa", values=[0, 1, 2, 3]))
