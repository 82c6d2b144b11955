"""Generation engine: one ``generate()`` for masked and causal LMs.

A masked LM is wrapped by :class:`demo.engine.mlm_decoder.MaskedLMAsCausalLM` (the BERTs paper's
``[CLS] text [MASK] [MASK]*p [SEP]`` trick); a causal LM is used as it is, with its KV cache.
Either way transformers' ``generate()`` does the decoding (greedy, beam search, sampling,
repetition penalty). This module adds what the papers and the app need on top:

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
import threading
import time
from dataclasses import dataclass, field, fields, replace

import torch
from tqdm.auto import tqdm
from transformers import GenerationConfig, StoppingCriteria

from ..settings import GenerationSettings
from .constraints import constraints, pieces
from .counting import Reads, count_pass, counting
from .mask_window import padding_masks_of, window_length
from .mlm_decoder import MaskedLMAsCausalLM, WindowSpecials
from .models import InputTooLong
from .prefix_cache import encoder_of
from .text import decode_newlines, prompt_as_read, prompt_ids_of, special_token_note
from .trace import StepRecorder, StepTrace, build_trace

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
    if s.cache == "prefix" and lm.kind == "masked":
        encoder_of(lm.model)  # refuses a family the prefix cache does not cover, naming those it does


def check_prompt(lm, prompt: str, settings: GenerationSettings) -> None:
    """Raise what ``generate`` would raise for this prompt's length (InputTooLong when the last
    step would not fit), without generating: for callers that filter inputs first."""
    _check_room(lm, len(prompt_ids_of(lm, prompt)), settings.max_new_tokens,
                padding_masks_of(lm, settings.padding_masks))


def _check_room(lm, n_prompt: int, max_new_tokens: int, padding_masks: int) -> None:
    """Refuse a request whose last step would not fit an absolute-position model."""
    if lm.max_length is None:
        return
    if lm.kind == "masked":
        # the last step predicts token max_new_tokens after n_prompt + max_new_tokens - 1 tokens
        needed = window_length(n_prompt + max_new_tokens - 1, padding_masks)
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


class Deadline(StoppingCriteria):
    """Stops every row once ``seconds`` have passed since it was made (a per-request time limit)."""

    def __init__(self, seconds: float):
        self.end, self.passed = time.perf_counter() + seconds, False

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        self.passed = self.passed or time.perf_counter() > self.end
        return torch.full((input_ids.shape[0],), self.passed, dtype=torch.bool, device=input_ids.device)


class ProgressBar(StoppingCriteria):
    """Advances a tqdm bar once per step; never stops anything."""

    def __init__(self, total: int):
        self.bar = tqdm(total=total, desc="generating", unit="step", leave=False)

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        self.bar.update(1)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


# ---------------------------------------------------------------- generate


def _end_ids(lm) -> list[int]:
    if lm.kind == "masked":
        return [WindowSpecials.of(lm.tokenizer).end]  # predicting [SEP] = "the text ends here"
    ids = lm.model.generation_config.eos_token_id
    ids = list(ids) if isinstance(ids, (list, tuple)) else ([ids] if ids is not None else [])
    if lm.tokenizer.eos_token_id is not None and lm.tokenizer.eos_token_id not in ids:
        ids.append(lm.tokenizer.eos_token_id)
    return ids


def suppressed_ids(lm, end_ids: list[int]) -> list[int]:
    """Ids the decoder may never pick: rows beyond the tokenizer (embeddings rounded up) and,
    for masked LMs, specials other than the end token ([CLS], [MASK], [PAD], [UNK]).
    Infilling passes no end token: a blank holds text only (``demo.engine.infill``)."""
    ids = set(range(len(lm.tokenizer), max(lm.model.config.vocab_size, len(lm.tokenizer))))
    if lm.kind == "masked":
        ids |= set(lm.tokenizer.all_special_ids) - set(end_ids)
    return sorted(ids)


_COUNTED_LOCK = threading.Lock()


def _count_inputs(module, args, kwargs) -> None:
    input_ids = kwargs.get("input_ids", args[0] if args else None)
    if input_ids is not None:
        count_pass(input_ids)  # with a KV cache: only the tokens the cache lacks


def _counts_its_passes(model) -> None:
    """Count a causal LM's passes where ``generate()`` feeds it: a hook that charges only the
    counters open in the calling thread, registered once per model (two at once would count
    every pass twice)."""
    with _COUNTED_LOCK:
        if not getattr(model, "_demo_counts_passes", False):
            model.register_forward_pre_hook(_count_inputs, with_kwargs=True)
            model._demo_counts_passes = True


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
    _validate(lm, prompt, s)
    tokenizer = lm.tokenizer
    masked = lm.kind == "masked"
    padding_masks = padding_masks_of(lm, s.padding_masks)

    model_prompt = prompt_as_read(prompt, lm.newline_survives)
    prompt_ids = prompt_ids_of(lm, prompt)
    n = len(prompt_ids)
    _check_room(lm, n, s.max_new_tokens, padding_masks)

    end_ids = _end_ids(lm)
    # (a causal LM decodes with its own exact KV cache whatever s.cache says)
    refresh_every = s.cache_refresh if s.cache == "prefix" else None
    model = (MaskedLMAsCausalLM(lm.model, tokenizer, padding_masks, refresh_every, s.cache_margin,
                                s.parallel_threshold) if masked else lm.model)
    if masked and s.trace:
        model.recorded_windows = []
    config = _decoding_config(lm, s, end_ids)
    processors, stops, prefix_fn, trie = constraints(lm, s, model_prompt, prompt_ids, end_ids)
    if not masked:
        _counts_its_passes(model)
    reads = Reads()
    recorder = StepRecorder(n, s.trace, s.trace_top_k, reads)
    processors.append(recorder)  # last: sees the scores after every constraint
    bar = ProgressBar(s.max_new_tokens) if progress else None
    if bar:
        stops.append(bar)
    deadline = Deadline(time_limit) if time_limit is not None else None
    if deadline:
        stops.append(deadline)

    input_ids = torch.tensor([prompt_ids], device=lm.device)
    devices = [lm.device.index or 0] if lm.device.type == "cuda" else []
    start = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=devices, enabled=s.seed is not None), counting(reads):
            if s.seed is not None:
                torch.manual_seed(s.seed)
            output = model.generate(
                input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config,
                logits_processor=processors, stopping_criteria=stops,
                prefix_allowed_tokens_fn=prefix_fn)
    finally:
        if bar:
            bar.bar.close()
    seconds = time.perf_counter() - start

    # The output row: prompt, generated ids, maybe an end token, maybe beam-search padding.
    generated = output[0, n:].tolist()
    ended = next((i for i, t in enumerate(generated) if t in end_ids), None)
    if ended is not None:
        generated = generated[:ended + 1]
    elif config.pad_token_id is not None:
        while generated and generated[-1] == config.pad_token_id:
            generated.pop()
    text_ids = generated[:ended] if ended is not None else generated
    tokens = pieces(tokenizer, prompt_ids, text_ids)
    text = decode_newlines("".join(tokens), lm.newline_survives)

    if trie is not None:
        text, reason = trie.sequences.get(tuple(text_ids), text), "choice"
    elif s.digits is not None and len(re.sub(r"\D", "", text)) == s.digits:
        reason = "digits"
    else:
        text, reason = _cut_at_stops(text, tuple(s.stop_strings), s.stop_at_newline)
        timed_out = deadline is not None and deadline.passed and len(generated) < s.max_new_tokens
        reason = reason or ("eos" if ended is not None else "time_limit" if timed_out else "max_new_tokens")

    steps = build_trace(lm, model, recorder, prompt_ids, generated, tokens, end_ids, padding_masks,
                   s.strategy == "beam") if s.trace else []
    note = special_token_note(prompt, tokenizer)
    return GenerationResult(prompt=prompt, text=text, tokens=tokens, stop_reason=reason,
                            steps=steps, seconds=seconds,
                            seconds_per_step=seconds / max(recorder.n_steps, 1), prompt_tokens=n,
                            token_ids=text_ids, notes=[note] if note else [],
                            refreshes=model.prefix_cache.refreshes if masked and model.prefix_cache else None,
                            guessed=(sum(j > 0 for j in model.read_from)
                                     if masked and s.parallel_threshold is not None else None),
                            reads=reads)


def _decoding_config(lm, s: GenerationSettings, end_ids: list[int]) -> GenerationConfig:
    sample = s.strategy == "sample"
    return GenerationConfig(
        max_new_tokens=s.max_new_tokens, min_new_tokens=0, do_sample=sample,
        num_beams=s.num_beams if s.strategy == "beam" else 1,
        # explicit values while sampling (so a checkpoint's own defaults cannot leak in),
        # unset otherwise (transformers warns about sampling flags without sampling)
        temperature=s.temperature if sample else None, top_k=s.top_k if sample else None,
        top_p=s.top_p if sample else None, repetition_penalty=s.repetition_penalty,
        no_repeat_ngram_size=0, length_penalty=1.0, num_return_sequences=1,
        eos_token_id=end_ids, pad_token_id=lm.tokenizer.pad_token_id,
        suppress_tokens=suppressed_ids(lm, end_ids) or None,
        use_cache=lm.kind != "masked", return_dict_in_generate=False)


