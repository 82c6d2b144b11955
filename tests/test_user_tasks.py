"""Your own task: the README's YAML + JSONL example, run by the evaluator, checked by hand."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

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
        totals = [sum(s[1] for s in naive_scores(standin_mlm, context, option, "right_masks"))
                  for option in item["options"]]
        assert record["scores"] == pytest.approx(totals, abs=1e-4)
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


def test_labels_are_text_or_index_and_unregistered_tasks_load(tmp_path):
    from demo.tasks import load_examples
    (tmp_path / "votes.jsonl").write_text(
        '{"q": "one", "options": ["1", "2", "3"], "answer": "2"}\n'
        '{"q": "two", "options": ["1", "2", "3"], "answer": 0}\n')
    (tmp_path / "votes.yaml").write_text(
        "tasks:\n  - {name: votes_unregistered, data: {local: votes.jsonl}, convert: fields,\n"
        "     convert_args: {candidates: options, label: answer}, template: '{q} {answer}',\n"
        "     kind: choice, shots: 0, metrics: [accuracy]}\n")
    task = read_task_file(tmp_path / "votes.yaml", base=tmp_path)[0]
    first, second = load_examples(task)  # never registered: loads all the same
    assert first.target == "2" and second.target == "1"  # "2" is a candidate's text, 0 an index
    (tmp_path / "votes.jsonl").write_text('{"q": "x", "options": ["a", "b"], "answer": "c"}\n')
    bad = read_task_file(tmp_path / "votes.yaml", base=tmp_path)[0]
    with pytest.raises(ValueError, match="not one of its candidates"):
        load_examples(bad, "data")


@needs_shared
def test_a_changed_scoring_setting_is_a_new_run(my_tasks, tmp_path, standin_mlm):
    from demo.evaluate import evaluate
    from demo.settings import RunSettings, ScoringSettings
    task = read_task_file(my_tasks / "capitals.yaml", base=my_tasks)[0]
    out = tmp_path / "runs"
    plain = evaluate(standin_mlm, task, out, RunSettings(shots=0, limit=2))
    full = evaluate(standin_mlm, task, out, RunSettings(shots=0, limit=2), ScoringSettings(scope="full"))
    assert plain[0]["run"] != full[0]["run"] and "-full__" in full[0]["run"]
    assert len(list(out.glob("capitals__*.jsonl"))) == 2  # the second run did not reuse the first
