"""Data-parallel ``score``, ``probe`` and ``evaluate`` (``demo.evaluation.data_parallel``, ``resumable``), against the one-process
run as the reference: two CPU processes under torchrun (gloo) write the same file, in the same
order, byte for byte; an interrupted run resumed by another number of processes writes each item
once and the same file; the sharing out and merging by hand.

Every command runs in a fresh process with one thread (``OMP_NUM_THREADS=1``, as torchrun sets
for each of its processes), so the one-process reference and the two processes run the same
kernels on the same chunks: bit-identical numbers, not numbers within float noise.
"""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from demo.cli import main
from demo.evaluation.data_parallel import Processes, share
from demo.evaluation.haystack import grid_cells, run_grid
from demo.evaluation.identity import digest
from demo.evaluation.resumable import ChunkParts, chunks, in_input_order, run_chunks
from demo.evaluation_settings import GridSettings
from tests.conftest import STANDIN_MLM

ROOT = Path(__file__).resolve().parents[1]
CHUNK = "3"  # 12 lines: 4 chunks, two for each of two processes
LINES = [
    {"context": "The cat sat on the", "candidates": ["mat.", "moon.", "roof of the old red barn."]},
    {"context": "Paris is the capital of", "candidates": ["France."]},
    {"context": "", "candidates": ["Colorless green ideas sleep furiously.", "Furiously sleep ideas green colorless."]},
    {"context": "She went to the store because she", "candidates": ["needed milk.", "was milk."]},
    {"context": "The keys to the cabinet", "candidates": ["are on the table.", "is on the table."]},
    {"context": "Q: What is two plus two?\nA:", "candidates": ["four", "five", "twenty-two", "fish"]},
    {"context": "Once upon a time, in a land far away, there lived a king who had three daughters, and "
                "the youngest of them was", "candidates": ["the most beautiful.", "a teapot."]},
    {"context": "The author that the critics praised", "candidates": ["writes well.", "write well."]},
    {"context": "Water boils at", "candidates": ["100 degrees Celsius.", "10 degrees Celsius."]},
    {"context": "He", "candidates": ["left.", "lefted."]},
    {"context": "The children", "candidates": ["play outside in the garden every afternoon.",
                                               "plays outside in the garden every afternoon."]},
    {"context": "Which is heavier, a kilogram of feathers or a kilogram of steel? Neither:",
     "candidates": ["they weigh the same.", "steel is heavier."]},
]

needs_two_processes = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="this torch build has no gloo backend, so two CPU processes cannot talk")


def launch(processes: int, *argv) -> subprocess.CompletedProcess:
    """``python -m demo ARGV`` alone, or under torchrun as that many CPU processes."""
    runner = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
               str(processes)] if processes > 1 else [sys.executable])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.run([*runner, "-m", "demo", *map(str, argv), "--no-progress"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def ok(run: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert run.returncode == 0, run.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    if not STANDIN_MLM.is_dir():
        pytest.skip("../shared/models/minilm-l6-mlm-standin is not beside this clone")
    path = tmp_path_factory.mktemp("input") / "items.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def one_process(items, tmp_path_factory):
    """suffix -> the bytes a one-process run writes (the reference)."""
    folder = tmp_path_factory.mktemp("one")
    written = {}
    for suffix in (".csv", ".json"):
        out = folder / f"scores{suffix}"
        ok(launch(1, "score", "--model", STANDIN_MLM, "--input", items, "--output", out, "--chunk-size", CHUNK))
        written[suffix] = out.read_bytes()
        assert not (folder / f"scores{suffix}.parts").exists()  # merged, then removed
    return written


# ---------------------------------------------------------------- score


@needs_two_processes
def test_two_processes_score_the_same_file_as_one(items, one_process, tmp_path):
    out = tmp_path / "scores.csv"
    run = ok(launch(2, "score", "--model", STANDIN_MLM, "--input", items, "--output", out, "--chunk-size", CHUNK))
    assert out.read_bytes() == one_process[".csv"]
    assert not out.with_name("scores.csv.parts").exists()
    assert run.stderr.count("-> ") == 1  # rank 0 reports, once
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [int(r["line"]) for r in rows if r["level"] == "candidate"] == [
        k for k, line in enumerate(LINES) for _ in line["candidates"]]  # input order


@needs_two_processes
def test_an_interrupted_run_resumes_each_item_once(items, one_process, tmp_path):
    """Two processes interrupted for real (the output cannot be written: a folder stands in its
    place) leave every chunk in their part files, each process its share (every other chunk). Cut
    back to what they held earlier (rank 0 halfway through writing its second chunk, rank 1 after
    its first), the parts are what an earlier interruption leaves. Two processes resume them: the
    chunks kept are read, not scored again (a value planted in one comes through), the others are
    scored, and the file is the one-process file, byte for byte but for the planted value."""
    out = tmp_path / "scores.json"
    out.mkdir()
    argv = ["score", "--model", STANDIN_MLM, "--input", items, "--output", out, "--chunk-size", CHUNK]
    failed = launch(2, *argv, "--overwrite")
    assert failed.returncode != 0 and "Is a directory" in failed.stderr
    out.rmdir()
    parts = [tmp_path / "scores.json.parts" / f"model-0.rank-{rank}.jsonl" for rank in (0, 1)]
    (header, *zero), (_, *one) = (part.read_text(encoding="utf-8").splitlines(keepends=True) for part in parts)
    assert [[json.loads(line)["chunk"] for line in lines] for lines in (zero, one)] == [[0, 2], [1, 3]]
    first = json.loads(zero[0])
    planted = first["results"][0][0]["total"] = -12345.5  # line 0, candidate 0
    parts[0].write_text(header + json.dumps(first) + "\n" + zero[1][:len(zero[1]) // 2], encoding="utf-8")
    parts[1].write_text(header + one[0], encoding="utf-8")

    ok(launch(2, *argv))
    assert not parts[0].parent.exists()
    resumed, reference = json.loads(out.read_text(encoding="utf-8")), json.loads(one_process[".json"])
    assert resumed["results"][0]["candidates"][0]["total"] == planted  # chunk 0 was kept, not redone
    true_total = reference["results"][0]["candidates"][0]["total"]
    resumed["results"][0]["candidates"][0]["total"] = true_total
    assert resumed == reference  # each item once, in input order, the same numbers
    assert out.read_bytes().replace(b"-12345.5", repr(true_total).encode(), 1) == one_process[".json"]


def test_parts_of_another_run_are_refused(items, tmp_path, capsys):
    """(After the model loads: the run's identity holds what the loaded model is, its precision and
    the commit its revision resolved to.)"""
    out = tmp_path / "scores.csv"
    parts = ChunkParts(tmp_path / "scores.csv.parts", "model-0", digest("another model"))
    with parts.open(0) as handle:
        handle.write(json.dumps({"chunk": 0, "results": []}) + "\n")
    assert main(["score", "--model", str(STANDIN_MLM), "--input", str(items), "--output", str(out)]) == 2
    assert "holds parts of another run" in capsys.readouterr().err and not out.exists()
    assert parts.path(0).is_file()  # left as it was


# ---------------------------------------------------------------- probe


@needs_two_processes
def test_two_processes_probe_the_same_grid_as_one(items, tmp_path):
    """The grid file's rows and every field but the timing (``seconds``), in the same order."""
    grid = ["--lengths", "96", "600", "--depths", "0", "0.5", "1", "--repetitions", "1"]
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    ok(launch(1, "probe", "--model", STANDIN_MLM, *grid, "--output", one))
    run = ok(launch(2, "probe", "--model", STANDIN_MLM, *grid, "--output", two))
    assert run.stdout.count("6 cells") == 1 and not two.with_name("two.csv.parts").exists()

    def untimed(path):
        rows = list(csv.reader(path.open(encoding="utf-8")))
        k = rows[0].index("seconds")
        return [row[:k] + row[k + 1:] for row in rows]

    assert untimed(two) == untimed(one)
    assert len(untimed(one)) == 7 and {row[-1] for row in untimed(one)[1:]} == {"ok", "beyond_limit"}


def test_a_probe_resumes_the_parts_a_launch_left(tiny_model, tmp_path):
    """Parts left by an interrupted launch (rank 1's share of the cells, written as rank 1 writes
    them; rank 0 finished none) are resumed by one process: their cells kept (their timings too),
    the others run, the output in grid order, the same cells as a one-process run's."""
    lm, grid = tiny_model("bert"), GridSettings(lengths=[120, 160], depths=[0.0, 1.0], repetitions=1)
    cells = grid_cells(grid)
    one, out = tmp_path / "one.csv", tmp_path / "grid.csv"
    run_grid(lm, grid, output=one)
    assert run_grid(lm, grid, output=out, processes=Processes(rank=1, count=2)) is None and not out.exists()
    (part,) = (tmp_path / "grid.csv.parts").glob("*.rank-1.jsonl")
    left = [json.loads(line)["results"][0] for line in part.read_text(encoding="utf-8").splitlines()[1:]]
    assert [(r["length"], r["depth"]) for r in left] == [cells[1][:2], cells[3][:2]]
    table = run_grid(lm, grid, output=out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [(int(r["length"]), float(r["depth"])) for r in rows] == [(n, d) for n, d, _ in cells]
    assert [rows[1]["seconds"], rows[3]["seconds"]] == [str(r["seconds"]) for r in left]
    assert not (tmp_path / "grid.csv.parts").exists() and len(table) == 4

    def untimed(path):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(path.open(encoding="utf-8"))]

    assert untimed(out) == untimed(one)


# ---------------------------------------------------------------- evaluate


@needs_two_processes
def test_two_processes_evaluate_the_same_records_as_one(items, tmp_path):
    """The evaluator's records, every field but the timing, in the same order, and the same
    summary; rank 0 says the summary row, once."""
    argv = ["evaluate", "--model", STANDIN_MLM, "--task", "copa:6", "--shots", "1", "--chunk-size", "2"]
    ok(launch(1, *argv, "--output-dir", tmp_path / "one"))
    run = ok(launch(2, *argv, "--output-dir", tmp_path / "two"))
    assert run.stdout.count("copa ") == 1 and not list((tmp_path / "two").glob("*.parts"))

    def untimed(folder):
        (path,) = folder.glob("*.jsonl")
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
                for line in path.read_text(encoding="utf-8").splitlines()]

    assert untimed(tmp_path / "two") == untimed(tmp_path / "one") and len(untimed(tmp_path / "one")) == 6

    def summary(folder):
        (row,) = csv.DictReader((folder / "summary.csv").open(encoding="utf-8"))
        return {k: v for k, v in row.items() if k not in ("seconds", "date", "command")}

    assert summary(tmp_path / "two") == summary(tmp_path / "one")


# ---------------------------------------------------------------- sharing out and merging, by hand


def test_shares_take_turns_and_cover_every_item_once():
    items = list("abcdefg")
    assert [share(items, rank, 3) for rank in range(3)] == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert share(items, 0, 1) == items and share(items[:1], 1, 2) == []
    assert Processes(rank=1, count=2).share(items) == ["b", "d", "f"]


def test_chunks_are_fixed_by_the_input_alone():
    assert chunks(7, 3) == [range(0, 3), range(3, 6), range(6, 7)]
    assert chunks(6, 3) == [range(0, 3), range(3, 6)] and chunks(0, 3) == []
    with pytest.raises(ValueError, match="at least 1"):
        chunks(5, 0)


def test_merge_restores_input_order_and_keeps_each_item_once():
    assert in_input_order([(2, "c"), (0, "a"), (1, "b"), (0, "again")], range(3)) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="1 of 3 items are missing .*first: 1"):
        in_input_order([(2, "c"), (0, "a")], range(3))


def test_run_chunks_writes_a_chunk_per_line_and_resumes(tmp_path):
    parts = ChunkParts(tmp_path / "out.csv.parts", "model-0", digest(["run", 1]))
    calls = []

    def square(items):
        calls.append(list(items))
        return [k * k for k in items]

    assert run_chunks(Processes(), parts, dict(enumerate(chunks(5, 2))), square) == [0, 1, 4, 9, 16]
    assert calls == [[0, 1], [2, 3], [4]]
    lines = parts.path(0).read_text().splitlines()
    assert json.loads(lines[0]) == {"fingerprint": parts.fingerprint}
    assert [json.loads(line) for line in lines[1:]] == [
        {"chunk": 0, "results": [0, 1]}, {"chunk": 1, "results": [4, 9]}, {"chunk": 2, "results": [16]}]
    # an interruption while the last chunk was written: that chunk alone is done again
    parts.path(0).write_text("\n".join(lines[:3]) + "\n" + lines[3][:7])
    calls.clear()
    assert run_chunks(Processes(), parts, dict(enumerate(chunks(5, 2))), square) == [0, 1, 4, 9, 16] and calls == [[4]]
    assert len(parts.path(0).read_text().splitlines()) == 4  # the cut line replaced, not kept
    parts.remove()
    assert not parts.folder.exists()


def test_rank_zero_merges_every_ranks_parts_in_chunk_order_each_chunk_once(tmp_path):
    """Parts of two ranks, out of order and with a chunk in both, merge in chunk order, each chunk
    once (the first rank's), whatever the keys (here a needle grid's cells); the parts of another
    run in the same folder (another model into the same output) are neither read nor removed."""
    folder = tmp_path / "g.csv.parts"
    cells = [(100, 0.0, 0), (100, 1.0, 0), (200, 0.0, 0), (200, 1.0, 0)]
    parts, other = ChunkParts(folder, "grid-m-exact", digest("m")), ChunkParts(folder, "grid-other-exact", digest("o"))
    for rank, done in ((0, [cells[0], cells[2]]), (1, [cells[3], cells[1], cells[0]])):
        with parts.open(rank) as handle:
            handle.writelines(json.dumps({"chunk": cell, "results": [f"{rank}: {cell}"]}) + "\n" for cell in done)
    with other.open(0) as handle:
        handle.write(json.dumps({"chunk": cells[2], "results": ["other"]}) + "\n")
    merged = run_chunks(Processes(), parts, {cell: [cell] for cell in cells}, lambda chunk: pytest.fail("computed again"))
    assert merged == [f"{rank}: {cell}" for rank, cell in zip((0, 1, 0, 1), cells)]
    parts.remove()
    assert [path.name for path in folder.iterdir()] == ["grid-other-exact.rank-0.jsonl"]
