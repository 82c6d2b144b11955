"""Your own task: the README's YAML + JSONL examples, run by the evaluator, checked by hand;
mistakes in a task file, refused in words before any model loads."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import tests.floats as floats
from demo.cli import main
from demo.tasks import read_task_file
from tests.conftest import STANDIN_MLM, needs_shared
from tests.test_pll import naive_scores

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_block(filename: str) -> str:
    """The fenced code block that follows the line naming ``filename`` in the README."""
    match = re.search(rf"`{re.escape(filename)}`\n\n```\w*\n(.*?)```", README.read_text(), re.S)
    assert match, f"README has no block for {filename}"
    return match.group(1)


@pytest.fixture
def my_tasks(tmp_path):
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    for name in ("capitals.yaml", "capitals.jsonl"):
        (folder / name).write_text(readme_block(f"my_tasks/{name}"))
    return folder


@needs_shared
@pytest.mark.floats
def test_readme_task_runs_and_scores_like_a_hand_loop(my_tasks, tmp_path, standin_mlm):
    out = tmp_path / "runs"
    assert main(["evaluate", "--model", str(STANDIN_MLM), "--tasks-dir", str(my_tasks), "--task",
                 "capitals", "--shots", "2", "--output-dir", str(out), "--no-progress"]) == 0
    summary = pd.read_csv(out / "summary.csv")
    records = [json.loads(line) for line in next(out.glob("capitals__*.jsonl")).read_text().splitlines()]
    items = [json.loads(line) for line in (my_tasks / "capitals.jsonl").read_text().splitlines()]
    assert len(records) == len(items) == summary["n"].iloc[0]

    def shown(item, answer):  # the README's template, written out by hand
        return f"Q: What is the capital of {item['country']}?\nA: {answer}"

    correct = 0
    for record in records:
        item = items[record["index"]]
        assert record["index"] not in record["demos"] and len(record["demos"]) == 2
        prompt = "".join(shown(items[d], items[d]["answer"]) + "\n\n" for d in record["demos"])
        context = prompt + shown(item, "")
        naive = [naive_scores(standin_mlm, context, option, "right_masks") for option in item["options"]]
        totals = [sum(s[1] for s in scores) for scores in naive]
        assert record["scores"] == [floats.total(t, len(s), standin_mlm) for t, s in zip(totals, naive)]
        best = max(range(len(totals)), key=totals.__getitem__)
        correct += item["options"][best] == item["answer"]
    assert summary["value"].iloc[0] == pytest.approx(100 * correct / len(items), abs=0.01)
    assert main(["evaluate", "--list", "--tasks-dir", str(my_tasks)]) == 0


@pytest.mark.parametrize("entry, message", [
    ("  - {name: t, data: {local: x.jsonl}, convert: fields, template: '{answer}', kind: choice, "
     "shots: 0, metrics: [accuracy], colour: red}", r"unknown field\(s\) \['colour'\]"),
    ("  - {name: t, data: {local: x.jsonl}, convert: fields, kind: choice, shots: 0, metrics: [accuracy]}",
     r"give the field\(s\) template"),
    ("  - {name: t, data: {local: x.jsonl}, convert: nope, template: '{answer}', kind: choice, "
     "shots: 0, metrics: [accuracy]}", "no converter named 'nope'"),
    ("  - {name: t, data: {local: x.jsonl}, convert: fields, template: 'no slot', kind: choice, "
     "shots: 0, metrics: [accuracy]}", r"has no \{answer\} slot"),
    ("  - {name: t, data: {local: x.jsonl}, convert: fields, template: '{answer}', kind: choice, "
     "shots: 0, metrics: [accuracy], scoring: {reduction: median}}", "reduction"),
])
def test_bad_task_files_are_explained(tmp_path, entry, message):
    path = tmp_path / "bad.yaml"
    path.write_text("tasks:\n" + entry + "\n")
    with pytest.raises(ValueError, match=message):
        read_task_file(path)


def _choice_task(folder, stem: str, label: str, metric: str, records: str, name: str | None = None) -> None:
    """A choice task's data (``records``, JSON lines) and its file, never registered: the question
    ``q``, the candidates ``options``, the label field ``label``."""
    (folder / f"{stem}.jsonl").write_text(records)
    (folder / f"{stem}.yaml").write_text(
        f"tasks:\n  - {{name: {name or stem + '_unregistered'}, data: {{local: {stem}.jsonl}}, convert: fields,\n"
        f"     convert_args: {{candidates: options, label: {label}}}, template: '{{q}} {{answer}}',\n"
        f"     kind: choice, shots: 0, metrics: [{metric}]}}\n")


def test_labels_are_text_or_index_and_unregistered_tasks_load(tmp_path):
    from demo.tasks import load_examples
    _choice_task(tmp_path, "votes", "answer", "accuracy", '{"q": "one", "options": ["1", "2", "3"], "answer": "2"}\n'
                                                       '{"q": "two", "options": ["1", "2", "3"], "answer": 0}\n')
    task = read_task_file(tmp_path / "votes.yaml", base=tmp_path)[0]
    first, second = load_examples(task)  # never registered: loads all the same
    assert first.target == "2" and second.target == "1"  # "2" is a candidate's text, 0 an index
    (tmp_path / "votes.jsonl").write_text('{"q": "x", "options": ["a", "b"], "answer": "c"}\n')
    with pytest.raises(ValueError, match=r"votes.yaml, task 'votes_unregistered': data: .*votes.jsonl"
                                         r"'?: Record 0: the label 'c' is not one of its candidates"):
        read_task_file(tmp_path / "votes.yaml", base=tmp_path)  # found when the file is read


@needs_shared
def test_a_changed_scoring_setting_is_a_new_run(my_tasks, tmp_path, standin_mlm):
    from demo.evaluation.evaluate import evaluate
    from demo.evaluation_settings import RunSettings
    from demo.settings import ScoringSettings
    task = read_task_file(my_tasks / "capitals.yaml", base=my_tasks)[0]
    out = tmp_path / "runs"
    plain = evaluate(standin_mlm, task, out, RunSettings(shots=0, limit=2))
    full = evaluate(standin_mlm, task, out, RunSettings(shots=0, limit=2), ScoringSettings(scope="full"))
    assert plain[0]["run"] != full[0]["run"] and "-full__" in full[0]["run"]
    assert len(list(out.glob("capitals__*.jsonl"))) == 2  # the second run did not reuse the first


# ---------------------------------------------------------------- several correct answers (TimeDial)

# 20 TimeDial-shaped items written for this test: a dialogue with one time span blanked out,
# (text before the blank, text after it, the two correct spans, the two incorrect ones)
TIMEDIAL = [
    ("A: How long was the drive? B: It took us ", " because of the snow.",
     ["five hours", "300 minutes"], ["five seconds", "five years"]),
    ("A: When does the shop open? B: At ", ", right after breakfast.",
     ["8 am", "eight in the morning"], ["midnight", "8 pm"]),
    ("A: Is the baby walking yet? B: Not yet, she is only ", " old.",
     ["ten months", "44 weeks"], ["ten minutes", "ten years"]),
    ("A: How long did you boil the egg? B: For ", ", so the yolk is soft.",
     ["six minutes", "360 seconds"], ["six days", "six hours"]),
    ("A: When did you move to Paris? B: Back in ", ", just after college.",
     ["2010", "the summer of 2010"], ["1810", "the year 3010"]),
    ("A: How long is the film? B: About ", ", so we will be home early.",
     ["two hours", "120 minutes"], ["two weeks", "two months"]),
    ("A: How old is your grandfather? B: He turned ", " last spring.",
     ["eighty", "80"], ["eight", "three hundred"]),
    ("A: When is the meeting? B: It starts at ", " sharp, before lunch.",
     ["ten", "10 am"], ["10 pm", "midnight"]),
    ("A: How long have you known her? B: For ", ", since we were kids.",
     ["twenty years", "two decades"], ["twenty minutes", "two seconds"]),
    ("A: How long does the bread bake? B: Around ", " in a hot oven.",
     ["forty minutes", "half an hour"], ["forty days", "four years"]),
    ("A: When did the war end? B: In ", ", after six long years.",
     ["1945", "the spring of 1945"], ["1245", "yesterday"]),
    ("A: How long is your commute? B: Only ", " by bike.",
     ["fifteen minutes", "a quarter of an hour"], ["fifteen days", "fifteen years"]),
    ("A: When do you go to bed? B: Usually at ", ", after the news.",
     ["eleven", "11 pm"], ["11 am", "noon"]),
    ("A: How long was your holiday? B: We were away for ", " in Spain.",
     ["two weeks", "fourteen days"], ["two minutes", "two seconds"]),
    ("A: How long did the exam last? B: It took ", " and I finished early.",
     ["three hours", "180 minutes"], ["three months", "three years"]),
    ("A: When is your birthday? B: It is in ", ", just before winter.",
     ["November", "late autumn"], ["the morning", "an hour"]),
    ("A: How long does the flight take? B: About ", " from London to Rome.",
     ["two hours", "two and a half hours"], ["two weeks", "two days"]),
    ("A: How old is the house? B: It was built ", " ago, in the last century.",
     ["a hundred years", "a century"], ["a minute", "a week"]),
    ("A: How long did you sleep? B: I slept for ", " and feel rested.",
     ["eight hours", "the whole night"], ["eight seconds", "eight months"]),
    ("A: When does the train leave? B: At ", ", so we should hurry.",
     ["six", "6 pm"], ["six years", "noon tomorrow next year"]),
]


def timedial_records() -> list[dict]:
    """The items as the README's timedial.jsonl holds them; the correct options' places vary."""
    records = []
    for number, (before, after, correct, incorrect) in enumerate(TIMEDIAL, start=1):
        options = ([correct[0], incorrect[0], correct[1], incorrect[1]] if number % 2 else
                   [incorrect[1], correct[1], incorrect[0], correct[0]])
        records.append({"id": str(number), "before": before, "after": after, "options": options,
                        "correct": list(correct)})
    return records


@needs_shared
def test_timedial_k_best_equals_a_hand_count_over_20_items(tmp_path, standin_mlm):
    """The README's multi-correct task, run by the command line; its 2-best accuracy (and its
    accuracy) against a count made by hand from the PLL of each option, asked of the scoring API
    directly (the evaluator's scores equal a naive per-token loop: the capitals test above)."""
    from demo.engine.pll import score_candidates
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    (folder / "timedial.yaml").write_text(readme_block("my_tasks/timedial.yaml"))
    items = timedial_records()
    (folder / "timedial.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    out = tmp_path / "runs"
    assert main(["evaluate", "--model", str(STANDIN_MLM), "--tasks-dir", str(folder), "--task",
                 "timedial", "--shots", "0", "--output-dir", str(out), "--no-progress"]) == 0
    summary = pd.read_csv(out / "summary.csv").set_index("metric")
    assert summary.loc["k_best", "n"] == summary.loc["accuracy", "n"] == 20

    # the option and the rest of the dialogue are scored (score: answer), after the dialogue's start
    totals = [[s.score for s in score_candidates(standin_mlm, item["before"],
                                                 [option + item["after"] for option in item["options"]])]
              for item in items]
    both_above = top_correct = 0
    for item, scores in zip(items, totals):
        correct = [t for o, t in zip(item["options"], scores) if o in item["correct"]]
        incorrect = [t for o, t in zip(item["options"], scores) if o not in item["correct"]]
        both_above += min(correct) > max(incorrect)
        top_correct += item["options"][scores.index(max(scores))] in item["correct"]
    assert summary.loc["k_best", "value"] == pytest.approx(100 * both_above / 20, abs=0.01)
    assert summary.loc["accuracy", "value"] == pytest.approx(100 * top_correct / 20, abs=0.01)
    assert both_above < top_correct  # on these items the two metrics differ: k_best is not accuracy


@needs_shared
def test_a_multi_correct_task_exported_for_lm_eval_counts_any_correct_option(tmp_path, standin_mlm):
    """export-tasks writes every correct option as the target (lm-eval's multiple targets), so
    lm-eval's accuracy equals ours, which counts the top option right if it is any correct one."""
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    from demo.harness.model import MaskedLMEval
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    # the README's task under a name of its own (another test registers "timedial" from its folder)
    task_file = readme_block("my_tasks/timedial.yaml").replace("name: timedial", "name: timedial_export")
    (folder / "timedial.yaml").write_text(task_file)
    (folder / "timedial.jsonl").write_text("".join(json.dumps(r) + "\n" for r in timedial_records()))
    common = ["--model", str(STANDIN_MLM), "--tasks-dir", str(folder), "--task", "timedial_export", "--shots", "0"]
    assert main(["export-tasks", *common, "--output-dir", str(tmp_path / "lm_eval")]) == 0
    assert main(["evaluate", *common, "--output-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    ours = pd.read_csv(tmp_path / "runs" / "summary.csv").set_index("metric").loc["accuracy", "value"]
    results = lm_eval.simple_evaluate(
        model=MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu"), tasks=["mlm_icl_timedial_export"],
        task_manager=TaskManager(include_path=str(tmp_path / "lm_eval"), include_defaults=False),
        bootstrap_iters=0)
    assert 100 * results["results"]["mlm_icl_timedial_export"]["acc,none"] == pytest.approx(ours, abs=0.005)


def test_the_readme_task_files_read(tmp_path):
    """The README's TimeDial records and its converter example load as the README says."""
    from demo.tasks import load_examples
    (tmp_path / "timedial.yaml").write_text(readme_block("my_tasks/timedial.yaml"))
    (tmp_path / "timedial.jsonl").write_text(readme_block("my_tasks/timedial.jsonl"))
    drive = load_examples(read_task_file(tmp_path / "timedial.yaml", base=tmp_path)[0])[0]
    assert (drive.id, drive.labels, drive.target) == ("1", (0, 1), "five hours")
    assert drive.fields == {"before": "A: How long was the drive? B: It took us ",
                            "after": " because of the snow."}
    (tmp_path / "wsc_perturbed.yaml").write_text(readme_block("my_tasks/wsc_perturbed.yaml"))
    (tmp_path / "wsc_perturbed.jsonl").write_text(json.dumps(
        {"sentence": "The cup did not fit in the box because _ was too big.", "option1": "the cup",
         "option2": "the box", "answer": "1"}) + "\n")
    task = read_task_file(tmp_path / "wsc_perturbed.yaml", base=tmp_path)[0]
    [cup] = load_examples(task)
    assert (cup.fields, cup.candidates, cup.label) == (
        {"context_prefix": "The cup did not fit in the box because ",
         "context_suffix": " was too big."}, ("the cup", "the box"), 0)


def test_correct_labels_are_texts_or_indices_in_a_list(tmp_path):
    from demo.tasks import load_examples
    _choice_task(tmp_path, "t", "correct", "k_best", '{"q": "a", "options": ["w", "x", "y", "z"], "correct": ["y", 0]}\n'
                                                 '{"q": "b", "options": ["w", "x", "y", "z"], "correct": [3, "z"]}\n',
                 name="multi_unregistered")
    first, second = load_examples(read_task_file(tmp_path / "t.yaml", base=tmp_path)[0])
    assert (first.label, first.labels, first.target) == (2, (2, 0), "y")
    assert (second.label, second.labels) == (3, (3,))  # the same option twice counts once
    (tmp_path / "t.jsonl").write_text('{"q": "a", "options": ["w", "x"], "correct": []}\n')
    with pytest.raises(ValueError, match=r"t.yaml, task 'multi_unregistered': data: .*Record 0: "
                                         r"its label field 'correct' is an empty list"):
        read_task_file(tmp_path / "t.yaml", base=tmp_path)


# ---------------------------------------------------------------- mistakes, found before a model loads

GOOD = {"name": "timedial_checked", "data": {"local": "t.jsonl"}, "convert": "fields",
        "convert_args": {"candidates": "options", "label": "correct", "id": "id"},
        "template": "{before}{answer}{after}", "kind": "choice", "shots": 0, "metrics": ["k_best"]}


@pytest.mark.parametrize("change, data, message", [
    ({"metrics": ["k_best", "acc2"]}, None,
     r"t.yaml, task 'timedial_checked': metrics: 'acc2' is not a metric; known metrics: accuracy, "
     r"bleu, .*k_best"),
    ({"template": "{befor}{answer}{after}"}, None,
     r"t.yaml, task 'timedial_checked': template: \{befor\} is not a field of its converted "
     r"examples \(did you mean 'before'\?\); example 0 \(id '1'\) has \{after\}, \{before\}"),
    ({"convert_args": {"candidates": ["options"], "label": "correct", "id": "id"}}, None,
     r"t.yaml, task 'timedial_checked': convert_args: candidates of converter 'fields' must be a "
     r"string or left out, not \['options'\]"),
    ({"kind": "generate", "convert_args": {"answers": "correct"}}, None,
     r"t.yaml, task 'timedial_checked': metrics: k_best reads every candidate's score, which only "
     r"a ranked task \(kind: choice\) has; this task is kind: generate"),
    ({}, '[["five hours", "300 minutes"], ["8 am", "midnight"]]',
     r"t.yaml, task 'timedial_checked': data: '.*t.jsonl': record 0 is list \[\"five hours\", "
     r"\"300 minutes\"\], not an object of named fields"),
    ({"data": {"local": "t.jsonl", "format": "xml"}}, None,
     r"t.yaml, task 'timedial_checked': format must be one of jsonl, json, json_examples, csv"),
    ({"generation": {"max_new_token": 8}}, None,
     r"t.yaml, task 'timedial_checked': GenerationSettings has no setting 'max_new_token': did you mean "
     r"max_new_tokens\?"),
])
def test_a_bad_task_file_is_refused_in_words_before_a_model_loads(tmp_path, monkeypatch, capsys,
                                                                  change, data, message):
    import yaml

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded for a task file that is not valid")
    monkeypatch.setattr("demo.engine.models.load_model", no_model)
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"tasks": [{**GOOD, **change}]}))
    (tmp_path / "t.jsonl").write_text(data or "".join(json.dumps(r) + "\n" for r in timedial_records()))
    start = time.perf_counter()
    code = main(["evaluate", "--model", str(STANDIN_MLM), "--tasks-dir", str(tmp_path), "--task",
                 "timedial_checked", "--output-dir", str(tmp_path / "runs"), "--no-progress"])
    seconds = time.perf_counter() - start
    error = capsys.readouterr().err
    assert code == 2 and re.search(message, error), error
    assert error.startswith("error: ") and "Traceback" not in error and error.count("\n") == 1
    assert seconds < 2, f"refusing the file took {seconds:.2f} s"


def test_a_bad_task_file_is_refused_before_torch_is_imported(tmp_path):
    """A fresh process, as a student runs it: the whole refusal, imports included, under 2 s."""
    (tmp_path / "t.yaml").write_text(f"tasks:\n  - {json.dumps({**GOOD, 'metrics': ['acc2']})}\n")
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in timedial_records()))
    program = ("import sys, time; start = time.perf_counter(); from demo.cli import main; "
               f"code = main(['evaluate', '--model', 'never-loaded', '--tasks-dir', {str(tmp_path)!r}, "
               "'--task', 'timedial_checked']); "
               "print(code, 'torch' in sys.modules, round(time.perf_counter() - start, 2))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=README.parent, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    code, torch_loaded, seconds = done.stdout.split()
    assert (code, torch_loaded) == ("2", "False") and "'acc2' is not a metric" in done.stderr
    assert float(seconds) < 2


def test_a_json_list_is_read_whatever_the_format_says(tmp_path):
    from demo.tasks import load_examples
    records = timedial_records()
    (tmp_path / "lines.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "list.jsonl").write_text(json.dumps(records, indent=1))  # a list, named .jsonl
    (tmp_path / "list.json").write_text(json.dumps(records))
    for local, fmt in [("lines.jsonl", "jsonl"), ("list.jsonl", "jsonl"), ("list.json", "json"),
                       ("lines.jsonl", "json")]:
        spec = {**GOOD, "name": "timedial_unregistered", "data": {"local": local, "format": fmt}}
        (tmp_path / "t.yaml").write_text(f"tasks:\n  - {json.dumps(spec)}\n")
        examples = load_examples(read_task_file(tmp_path / "t.yaml", base=tmp_path)[0])
        assert [(e.candidates, e.labels) for e in examples] == [
            (tuple(r["options"]), tuple(r["options"].index(c) for c in r["correct"])) for r in records]


@needs_shared
def test_a_missing_data_file_is_said_before_a_model_loads(tmp_path, monkeypatch, capsys):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded for a task without its data")
    monkeypatch.setattr("demo.engine.models.load_model", no_model)
    assert main(["evaluate", "--model", str(STANDIN_MLM), "--task", "winogradversarial",
                 "--data-root", str(tmp_path), "--no-progress"]) == 2
    assert "needs the local file" in capsys.readouterr().err
