"""Generation engine: one ``generate()`` for masked and causal LMs.

A masked LM is wrapped by :class:`demo.mlm_decoder.MaskedLMAsCausalLM` (the BERTs paper's
``[CLS] text [MASK] [MASK]*p [SEP]`` trick); a causal LM is used as it is, with its KV cache.
Either way transformers' ``generate()`` does the decoding (greedy, beam search, sampling,
repetition penalty). This module adds what the papers and the app need on top:

- newlines for tokenizers that lose them (the paper's "\\\\n " marker, ``demo.text``);
- stop strings and "stop at newline", checked on the decoded, newline-restored text;
- digits-only decoding with exactly N digits (the needle probe) and a fixed set of allowed
  continuations (prefix-constrained decoding over the choices' token sequences);
- a step trace for teaching: the window the model saw, its top next tokens, the chosen token,
  the live beams with their scores;
- clear ``ValueError``s for bad input, never silent truncation.
"""

import re
import time
from dataclasses import dataclass, field, fields, replace

import torch
from tqdm.auto import tqdm
from transformers import (GenerationConfig, LogitsProcessor, LogitsProcessorList,
                          StoppingCriteria, StoppingCriteriaList)

from .mlm_decoder import MaskedLMAsCausalLM, WindowSpecials, window_length
from .settings import GenerationSettings
from .text import decode_newlines, encode_newlines, join

STOP_REASONS = ("max_new_tokens", "stop_string", "newline", "eos", "digits", "choice")
_DECODE_CONTEXT = 8  # prompt tokens decoded before a continuation so its first space survives


@dataclass
class StepTrace:
    step: int
    window: list[str]  # tokens the model saw this step, masks included
    mask_positions: list[int]  # positions of the masks in `window` (first = predicted); [] causal
    top: list[tuple[str, float]]  # top-k next tokens (as text) with probabilities
    chosen: str  # the token taken at this step (as text; the end token as its name)
    beams: list[tuple[str, float]] | None  # beam search: live hypotheses, cumulative log-prob


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
        raise ValueError(f"padding_masks only applies to masked LMs; {lm.name} is a causal LM "
                         f"(leave it unset).")


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
        raise ValueError(
            f"The prompt is {n_prompt} tokens: with {layout} it already fills {lm.name}'s "
            f"{lm.max_length} positions (absolute position embeddings), so no token can be "
            f"generated. Shorten the prompt or pick a model with relative positions (DeBERTa).")
    raise ValueError(
        f"The prompt is {n_prompt} tokens; {lm.name} reads at most {lm.max_length} tokens, so with "
        f"{layout} there is room for {room} new token(s), not {max_new_tokens}. Lower "
        f"max_new_tokens to {room} or shorten the prompt.")


# ---------------------------------------------------------------- decoding text


def _decode(tokenizer, ids) -> str:
    # No clean-up: it rewrites " ." to "." only once the "." arrives, so decoding a growing
    # sequence would not be monotone and the pieces would not add up to the text.
    return tokenizer.decode(ids, clean_up_tokenization_spaces=False)


def _continuation(tokenizer, context: list[int], new: list[int]) -> str:
    """The text ``new`` adds after ``context`` (its leading space included)."""
    tail = context[-_DECODE_CONTEXT:]
    before, after = _decode(tokenizer, tail), _decode(tokenizer, tail + list(new))
    return after[len(before):] if after.startswith(before) else _decode(tokenizer, new)


def _pieces(tokenizer, context: list[int], new: list[int]) -> list[str]:
    """The text each token of ``new`` adds; ``"".join`` gives the whole continuation.

    A byte-level token that ends inside a UTF-8 character decodes to U+FFFD until the rest
    arrives, so such replacement characters are held back and given to the next token.
    """
    tail = context[-_DECODE_CONTEXT:]
    base = _decode(tokenizer, tail)
    done, pieces = base, []
    for i in range(1, len(new) + 1):
        text = _decode(tokenizer, tail + list(new[:i]))
        settled = text.rstrip("\ufffd") if i < len(new) else text
        if settled.startswith(done):
            pieces.append(settled[len(done):])
            done = settled
        else:  # decoding changed earlier text: give up on exact pieces for this token
            pieces.append(_decode(tokenizer, new[i - 1:i]))
            done = text
    return pieces


def _cut_at_stops(text: str, stop_strings: tuple[str, ...], stop_at_newline: bool):
    """(text before the earliest stop, reason) or (text, None)."""
    best = None
    for stop, reason in [(s, "stop_string") for s in stop_strings] + (
            [("\n", "newline")] if stop_at_newline else []):
        at = text.find(stop)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, reason)
    return (text, None) if best is None else (text[:best[0]], best[1])


# ---------------------------------------------------------------- constraints and stops


class TextStop(StoppingCriteria):
    """Stop a row once its decoded, newline-restored continuation holds a stop string or "\\n".

    Own criterion instead of transformers' ``stop_strings`` because the check must run on the
    text after the "\\\\n " marker is turned back into a newline.
    """

    def __init__(self, tokenizer, prompt_ids: list[int], newline_survives: bool,
                 stop_strings: tuple[str, ...], stop_at_newline: bool):
        self.tokenizer, self.prompt_ids = tokenizer, prompt_ids
        self.newline_survives = newline_survives
        self.stops = tuple(stop_strings) + (("\n",) if stop_at_newline else ())

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        n = len(self.prompt_ids)
        done = []
        for row in input_ids[:, n:].tolist():
            text = decode_newlines(_continuation(self.tokenizer, self.prompt_ids, row),
                                   self.newline_survives)
            done.append(any(stop in text for stop in self.stops))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


_DIGIT_TABLES: dict = {}


def _digit_tables(tokenizer):
    """Per vocabulary id: digits it carries (0 = not a pure-digit token), whether it starts a
    new word, whether it is a bare word boundary ("▁" / "Ġ", which may open a number).

    Word boundaries by marker: "##x" continues a word (WordPiece), "▁x"/"Ġx" starts one
    (SentencePiece, byte-level BPE); a bare "x" starts a word in WordPiece vocabularies and
    continues one elsewhere.
    """
    key = id(tokenizer)
    if key in _DIGIT_TABLES and _DIGIT_TABLES[key][0] is tokenizer:
        return _DIGIT_TABLES[key][1]
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    wordpiece = sum(1 for p in pieces if p and p.startswith("##")) > 100
    n_digits = torch.zeros(len(pieces), dtype=torch.long)
    starts_word = torch.zeros(len(pieces), dtype=torch.bool)
    bare_boundary = torch.zeros(len(pieces), dtype=torch.bool)
    for i, piece in enumerate(pieces):
        if not piece:
            continue
        if piece.startswith("##"):
            body, start = piece[2:], False
        elif piece[0] in "▁Ġ ":
            body, start = piece[1:], True
        else:
            body, start = piece, wordpiece
        if re.fullmatch(r"[0-9]+", body):
            n_digits[i], starts_word[i] = len(body), start
        elif body == "" and piece[0] in "▁Ġ":
            bare_boundary[i] = True
    tables = (n_digits, starts_word, bare_boundary)
    _DIGIT_TABLES[key] = (tokenizer, tables)
    return tables


class DigitsOnly(LogitsProcessor):
    """Allow only tokens that keep the continuation a single run of at most ``n`` digits.

    The first token may start a new word (" 48") or be a bare boundary ("Ġ" before "4");
    later tokens must continue the number ("##29", "29"), and no token may carry more digits
    than are still missing. The end token is blocked until ``DigitsDone`` stops the row.
    """

    def __init__(self, tokenizer, n: int, prompt_len: int, end_ids: list[int]):
        self.n, self.prompt_len, self.end_ids = n, prompt_len, end_ids
        self.n_digits, self.starts_word, self.bare_boundary = _digit_tables(tokenizer)
        # completable[m]: m more digits can be written with word-continuing tokens alone, so no
        # allowed token may lead into a dead end (a small vocabulary may lack "##7" or "7").
        lengths = set(self.n_digits[(self.n_digits > 0) & ~self.starts_word].tolist())
        self.completable = [True] + [False] * n
        for m in range(1, n + 1):
            self.completable[m] = any(k <= m and self.completable[m - k] for k in lengths)
        if not any(self.completable[n - k] for k in set(self.n_digits[self.n_digits > 0].tolist())
                   if k <= n):
            raise ValueError(f"This tokenizer cannot spell a {n}-digit number with digit tokens.")

    def __call__(self, input_ids, scores):
        width = scores.shape[-1]
        n_digits = _fit(self.n_digits, width, 0).to(scores.device)
        starts_word = _fit(self.starts_word, width, False).to(scores.device)
        bare = _fit(self.bare_boundary, width, False).to(scores.device)
        allowed = torch.zeros_like(scores, dtype=torch.bool)
        for r, row in enumerate(input_ids[:, self.prompt_len:].tolist()):
            have = sum(int(self.n_digits[t]) if t < len(self.n_digits) else 0 for t in row)
            missing = self.n - have
            if missing <= 0:  # only reached if a caller ignores DigitsDone: let the row end
                allowed[r, self.end_ids] = True
                continue
            fits = (n_digits >= 1) & (n_digits <= missing)
            fits &= torch.tensor(self.completable, device=scores.device)[
                (missing - n_digits).clamp(0, self.n)]
            if row:  # inside the number: no new word
                allowed[r] = fits & ~starts_word
            else:  # opening the number; a bare "Ġ" only if digits alone can follow it
                allowed[r] = fits | (bare & self.completable[missing])
        return scores.masked_fill(~allowed, float("-inf"))


class DigitsDone(StoppingCriteria):
    def __init__(self, tokenizer, n: int, prompt_len: int):
        self.n, self.prompt_len = n, prompt_len
        self.n_digits = _digit_tables(tokenizer)[0]

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        counts = [sum(int(self.n_digits[t]) if t < len(self.n_digits) else 0 for t in row)
                  for row in input_ids[:, self.prompt_len:].tolist()]
        return torch.tensor([c >= self.n for c in counts], dtype=torch.bool, device=input_ids.device)


def _fit(table: torch.Tensor, width: int, fill) -> torch.Tensor:
    """Pad or crop a vocabulary table to the logits' width (embeddings may be rounded up)."""
    if len(table) >= width:
        return table[:width]
    return torch.cat([table, torch.full((width - len(table),), fill, dtype=table.dtype)])


class ChoiceTrie:
    """Token sequences of the allowed continuations, for prefix-constrained decoding."""

    def __init__(self, sequences: dict[tuple[int, ...], str], end_id: int):
        self.sequences, self.end_id = sequences, end_id
        self.children: dict[tuple[int, ...], set[int]] = {}
        for seq in sequences:
            for i in range(len(seq)):
                self.children.setdefault(seq[:i], set()).add(seq[i])

    def allowed(self, generated: tuple[int, ...]) -> list[int]:
        nxt = set(self.children.get(generated, ()))
        if generated in self.sequences:  # complete, but also the prefix of a longer choice
            nxt.add(self.end_id)
        return sorted(nxt) or [self.end_id]

    def finished(self, generated: tuple[int, ...]) -> bool:
        return generated in self.sequences and generated not in self.children


class ChoiceDone(StoppingCriteria):
    def __init__(self, trie: ChoiceTrie, prompt_len: int):
        self.trie, self.prompt_len = trie, prompt_len

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        return torch.tensor([self.trie.finished(tuple(row)) for row in
                             input_ids[:, self.prompt_len:].tolist()],
                            dtype=torch.bool, device=input_ids.device)


def _choice_sequences(lm, model_prompt: str, prompt_ids: list[int], choices) -> dict:
    """token sequence -> choice, each tokenised as it would follow the prompt.

    Prompt and choice meet as ``demo.text.join`` says (as in scoring); if the tokenizer merges
    across the junction, the choice is tokenised on its own.
    """
    tokenizer, add_specials = lm.tokenizer, lm.kind == "causal"
    sequences: dict[tuple[int, ...], str] = {}
    for choice in choices:
        completion = join(model_prompt, encode_newlines(choice, lm.newline_survives))
        full = tokenizer(model_prompt + completion, add_special_tokens=add_specials)["input_ids"]
        if full[:len(prompt_ids)] == prompt_ids and len(full) > len(prompt_ids):
            seq = tuple(full[len(prompt_ids):])
        else:
            seq = tuple(tokenizer(completion, add_special_tokens=False)["input_ids"])
        if not seq:
            raise ValueError(f"The choice {choice!r} encodes to no tokens.")
        sequences.setdefault(seq, choice)
    return sequences


class StepRecorder(LogitsProcessor):
    """Counts decoding steps and, for the trace, records what each step saw and scored.

    Installed after every constraint, so it sees the scores the decoder chooses from (for
    sampling: before temperature / top-k / top-p, which transformers applies afterwards). For
    beam search those scores are the log-probs added to each hypothesis, so cumulative beam
    scores follow by adding each row's parent score and its last token's log-prob.
    """

    def __init__(self, prompt_len: int, record: bool, top_k: int):
        self.prompt_len, self.record, self.top_k = prompt_len, record, top_k
        self.n_steps = 0
        self.steps: list[dict] = []
        self._previous = None  # (rows, cumulative scores, scores) of the last step

    def __call__(self, input_ids, scores):
        self.n_steps += 1
        if not self.record:
            return scores
        rows = [tuple(r) for r in input_ids[:, self.prompt_len:].tolist()]
        if self._previous is None:
            cumulative = [0.0] * len(rows)
        else:
            prev_rows, prev_cumulative, prev_scores = self._previous
            where = {r: i for i, r in enumerate(prev_rows)}
            cumulative = [prev_cumulative[where[r[:-1]]] + float(prev_scores[where[r[:-1]], r[-1]])
                          if r[:-1] in where else float("-inf") for r in rows]
        probs = scores.float().log_softmax(-1).exp()
        top = probs.topk(min(self.top_k, probs.shape[-1]), dim=-1)
        self.steps.append(dict(rows=rows, cumulative=cumulative, top_ids=top.indices.tolist(),
                               top_probs=top.values.tolist()))
        self._previous = (rows, cumulative, scores.detach().float().cpu())
        return scores


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


def _suppressed_ids(lm, vocab_width: int, end_ids: list[int]) -> list[int]:
    """Ids the decoder may never pick: rows beyond the tokenizer (embeddings rounded up) and,
    for masked LMs, specials other than the end token ([CLS], [MASK], [PAD], [UNK])."""
    ids = set(range(len(lm.tokenizer), vocab_width))
    if lm.kind == "masked":
        ids |= set(lm.tokenizer.all_special_ids) - set(end_ids)
    return sorted(ids)


def _vocab_width(lm) -> int:
    return max(lm.model.config.vocab_size, len(lm.tokenizer))


def generate(lm, prompt: str, settings: GenerationSettings | None = None, *, progress: bool = False,
             **overrides) -> GenerationResult:
    """Continue ``prompt`` with a masked or causal LM (``demo.models.LoadedModel``).

    ``settings`` fields can be overridden by keyword (``generate(lm, p, strategy="beam")``).
    Temperature, top-k and top-p only act when ``strategy="sample"``; with ``choices`` the
    stop strings and "stop at newline" are not needed and not applied.
    """
    s = _settings(settings, overrides)
    _validate(lm, prompt, s)
    tokenizer = lm.tokenizer
    masked = lm.kind == "masked"
    padding_masks = (s.padding_masks if s.padding_masks is not None else lm.padding_masks) if masked else 0

    model_prompt = encode_newlines(prompt, lm.newline_survives)
    # verbose=False: the length check below is ours (with a clearer message)
    prompt_ids = tokenizer(model_prompt, add_special_tokens=not masked, verbose=False)["input_ids"]
    n = len(prompt_ids)
    if n == 0:
        raise ValueError("The prompt encodes to no tokens.")
    _check_room(lm, n, s.max_new_tokens, padding_masks)

    end_ids = _end_ids(lm)
    model = MaskedLMAsCausalLM(lm.model, tokenizer, padding_masks) if masked else lm.model
    if masked and s.trace:
        model.recorded_windows = []
    config = _decoding_config(lm, s, end_ids)
    processors, stops, prefix_fn, trie = _constraints(lm, s, model_prompt, prompt_ids, end_ids)
    recorder = StepRecorder(n, s.trace, s.trace_top_k)
    processors.append(recorder)  # last: sees the scores after every constraint
    bar = ProgressBar(s.max_new_tokens) if progress else None
    if bar:
        stops.append(bar)

    input_ids = torch.tensor([prompt_ids], device=lm.device)
    devices = [lm.device.index or 0] if lm.device.type == "cuda" else []
    start = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=devices, enabled=s.seed is not None):
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
    tokens = _pieces(tokenizer, prompt_ids, text_ids)
    text = decode_newlines("".join(tokens), lm.newline_survives)

    if trie is not None:
        text, reason = trie.sequences.get(tuple(text_ids), text), "choice"
    elif s.digits is not None and len(re.sub(r"\D", "", text)) == s.digits:
        reason = "digits"
    else:
        text, reason = _cut_at_stops(text, tuple(s.stop_strings), s.stop_at_newline)
        reason = reason or ("eos" if ended is not None else "max_new_tokens")

    steps = _trace(lm, model, recorder, prompt_ids, generated, tokens, end_ids, padding_masks,
                   s.strategy == "beam") if s.trace else []
    return GenerationResult(prompt=prompt, text=text, tokens=tokens, stop_reason=reason,
                            steps=steps, seconds=seconds,
                            seconds_per_step=seconds / max(recorder.n_steps, 1), prompt_tokens=n,
                            token_ids=text_ids)


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
        suppress_tokens=_suppressed_ids(lm, _vocab_width(lm), end_ids) or None,
        use_cache=lm.kind != "masked", return_dict_in_generate=False)


def _constraints(lm, s: GenerationSettings, model_prompt: str, prompt_ids: list[int], end_ids):
    """(logits processors, stopping criteria, prefix_allowed_tokens_fn, choice trie)."""
    n = len(prompt_ids)
    processors, stops, prefix_fn, trie = LogitsProcessorList(), StoppingCriteriaList(), None, None
    if s.digits is not None:
        processors.append(DigitsOnly(lm.tokenizer, s.digits, n, end_ids))
        stops.append(DigitsDone(lm.tokenizer, s.digits, n))
    if s.choices is not None:
        trie = ChoiceTrie(_choice_sequences(lm, model_prompt, prompt_ids, s.choices), end_ids[0])
        longest = max(len(seq) for seq in trie.sequences)
        if longest > s.max_new_tokens:
            raise ValueError(f"The longest choice is {longest} tokens but max_new_tokens is "
                             f"{s.max_new_tokens}; raise max_new_tokens.")
        prefix_fn = lambda batch_id, ids: trie.allowed(tuple(ids[n:].tolist()))  # noqa: E731
        stops.append(ChoiceDone(trie, n))
    elif s.stop_strings or s.stop_at_newline:
        stops.append(TextStop(lm.tokenizer, prompt_ids, lm.newline_survives, s.stop_strings,
                              s.stop_at_newline))
    return processors, stops, prefix_fn, trie


def _trace(lm, model, recorder: StepRecorder, prompt_ids, generated, tokens, end_ids,
           padding_masks: int, beam: bool) -> list[StepTrace]:
    """One StepTrace per token of the output, taken from the row that held its prefix."""
    tokenizer, n = lm.tokenizer, len(prompt_ids)
    masked = lm.kind == "masked"
    steps = []
    for t, token_id in enumerate(generated):
        record = recorder.steps[t]
        prefix = tuple(generated[:t])  # beam search: some live row holds the output's prefix
        row = record["rows"].index(prefix) if prefix in record["rows"] else 0
        context = prompt_ids + list(generated[:t])
        if masked:
            window_ids = model.recorded_windows[t][row].tolist()
            first_mask = n + t + 1
            mask_positions = list(range(first_mask, first_mask + padding_masks + 1))
        else:
            window_ids, mask_positions = context, []
        top = [(_piece_or_name(tokenizer, context, i, end_ids), p)
               for i, p in zip(record["top_ids"][row], record["top_probs"][row])]
        chosen = tokens[t] if t < len(tokens) else _piece_or_name(tokenizer, context, token_id, end_ids)
        beams = None
        if beam:
            live = {}
            for r, score in zip(record["rows"], record["cumulative"]):
                if score > -1e8 and r not in live:  # -1e9: beam search's placeholder rows
                    live[r] = score
            beams = sorted(((_continuation(tokenizer, prompt_ids, list(r)), score)
                            for r, score in live.items()), key=lambda b: -b[1])
        steps.append(StepTrace(step=t, window=tokenizer.convert_ids_to_tokens(window_ids),
                               mask_positions=mask_positions, top=top, chosen=chosen, beams=beams))
    return steps


def _piece_or_name(tokenizer, context, token_id: int, end_ids) -> str:
    if token_id in end_ids or token_id in tokenizer.all_special_ids:
        return tokenizer.convert_ids_to_tokens(token_id)
    return _continuation(tokenizer, context, [token_id])
