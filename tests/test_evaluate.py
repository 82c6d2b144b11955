"""The evaluator: wiring to the engines, resume after an interruption, masked and causal LMs,
clear errors for bad input."""

import json

import pytest

import demo.pll as pll
from conftest import SHARED, needs_shared
from demo import evaluate as E
from demo import tasks as T
from demo.settings import RunSettings, ScoringSettings

DATA = str(SHARED / "data")


@pytest.fixture(scope="module")
def bert(tiny_model):
    return tiny_model("bert")


def _records(folder, pattern="*.jsonl"):
    files = sorted(folder.glob(pattern))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@needs_shared
def test_scores_are_the_engine_scores_of_the_hand_written_spans(bert, tmp_path):
    """Winograd 0-shot, partial scoring: the evaluator's scores must be the PLL of exactly
    (sentence up to and with the candidate, the words after it)."""
    rows = E.evaluate(bert, "winograd", tmp_path, RunSettings(shots=0, limit=3, data_root=DATA))
    by_index = {r["index"]: r for r in _records(tmp_path)}
    record = next(iter(by_index.values()))
    item = T.load_examples("winograd", "data", DATA)[record["index"]]
    head = item.fields["context_prefix"]
    expected = pll.score_batch(bert, [(head + c, item.fields["context_suffix"]) for c in item.candidates],
                               ScoringSettings(method="right_masks"))
    assert record["scores"] == pytest.approx([x.total for x in expected])
    assert record["pred"] == max(range(2), key=lambda i: expected[i].total)
    assert rows[0]["n"] == 3 and rows[0]["method"] == "right_masks" and rows[0]["score"] == "suffix"
    assert rows[0]["value"] == pytest.approx(100 * sum(r["correct"] for r in by_index.values()) / 3, abs=0.01)


@needs_shared
def test_unconditional_normalisation_subtracts_the_answer_context_score(bert, tmp_path):
    E.evaluate(bert, "arc_easy", tmp_path, RunSettings(shots=0, limit=1, data_root=DATA))
    record = _records(tmp_path)[0]
    item = T.load_examples("arc_easy", "data", DATA)[record["index"]]
    q = "Question: " + item.fields["question"] + "\nAnswer: "  # raw text: the engine writes the marker
    assert not bert.newline_survives
    conditional = pll.score_batch(bert, [("", q + c) for c in item.candidates])
    unconditional = pll.score_batch(bert, [("Answer:", " " + c) for c in item.candidates])
    assert record["scores"] == pytest.approx([c.total - u.total for c, u in zip(conditional, unconditional)])


@needs_shared
def test_interrupted_run_resumes_where_it_stopped(bert, tmp_path, monkeypatch):
    settings = RunSettings(shots=1, limit=6, chunk_size=2, repetitions=2, seed=5, data_root=DATA)
    reference = E.evaluate(bert, "copa", tmp_path / "whole", settings)

    calls = []
    real = pll.score_batch

    def interrupted(lm, items, *args, **kw):
        calls.append(len(items))
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the third chunk
        return real(lm, items, *args, **kw)

    monkeypatch.setattr(pll, "score_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        E.evaluate(bert, "copa", tmp_path / "cut", settings)
    partial = _records(tmp_path / "cut")
    assert len(partial) == 4  # two chunks of two examples reached the disk
    # a half-written line (the process died while writing) is ignored and redone
    path = next((tmp_path / "cut").glob("*.jsonl"))
    path.write_text(path.read_text() + '{"repetition": 0, "ind')

    calls.clear()
    monkeypatch.setattr(pll, "score_batch", lambda lm, items, *a, **kw: calls.append(len(items)) or real(lm, items, *a, **kw))
    resumed = E.evaluate(bert, "copa", tmp_path / "cut", settings)
    assert len(calls) == 4  # 12 (repetition, example) pairs - 4 done = 8 = 4 chunks of 2
    records = _records(tmp_path / "cut")  # every line is whole JSON again
    assert sorted((r["repetition"], r["index"]) for r in records) == sorted(
        (r["repetition"], r["index"]) for r in _records(tmp_path / "whole"))
    for key in ("value", "std", "n", "repetitions"):
        assert resumed[0][key] == reference[0][key]
    # the same demonstrations were drawn as in the uninterrupted run
    whole = {(r["repetition"], r["index"]): r["demos"] for r in _records(tmp_path / "whole")}
    assert all(whole[(r["repetition"], r["index"])] == r["demos"] for r in records)


@needs_shared
def test_summary_files(bert, tmp_path):
    rows = E.evaluate(bert, "cb", tmp_path, RunSettings(shots=1, limit=4, data_root=DATA), command="mlm-icl evaluate --task cb")
    assert [r["metric"] for r in rows] == ["accuracy", "f1_macro"]
    import pandas as pd
    table = pd.read_csv(tmp_path / "summary.csv")
    for column in ("task", "model", "shots", "metric", "value", "stderr", "n", "seconds", "date", "command"):
        assert column in table.columns
    assert list(table["metric"]) == ["accuracy", "f1_macro"]
    summary = json.loads(next(tmp_path.glob("*.summary.json")).read_text())
    assert summary[0]["command"] == "mlm-icl evaluate --task cb"
    assert summary[0]["value"] == rows[0]["value"] and summary[0]["n"] == 4
    E.evaluate(bert, "cb", tmp_path, RunSettings(shots=1, limit=4, data_root=DATA))
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 2  # a rerun replaces its rows


@needs_shared
def test_causal_lm_goes_through_the_same_evaluator(tiny_model, tmp_path):
    gpt2 = tiny_model("gpt2")
    rows = E.evaluate(gpt2, "copa", tmp_path, RunSettings(shots=1, limit=2, data_root=DATA))
    assert rows[0]["method"] == "causal" and rows[0]["model_kind"] == "causal"
    record = _records(tmp_path)[0]
    item = T.load_examples("copa", "data", DATA)[record["index"]]
    demo = T.load_examples("copa", "demos", DATA)[record["demos"][0]]
    context = T.render(T.get_task("copa"), demo) + "\n\n"
    expected = pll.score_batch(gpt2, [(context, T.render(T.get_task("copa"), item, c))
                                      for c in item.candidates], ScoringSettings(method="causal"))
    assert record["scores"] == pytest.approx([x.total for x in expected], rel=1e-5)
    with pytest.raises(ValueError, match="causal LM.*'salazar' is a masked-LM method"):
        E.evaluate(gpt2, "copa", tmp_path, RunSettings(shots=0, limit=1, data_root=DATA), ScoringSettings(method="salazar"))


@needs_shared
def test_generation_task_scores_the_generated_text(bert, tmp_path):
    rows = E.evaluate(bert, "ii_sum", tmp_path, RunSettings(shots=2, limit=2, max_new_tokens=3, data_root=DATA))
    for r in _records(tmp_path):
        assert r["query"].startswith("Input: ") and r["query"].endswith("\nOutput:")
        assert r["ii_exact_match"] == float(r["text"].strip().split(".")[0].lower() in
                                            [a.lower() for a in r["answers"]])
    assert rows[0]["metric"] == "ii_exact_match" and rows[0]["n"] == 2


@needs_shared
def test_induced_instruction_is_executed(bert, tmp_path):
    rows = E.evaluate(bert, "ii_antonyms_induce", tmp_path, RunSettings(shots=0, limit=1, execute_limit=2, max_new_tokens=3, data_root=DATA))
    record = _records(tmp_path)[0]
    assert record["executed"] == 2 and len(record["outputs"]) == 2
    assert rows[0]["metric"] == "execution_accuracy" and rows[0]["value"] == 100 * record["execution"]


# ---------------------------------------------------------------- bad input


@needs_shared
def test_bad_requests_are_explained(bert, tmp_path):
    with pytest.raises(ValueError, match="--shots 25 is more than its demonstration pool holds "
                                         r"\(19 examples, the evaluated split minus"):
        E.evaluate(bert, "winogradversarial", tmp_path, RunSettings(shots=25, data_root=DATA))
    with pytest.raises(ValueError, match="zero-shot by design"):
        E.evaluate(bert, "ii_sum_gold", tmp_path, RunSettings(shots=1, data_root=DATA))
    with pytest.raises(ValueError, match="needs the local file '.*winogradversarial.jsonl'"):
        E.evaluate(bert, "winogradversarial", tmp_path, RunSettings(shots=0, data_root=str(tmp_path)))


# ---------------------------------------------------------------- result tables


def test_published_tables_are_tidy_and_labelled():
    from demo.results import load_published
    table = load_published()
    assert set(table["source"]) == {"published"}
    assert table["paper"].str.len().min() > 0 and table["table"].str.len().min() > 0
    # spot checks against the papers (BERTs paper table 6 and table 1; ALBERT table 3)
    copa = table[(table.table == "Table 6") & (table.task == "copa") & (table.model == "DeBERTa 1.4B")]
    assert dict(zip(copa.shots_label, copa.value)) == {"0-shot": 78.9, "1-shot": 84.2, "few-shot": 90.4}
    assert set(copa[copa.shots_label == "few-shot"].shots) == {64}
    gpt3 = table[(table.table == "Table 1") & (table.task == "copa") & (table.shots == 1)
                 & (table.model == "GPT-3 1.3B")]
    assert list(gpt3.value) == [74.0]
    albert = table[(table.table == "Table 3") & (table.model == "albert-xxlarge-v2")]
    assert dict(zip(albert.task, albert.value)) == {"winograd": 81.05, "winogrande": 76.71}
    ii = table[(table.task == "ii_first_word_letter") & (table.model == "GPT-3 DaVinci")]
    assert list(ii.value) == [97] and list(ii.metric) == ["ii_exact_match"]


@needs_shared
def test_our_runs_join_the_published_ones(bert, tmp_path):
    from demo.results import add_runs, load_ours
    E.evaluate(bert, "copa", tmp_path / "run", RunSettings(shots=0, limit=2, data_root=DATA), command="mlm-icl evaluate --task copa")
    add_runs(tmp_path / "run" / "summary.csv", tmp_path / "ours.csv")
    add_runs(tmp_path / "run" / "summary.csv", tmp_path / "ours.csv")  # idempotent
    ours = load_ours(tmp_path / "ours.csv")
    assert len(ours) == 1
    row = ours.iloc[0]
    assert (row.source, row.task, row.shots, row.n, row.metric) == ("ours", "copa", 0, 2, "accuracy")
    assert row.command == "mlm-icl evaluate --task copa" and row.model_size > 0
