"""Prompting tab: continue one few-shot prompt with a masked LM and a causal LM, side by side.

Wiring only: ``demo.engine.generation.generate`` decodes (with ``trace=True``, which feeds the
decoding playback of both models, ``demo.ui.playback``). The masked LM decodes exactly (the paper's
method), with the approximate prefix cache (``demo.engine.prefix_cache``; the API's decoding "fast") or both, compared side by
side; a causal LM always decodes with its own exact KV cache.
"""

import functools
from dataclasses import replace
from typing import Literal, NamedTuple

import gradio as gr

from ..app import budget
from ..app.catalog import Catalog
from ..app.in_effect import head_in_effect, in_effect
from ..app.limits import check_text
from ..app.shared_results import cut_short
from ..declared import schema
from ..settings import GenerationSettings
from ..user_text import as_said, quoted
from .common import Radio, TabParts, Textbox, deployment, escape, message, notes, tab_help, work_line, work_text
from .handlers import handler
from .loading import load
from .outputs import components, shown_in
from .pickers import EMD, emd_radio, model_note
from .playback import LEGEND, PLAYER_JS, lane_switch, playback, run_id, window_diagram
from .presets import preset_named, read_presets
from .reproduce_block import reproduce_block, reproduction
from .run_marker import run_ends, run_starts
from .settings_form import (
    Own,
    Setting,
    endpoint,
    model_argument,
    panel,
    setting_args,
    shown_value,
    widget,
    widget_default,
)
from .sides import KIND_NAMES, side_columns, side_pickers
from .turns import batch_note, together

HELP = ("Type a prompt or pick a preset: a **masked LM** and a **causal LM** continue it side by side, "
        "and the playback below shows every step.")

HOW = """
The masked LM generates left to right the way the BERTs paper does: it appends `[MASK]` (plus a
few *padding masks* that keep the end-of-text token away), predicts the first mask, keeps that
token and repeats. It has no key/value cache, so every step re-reads the whole text. The causal LM
predicts each next token from the text on its left and keeps what it has read (its key/value
cache): after the prompt, each step reads only the token it wrote last. The **Work** line under
each output counts both: the forward passes and the tokens they read. Whether that makes the
masked LM slower depends on the pair and the machine: per step it reads far more tokens, so on
a CPU it is slower than a causal LM of its size, but a much smaller masked LM can be quicker. The *prefix cache*
reuses the prompt's internal states between refreshes (approximate, fewer tokens read); *compare* runs
both and shows where they part. The **playback** shows, step by step, the window each model read
and what that step read, its top guesses with probabilities, the token kept and, with beam
search, the beams.

Ticked, **any order** has the same masked LM write the way masked diffusion LMs (LLaDA, Dream, the
BERT-chat models) do: a block of masks after the prompt, several filled per step, the ones the model
is surest of first (the others stay masked for a later step); when the block is full, the next block
follows. Its lane numbers each token with the step that wrote it, so the order is visible; each
output's **log-likelihood** is the probability that its decoding writes exactly that text.

Some masked LMs were trained to write: dLLM's **BERT-Chat** models (ModernBERT fine-tuned as masked
diffusion chat models) answer a *chat turn*. Picking one sets the decoding it was trained with:
the prompt as a question in its chat template, every mask of the answer laid out at once and filled
block by block, the surest token first.
"""

_CORE = GenerationSettings()
# The settings both models' runs share (the masked LM's arguments after them are its own)
SHARED = setting_args(GenerationSettings, "strategy", "max_new_tokens", "num_beams", "temperature", "top_k", "top_p",
                      "min_p", "repetition_penalty", "padding_masks", "stop_at_newline", "seed")
# Shared too, and last in each endpoint's arguments (an API client's positions stay where they were)
SHARED_LAST = setting_args(GenerationSettings, "typical_p")
EVERY_SHARED = SHARED + SHARED_LAST  # what a preset or a lesson step sets
# The core's defaults, except two choices of the page: a short answer that stops at the end of its
# line (a few-shot answer is one line)
PAGE_DEFAULTS = dict(max_new_tokens=24, stop_at_newline=True)
SETTING_DEFAULTS = {t.name: PAGE_DEFAULTS.get(t.name, widget_default(GenerationSettings, t.name))
                    for t in EVERY_SHARED}
TRACED = dict(trace=True, trace_top_k=5)  # every page run records its steps for the playback

# The masked LM's decoding: each choice is the GenerationSettings.cache of the runs it makes
# (compare: exact first, then the prefix cache, on the same prompt and settings). "fast" is the
# public API's word for the prefix cache; the page says "prefix cache", as the code and CLI do.
DECODINGS = {"exact": ("exact",), "fast": ("prefix",), "compare": ("exact", "prefix")}
RUN_NAMES = {"exact": "exact (the paper's method)", "prefix": "prefix cache (approximate)"}
DECODING_NAMES = [("exact", "exact"), ("prefix cache", "fast"), ("compare", "compare")]


# Writing in any order (masked diffusion): the page's defaults, small enough to watch: blocks of
# 8 masks, 2 tokens a step, surest first.
ANY_ORDER_DEFAULTS = dict(order="confidence", tokens_per_step=2, block_length=8, remask=False, confidence_threshold=0)


def masked_caches(decoding) -> tuple[str, ...]:
    """The GenerationSettings.cache of each masked-LM run a decoding choice makes."""
    if not isinstance(decoding, str) or decoding not in DECODINGS:
        raise ValueError(f"Unknown decoding {as_said(decoding)}; use one of {', '.join(DECODINGS)}.")
    return DECODINGS[decoding]


def masked_runs(arguments: dict) -> int:
    """How many generations a masked-LM request is, for every cap (compare: two)."""
    try:
        return len(masked_caches(arguments.get("decoding", "exact")))
    except ValueError:  # the handler refuses it with this message, before any run
        return 1


def generation_estimate(s: GenerationSettings, arguments: dict, kind: str, parameters: float) -> budget.Work:
    """One generation's work, from the request's settings (``handlers.handler``'s ``estimate``)."""
    beams = s.num_beams if s.strategy == "beam" else 1
    return budget.estimated_generation_work(kind, parameters, str(arguments.get("prompt") or ""), s.max_new_tokens,
                                            beams, s.masks_ahead)


def _with_cache(settings: GenerationSettings, cache: str) -> GenerationSettings:
    """The settings of one masked-LM run. Parallel unmasking rides on the prefix cache, so an exact
    run stays the paper's method; it keeps the
    default refresh (which it does not use), so its Reproduce snippet does not list it."""
    if cache == "prefix":
        return replace(settings, cache=cache)
    return replace(settings, cache=cache, cache_refresh=_CORE.cache_refresh, parallel_threshold=None)


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


def _label(name: str) -> str:
    """A setting's label as a line names it ("max new tokens")."""
    label = schema(GenerationSettings, name).get("label", name)
    return label[0].lower() + label[1:]


def setting_items(s: GenerationSettings, decoding="exact") -> dict[str, str]:
    """The settings a run uses, by their labels, in the page's words (only those that act:
    sampling's with sampling)."""
    shown = {"strategy": shown_value(GenerationSettings, "strategy", s.strategy), "max_new_tokens": str(s.max_new_tokens)}
    if s.strategy == "beam":
        shown["num_beams"] = str(s.num_beams)
    if s.strategy == "sample":
        shown.update({"temperature": f"{s.temperature:g}", "top_k": str(s.top_k), "top_p": f"{s.top_p:g}",
                      **({"min_p": f"{s.min_p:g}"} if s.min_p else {}),
                      **({"typical_p": f"{s.typical_p:g}"} if s.typical_p < 1 else {}), "seed": str(s.seed)})
    if s.repetition_penalty != 1.0:
        shown["repetition_penalty"] = f"{s.repetition_penalty:g}"
    shown["padding_masks"] = "family default" if s.padding_masks is None else str(s.padding_masks)
    shown["stop_at_newline"] = "on" if s.stop_at_newline else "off"
    return {"decoding": dict((v, k) for k, v in DECODING_NAMES).get(decoding, str(decoding)),
            **{_label(name): value for name, value in shown.items()}}


def any_order_items(s: GenerationSettings) -> dict[str, str]:
    """The any-order writing's settings, in the page's words: those that act with the order chosen."""
    items = {"any order": shown_value(GenerationSettings, "order", s.order),
             "tokens per step": str(s.tokens_per_step), "block length": str(s.block_length)}
    if s.order == "confidence" and s.confidence_threshold:
        items["write all this sure"] = f"{s.confidence_threshold:g}"
    if s.order == "confidence" and s.remask:
        items["re-mask"] = "on"
    if s.masks_ahead:
        items["all masks ahead"] = "on"
    return items


def writing_line(result, settings: GenerationSettings) -> str:
    """Any-order writing in words (plain text): the tokens each pass wrote and, with a confidence
    threshold, whether it wrote any token beyond the step's (``threshold_line``)."""
    counts = [len(step.written or []) for step in result.steps]
    if not counts:
        return ""
    shown = ", ".join(map(str, counts[:24])) + (", ..." if len(counts) > 24 else "")
    line = f"Tokens written per pass: {shown}."
    if settings.confidence_threshold and settings.order == "confidence":
        line += " " + threshold_line(result.steps, settings.confidence_threshold, settings.tokens_per_step)
    return line


def threshold_line(steps, threshold: float, k: int) -> str:
    """What a confidence threshold wrote beyond the k tokens a pass writes anyway. Where it wrote
    none, why: the surest guess any pass left masked (the one the threshold could have written)
    was below it; the guesses a pass wrote among its k say nothing of the threshold."""
    counts = [len(step.written or []) for step in steps]
    beyond = [count - k for count in counts if count > k]
    if beyond:
        return (f"The threshold ({threshold:g}) wrote {sum(beyond)} token{'' if sum(beyond) == 1 else 's'} beyond "
                f"the {k} a step, in {len(beyond)} of {len(counts)} passes.")
    line = f"The threshold ({threshold:g}) wrote no token beyond the {k} a step"
    left = [step.surest_unwritten for step in steps if step.surest_unwritten is not None]
    if not left:
        return line + ": every pass wrote all the masks it read, so none was left for it."
    if max(left) < threshold:
        return line + f": the surest guess any pass left masked was {shown_below(max(left), threshold)}, below it."
    return line + "."


def shown_below(p: float, threshold: float) -> str:
    """A probability below the threshold, with as many decimals as it takes to read below it
    (0.2996 is 0.2996 beside 0.3, not 0.30)."""
    decimals = 2
    while float(f"{p:.{decimals}f}") >= threshold and decimals < 6:
        decimals += 1
    return f"{p:.{decimals}f}"


def settings_line(items: dict[str, str]) -> str:
    """The settings beside the button (HTML): what a run of the button would use."""
    return ('<div class="demo-settings-line">Runs with: '
            + " · ".join(f"{escape(name)} <b>{escape(value)}</b>" for name, value in items.items()) + "</div>")


def changes(before: dict[str, str], after: dict[str, str]) -> str:
    """What differs between two runs' settings, in words (plain text)."""
    changed = [f"{name} {before.get(name, '(not used)')} → {after.get(name, '(not used)')}"
               for name in dict.fromkeys([*before, *after]) if before.get(name) != after.get(name)]
    if not changed:
        return "same settings"
    return ("; ".join(changed) + (" (the only change)" if len(changed) == 1 else ""))


def how_it_read(result, kind: str) -> str:
    """How a generation's passes read, in words: what its work line's numbers come from."""
    if kind == "causal":
        return "the prompt once, then only the token written last: its key/value cache keeps the rest"
    if result.steps_run and result.steps_run < len(result.token_ids):
        return "the whole window re-read at every step, several tokens written per step"
    if result.refreshes is None:
        return "the whole window re-read at every step"
    return ("a refresh re-reads the whole window, the other steps only its last tokens"
            + ("; a token guessed at a padding mask, nothing" if result.guessed is not None else ""))


def _stats(lm, result, time_limit: float, refresh: int | None = None) -> str:
    """The lines under an output: the model, the run's numbers and the work it did (a prefix-cache
    run's refreshes too)."""
    stats = (f"{len(result.tokens)} tokens in {result.seconds:.1f} s "
             f"({result.seconds_per_step * 1000:.0f} ms per step) · prompt {result.prompt_tokens} "
             f"tokens · stopped by: {result.stop_reason.replace('_', ' ')}")
    work = work_line(result.reads, how_it_read(result, lm.kind))
    prefix = (f"<div>Prefix cache (approximate): {tokens_per_second(result):.1f} tokens/s · "
              f"{_refreshes(result, refresh)}</div>" if result.refreshes is not None else "")
    timed_out = result.stop_reason == "time_limit"
    return (f"<div>{model_note(lm)}</div><div>{stats}</div>{_likelihood(result)}{work}{prefix}"
            + "".join(message(note, "note") for note in result.notes)
            + (message(f"Stopped after {time_limit:.0f} s, the time this generation may take "
                       f"here; the text so far is shown.", "note") if timed_out else ""))


def _likelihood(result) -> str:
    """The output's log-likelihood under the order it was written (none for beam search)."""
    if result.log_likelihood is None:
        return ""
    return (f'<div class="demo-likelihood" title="each token\'s log-prob at the step that wrote it, summed">'
            f"Log-likelihood of this output: <b>{result.log_likelihood:.2f}</b> (how likely it was written)</div>")


def tokens_per_second(result) -> float:
    """Tokens generated per second of decoding (0 when nothing was timed)."""
    return len(result.tokens) / result.seconds if result.seconds > 0 else 0.0


def newline_note(lm, prompt: str) -> str | None:
    """Why the newline marker's tokens appear in the playback, if the prompt reached the model
    with them."""
    from ..engine.text import newline_marker_note, prompt_as_read
    return newline_marker_note(prompt_as_read(prompt, lm.newline_survives), lm.newline_survives)


def _refreshes(result, refresh: int) -> str:
    guessed = (f" · {result.guessed} of {len(result.token_ids)} tokens written by parallel unmasking "
               f"(no pass of their own)" if result.guessed is not None else "")
    return f"refreshes: {result.refreshes} (set: every {refresh} tokens){guessed}"


def _token(result, at: int) -> str:
    if at < len(result.tokens):
        return repr(result.tokens[at])  # quoted, as the playback shows tokens; "\n" visible
    return f"nothing more (stopped by: {result.stop_reason.replace('_', ' ')})"


def difference_line(exact, prefix) -> str:
    """Where the prefix cache's output parts from the exact one, in words (plain text: escape it to show).
    Tokens count from 1, as the playback's steps do."""
    from ..engine.generation import first_difference

    at = first_difference(exact, prefix)
    if at is None:
        return f"Identical: both wrote the same {len(exact.tokens)} tokens."
    return f"First differs at token {at + 1}: exact wrote {_token(exact, at)}, the prefix cache wrote {_token(prefix, at)}."


def comparison(exact, prefix, refresh: int) -> str:
    """The exact and the prefix cache's output side by side (HTML; the texts escaped), each with its
    tokens/s (the prefix cache's with its refreshes), then the speed-up and where the two first differ."""
    def card(cache, result, extra=""):
        return (f'<div class="demo-compare-run"><div class="demo-compare-title">{escape(RUN_NAMES[cache])}</div>'
                f'<div class="demo-compare-text">{escape(result.text) or "<i>(nothing)</i>"}</div>'
                f'<div class="demo-compare-speed">{len(result.tokens)} tokens in {result.seconds:.2f} s '
                f'· {tokens_per_second(result):.1f} tokens/s{extra}</div>'
                f'<div class="demo-work">{work_text(result.reads)}</div></div>')

    slow = tokens_per_second(exact)
    speedup = (f"Speed-up: {tokens_per_second(prefix) / slow:.1f}x (the prefix cache's tokens/s over exact's)."
               if slow > 0 else "Speed-up: none to show (the exact run wrote nothing).")
    return ('<div class="demo-compare"><div class="demo-compare-head"><b>Exact vs prefix cache</b>, same '
            'prompt and settings (the text box above and the playback show the exact run)'
            '</div><div class="demo-compare-runs">'
            + card("exact", exact) + card("prefix", prefix, f" · {_refreshes(prefix, refresh)}") + "</div>"
            + message(speedup, "note") + message(difference_line(exact, prefix), "note") + "</div>")


def _run(prompt, model_name, kind, runs: list[GenerationSettings], emd: str = "auto"):
    """(model, one result per settings in ``runs``, their time limit, the note on how it was
    batched, their Python calls, their command lines). The model loads in the
    generating turn, so a request waiting for it holds none; a single run that waits for the turn
    with others of the same model and settings is written in one batch with them
    (``turns.together``; ``demo.engine.decoding.batches`` says which settings can be). The work of
    all runs together is checked before the first starts; they share the time one request may take."""
    from ..engine.decoding import batches

    prompt = check_text(prompt, "prompt", deployment().settings.max_prompt_chars)
    key = (model_name, kind, emd, repr(runs[0])) if len(runs) == 1 and batches(kind, runs[0]) else None
    time_limit = deployment().settings.max_request_seconds / len(runs)
    (lm, results), batch = together("generate", key, prompt,
                                    functools.partial(_generated, model_name, kind, emd, runs, time_limit))
    if any(r.stop_reason == "time_limit" for r in results):
        cut_short()  # stopped by the time limit: not an answer to share
    emd, head = head_in_effect(emd, lm)
    note = notes(head) + batch_note(batch, results[0].seconds, "Written", key is not None)
    return (lm, results, time_limit, note, *_reproductions(model_name, kind, runs, prompt, emd))


def _generated(model_name, kind, emd, runs: list[GenerationSettings], time_limit: float, prompts: list[str]) -> list:
    """Each prompt's (model, one result per settings in ``runs``), or the ValueError refusing it
    before any run (work over the budget, a prompt the model cannot take); the prompts of each
    settings written together (``generate_together``)."""
    from ..app.budget import generation_work
    from ..engine.generation import check_prompt, generate_together
    from ..engine.prefix_cache import encoder_of

    lm = load(model_name, kind, emd)
    if kind == "masked" and any(s.cache == "prefix" for s in runs):
        try:  # refused before any run: a family the prefix cache does not cover
            encoder_of(lm.model)
        except ValueError as err:
            raise ValueError(f"{err} On this page: choose 'exact' (the prefix cache and compare need "
                             f"it).") from None
    checked = []
    for prompt in prompts:
        try:
            work = generation_work(lm, prompt, runs[0])  # (the exact method's: the prefix cache reads less)
            if len(runs) > 1:
                work = replace(work, tokens=work.tokens * len(runs), passes=work.passes * len(runs),
                               what=f"{len(runs)} generations of {work.what}")
            work.check(deployment().settings)  # refused before it runs
            check_prompt(lm, prompt, runs[0])
            checked.append(prompt)
        except ValueError as err:
            checked.append(err)
    prompts = [p for p in checked if isinstance(p, str)]
    written = [generate_together(lm, prompts, s, progress=True, time_limit=time_limit) for s in runs] if prompts else []
    answers = iter(zip(*written))
    return [c if isinstance(c, ValueError) else (lm, list(next(answers))) for c in checked]


def _reproductions(model_name, kind, runs, prompt, emd="auto") -> tuple[str, str]:
    """The Python call and the command line of each run, one after the other, each headed by its
    name when there are several (compare)."""
    codes = [reproduction("generate", model_name, kind, s, emd, prompt=prompt) for s in runs]
    if len(codes) == 1:
        return codes[0]
    heads = [f"# {RUN_NAMES[s.cache]}\n" for s in runs]
    return ("\n".join(h + python for h, (python, _) in zip(heads, codes)),
            "".join(h + shell for h, (_, shell) in zip(heads, codes)))


class MaskedGenerationOutputs(NamedTuple):
    """The masked LM's continuation, as /generate_mlm gives it (in this order)."""
    text: str = ""  # the continuation (of the exact run when comparing)
    stats: str = ""  # HTML: model, speed, why it stopped, the work (forward passes, tokens read); or the message shown instead
    trace: str = ""  # HTML: the decoding playback's frames, one per step (of the exact run when comparing)
    compare: str = ""  # HTML: exact and prefix cache side by side (decoding "compare" only)
    python: str = ""  # Reproduce: the Python call(s)
    shell: str = ""  # Reproduce: the command line(s)
    run: dict | None = None  # (page only, a gr.State) what "compare with the previous run" shows of it

    showing = shown_in("stats")  # Only ``message``; no stale continuation.


class AnyOrderOutputs(NamedTuple):
    """The masked LM's continuation written in any order, as /generate_mlm_any_order gives it."""
    text: str = ""  # the continuation
    stats: str = ""  # HTML: model, speed, steps, log-likelihood, the work; or the message shown instead
    trace: str = ""  # HTML: the playback's frames, one per step (several tokens each)
    python: str = ""  # Reproduce: the Python call
    shell: str = ""  # Reproduce: the command line

    showing = shown_in("stats")


class CausalGenerationOutputs(NamedTuple):
    """The causal LM's continuation, as /generate_causal gives it (in this order)."""
    text: str = ""  # the continuation
    stats: str = ""  # HTML: model, speed, why it stopped, the work (forward passes, tokens read); or the message shown instead
    python: str = ""  # Reproduce: the Python call
    shell: str = ""  # Reproduce: the command line
    trace: str = ""  # HTML: the decoding playback's frames, one per step

    showing = shown_in("stats")  # an error, or why this side did not run; no stale continuation


PROMPT = Own("prompt", "the few-shot prompt to continue")
MODEL = model_argument()
CHAT = Setting(GenerationSettings, "chat")
DECODING = Own("decoding", "exact (the paper's method, re-reads the whole prompt at every token), fast (the prefix cache: "
                           "reuses the prompt's internal states between refreshes, faster, approximate) or compare (both, "
                           "exact first, side by side; counts as two generations)", "exact", Literal[tuple(DECODINGS)])


@handler("generate", MaskedGenerationOutputs.showing, runs=masked_runs, estimate=generation_estimate, batches=True)
@endpoint(PROMPT, MODEL, *SHARED, DECODING, Setting(GenerationSettings, "cache_refresh"), EMD,
          Setting(GenerationSettings, "parallel_threshold"), CHAT, *SHARED_LAST, builds=GenerationSettings, fixed=TRACED)
def generate_masked(prompt, model_name, settings: GenerationSettings, decoding, emd,
                    progress=gr.Progress(track_tqdm=True)):
    """Continue a prompt with a masked LM, the BERTs paper's way: append [MASK] (and padding
    masks) and [SEP], predict the first mask, keep it, repeat. Decoding exact, fast (the
    approximate prefix cache) or compare (both side by side). Also returns the decoding playback
    (of the exact run when comparing)."""
    caches = masked_caches(decoding)
    settings, unused = in_effect(replace(settings, cache=caches[-1]), "masked")  # (the prefix cache's, if it runs)
    runs = [_with_cache(settings, cache) for cache in caches]
    lm, results, time_limit, note, python, shell = _run(prompt, model_name, "masked", runs, emd)
    shown = results[0]  # compare: the exact run (the paper's method) fills the usual outputs
    compared = comparison(*results, settings.cache_refresh) if len(results) == 2 else ""
    run = run_id(prompt, shown.token_ids, shown.seconds)
    return MaskedGenerationOutputs(text=shown.text, stats=_stats(lm, shown, time_limit, settings.cache_refresh)
                                   + notes(unused) + note,
                                   trace=playback(shown.steps, "masked", run, newline_note(lm, prompt)),
                                   compare=compared, python=python, shell=shell,
                                   run=dict(steps=shown.steps, text=shown.text, settings=setting_items(settings, decoding),
                                            id=run, prompt=prompt, model=lm.name))


@handler("generate", AnyOrderOutputs.showing, estimate=generation_estimate, batches=True)
@endpoint(PROMPT, MODEL, *SHARED, *setting_args(GenerationSettings, "order", "tokens_per_step", "block_length", "remask"),
          EMD, CHAT, *setting_args(GenerationSettings, "masks_ahead", "confidence_threshold"), *SHARED_LAST,
          builds=GenerationSettings, defaults=ANY_ORDER_DEFAULTS, fixed=dict(TRACED, window="block"))
def generate_any_order(prompt, model_name, settings: GenerationSettings, emd, progress=gr.Progress(track_tqdm=True)):
    """Continue a prompt with a masked LM the masked-diffusion way: a block of masks after the
    text, filled in any order, several tokens a step; the next block when it is full. Also
    returns the playback, each token marked with the step that wrote it."""
    settings, unused = in_effect(settings, "masked")
    lm, (result,), time_limit, note, python, shell = _run(prompt, model_name, "masked", [settings], emd)
    steps = f"{result.steps_run} steps for {len(result.token_ids)} tokens. {writing_line(result, settings)}"
    return AnyOrderOutputs(text=result.text, stats=message(steps.strip(), "note") + _stats(lm, result, time_limit)
                           + notes(unused) + note,
                           trace=playback(result.steps, "any_order", run_id(prompt, result.token_ids, result.seconds),
                                          newline_note(lm, prompt)),
                           python=python, shell=shell)


COMPARE_HELP = "The masked LM's last run plays beside this one, step by step, headed by the settings that changed."


def compare_help(compare: bool, previous: dict | None, current: dict | None) -> str:
    """The words under "Compare with the previous run": what it does, or, when it is ticked with no
    earlier run to play beside this one (a lesson step ticks it on a fresh page), why nothing shows."""
    if not compare or previous:
        return COMPARE_HELP
    if current:
        return ("Nothing to compare yet: the masked LM has run once on this page. Press Generate and that run "
                "plays beside the new one.")
    return ("Nothing to compare yet: the masked LM has not run on this page. Press Generate twice: the second "
            "run plays beside the first (in the lesson, run step 2 before step 3).")


def comparison_view(compare: bool, previous: dict | None, current: dict | None) -> tuple[str, dict]:
    """The previous run's lane (``previous_run_view``) and the compare box's words (``compare_help``)."""
    return previous_run_view(compare, previous, current), gr.update(info=compare_help(compare, previous, current))


def previous_run_view(compare: bool, previous: dict | None, current: dict | None) -> str:
    """The previous masked-LM run as a third player, moving in step with this run's, headed by
    what changed between them (HTML; empty when not asked for or nothing to compare)."""
    if not compare or not previous or not current:
        return ""
    changed = changes(previous["settings"], current["settings"])
    if previous["prompt"] != current["prompt"]:
        changed += "; and the prompt"
    if previous["model"] != current["model"]:
        changed += f"; and the model ({previous['model']} → {current['model']})"
    return playback(previous["steps"], "previous", previous["id"],
                    f"Changed since: {changed}. It wrote: “{quoted(previous['text'])}”")


@handler("generate", CausalGenerationOutputs.showing, estimate=generation_estimate, models={"model_name": "causal"},
         batches=True)
@endpoint(PROMPT, MODEL, *SHARED, *SHARED_LAST, builds=GenerationSettings, fixed=TRACED)
def generate_causal(prompt, model_name, settings: GenerationSettings, progress=gr.Progress(track_tqdm=True)):
    """Continue a prompt with a causal LM (left to right, transformers' generate()). Also returns
    the decoding playback."""
    if not model_name:
        return CausalGenerationOutputs.showing(message("Skipped: no causal LM picked.", "note"))
    settings, unused = in_effect(settings, "causal")
    lm, (result,), time_limit, note, python, shell = _run(prompt, model_name, "causal", [settings])
    return CausalGenerationOutputs(text=result.text, stats=_stats(lm, result, time_limit) + notes(unused) + note,
                                   python=python,
                                   shell=shell, trace=playback(result.steps, "causal", run_id(prompt, result.token_ids, result.seconds),
                                                               newline_note(lm, prompt)))


def trained_decoding(catalog: Catalog, name: str) -> dict:
    """What a picked masked LM sets, by widget name: a model trained to write
    (``Catalog.generation_defaults``) gets its decoding, within this app's token cap, its answer
    not cut at a line break; another turns chat and masks ahead off and keeps the rest."""
    trained, cap = catalog.generation_defaults(name) or {}, deployment().settings.max_new_tokens
    values = dict({n: trained.get(n, ANY_ORDER_DEFAULTS[n]) for n in ANY_ORDER_DEFAULTS},
                  chat=trained.get("chat", False), masks_ahead=trained.get("masks_ahead", False),
                  any_order=trained.get("window") == "block", strategy=trained.get("strategy", gr.update()),
                  max_new_tokens=min(trained.get("max_new_tokens", cap), cap), stop_at_newline=False)
    if not trained:
        return {n: value if n in ("chat", "masks_ahead") else gr.update() for n, value in values.items()}
    return values


# The decoding settings' panel: rows of GenerationSettings' fields (their widgets read the
# declarations); the page's own ids and sizes where tests and styles name them
SETTING_ROWS = [("strategy", "max_new_tokens", "num_beams"), ("temperature", "top_k", "top_p", "min_p", "typical_p"),
                ("repetition_penalty", "padding_masks", "stop_at_newline", "seed"),
                ("order", "tokens_per_step", "block_length", "remask"),
                ("chat", "masks_ahead", "confidence_threshold"), ("parallel_threshold",)]
SETTING_LAYOUT = dict(max_new_tokens=dict(elem_id="gen-max"), parallel_threshold=dict(elem_id="gen-parallel"))


def _inputs(catalog: Catalog, presets: list[dict], first: dict) -> dict:
    """The prompt, the models, the decoding choice and the run button, by name."""
    w = {}
    w["preset"] = gr.Dropdown(
        choices=[p["name"] for p in presets], value=presets[0]["name"] if presets else None,
        label="Preset", elem_id="gen-preset",
        info="The BERTs paper's qualitative examples (novel words, grammar correction; sampled "
             "as in the paper) and instruction-induction prompts, including the 'I gave a "
             "friend an instruction...' meta-prompt. Fills the prompt and the decoding settings.")
    w["prompt"] = Textbox(
        value=first["prompt"], label="Prompt", lines=8, elem_id="gen-prompt",
        max_length=deployment().settings.max_prompt_chars,
        info=f"Few-shot prompt to continue, at most {deployment().settings.max_prompt_chars:,} characters. Newlines "
             f"are kept (written as the paper's '\\n ' marker for tokenizers that drop them).")
    w["paper_output"] = gr.Markdown(first["note"], elem_id="gen-paper-output")
    w["masked_model"], w["causal_model"] = side_pickers(catalog, "gen")
    with gr.Row():
        w["decoding"] = Radio(
            choices=DECODING_NAMES, value="exact", label="Masked LM decoding", elem_id="gen-decoding",
            scale=2, min_width=300,  # (wraps above the slider on a phone)
            info="exact: the paper's method, re-reads the whole prompt at every token. prefix cache: reuses "
                 "the prompt's internal states between refreshes (faster, approximate): for long prompts "
                 "and answers, where exact is slow. compare: runs both side by side, to see what the "
                 "speed costs. Masked LM only: a causal LM always uses its own exact cache.")
        w["cache_refresh"] = widget(GenerationSettings, "cache_refresh", scale=1, min_width=240, elem_id="gen-refresh",
                                    elem_classes=["demo-with-prefix"])  # shown with the prefix cache or compare only (style.css)
    with gr.Row(equal_height=True):
        w["run"] = gr.Button("Generate with both models", variant="primary", elem_id="gen-run", scale=2,
                             min_width=220)
        w["compare_previous"] = gr.Checkbox(
            value=False, label="Compare with the previous run", elem_id="gen-compare-previous", scale=1,
            min_width=220, info=COMPARE_HELP)
        w["any_order"] = gr.Checkbox(
            value=False, label="Also write in any order (masked diffusion)", elem_id="gen-any-order", scale=1,
            min_width=220, info="Masked diffusion's way: a block of masks, surest first.")
    w["settings_shown"] = gr.HTML(settings_line_of(dict(first, decoding="exact", any_order=False)),
                                  elem_id="gen-settings-line")
    with gr.Accordion("Decoding settings", open=False):
        w["emd"] = emd_radio("gen-deberta-head", w["masked_model"])
        w.update(panel(GenerationSettings, SETTING_ROWS, "gen", dict(first, **ANY_ORDER_DEFAULTS), SETTING_LAYOUT))
    return w


def _outputs(w: dict) -> None:
    """Both sides' outputs, the any-order lane's, and the playback lanes, added to ``w`` by name."""
    w["sides"] = side_columns("gen", {
        "text": lambda kind, elem_id: gr.Textbox(label=f"{KIND_NAMES[kind]} continuation", lines=4,
                                                 elem_id=elem_id, interactive=False),
        "stats": lambda kind, elem_id: gr.HTML(elem_id=elem_id),
        "compare": lambda kind, elem_id: (gr.HTML(elem_id=elem_id, elem_classes=["demo-hide-empty"])
                                          if kind == "masked" else None)})
    with gr.Column(visible=False, elem_id="gen-any-order-output") as w["any_output"]:
        w["any_text"] = gr.Textbox(label="Masked LM continuation, written in any order", lines=3,
                                   elem_id="gen-any-text", interactive=False)
        w["any_stats"] = gr.HTML(elem_id="gen-any-stats")
        w["any_python"], w["any_shell"] = reproduce_block("gen-any-reproduce")
    with gr.Accordion("Playback: both models write, step by step", open=True, elem_classes=["demo-playback"]):
        gr.HTML(LEGEND, elem_classes=["demo-legend-block"])
        lane_switch("gen", "gen-playback")
        lane = dict(min_width=320, elem_classes=["demo-lane"])
        with gr.Row(elem_id="gen-playback", elem_classes=["demo-lanes"]):
            with gr.Column(**lane):
                w["trace"] = gr.HTML(elem_id="gen-trace", js_on_load=PLAYER_JS)
            with gr.Column(**lane, visible=False, elem_id="gen-any-order-column") as w["any_lane"]:
                w["any_trace"] = gr.HTML(elem_id="gen-any-trace", js_on_load=PLAYER_JS)
            with gr.Column(**lane, elem_id="gen-previous-column"):  # shown when comparing
                w["previous_trace"] = gr.HTML(elem_id="gen-previous-trace", js_on_load=PLAYER_JS)
            with gr.Column(**lane):
                w["causal_trace"] = gr.HTML(elem_id="gen-causal-trace", js_on_load=PLAYER_JS)


QUICK = dict(api_visibility="private", show_progress="hidden", concurrency_limit=None)


def _wire_settings(w: dict, catalog: Catalog, presets: list[dict]) -> None:
    """Presets fill the prompt and the shared settings; the settings line follows the widgets; a
    picked masked LM sets what it was trained with. Adds ``w["fill"]`` (a preset's values) and
    ``w["line"]`` (the settings line's (function, inputs, outputs), for the lesson)."""
    shared = [w[t.name] for t in EVERY_SHARED]

    def fill(name):
        values = preset_values(preset_named(presets, name))
        return [values["prompt"], values["note"]] + [values[t.name] for t in EVERY_SHARED]

    shown = list(dict.fromkeys(t.argument for fn in (generate_masked, generate_any_order) for t in fn.takes
                               if isinstance(t, Setting) and t.cls is GenerationSettings)) + ["decoding", "any_order"]

    def line(*values):
        return settings_line_of(dict(zip(shown, values)))

    w["line"] = (line, [w[name] for name in shown], [w["settings_shown"]])
    # The line is drawn after a person's edit (``input``) or once the page has set all it sets
    # (a preset, a picked model, a lesson step), never on each value's ``change``: a page that
    # sets several values changes them one after another, and a line drawn in between names a
    # mix of old and new values (a step's greedy decoding with the last preset's stop at newline).
    gr.on([w[name].input for name in shown], *w["line"], **QUICK)
    # select, not change: picking the same preset again restores its text after an edit
    w["preset"].select(fill, w["preset"], [w["prompt"], w["paper_output"]] + shared,
                       api_visibility="private").then(*w["line"], **QUICK)
    trained = list(trained_decoding(catalog, ""))  # the widgets a pick sets, by name
    w["masked_model"].change(lambda name: list(trained_decoding(catalog, name).values()), w["masked_model"],
                             [w[n] for n in trained], **QUICK).then(*w["line"], **QUICK)
    w["fill"] = fill


def settings_line_of(values: dict) -> str:
    """The settings line for the widgets' values by name: what the button's runs use, the
    any-order settings too when it also writes in any order (the settings each run would check)."""
    try:
        items = setting_items(generate_masked.settings(values), values["decoding"])
        if values["any_order"]:
            items |= any_order_items(generate_any_order.settings(values))
    except ValueError as err:
        return message(str(err))
    return settings_line(items)


def _wire_runs(w: dict) -> None:
    """The button's runs: the masked LM's (then the previous run's lane, then any order, when
    asked), and the causal LM's."""
    last_run, previous_run = gr.State(None), gr.State(None)
    # the last run becomes the previous one as the button is pressed (a failed run keeps it)
    started = w["run"].click(lambda last, previous: last or previous, [last_run, previous_run], previous_run,
                             js=run_starts("gen"), **QUICK)
    masked_event = started.then(
        generate_masked, generate_masked.inputs(dict(w, model_name=w["masked_model"])),
        components(MaskedGenerationOutputs, **w["sides"]["masked"], trace=w["trace"], run=last_run),
        api_name="generate_mlm", concurrency_id=generate_masked.group, show_progress_on=w["sides"]["masked"]["text"])
    comparing = [w["compare_previous"], previous_run, last_run]
    compared = [w["previous_trace"], w["compare_previous"]]
    previous_shown = masked_event.then(comparison_view, comparing, compared, **QUICK)
    # any order, when asked: a request of its own (its own API), started once the paper's way is done
    any_request = gr.State(0)
    any_asked = previous_shown.then(lambda asked, n: n + 1 if asked else gr.update(),
                                    [w["any_order"], any_request], any_request, **QUICK)
    any_event = any_request.change(
        generate_any_order, generate_any_order.inputs(dict(w, model_name=w["masked_model"])),
        components(AnyOrderOutputs, text=w["any_text"], stats=w["any_stats"], trace=w["any_trace"],
                   python=w["any_python"], shell=w["any_shell"]),
        api_name="generate_mlm_any_order", concurrency_id=generate_any_order.group, show_progress_on=w["any_text"],
        js=run_starts("gen-any"))
    w["any_order"].change(lambda asked: [gr.update(visible=asked)] * 2, w["any_order"],
                          [w["any_output"], w["any_lane"]], **QUICK)
    w["compare_previous"].change(comparison_view, comparing, compared, **QUICK)
    causal_event = w["run"].click(generate_causal, generate_causal.inputs(dict(w, model_name=w["causal_model"])),
                                  components(CausalGenerationOutputs, **w["sides"]["causal"], trace=w["causal_trace"]),
                                  api_name="generate_causal", concurrency_id=generate_causal.group,
                                  show_progress_on=w["sides"]["causal"]["text"], js=run_starts("gen"))
    # a press's run: both chains; the any-order writing, a request of its own, is a run of its own
    run_ends("gen", any_asked, causal_event)
    run_ends("gen-any", any_event)


def build(catalog: Catalog) -> TabParts:
    """The Prompting tab's components and events (call inside a gr.Blocks/gr.Tab context); a
    lesson step fills its preset."""
    presets = read_presets("prompting")
    first = preset_values(presets[0] if presets else None)
    tab_help(HELP, HOW, window_diagram())
    w = _inputs(catalog, presets, first)
    _outputs(w)
    _wire_settings(w, catalog, presets)
    _wire_runs(w)
    return TabParts(lesson_fields=(w["preset"], w["prompt"], w["paper_output"], *(w[t.name] for t in EVERY_SHARED),
                                   w["compare_previous"],
                                   w["any_order"]),
                    lesson_values=lambda step: [step["preset"], *w["fill"](step["preset"]),
                                                step.get("compare_previous", False), step.get("any_order", False)],
                    presses=lambda step: (generate_masked, generate_causal)
                    + ((generate_any_order,) if step.get("any_order") else ()),
                    after_lesson=(w["line"],))
