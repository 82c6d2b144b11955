"""Prompting tab: continue one few-shot prompt with a masked LM and a causal LM, side by side.

Wiring only: ``demo.generation.generate`` decodes (with ``trace=True`` for the masked LM, which
feeds the step-by-step view, ``demo.ui.step_view``).
"""

import gradio as gr

from ..catalog import Catalog
from ..settings import GenerationSettings
from .common import (Dropdown, Number, Radio, Slider, handler, load, message, model_note,
                     model_picker, pair_picker, read_presets, reproduce_block, reproduction,
                     with_arguments)
from .limits import LIMITS, check_text, whole
from .step_view import step_view

HELP = """
Type a prompt (or pick a preset) and let both models continue it. The **masked LM** generates
left to right the way the BERTs paper does: it appends `[MASK]` (plus a few *padding masks*
that keep the end-of-text token away), predicts the first mask, keeps that token and repeats.
There is no key/value cache, so every step re-reads the whole text: slower than a causal LM.
The **step-by-step view** shows, for each step, the window the masked LM saw, its top guesses
with probabilities, and the beams.
"""

STRATEGIES = [("greedy", "greedy"), ("beam search", "beam"), ("sampling", "sample")]
PADDING_CHOICES = [("family default", "default")] + [(str(n), str(n)) for n in range(0, 5)]


def _settings(strategy, max_new_tokens, num_beams, temperature, top_k, top_p, repetition_penalty,
              padding_masks, stop_at_newline, seed, trace):
    """The page's widgets (or an API call's values) as the core's settings, which check them."""
    max_new_tokens = whole(max_new_tokens)
    if isinstance(max_new_tokens, int) and max_new_tokens > LIMITS.max_new_tokens:
        raise ValueError(f"max_new_tokens may be at most {LIMITS.max_new_tokens} new tokens per request "
                         f"here (you asked for {max_new_tokens}).")
    return GenerationSettings(
        max_new_tokens=max_new_tokens, strategy=strategy, num_beams=whole(num_beams),
        temperature=temperature, top_k=whole(top_k), top_p=top_p,
        repetition_penalty=repetition_penalty,
        padding_masks=None if padding_masks in (None, "", "default") else whole(padding_masks),
        stop_at_newline=stop_at_newline, seed=None if seed in (None, "") else whole(seed),
        trace=trace, trace_top_k=5)


_CORE = GenerationSettings()
# The core's defaults, except two choices of the page: a short answer that stops at the end of
# its line (a few-shot answer is one line), and padding masks shown as "family default".
SETTING_DEFAULTS = dict(strategy=_CORE.strategy, max_new_tokens=24, num_beams=_CORE.num_beams,
                        temperature=_CORE.temperature, top_k=_CORE.top_k, top_p=_CORE.top_p,
                        repetition_penalty=_CORE.repetition_penalty, padding_masks="default",
                        stop_at_newline=True, seed=_CORE.seed)
SETTING_NAMES = tuple(SETTING_DEFAULTS)


def preset_values(preset: dict | None) -> dict:
    """Prompt, note and decoding settings a preset puts in the page (the defaults without one)."""
    values = dict(SETTING_DEFAULTS, prompt="", note="")
    if preset is None:
        return values
    values.update(preset.get("settings", {}), prompt=preset["prompt"])
    paper, expected = preset.get("paper_output") or {}, preset.get("expected")
    if paper:
        values["note"] = "**The paper's models wrote:** " + " · ".join(
            f"{m}: *{t}*" for m, t in paper.items())
    elif expected:
        values["note"] = f"**Expected:** *{expected}*"
    values["note"] += f"  \n<sub>Source: {preset.get('source', '')}</sub>"
    return values


def _stats(lm, result) -> str:
    stats = (f"{len(result.tokens)} tokens in {result.seconds:.1f} s "
             f"({result.seconds_per_step * 1000:.0f} ms per step) · prompt {result.prompt_tokens} "
             f"tokens · stopped by: {result.stop_reason.replace('_', ' ')}")
    timed_out = result.stop_reason == "time_limit"
    return (f"<div>{model_note(lm)}</div><div>{stats}</div>"
            + "".join(message(note, "note") for note in result.notes)
            + (message(f"Stopped after {LIMITS.max_request_seconds:.0f} s, the time one request may "
                       f"take here; the text so far is shown.", "note") if timed_out else ""))


def _run(prompt, model_name, kind, settings):
    """(model, result, its Python call, its command line)."""
    from ..budget import generation_work
    from ..generation import generate

    prompt = check_text(prompt, "prompt")
    lm = load(model_name, kind)
    generation_work(lm, prompt, settings).check(LIMITS)  # refused before it runs
    result = generate(lm, prompt, settings, progress=True, time_limit=LIMITS.max_request_seconds)
    return (lm, result, *reproduction("generate", model_name, kind, settings, prompt=prompt))


GENERATION_ARGUMENTS = """\
        prompt: the few-shot prompt to continue
        model_name: the model: Hugging Face Hub id, or one of the app's models
        strategy: greedy, beam or sample
        max_new_tokens: upper bound on the continuation's length in tokens
        num_beams: beams kept (beam search only)
        temperature: sampling temperature (sampling only)
        top_k: sample from the k likeliest tokens, 0 = all (sampling only)
        top_p: sample from the smallest set holding this probability mass (sampling only)
        repetition_penalty: above 1 discourages repeating tokens
        padding_masks: masks after the predicted one (masked LMs), or "default" for the family's
        stop_at_newline: end the continuation at the first line break
        seed: sampling seed
"""


@handler(lambda error: ("", error, "", "", ""))
@with_arguments(GENERATION_ARGUMENTS)
def generate_masked(prompt, model_name, strategy, max_new_tokens, num_beams, temperature, top_k, top_p,
                    repetition_penalty, padding_masks, stop_at_newline, seed,
                    progress=gr.Progress(track_tqdm=True)):
    """Continue a prompt with a masked LM, the BERTs paper's way: append [MASK] (and padding
    masks) and [SEP], predict the first mask, keep it, repeat. Also returns the step-by-step view."""
    settings = _settings(strategy, max_new_tokens, num_beams, temperature, top_k, top_p,
                         repetition_penalty, padding_masks, stop_at_newline, seed, trace=True)
    lm, result, python, shell = _run(prompt, model_name, "masked", settings)
    return result.text, _stats(lm, result), step_view(result.steps), python, shell


@handler(lambda error: ("", error, "", ""))
@with_arguments(GENERATION_ARGUMENTS)
def generate_causal(prompt, model_name, strategy, max_new_tokens, num_beams, temperature, top_k, top_p,
                    repetition_penalty, padding_masks, stop_at_newline, seed,
                    progress=gr.Progress(track_tqdm=True)):
    """Continue a prompt with a causal LM (left to right, transformers' generate())."""
    if not model_name:
        return "", message("Skipped: no causal LM picked.", "note"), "", ""
    settings = _settings(strategy, max_new_tokens, num_beams, temperature, top_k, top_p,
                         repetition_penalty, padding_masks, stop_at_newline, seed, trace=False)
    lm, result, python, shell = _run(prompt, model_name, "causal", settings)
    return result.text, _stats(lm, result), python, shell


def build(catalog: Catalog) -> None:
    """The Prompting tab's components and events (call inside a gr.Blocks/gr.Tab context)."""
    presets = read_presets("prompting")
    first = preset_values(presets[0] if presets else None)
    gr.Markdown(HELP)
    preset = gr.Dropdown(
        choices=[p["name"] for p in presets], value=presets[0]["name"] if presets else None,
        label="Preset", elem_id="gen-preset",
        info="The BERTs paper's qualitative examples (novel words, grammar correction; sampled "
             "as in the paper) and instruction-induction prompts, including the 'I gave a "
             "friend an instruction...' meta-prompt. Fills the prompt and the decoding settings.")
    prompt = gr.Textbox(
        value=first["prompt"], label="Prompt", lines=8, elem_id="gen-prompt",
        max_length=LIMITS.max_prompt_chars,
        info=f"Few-shot prompt to continue, at most {LIMITS.max_prompt_chars:,} characters. Newlines "
             f"are kept (written as the paper's '\\n ' marker for tokenizers that drop them).")
    paper_output = gr.Markdown(first["note"], elem_id="gen-paper-output")
    with gr.Row():
        masked_model = model_picker(catalog, "masked", "Masked LM", "gen-mlm")
        causal_model = model_picker(catalog, "causal", "Causal LM", "gen-causal", with_none=True)
    pair_picker(catalog, "gen-pair", masked_model, causal_model)
    run = gr.Button("Generate with both models", variant="primary", elem_id="gen-run")
    with gr.Accordion("Decoding settings", open=False):
        with gr.Row():
            strategy = Radio(
                choices=STRATEGIES, value=first["strategy"], label="Strategy", elem_id="gen-strategy",
                info="Greedy: always the likeliest token. Beam search keeps several candidate "
                     "texts (the paper: 4 beams). Sampling draws at random (the paper's examples: "
                     "top-k 64, top-p 0.9, temperature 0.2).")
            max_new_tokens = Slider(
                1, LIMITS.max_new_tokens, value=first["max_new_tokens"], step=1,
                label="Max new tokens", elem_id="gen-max",
                info="Upper bound on the continuation's length in tokens.")
            num_beams = Slider(
                2, 8, value=first["num_beams"], step=1, label="Beams",
                info="Beam search only: how many hypotheses are kept.")
        with gr.Row():
            temperature = Slider(
                0.05, 2.0, value=first["temperature"], step=0.05, label="Temperature",
                info="Sampling only: below 1 sharpens the distribution.")
            top_k = Slider(
                0, 200, value=first["top_k"], step=1, label="Top-k",
                info="Sampling only: draw from the k likeliest tokens (0 = all).")
            top_p = Slider(
                0.05, 1.0, value=first["top_p"], step=0.05, label="Top-p",
                info="Sampling only: draw from the smallest set holding this probability mass "
                     "(1 = all).")
        with gr.Row():
            repetition_penalty = Slider(
                1.0, 2.0, value=first["repetition_penalty"], step=0.05, label="Repetition penalty",
                info="Above 1 discourages repeating tokens already seen.")
            padding_masks = Dropdown(
                choices=PADDING_CHOICES, value=first["padding_masks"], label="Padding masks (masked LM)",
                info="Extra [MASK] tokens after the predicted one, so the end-of-text token does "
                     "not sit right after it (the paper: 2 for DeBERTa).")
            stop_at_newline = gr.Checkbox(
                value=first["stop_at_newline"], label="Stop at newline",
                info="End the continuation at the first line break.")
            seed = Number(value=first["seed"], precision=0, label="Seed",
                             info="Sampling seed, for repeatable samples.")
    with gr.Row():
        with gr.Column():
            masked_text = gr.Textbox(label="Masked LM continuation", lines=4, elem_id="gen-mlm-text",
                                     interactive=False)
            masked_stats = gr.HTML(elem_id="gen-mlm-stats")
            masked_code = reproduce_block("gen-mlm-reproduce")
        with gr.Column():
            causal_text = gr.Textbox(label="Causal LM continuation", lines=4, elem_id="gen-causal-text",
                                     interactive=False)
            causal_stats = gr.HTML(elem_id="gen-causal-stats")
            causal_code = reproduce_block("gen-causal-reproduce")
    with gr.Accordion("Step-by-step view of the masked LM decoder", open=True):
        trace = gr.HTML(elem_id="gen-trace")

    decoding = [strategy, max_new_tokens, num_beams, temperature, top_k, top_p, repetition_penalty,
                padding_masks, stop_at_newline, seed]

    def fill(name):
        values = preset_values(next((p for p in presets if p["name"] == name), None))
        return [values["prompt"], values["note"]] + [values[k] for k in SETTING_NAMES]

    # select, not change: picking the same preset again restores its text after an edit
    preset.select(fill, preset, [prompt, paper_output] + decoding, api_visibility="private")
    run.click(generate_masked, [prompt, masked_model] + decoding,
              [masked_text, masked_stats, trace, *masked_code], api_name="generate_mlm",
              concurrency_id="generate")
    run.click(generate_causal, [prompt, causal_model] + decoding, [causal_text, causal_stats, *causal_code],
              api_name="generate_causal", concurrency_id="generate")
