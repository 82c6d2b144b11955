"""``mlm-icl check-model``: known answers tell a model read right from one read wrong.

The reference for "read right" is the offline stand-in MLM (real weights) and SmolLM2 (a real
causal LM); for "read wrong", the same stand-in with its prediction head's weights shuffled (what a
head loaded under the wrong names looks like: trained-looking numbers in the wrong places)."""

import contextlib

import pytest
import torch

from demo.evaluation import model_check
from tests.conftest import STANDIN_MLM, needs_shared


def test_the_papers_figure_is_its_table_6_one_shot_copa():
    # Samuel 2024, table 6, COPA one-shot: 0.1B 67.0, 0.4B 78.0, 0.9B 80.6, 1.4B 84.2
    assert model_check.paper_figure("microsoft/deberta-base") == (67.0, "DeBERTa 0.1B")
    assert model_check.paper_figure("microsoft/deberta-v2-xxlarge") == (84.2, "DeBERTa 1.4B")
    assert model_check.paper_figure("ltg/deberta-large-fixed") == (78.0, "DeBERTa 0.4B")
    assert model_check.paper_figure("bert-base-uncased") is None


@needs_shared
def test_a_model_read_right_passes_the_word_probes(standin_mlm, smollm2):
    for lm in (standin_mlm, smollm2):
        checks = model_check.check_model(lm, lm.name, items=8)
        summary = next(c for c in checks if c.what == "word probes")
        assert summary.status == "pass", [(c.what, c.measured) for c in checks]
        task = checks[-1]
        assert task.what == "COPA 1-shot, 8 items" and task.measured.endswith("%")
        # neither model is in the paper: compared with chance plus two standard errors of 8 items
        assert task.expected == "above chance: more than 85.4% on 8 items"


@needs_shared
def test_a_head_read_wrong_fails_in_words(tmp_path, capsys):
    from demo.cli import main
    from demo.engine.models import load_model
    lm = load_model(str(STANDIN_MLM), device="cpu")
    broken = tmp_path / "broken"
    lm.model.save_pretrained(broken)
    lm.tokenizer.save_pretrained(broken)
    from transformers import AutoModelForMaskedLM
    model = AutoModelForMaskedLM.from_pretrained(broken)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if name.startswith("cls.predictions.transform"):  # the head, misread
                weight.copy_(weight.flatten()[torch.randperm(weight.numel(), generator=generator)].view_as(weight))
    model.save_pretrained(broken)
    assert main(["check-model", "--model", str(broken), "--items", "4", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "FAIL     word probes" in out and "expected at least 4 of 5" in out and "why:" in out
    assert "\"The capital of France is ___\" -> \"Paris\"" in out


def test_the_task_check_compares_with_two_standard_errors(monkeypatch):
    monkeypatch.setattr(model_check, "evaluate", lambda lm, task, folder, run: [
        {"metric": "accuracy", "value": 75.0, "n": 100}])
    # the paper's 0.4B: 78.0 on 100 items, margin 2 * sqrt(.78 * .22 / 100) = 8.3 points
    check = model_check.task_check(None, "microsoft/deberta-large", 100)
    assert check.status == "pass" and "at least 69.7%" in check.expected
    monkeypatch.setattr(model_check, "evaluate", lambda lm, task, folder, run: [
        {"metric": "accuracy", "value": 69.0, "n": 100}])
    assert model_check.task_check(None, "microsoft/deberta-large", 100).status == "fail"
    # a model the paper did not run: chance (50%) + 2 * sqrt(.25 / 100) = 60 points to pass
    assert model_check.task_check(None, "someone/model", 100).status == "pass"
    monkeypatch.setattr(model_check, "evaluate", lambda lm, task, folder, run: [
        {"metric": "accuracy", "value": 55.0, "n": 100}])
    assert model_check.task_check(None, "someone/model", 100).status == "unclear"
    monkeypatch.setattr(model_check, "evaluate", lambda lm, task, folder, run: [
        {"metric": "accuracy", "value": 39.0, "n": 100}])  # below chance by more than 10 points
    assert model_check.task_check(None, "someone/model", 100).status == "fail"


@pytest.mark.parametrize("items", ["0", "x"])
def test_bad_item_counts_are_refused(items, capsys):
    from demo.cli import main
    with pytest.raises(SystemExit) if items == "x" else contextlib.nullcontext():
        assert main(["check-model", "--model", "bert-base-uncased", "--items", items]) == 2
    assert "items" in capsys.readouterr().err

