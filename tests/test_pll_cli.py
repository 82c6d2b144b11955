"""Command line: JSONL in, per-token JSON or tidy CSV out."""

import json

import pandas as pd
import pytest

from demo.score import main
from tests.conftest import STANDIN_MLM, needs_shared
from tests.test_pll import naive_scores

LINES = [
    {"context": "The cat sat on the", "candidates": ["mat.", "moon.", "mat."]},
    {"context": "Paris is the capital of", "candidates": ["France."]},
]


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in LINES) + "\n")
    return path


@needs_shared
def test_json_output_has_per_token_scores(standin_mlm, jsonl, tmp_path):
    out = tmp_path / "out.json"
    assert main(["--model", str(STANDIN_MLM), "--input", str(jsonl), "--output", str(out),
                 "--method", "salazar", "--word-level", "--no-progress"]) == 0
    results = json.loads(out.read_text())["results"]
    assert [len(r["candidates"]) for r in results] == [3, 1]
    for line, result in zip(LINES, results):
        for candidate in result["candidates"]:
            expected = naive_scores(standin_mlm, line["context"], " " + candidate["candidate"], "salazar")
            assert candidate["total"] == pytest.approx(sum(e[1] for e in expected), abs=1e-4)
            assert [t["logprob"] for t in candidate["tokens"]] == pytest.approx([e[1] for e in expected], abs=1e-4)
            assert candidate["words"]
    assert results[0]["best"] == max(results[0]["candidates"], key=lambda c: c["score"])["candidate"]


@needs_shared
def test_csv_output_is_tidy(jsonl, tmp_path):
    out = tmp_path / "out.csv"
    assert main(["--model", str(STANDIN_MLM), "--input", str(jsonl), "--output", str(out),
                 "--normalize", "--no-progress"]) == 0
    table = pd.read_csv(out)
    assert set(table["level"]) == {"token"}
    per_candidate = table.groupby(["line", "candidate_index"])
    assert len(per_candidate) == 4
    for _, rows in per_candidate:  # per-token rows add up to the candidate's total; score is the mean
        assert rows["logprob"].sum() == pytest.approx(rows["total"].iloc[0], abs=1e-4)
        assert rows["score"].iloc[0] == pytest.approx(rows["total"].iloc[0] / len(rows), abs=1e-5)


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"context": "x"}\n')
    assert main(["--model", str(STANDIN_MLM), "--input", str(bad), "--output", str(tmp_path / "o.json")]) == 2
    assert "line 1" in capsys.readouterr().err
