"""The Infill tab (demo.ui.infill_tab): the masked LM's fill from both sides, the causal LM's from
the left, both fills scored by both models, and bad input said in words. The engine itself is
tested against naive loops in tests/test_infill.py."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import STANDIN_MLM, needs_shared, tokens_read

pytest.importorskip("gradio")
from demo.ui import infill_tab  # noqa: E402

SHE, HE = "The [blank] said that she would be late for dinner.", "The [blank] said that he would be late for dinner."


@pytest.fixture
def app(monkeypatch):
    from demo.ui.app import build_app
    return build_app()


@needs_shared
def test_the_masked_fill_reads_the_right_context_and_the_causal_one_cannot(app, smollm2):
    from demo.engine.infill import infill
    from demo.engine.models import load_model
    from tests.conftest import STANDIN_MLM

    causal = infill_tab.deployment().catalog.default("causal").name
    masked = [infill_tab.infill_masked(t, STANDIN_MLM.name, "left_to_right", 1, 0) for t in (SHE, HE)]
    left = [infill_tab.infill_causal(t, causal, "left_to_right", 1, 0) for t in (SHE, HE)]
    # the page shows what the engine fills (an independent call), marked in the text
    engine = [infill(load_model(str(STANDIN_MLM), device="cpu"), t).fills[0] for t in (SHE, HE)]
    for shown, fill in zip(masked, engine):
        assert f'<mark class="demo-fill">{fill}</mark>' in shown.filled and shown.filled_text.startswith(f"The {fill} said")
    assert engine[0] != engine[1]  # only the word after the blank differs, and the fill follows it
    assert left[0].filled_text.split(" said")[0] == left[1].filled_text.split(" said")[0]  # blind to it
    assert "before each blank" in left[0].stats
    assert masked[0].trace.count('class="demo-step"') == 1 and "demo-mask-predicted" in masked[0].trace


@needs_shared
def test_both_fills_are_scored_by_both_models(app):
    from demo.engine.infill_causal import rank_fills
    from demo.engine.models import load_model
    from demo.engine.sources import smollm2_gguf
    from tests.conftest import STANDIN_MLM

    causal = infill_tab.deployment().catalog.default("causal").name
    texts = ["The lady said that she would be late.", "The - said that she would be late."]
    html = infill_tab.rank_both(*texts, STANDIN_MLM.name, causal)
    expected = rank_fills([load_model(str(STANDIN_MLM), device="cpu"), load_model(str(smollm2_gguf()), device="cpu")],
                          texts)
    for ranking in expected:
        for score in ranking.scores:
            assert f"{score:.2f}" in html
    assert html.count("<b>") == 1 + len(expected)  # the title, and each model's preferred fill


def test_bad_input_is_said_in_words(app):
    cases = [("no blank here", "no blank"), ("The [blank:x] is", "is not a blank"),
             ("[blank] " * 9, "at most 8"), ("", "empty")]
    for text, words in cases:
        shown = infill_tab.infill_masked(text, "minilm-l6-mlm-standin", "left_to_right", 1, 0)
        assert "demo-error" in shown.filled and words in shown.filled, (text, shown.filled)
        assert shown.trace == "" and shown.filled_text == ""
    shown = infill_tab.infill_masked(SHE, "minilm-l6-mlm-standin", "sideways", 1, 0)
    assert "demo-error" in shown.filled and "order" in shown.filled
    shown = infill_tab.infill_causal(SHE, "", "left_to_right", 1, 0)
    assert "Skipped" in shown.filled


def test_the_reproduce_command_fills_the_same_text_where_it_is_pasted(app, standin_mlm, tmp_path):
    """The command line, pasted into a shell that lacks the app's settings (no DEMO_* variable),
    finds the local model (its block sets the variable) and fills the same text."""
    import os
    shown = infill_tab.infill_masked(HE, standin_mlm.name, "confidence", 1, 0)
    assert f"export DEMO_LOCAL_MODELS={STANDIN_MLM.resolve()}\n" in shown.shell
    bare = {k: v for k, v in os.environ.items() if not k.startswith("DEMO_")}
    bare["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])  # this clone's demo, run from elsewhere
    run = [sys.executable, "-m", "demo"]  # mlm-icl, as this interpreter has it
    pasted = subprocess.run(["bash", "-c", shown.shell.replace("mlm-icl ", f"{' '.join(run)} ")],
                            capture_output=True, text=True, env=bare, cwd=tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.strip().endswith(shown.filled_text)
    # without that line, the shell knows no model by that name
    command = shown.shell[shown.shell.index("mlm-icl ") + len("mlm-icl "):]
    import shlex
    alone = subprocess.run(run + shlex.split(command), capture_output=True, text=True, env=bare, cwd=tmp_path)
    assert alone.returncode != 0 and f"Could not load model '{STANDIN_MLM.name}'" in alone.stderr


# ---------------------------------------------------------------- the work each step is charged

CAPITALS = [("France", "Paris"), ("Germany", "Berlin"), ("Spain", "Madrid"), ("Portugal", "Lisbon"),
            ("Austria", "Vienna"), ("Poland", "Warsaw"), ("Greece", "Athens"), ("Norway", "Oslo"),
            ("Sweden", "Stockholm"), ("Finland", "Helsinki"), ("Ireland", "Dublin"), ("Hungary", "Budapest"),
            ("Egypt", "Cairo"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Chile", "Santiago"),
            ("Canada", "Ottawa"), ("Cuba", "Havana"), ("Iran", "Tehran"), ("Russia", "Moscow")]


def few_shot(shots: int, question: str = "Q: What is the capital of Italy?\nA: [blank:3]\n") -> str:
    return "".join(f"Q: What is the capital of {c}?\nA: {a}\n" for c, a in CAPITALS[:shots]) + question


@needs_shared
def test_a_few_shot_fill_fits_the_default_budget_on_a_150m_encoder():
    """The Space's default encoder (Ettin 150M, ModernBERT's tokenizer): a fill of three tokens
    after 300 tokens of examples is three passes over the text, well within the budget; scoring
    the filled texts whole (the page's last step) is not, which is why it is its own step."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from demo.app.budget import filled_texts_work, infill_work
    from demo.app_settings import AppSettings
    from demo.settings import InfillSettings
    from tests.conftest import TOKENIZERS

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "answerdotai-ModernBERT-large")
    encoder = SimpleNamespace(kind="masked", tokenizer=tokenizer, n_parameters=150_000_000,
                              newline_survives=True, check_length=lambda n, what: None)
    text = few_shot(len(CAPITALS))
    assert 300 <= len(tokenizer(text)["input_ids"]) < 330
    work = infill_work(encoder, text, InfillSettings())
    assert work.fits(AppSettings()) and "3 masked token(s)" in work.what
    auto = infill_work(encoder, text.replace("[blank:3]", "[blank:auto]"), InfillSettings())
    assert auto.tokens > 100 * work.tokens  # only a [blank:auto] scores its tries whole
    assert not filled_texts_work(encoder, [text, text]).fits(AppSettings())


@needs_shared
def test_the_count_is_what_the_engines_forward_passes_read(standin_mlm, tiny_model):
    """Counted before it runs = read while it runs: exactly for a masked LM's fixed blanks; for a
    [blank:auto] (its tries' texts unknown until filled) and a causal LM (which may stop early)
    at most a little more."""
    from demo.app.budget import infill_work
    from demo.engine.infill import infill
    from demo.engine.infill_causal import causal_infill
    from demo.settings import InfillSettings

    settings = InfillSettings()
    for text in (few_shot(12), few_shot(6, "Q: What is the [blank:2] of [blank]?\nA: [blank:4]\n")):
        _, read = tokens_read(standin_mlm, lambda: infill(standin_mlm, text, settings))
        assert read == infill_work(standin_mlm, text, settings).tokens, text
    text = few_shot(1, "Q: What is the capital of Italy?\nA: [blank:auto]\n")  # its tries' PLLs: short
    _, read = tokens_read(standin_mlm, lambda: infill(standin_mlm, text, settings))
    assert read <= infill_work(standin_mlm, text, settings).tokens < 1.05 * read

    gpt2 = tiny_model("gpt2")
    for text in (few_shot(6, "Q: What is the [blank:2] of [blank]?\nA: [blank:4]\n"),
                 few_shot(6, "Q: What is the capital of Italy?\nA: [blank:auto]\n")):
        _, read = tokens_read(gpt2, lambda: causal_infill(gpt2, text, settings))
        assert read <= infill_work(gpt2, text, settings).tokens < 1.1 * read, text


def _seconds(run) -> float:
    import time
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


@needs_shared
def test_a_fill_over_the_budget_is_refused_with_about_its_time(app, standin_mlm):
    """The refusal's seconds, at the speed this machine runs the same model, are within 2x of
    the time the fill takes here. Both are timed in turns, the quickest of each kept: a busy
    machine slows both alike."""
    import dataclasses

    import torch

    from demo.app.budget import infill_work
    from demo.engine.infill import infill
    from demo.settings import InfillSettings
    from demo.ui import common

    text, settings = few_shot(12, "Q: What is the capital of Italy?\nA: [blank:4]\n"), InfillSettings()
    work = infill_work(standin_mlm, text, settings)
    window = torch.full((1, work.tokens // 4), standin_mlm.tokenizer.mask_token_id)  # what each pass reads
    passes, fills = [], []
    with torch.inference_mode():
        for _ in range(3):
            passes.append(_seconds(lambda: standin_mlm.model.base_model(window)))
            fills.append(_seconds(lambda: infill(standin_mlm, text, settings)))
    gflops = 2 * standin_mlm.n_parameters * window.shape[1] / min(passes) / 1e9
    assert 0.5 < work.seconds(gflops) / min(fills) < 2

    served = infill_tab.deployment()
    common.use(dataclasses.replace(served, settings=served.settings.model_copy(
        update=dict(max_request_tflop=work.tflop / 2, assumed_gflops=gflops))))
    refused = infill_tab.infill_masked(text, standin_mlm.name, "left_to_right", 1, 0)
    assert "too big" in refused.filled and f"roughly {work.seconds(gflops):.0f} s" in refused.filled
    assert refused.filled_text == ""


@needs_shared
def test_a_long_few_shot_text_with_one_blank_is_filled_on_the_default_budget(app, standin_mlm):
    text = few_shot(18, "Q: What is the capital of Italy, land of pasta and art?\nA: [blank]\n")
    assert len(text) == 862
    shown = infill_tab.infill_masked(text, standin_mlm.name, "left_to_right", 1, 0)
    assert "demo-error" not in shown.filled and shown.filled_text.startswith(text.split("[blank]")[0])


@needs_shared
def test_scoring_both_fills_says_when_it_was_skipped_as_too_big(app, smollm2):
    import dataclasses

    from demo.app.budget import filled_texts_work
    from demo.ui import common
    from tests.conftest import STANDIN_MLM

    causal = infill_tab.deployment().catalog.default("causal").name
    texts = [few_shot(12, "Q: What is the capital of Italy?\nA: Rome\n"),
             few_shot(12, "Q: What is the capital of Italy?\nA: Milan\n")]
    masked = infill_tab.load(STANDIN_MLM.name, "masked")
    served = infill_tab.deployment()
    common.use(dataclasses.replace(served, settings=served.settings.model_copy(
        update=dict(max_request_tflop=filled_texts_work(masked, texts).tflop / 2))))
    shown = infill_tab.rank_both(*texts, STANDIN_MLM.name, causal)
    assert "demo-note" in shown and "<table" not in shown
    assert "scoring them whole was skipped" in shown and "too big" in shown
