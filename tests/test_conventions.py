"""One owner per convention: the same item scores the same through every door.

A few-shot COPA item (its demonstrations joined by blank lines) goes through the Ranking tab's
handler, the ``score`` command, the evaluator and the core API, on the stand-in MLM (whose
tokenizer drops "\\n") and on SmolLM2 (which keeps it): all four must give the same scores.
The rules themselves are checked by hand-written cases (``demo.engine.text``).

Sizes, counted with ``ast`` over every floor of demo/: no function longer than a screen, none
with more than eight parameters (an API handler receives its settings as one object: the public
API's parameters, tests/public_api.json, are its endpoint's signature, ``settings_form.endpoint``).
"""

import ast
import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import tests.floats as floats
from demo import user_text
from demo.cli import main
from demo.engine import text
from demo.engine.pll import score_candidates
from demo.evaluation.evaluate import evaluate
from demo.evaluation_settings import RunSettings
from demo.tasks import add_task_dir
from demo.ui.ranking import rank_causal, rank_masked
from tests.conftest import needs_shared

SHOTS = 3
PRESETS = "assets/presets/task_examples.json"


def test_text_rules_by_hand():
    assert text.encode_newlines("A.\n\nB \n C", False) == "A.\\n \\n B\\n C"
    assert text.encode_newlines("A.\n\nB", True) == "A.\n\nB"
    assert text.decode_newlines("A.\\n \\n B", False) == "A.\n\nB"
    assert text.join("Answer:", "Paris") == " Paris"
    assert text.join("Answer: ", "Paris") == "Paris" and text.join("Answer:", " Paris") == " Paris"
    # the context's trailing whitespace belongs to the completion, newlines too (lm-eval's
    # _encode_pair: context.rstrip()); newlines become the marker
    assert text.model_pair("Q?\nA: ", "Paris.", False) == ("Q?\\n A:", " Paris.")
    assert text.model_pair("Q?\nA: ", "Paris.", True) == ("Q?\nA:", " Paris.")
    assert text.model_pair("Q?\nA:\n", "Paris.", True) == ("Q?\nA:", "\nParis.")
    assert text.model_pair("A.\r\n\t", "B", True) == ("A.", "\r\n\tB")
    # a newline at the junction gets one marker, as anywhere else, on either side of the split
    assert text.model_pair("foo ", "\nbar", False) == ("foo", "\\n bar")
    assert text.model_pair("A\n", " B", False) == ("A", "\\n B")
    assert text.model_pair("A \n\n", "B", False) == ("A", "\\n \\n B")
    # text a tokenizer cannot read is refused in words; user text is quoted without Python escapes
    assert user_text.check_readable("a \n\u00e9", "prompt") == "a \n\u00e9" and user_text.check_readable("\n", "x") == "\n"
    with pytest.raises(ValueError, match=r"^The prompt holds a broken character \(U\+DC80, half of an emoji"):
        user_text.check_readable("ok\udc80", "prompt")
    with pytest.raises(ValueError, match=r"^The candidate is only invisible characters"):
        user_text.check_readable(" \u200b\ufeff\x00", "candidate")
    assert user_text.quoted(" \x00\x00") == " ⟨U+0000⟩⟨U+0000⟩" and user_text.quoted("a\nb\u200b") == "a b⟨U+200B⟩"
    assert user_text.quoted("x" * 100, width=10) == "xxxxxxx..."


@pytest.fixture(scope="module")
def copa_task(tmp_path_factory):
    """A copy of the COPA task over files of our own: one evaluated item, SHOTS demonstrations
    (so the evaluator's context is known), scoring the answer span like the Ranking tab."""
    records = json.loads((Path(__file__).resolve().parents[1] / PRESETS).read_text())["copa"]
    folder = tmp_path_factory.mktemp("copa_task")
    (folder / "item.jsonl").write_text(json.dumps(records[SHOTS]) + "\n")
    (folder / "demos.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:SHOTS]))
    (folder / "copa_copy.yaml").write_text(
        "tasks:\n"
        "  - name: copa_conventions\n"
        "    data: {local: item.jsonl}\n"
        "    demos: {local: demos.jsonl}\n"
        "    convert: copa\n"
        '    template: "{premise} {connector} {answer}"\n'
        "    kind: choice\n"
        f"    shots: {SHOTS}\n"
        "    metrics: [accuracy]\n")
    return add_task_dir(folder)[0]


def _four_ways(lm, kind, task, tmp_path):
    """Per-candidate scores from the evaluator, the core API, the score command and the tab."""
    evaluate(lm, task, tmp_path / "eval", RunSettings(shots=SHOTS))
    record = json.loads(next((tmp_path / "eval").glob("*.jsonl")).read_text().splitlines()[0])
    context, candidates = record["context"], record["candidates"]
    assert context.count("\n\n") == SHOTS  # the demonstrations' blank lines reach every door

    core = score_candidates(lm, context, candidates)

    (tmp_path / "in.jsonl").write_text(json.dumps({"context": context, "candidates": candidates}) + "\n")
    assert main(["score", "--model", lm.name, "--kind", kind, "--input", str(tmp_path / "in.jsonl"),
                 "--output", str(tmp_path / "out.json"), "--no-progress"]) == 0
    command = [c["score"] for c in json.loads((tmp_path / "out.json").read_text())["results"][0]["candidates"]]

    if kind == "masked":
        outputs = rank_masked(context, "\n".join(candidates), lm.name, "right_masks", 2, False,
                              "completion", "")
    else:
        outputs = rank_causal(context, "\n".join(candidates), lm.name, False, "completion", "")
    tab = [s.score for s in outputs.scores]
    return record["scores"], core, command, tab, (outputs.python, outputs.shell)


@needs_shared
@pytest.mark.floats
@pytest.mark.parametrize("model", ["standin_mlm", "smollm2"])
def test_one_item_scores_the_same_through_every_door(model, copa_task, tmp_path, request):
    lm = request.getfixturevalue(model)
    evaluator, core, command, tab, reproduce = _four_ways(lm, lm.kind, copa_task, tmp_path)
    assert len(evaluator) == 2
    # each door may batch the candidates differently: float32's bound for a sum of their tokens
    evaluator = [floats.total(e, len(s.tokens), lm) for e, s in zip(evaluator, core)]
    for other in ([s.score for s in core], command, tab):
        assert other == evaluator
    # the tab's "Reproduce" block: its Python call and its command line give the same scores
    python, shell = reproduce
    namespace = {}
    exec(python, namespace)
    assert [s.score for s in namespace["result"]] == evaluator
    subprocess.run(["bash", "-c", shell], cwd=tmp_path, check=True, capture_output=True)
    rows = pd.read_csv(tmp_path / "scores.csv").query("level == 'candidate'")
    assert rows["score"].tolist() == evaluator


@needs_shared
def test_the_scored_text_has_the_marker_only_where_newlines_are_lost(standin_mlm, smollm2):
    context = "The sun was rising.\n\nThe grass was cut.\n\nMy body cast a shadow because"
    mlm, clm = (score_candidates(lm, context, ["the sun rose."])[0] for lm in (standin_mlm, smollm2))
    assert not standin_mlm.newline_survives and smollm2.newline_survives
    assert "rising.\\n \\n The grass" in mlm.text and "\n" not in mlm.text
    assert "rising.\n\nThe grass" in clm.text and "\\n" not in clm.text
    assert mlm.text.endswith("because the sun rose.") and clm.text.endswith("because the sun rose.")


def test_typed_special_tokens_are_allowed_and_always_said(tiny_model, capsys):
    """One rule for the core, the app and the command line (demo.engine.text.special_token_note)."""
    from demo.engine.generation import generate
    bert, gpt2 = tiny_model("bert"), tiny_model("gpt2")
    assert text.special_token_note("A [MASK] sat.", bert.tokenizer) == (
        "The text contains [MASK]: the model reads it as its special token, not as plain text.")
    assert text.special_token_note("A [MASK] sat.", gpt2.tokenizer) is None  # not special there
    assert "<|endoftext|>" in text.special_token_note("end<|endoftext|>", gpt2.tokenizer)
    assert generate(bert, "The [SEP] cat", max_new_tokens=1).notes == [
        "The text contains [SEP]: the model reads it as its special token, not as plain text."]
    assert generate(bert, "The cat", max_new_tokens=1).notes == []


@needs_shared
@pytest.mark.parametrize("model", ["standin_mlm", "smollm2"])
def test_the_prompting_tabs_reproduce_block_writes_the_same_text(model, request, capsys, monkeypatch):
    """The Python call and the command line under a generation give the page's text."""
    import shlex

    from demo.ui.prompting import generate_causal, generate_masked
    lm = request.getfixturevalue(model)
    handler = generate_masked if lm.kind == "masked" else generate_causal
    outputs = handler(prompt="Q: What is the capital of France?\nA: Paris\nQ: And of Italy?\nA:",
                      model_name=lm.name, strategy="beam", max_new_tokens=4, num_beams=3,
                      temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0,
                      padding_masks="default", stop_at_newline=True, seed=0)
    text, python, shell = outputs.text, outputs.python, outputs.shell
    assert "num_beams=3" in python and "--num-beams 3" in shell and "--strategy beam" in shell
    namespace = {}
    monkeypatch.setenv("DEMO_LOCAL_MODELS", os.environ["DEMO_LOCAL_MODELS"])  # restored after the snippet sets it
    exec(python, namespace)
    assert namespace["result"].text == text
    capsys.readouterr()
    command = shell[shell.index("mlm-icl "):]  # after the lines that say where the local model is
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 0
    out = capsys.readouterr().out  # (the steps as text first, --trace: the page shows both playbacks)
    assert out.endswith(text + "\n") and "step   0" in out


@needs_shared
@pytest.mark.parametrize("request_kind, settings", [
    ("seeded", dict(strategy="sample", temperature=0.9, seed=7)),
    ("unseeded", dict(strategy="sample", temperature=0.9, seed=None)),
    ("ignored", dict(strategy="greedy", temperature=0.7, top_k=5, seed=3)),
])
def test_the_command_line_reproduce_of_a_page_run_gives_its_text(request_kind, settings, standin_mlm, capsys,
                                                                  monkeypatch):
    """Seeded, unseeded (the seed drawn is said and written into the command) and with settings
    that do nothing for the run (said, and left out of the command): the page's command line
    reruns to the page's text."""
    import html
    import re
    import shlex

    from demo.ui.prompting import generate_masked
    monkeypatch.setenv("DEMO_LOCAL_MODELS", os.environ["DEMO_LOCAL_MODELS"])
    outputs = generate_masked(prompt="Q: What is the capital of France?\nA: Paris\nQ: And of Italy?\nA:",
                              model_name=standin_mlm.name, max_new_tokens=6, padding_masks="default",
                              stop_at_newline=False, **dict(dict(top_k=0, top_p=1.0, repetition_penalty=1.0), **settings))
    stats, shell = html.unescape(outputs.stats), outputs.shell
    if request_kind == "unseeded":
        drawn = re.search(r"No seed was given: this run drew seed (\d+), which its Reproduce code uses", stats)
        assert drawn and f"--seed {drawn.group(1)}" in shell, (stats, shell)
    if request_kind == "ignored":
        assert "Temperature (0.7) and Top-k (5) act only when sampling: left out of this run and of its Reproduce code." \
            in stats and "Seed (3) acts only when sampling or in a random order" in stats
        assert "--top-k" not in shell and "--temperature" not in shell and "--seed" not in shell
    capsys.readouterr()
    command = shell[shell.index("mlm-icl "):]
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 0
    assert capsys.readouterr().out.endswith(outputs.text + "\n")


@needs_shared
def test_a_bfloat16_page_run_reproduces_in_bfloat16(standin_mlm, capsys, monkeypatch):
    """A deployment in bfloat16: both Reproduce forms load the model in bfloat16 (the command line
    and scripts default to float32) and rerun to the page's text."""
    import shlex

    from demo.ui.prompting import generate_masked
    monkeypatch.setenv("DEMO_LOCAL_MODELS", os.environ["DEMO_LOCAL_MODELS"])
    monkeypatch.setenv("DEMO_CPU_DTYPE", "bfloat16")
    outputs = generate_masked(prompt="Q: What is the capital of France?\nA: Paris\nQ: And of Italy?\nA:",
                              model_name=standin_mlm.name, max_new_tokens=4, padding_masks="default",
                              stop_at_newline=False, strategy="sample", temperature=0.9, seed=7, top_k=0,
                              top_p=1.0, repetition_penalty=1.0)
    assert "dtype='bfloat16'" in outputs.python and "--dtype bfloat16" in outputs.shell
    assert "bfloat16" in outputs.stats  # the model line
    namespace = {}
    exec(outputs.python, namespace)
    assert namespace["result"].text == outputs.text
    capsys.readouterr()
    command = outputs.shell[outputs.shell.index("mlm-icl "):]
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 0
    assert capsys.readouterr().out.endswith(outputs.text + "\n")


# ---------------------------------------------------------------- sizes


DEMO = Path(__file__).resolve().parents[1] / "demo"
MAX_LINES = 60  # a function reads in one screen
MAX_PARAMETERS = 8  # more travel in a settings object or a dict of the call's values


def _functions():
    """(path relative to demo/, function node) for every function and method of the package."""
    for path in sorted(DEMO.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path.relative_to(DEMO), node


def _parameters(node) -> int:
    """Parameters a caller can pass: ``self`` and ``cls`` left out, ``*args`` and ``**kwargs`` one each."""
    a = node.args
    names = [p.arg for p in a.posonlyargs + a.args]
    own = 1 if names and names[0] in ("self", "cls") else 0
    return len(names) - own + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def test_no_function_is_longer_than_a_screen():
    long = [f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path, node in _functions() if node.end_lineno - node.lineno + 1 > MAX_LINES]
    assert not long, "split these (panels, settings objects and small helpers): " + "; ".join(long)


def test_no_function_takes_more_than_eight_parameters():
    many = [f"{path}:{node.lineno} {node.name} ({_parameters(node)} parameters)"
            for path, node in _functions()
            if _parameters(node) > MAX_PARAMETERS]
    assert not many, "group these in a settings object or a frozen dataclass: " + "; ".join(many)
