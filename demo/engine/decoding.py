"""One decoding run of ``generate()``: transformers' ``GenerationMixin.generate`` drives a masked LM
(dressed as a causal LM by ``demo.engine.mlm_decoder``) or a causal LM (with its own exact KV
cache), under the request's constraints, its step recorder, its stops and its counters. A masked
LM writing in any order (``GenerationSettings.any_order``) is run by ``demo.engine.unmasking``.
Several requests with the same settings decode as one batch (``decode_together``; each request's
rows its own: ``demo.engine.batch_rows``).

``decode`` hands back what the run wrote and did as one frozen record (``Decoded``): the ids, the
time, why it may have stopped early, the work counted and, for a masked LM, what each step read
(``DecodingRecord``). ``demo.engine.generation`` turns that into text, a stop reason and a trace.
"""

import threading
import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm
from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList
from transformers.generation.logits_process import PrefixConstrainedLogitsProcessor

from ..settings import GenerationSettings
from .batch_rows import Batch, RowProcessors, RowStops
from .constraints import Constraints, pieces
from .counting import Reads, count_pass, counting
from .mask_window import open_masks, padding_masks_of, window_length
from .mlm_decoder import DecodingRecord, MaskedLMAsCausalLM, WindowSpecials
from .sampling import Draw, generator, logits_processors
from .text import decode_newlines
from .trace import StepRecorder
from .unmasking import Growth, Written, write_together


@dataclass(frozen=True)
class Decoded:
    """What one decoding run wrote and did."""
    ids: tuple[int, ...]  # after the prompt: up to and with an end token, beam padding removed
    ended: bool  # the last id is an end token
    seconds: float
    timed_out: bool  # the time limit ended it before max_new_tokens
    recorder: StepRecorder | None  # per step: the scores the decoder chose from (trace) and the work
    reads: Reads  # the forward passes it ran and the tokens they read, all rows together
    record: DecodingRecord | None  # a masked LM's steps; None for a causal LM
    n_steps: int  # decoding steps (one = one forward pass over all rows)
    # the log-likelihood of the output under the order it was written: each token's log-prob
    # (among what the decoder may write) at the step it was written; None for beam search
    log_likelihood: float | None
    written: Written | None = None  # any-order writing: what each step wrote (its trace included)

    @property
    def text_ids(self) -> list[int]:
        """The ids that make the text (the end token left out)."""
        return list(self.ids[:-1] if self.ended else self.ids)


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


def end_ids(lm, chat: bool = False) -> list[int]:
    """The ids that end a text: a masked LM's [SEP] (predicting it says "the text ends here"), a
    causal LM's end-of-sequence ids (its generation config's and its tokenizer's). A masked LM
    answering a chat turn ends where its chat training ended an answer: dLLM's chat models are
    trained on answers padded with the tokenizer's end-of-sequence token, its padding token where
    it has none (ModernBERT's), and their sampler ends the text at the first one."""
    if lm.kind == "masked":
        if chat:
            tokenizer = lm.tokenizer
            end = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.pad_token_id
            if end is None:
                raise ValueError(f"{lm.label}'s tokenizer has neither an end-of-sequence nor a padding token, "
                                 f"so nothing ends a chat answer: turn chat off.")
            return [end]
        return [WindowSpecials.of(lm.tokenizer).end]
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


def decode(lm, s: GenerationSettings, prompt_ids: list[int], ends: list[int], rules: Constraints, *,
           progress: bool = False, time_limit: float | None = None) -> Decoded:
    """Continue ``prompt_ids`` once, as the settings say, under ``rules``; ``ends``: the ids that
    end the text (``end_ids``). ``progress``: a tqdm bar; ``time_limit``: seconds, after which
    the step that passes it is the last."""
    return decode_together(lm, s, [prompt_ids], ends, [rules], progress=progress, time_limit=time_limit)[0]


def batches(kind: str, s: GenerationSettings) -> bool:
    """Whether several prompts with these settings decode as one batch, each row as it runs alone.
    Beam search keeps a request's beams together and the prefix cache and parallel unmasking keep
    state for one window: those decode one prompt at a time."""
    if kind == "masked" and not s.any_order:
        return s.strategy != "beam" and s.cache == "exact" and s.parallel_threshold is None
    return s.strategy != "beam"


def decode_together(lm, s: GenerationSettings, prompts: list[list[int]], ends: list[int], rules: list[Constraints], *,
                    progress: bool = False, time_limit: float | None = None) -> list[Decoded]:
    """:func:`decode` for several prompts with the same settings, each output the one it gets
    alone: one batch where :func:`batches` says so (the seconds are the batch's), else one prompt
    after another."""
    if lm.kind == "masked" and s.any_order:
        return unmask_together(lm, s, prompts, ends, progress=progress, time_limit=time_limit)
    if len(prompts) > 1 and not batches(lm.kind, s):
        return [decode(lm, s, ids, ends, r, progress=progress, time_limit=time_limit) for ids, r in zip(prompts, rules)]
    model = _decoder(lm, s)
    config = _decoding_config(lm, s, ends)
    beams = s.num_beams if s.strategy == "beam" else 1
    batch = Batch.of(prompts, config.pad_token_id, beams, lm.device)
    reads, alone = Reads(), len(prompts) == 1
    # a request's reads are counted as they run alone; in a batch they are what it reads alone
    recorders = [StepRecorder(len(ids), s.trace, s.trace_top_k, reads if alone else None) for ids in prompts]
    penalty, warpers = logits_processors(s)
    own = [[*([PrefixConstrainedLogitsProcessor(r.prefix_fn, beams)] if r.prefix_fn else []), *penalty, *r.processors,
            recorder] for r, recorder in zip(rules, recorders)]
    draw = [Draw(warpers, [generator(s.seed, lm.device) for _ in prompts])] if s.strategy == "sample" else []
    stops = RowStops(batch, [r.stops for r in rules], ends if beams == 1 else [])
    bar = ProgressBar(s.max_new_tokens) if progress else None
    deadline = Deadline(time_limit) if time_limit is not None else None
    start = time.perf_counter()
    try:
        with counting(reads):
            output = model.generate(
                batch.ids, attention_mask=batch.attention_mask, generation_config=config,
                # each request's constraints, then its recorder, on its own rows; then the draw
                logits_processor=LogitsProcessorList([RowProcessors(batch, own), *draw]),
                stopping_criteria=StoppingCriteriaList([stops, *filter(None, (bar, deadline))]))
    finally:
        if bar:
            bar.bar.close()
    seconds = time.perf_counter() - start
    runs = []
    for r, (prompt_ids, recorder) in enumerate(zip(prompts, recorders)):
        ids, ended = _generated(batch.written(output, r, stops.lengths[r]), ends, config.pad_token_id)
        timed_out = deadline is not None and deadline.passed and not ended and len(ids) < s.max_new_tokens
        if not alone:
            recorder.step_reads = reads_alone(lm, s, len(prompt_ids), len(ids))
        record = (model.record() if alone else model.record(r)) if isinstance(model, MaskedLMAsCausalLM) else None
        runs.append(Decoded(ids, ended, seconds, timed_out, recorder,
                            reads if alone else sum(recorder.step_reads, Reads()), record,
                            recorder.n_steps if alone else len(ids),
                            recorder.log_likelihood(ids) if beams == 1 else None))
    return runs


def reads_alone(lm, s: GenerationSettings, prompt_tokens: int, steps: int) -> list[Reads]:
    """What each step of a generation reads when it runs alone (what a request decoded in a batch
    is charged: the batch also reads rows that have ended): a masked LM its whole window, a causal
    LM the prompt once, then the token it wrote last."""
    if lm.kind == "masked":
        return [Reads(1, window_length(prompt_tokens + t, padding_masks_of(lm, s.padding_masks))) for t in range(steps)]
    return [Reads(1, prompt_tokens if t == 0 else 1) for t in range(steps)]


def unmask_together(lm, s: GenerationSettings, prompts: list[list[int]], ends: list[int], *,
                    progress: bool = False, time_limit: float | None = None) -> list[Decoded]:
    """A masked LM writing in any order (``demo.engine.unmasking``), its masks after each text as
    the settings say (``mask_window.open_masks``), until the end token, a stop string or
    ``max_new_tokens`` decided tokens; the prompts' steps read together (``write_together``), each
    output the one it gets alone; the seconds are the batch's."""
    growth = Growth(s.window, open_masks(lm, s), s.max_new_tokens, ends[0], s.masks_ahead)
    bar = tqdm(total=s.max_new_tokens * len(prompts), desc="generating", unit="token", leave=False) \
        if progress else None
    start = time.perf_counter()
    deadline = start + time_limit if time_limit is not None else None
    try:
        written = write_together(lm, prompts, s, growth, suppressed_ids(lm, ends),
                                 [_stops(lm, s, ids) for ids in prompts], deadline,
                                 bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    seconds = time.perf_counter() - start
    timed_out = deadline is not None and time.perf_counter() > deadline
    return [_written(lm, s, out, begin, ends, seconds, timed_out) for out, begin in written]


def _written(lm, s: GenerationSettings, out: Written, begin: int, ends: list[int], seconds: float,
             late: bool) -> Decoded:
    """One window's writing as a decoding run: the text before its first mask (at most
    ``max_new_tokens``), with the end token written right after it."""
    text = out.ids[begin:-1]
    text = text[:text.index(lm.tokenizer.mask_token_id)] if lm.tokenizer.mask_token_id in text else text
    after = begin + len(text)  # an end token written there ends the text
    ended = len(text) < s.max_new_tokens and after in out.written_at and out.ids[after] in ends
    ids = tuple(text[:s.max_new_tokens]) + ((out.ids[begin + len(text)],) if ended else ())
    timed_out = late and not ended and len(text) < s.max_new_tokens
    return Decoded(ids, ended, seconds, timed_out, None, out.reads, None, len(out.order),
                   sum(out.logprobs[begin + i] for i in range(len(ids))), out)


def _stops(lm, s: GenerationSettings, prompt_ids: list[int]):
    """Whether the text decided so far holds a stop string (or a newline, where it stops there)."""
    stops = [*s.stop_strings, *(["\n"] if s.stop_at_newline else [])]
    if not stops:
        return None
    return lambda ids: any(stop in decode_newlines("".join(pieces(lm.tokenizer, prompt_ids, ids)),
                                                   lm.newline_survives) for stop in stops)


def _decoder(lm, s: GenerationSettings):
    """The model ``generate()`` drives: a masked LM in its window, with the prefix cache and
    parallel unmasking as set, or the causal LM itself (its own exact KV cache whatever
    ``s.cache`` says), which counts its passes through a hook."""
    if lm.kind != "masked":
        _counts_its_passes(lm.model)
        return lm.model
    return MaskedLMAsCausalLM(lm.model, lm.tokenizer, padding_masks_of(lm, s.padding_masks),
                              s.cache_refresh if s.cache == "prefix" else None, s.cache_margin,
                              s.parallel_threshold, record_windows=s.trace)


def _decoding_config(lm, s: GenerationSettings, ends: list[int]) -> GenerationConfig:
    return GenerationConfig(
        # a sample is drawn by the processors (Draw), so generate() itself only takes the best token
        max_new_tokens=s.max_new_tokens, min_new_tokens=0, do_sample=False,
        num_beams=s.num_beams if s.strategy == "beam" else 1,
        repetition_penalty=1.0,  # the penalty is the processors' (demo.engine.sampling)

        no_repeat_ngram_size=0, length_penalty=1.0, num_return_sequences=1,
        eos_token_id=ends, pad_token_id=lm.tokenizer.pad_token_id,
        suppress_tokens=suppressed_ids(lm, ends) or None,
        use_cache=lm.kind != "masked", return_dict_in_generate=False)


def _generated(row: list[int], ends: list[int], pad_id: int | None) -> tuple[tuple[int, ...], bool]:
    """(the output row after the prompt, whether it ended): cut after its first end token, or
    else without beam search's padding."""
    ended = next((i for i, t in enumerate(row) if t in ends), None)
    if ended is not None:
        return tuple(row[:ended + 1]), True
    while row and pad_id is not None and row[-1] == pad_id:
        row.pop()
    return tuple(row), False


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
