"""Constraints and stops for ``generate()``: what the decoder may write, and when a row is done.

transformers' ``generate()`` takes logits processors, stopping criteria and a prefix function;
these are ours because the papers need rules it does not have:

- ``DigitsOnly`` / ``DigitsDone``: exactly N digits and nothing else (the needle probe);
- ``ChoiceTrie`` / ``ChoiceDone``: the output is one of a fixed set of strings (prefix-constrained
  decoding over the choices' token sequences, each tokenised as it would follow the prompt);
- ``TextStop``: stop strings and "stop at newline" checked on the decoded text after the paper's
  newline marker is turned back into "\\n" (transformers' ``stop_strings`` see only the marker).

Also the decoding helpers they share with the trace: the text a token adds after its context.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor, StoppingCriteria

from ..settings import GenerationSettings
from .text import decode_newlines, encode_newlines, join

_DECODE_CONTEXT = 8  # prompt tokens decoded before a continuation so its first space survives


# ---------------------------------------------------------------- decoding text


def decode(tokenizer, ids) -> str:
    # No clean-up: it rewrites " ." to "." only once the "." arrives, so decoding a growing
    # sequence would not be monotone and the pieces would not add up to the text.
    return tokenizer.decode(ids, clean_up_tokenization_spaces=False)


def continuation(tokenizer, context: list[int], new: list[int]) -> str:
    """The text ``new`` adds after ``context`` (its leading space included)."""
    tail = context[-_DECODE_CONTEXT:]
    before, after = decode(tokenizer, tail), decode(tokenizer, tail + list(new))
    return after[len(before):] if after.startswith(before) else decode(tokenizer, new)


def pieces(tokenizer, context: list[int], new: list[int]) -> list[str]:
    """The text each token of ``new`` adds; ``"".join`` gives the whole continuation.

    A byte-level token that ends inside a UTF-8 character decodes to U+FFFD until the rest
    arrives, so such replacement characters are held back and given to the next token.
    """
    tail = context[-_DECODE_CONTEXT:]
    base = decode(tokenizer, tail)
    done, pieces = base, []
    for i in range(1, len(new) + 1):
        text = decode(tokenizer, tail + list(new[:i]))
        settled = text.rstrip("\ufffd") if i < len(new) else text
        if settled.startswith(done):
            pieces.append(settled[len(done):])
            done = settled
        else:  # decoding changed earlier text: give up on exact pieces for this token
            pieces.append(decode(tokenizer, new[i - 1:i]))
            done = text
    return pieces


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
            text = decode_newlines(continuation(self.tokenizer, self.prompt_ids, row),
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

    Prompt and choice meet as ``demo.engine.text.join`` says (as in scoring); if the tokenizer merges
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


@dataclass(frozen=True)
class Constraints:
    """A request's rules, in the forms transformers' ``generate()`` takes them."""
    processors: tuple[LogitsProcessor, ...] = ()
    stops: tuple[StoppingCriteria, ...] = ()
    prefix_fn: Callable | None = None  # prefix_allowed_tokens_fn: the choices' next tokens
    trie: ChoiceTrie | None = None  # the choices, whose text the output is when one was written


def constraints(lm, s: GenerationSettings, model_prompt: str, prompt_ids: list[int], end_ids) -> Constraints:
    """What the settings ask of the output: exactly N digits, one of the choices, or the stop
    strings and "stop at newline" (the choices need neither)."""
    n = len(prompt_ids)
    processors, stops, prefix_fn, trie = [], [], None, None
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
    return Constraints(tuple(processors), tuple(stops), prefix_fn, trie)
