"""``python -m demo.generate``: options reach the engine, errors read as messages."""

import json

import pytest

from demo.generate import main
from tests.conftest import STANDIN_MLM, needs_shared

pytestmark = needs_shared


def test_cli_json_digits(capsys):
    result = main(["--model", str(STANDIN_MLM), "--prompt", "The code is 123456. The code is",
                   "--digits", "6", "--json", "--no-progress"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["text"] == result.text and printed["stop_reason"] == "digits"
    assert len(printed["text"].strip()) == 6 and printed["text"].strip().isdigit()


def test_cli_trace_choices_and_prompt_file(tmp_path, capsys):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("The capital of France is Paris. The capital of Germany is", encoding="utf-8")
    result = main(["--model", str(STANDIN_MLM), "--prompt-file", str(prompt), "--choice", "paris",
                   "--choice", "berlin", "--trace", "--strategy", "beam", "--num-beams", "2",
                   "--no-progress"])
    out = capsys.readouterr().out
    assert result.text in ("paris", "berlin") and out.strip().endswith(result.text)
    assert "step   0  window:" in out and "<[MASK]>" in out and "beam" in out


def test_cli_reports_bad_input_without_traceback(capsys):
    with pytest.raises(SystemExit, match="max_new_tokens"):
        main(["--model", str(STANDIN_MLM), "--prompt", "Hello", "--max-new-tokens", "0"])
