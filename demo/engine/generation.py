"""Generation engine: one ``generate()`` for masked and causal LMs.

A masked LM is wrapped by :class:`demo.engine.mlm_decoder.MaskedLMAsCausalLM` (the BERTs paper's
``[CLS] text [MASK] [MASK]*p [SEP]`` trick); a causal LM is used as it is, with its KV cache.
Either way transformers' ``generate()`` does the decoding (greedy, beam search, sampling,
repetition penalty), run for one request or several at once by ``demo.engine.decoding``. This
module adds what the papers and the app need on top:

- the text conventions of ``demo.engine.text`` (the paper's newline marker for tokenizers that lose
  "\\n"), applied to the raw prompt here and undone on the output;
- stop strings, "stop at newline", exactly N digits, a fixed set of choices (``demo.engine.constraints``);
- a step trace for teaching (``demo.engine.trace``): the window the model saw, its top next tokens, the
  chosen token, the live beams with their scores;
- for masked LMs, the approximate prefix cache (``settings.cache="prefix"``, ``demo.engine.prefix_cache``)
  beside the exact method, and where two outputs part (``first_difference``);
- the work it did (``GenerationResult.reads``, per step in the trace): forward passes and the
  tokens they read, counted as they run (``demo.engine.counting``);
- clear ``ValueError``s for bad input, never silent truncation.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from ..settings import GenerationSettings
from .constraints import Constraints, constraints, pieces
from .counting import Reads
from .decoding import Decoded, decode, decode_together, end_ids
from .mask_window import last_window, padding_masks_of, window_length
from .models import InputTooLong
from .prefix_cache import encoder_of
from .text import decode_newlines, model_prompt, prompt_ids_of, special_token_note
from .trace import StepTrace, build_trace

STOP_REASONS = ("max_new_tokens", "stop_string", "newline", "eos", "digits", "choice", "time_limit")


@dataclass
class GenerationResult:
    prompt: str
    text: str  # continuation only: newlines restored, stop string removed
    tokens: list[str]  # generated tokens as the text each adds (end token excluded)
    stop_reason: str  # one of STOP_REASONS
    steps: list[StepTrace]  # empty unless settings.trace
    seconds: float
    seconds_per_step: float  # one step = one forward pass over all beams / samples
    prompt_tokens: int
    token_ids: list[int] = field(default_factory=list)  # ids of `tokens` (end token excluded)
    notes: list[str] = field(default_factory=list)  # things the reader should know (demo.engine.text)
    # the prefix cache's whole-window encodings (its first step, every R tokens, near-ties);
    # None for the exact method, whose every step is one
    refreshes: int | None = None
    # parallel unmasking: the steps that ran no forward pass of their own (read at a padding mask
    # of an earlier one); None when it is off or the model is a causal LM
    guessed: int | None = None
    # the forward passes decoding ran and the tokens they read, all beams together: a masked LM
    # re-reads its window every step (the prefix cache: only its tail between refreshes); a causal
    # LM reads the prompt once, then the one token it wrote last
    reads: Reads = field(default_factory=Reads)
    # the output's log-likelihood under the order it was written: each token's log-prob (among what
    # the decoder may write) at the step it was written, the end token's included; greedy or
    # sampled left to right, the masked LM's is its decoder likelihood (ScoringSettings
    # method="decoder"). None for beam search
    log_likelihood: float | None = None
    steps_run: int = 0  # decoding steps: one forward pass each (several tokens each, writing in any order)


def first_difference(a: GenerationResult, b: GenerationResult) -> int | None:
    """Index of the first generated token where two outputs differ (one ending earlier counts
    as a difference); None when they are the same (e.g. the exact method vs the prefix cache)."""
    if a.token_ids == b.token_ids:
        return None
    return next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y),
                min(len(a.token_ids), len(b.token_ids)))


# ---------------------------------------------------------------- validation


def _settings(settings: GenerationSettings | None, overrides: dict) -> GenerationSettings:
    known = {f.name for f in fields(GenerationSettings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"Unknown generation setting(s) {unknown}; known: {sorted(known)}")
    return replace(settings or GenerationSettings(), **overrides)  # validated by the dataclass


def _validate(lm, prompt, s: GenerationSettings) -> None:
    """What depends on the prompt and the model (the rest is checked by GenerationSettings)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: give the model some text to continue.")
    if s.padding_masks is not None and lm.kind != "masked":
        raise ValueError(f"padding_masks only applies to masked LMs; {lm.label} is a causal LM "
                         f"(leave it unset).")
    if s.any_order and lm.kind != "masked":
        raise ValueError(f"{lm.label} is a causal LM: it writes left to right, one token after the text; "
                         f"window, order, tokens_per_step and remask are a masked LM's (leave them unset).")
    if s.cache == "prefix" and lm.kind == "masked":
        encoder_of(lm.model)  # refuses a family the prefix cache does not cover, naming those it does


def check_prompt(lm, prompt: str, settings: GenerationSettings) -> None:
    """Raise what ``generate`` would raise for this prompt's length (InputTooLong when the last
    step would not fit), without generating: for callers that filter inputs first."""
    _check_room(lm, len(prompt_ids_of(lm, prompt, settings.chat)), settings)


def _check_room(lm, n_prompt: int, s: GenerationSettings) -> None:
    """Refuse a request whose longest window would not fit an absolute-position model."""
    if lm.max_length is None:
        return
    max_new_tokens, padding_masks = s.max_new_tokens, padding_masks_of(lm, s.padding_masks)
    if lm.kind == "masked" and s.window == "block":  # the prompt and every block, between [CLS] and [SEP]
        needed = last_window(n_prompt, max_new_tokens, padding_masks, s.window)
        room, layout = lm.max_length - n_prompt - 2, "[CLS], the blocks' masks and [SEP]"
    elif lm.kind == "masked":
        # the last step predicts token max_new_tokens after n_prompt + max_new_tokens - 1 tokens
        needed = last_window(n_prompt, max_new_tokens, padding_masks)
        room = lm.max_length - window_length(n_prompt, padding_masks) + 1
        layout = f"[CLS], {padding_masks + 1} mask(s) and [SEP]"
    else:
        needed, room, layout = n_prompt + max_new_tokens, lm.max_length - n_prompt, "the prompt"
    if needed <= lm.max_length:
        return
    if room <= 0:
        raise InputTooLong(
            f"The prompt is {n_prompt} tokens: with {layout} it already fills {lm.label}'s "
            f"{lm.max_length} positions (absolute position embeddings), so no token can be "
            f"generated. Shorten the prompt or pick a model with relative positions (DeBERTa).")
    raise InputTooLong(
        f"The prompt is {n_prompt} tokens; {lm.label} reads at most {lm.max_length} tokens, so with "
        f"{layout} there is room for {room} new token(s), not {max_new_tokens}. Lower "
        f"max_new_tokens to {room} or shorten the prompt.")


def _cut_at_stops(text: str, stop_strings: tuple[str, ...], stop_at_newline: bool):
    """(text before the earliest stop, reason) or (text, None)."""
    best = None
    for stop, reason in [(s, "stop_string") for s in stop_strings] + (
            [("\n", "newline")] if stop_at_newline else []):
        at = text.find(stop)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, reason)
    return (text, None) if best is None else (text[:best[0]], best[1])


# ---------------------------------------------------------------- generate


def generate(lm, prompt: str, settings: GenerationSettings | None = None, *, progress: bool = False,
             time_limit: float | None = None, **overrides) -> GenerationResult:
    """Continue ``prompt`` with a masked or causal LM (``demo.engine.models.LoadedModel``).

    ``settings`` fields can be overridden by keyword (``generate(lm, p, strategy="beam")``).
    Temperature, top-k and top-p only act when ``strategy="sample"``; with ``choices`` the
    stop strings and "stop at newline" are not needed and not applied. ``time_limit`` (seconds)
    ends decoding after the step that passes it, keeping what was generated (stop reason
    "time_limit").
    """
    s = _settings(settings, overrides)
    prompt_ids, ends, rules = _prepared(lm, prompt, s)
    run = decode(lm, s, prompt_ids, ends, rules, progress=progress, time_limit=time_limit)
    return _result(lm, prompt, s, prompt_ids, ends, rules, run)


def generate_together(lm, prompts: list[str], settings: GenerationSettings | None = None, *,
                      progress: bool = False, time_limit: float | None = None) -> list[GenerationResult]:
    """:func:`generate` for several prompts with the same settings, each result the one it gets
    alone (greedy and seeded sampling token for token; scores up to float rounding): one batch,
    read in one forward pass a step, where ``demo.engine.decoding.batches`` says so (the seconds
    are the batch's), else one prompt after another."""
    s = _settings(settings, {})
    prepared = [_prepared(lm, prompt, s) for prompt in prompts]
    ends = prepared[0][1]
    runs = decode_together(lm, s, [ids for ids, _, _ in prepared], ends, [rules for _, _, rules in prepared],
                           progress=progress, time_limit=time_limit)
    return [_result(lm, prompt, s, ids, ends, rules, run)
            for prompt, (ids, _, rules), run in zip(prompts, prepared, runs)]


def generate_grouped(lm, requests: list[tuple[str, GenerationSettings]], batch_size: int,
                     done: Callable[[list[int], list[GenerationResult]], None] | None = None) -> list[GenerationResult]:
    """Each (prompt, settings) request generated, those with the same settings ``batch_size`` at a
    time (:func:`generate_together`), in the requests' order; ``done(indices, results)`` after each
    batch, with its requests' indices and results (a caller that saves as it goes)."""
    groups: dict[str, list[int]] = {}
    for i, (_, settings) in enumerate(requests):
        groups.setdefault(repr(settings), []).append(i)
    results: list[GenerationResult | None] = [None] * len(requests)
    for group in groups.values():
        for at in range(0, len(group), batch_size):
            batch = group[at:at + batch_size]
            written = generate_together(lm, [requests[i][0] for i in batch], requests[batch[0]][1])
            for i, result in zip(batch, written):
                results[i] = result
            if done is not None:
                done(batch, written)
    return results


def _prepared(lm, prompt: str, s: GenerationSettings) -> tuple[list[int], list[int], Constraints]:
    """(the prompt's ids as the model reads them, the ids that end the text, the constraints),
    the prompt checked against the model."""
    _validate(lm, prompt, s)
    prompt_ids = prompt_ids_of(lm, prompt, s.chat)
    _check_room(lm, len(prompt_ids), s)
    ends = end_ids(lm, s.chat)
    return prompt_ids, ends, constraints(lm, s, model_prompt(lm, prompt, s.chat), prompt_ids, ends)


def _result(lm, prompt: str, s: GenerationSettings, prompt_ids: list[int], ends: list[int], rules: Constraints,
            run: Decoded) -> GenerationResult:
    """A decoding run as the text, why it stopped, its trace and what it did."""
    text_ids = run.text_ids
    tokens = pieces(lm.tokenizer, prompt_ids, text_ids)
    text, reason = _ending(decode_newlines("".join(tokens), lm.newline_survives), run, rules, s)
    if run.written is not None:  # any-order writing: its steps recorded as they ran
        steps = run.written.steps
    else:
        steps = (build_trace(lm, run.record, run.recorder, prompt_ids, list(run.ids), tokens, ends,
                             s.strategy == "beam") if s.trace else [])
    note = special_token_note(prompt, lm.tokenizer)
    record = run.record
    return GenerationResult(prompt=prompt, text=text, tokens=tokens, stop_reason=reason, steps=steps,
                            seconds=run.seconds, seconds_per_step=run.seconds / max(run.n_steps, 1),
                            prompt_tokens=len(prompt_ids), token_ids=text_ids, notes=[note] if note else [],
                            refreshes=record.refreshes if record else None,
                            guessed=record.guessed if record else None, reads=run.reads,
                            log_likelihood=run.log_likelihood, steps_run=run.n_steps)


def _ending(text: str, run: Decoded, rules: Constraints, s: GenerationSettings) -> tuple[str, str]:
    """The text the result shows and why decoding stopped (one of STOP_REASONS): a choice is
    shown as written in the settings, stop strings and "stop at newline" cut the text."""
    if rules.trie is not None:
        return rules.trie.sequences.get(tuple(run.text_ids), text), "choice"
    if s.digits is not None and len(re.sub(r"\D", "", text)) == s.digits:
        return text, "digits"
    text, reason = _cut_at_stops(text, tuple(s.stop_strings), s.stop_at_newline)
    return text, reason or ("eos" if run.ended else "time_limit" if run.timed_out else "max_new_tokens")
