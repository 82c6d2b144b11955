"""Infilling: a masked LM fills the blanks of a text by iterative unmasking (docs/method.md, section 8).

Every blank becomes [MASK] tokens in one window, ``[CLS] text [MASK]... text [MASK]... text [SEP]``;
then, one step per masked token:

    read the window (one forward pass), pick a masked position by the order, write a token there

until no mask is left. The orders: ``left_to_right`` (the leftmost mask: the BERTs paper's
order), ``confidence`` (the mask whose chosen token is likeliest: Mask-Predict's and masked
diffusion LMs' order) and ``random`` (a seeded shuffle). The token is the likeliest or a sample
(temperature, top-k, top-p as ``generate()`` means them). A blank never receives a special
token (``demo.engine.decoding.suppressed_ids``, with no end token).

A BERT has no token for "the blank ends here", so a blank of unknown length (``[blank:auto]``)
is filled at every length 1..``max_blank_tokens`` and the fill whose whole text the model itself
scores best (its PLL, ``demo.engine.pll``) is kept; all the tries come back with their scores.

The steps are the unmasking loop that any-order generation runs too (``demo.engine.unmasking``),
one token a step over a window that does not grow. The causal LM's side of the same text is
``demo.engine.infill_causal``.
"""

import re
import time
from dataclasses import dataclass, field

from ..settings import InfillSettings, ScoringSettings
from ..user_text import check_readable, quoted
from .constraints import continuation
from .counting import Reads, counting
from .decoding import suppressed_ids
from .mlm_decoder import WindowSpecials
from .pll import score_batch
from .text import decode_newlines, encode_newlines, special_token_note
from .trace import StepTrace
from .unmasking import fill

# ---------------------------------------------------------------- blanks

# A blank: [blank] (settings.blank_tokens tokens), [blank:k] (k tokens), [blank:auto] (the length
# chosen by the model's score), or four or more underscores (a [blank]). Case does not matter.
# Anything else in [blank...] brackets is refused in words, not read as text.
BLANK = re.compile(r"\[blank(?::([^\]]*))?\]|_{4,}", re.IGNORECASE)
AUTO = None  # a blank's length when the model picks it (Blank.tokens)


@dataclass(frozen=True)
class Blank:
    start: int  # the marker's character span in the text
    end: int
    tokens: int | None  # masked tokens; None (AUTO): [blank:auto]


def parse_blanks(text: str, settings: InfillSettings) -> list[Blank]:
    """The blanks of ``text``, in order, checked against the settings' caps (ValueError in words)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("The text is empty: write a sentence with a blank, e.g. "
                         "'The [blank] is the capital of France.'")
    check_readable(text, "text")
    blanks = []
    for match in BLANK.finditer(text):
        count = match.group(1)
        if count is None:
            tokens = settings.blank_tokens
        elif count.strip().lower() == "auto":
            tokens = AUTO
        elif re.fullmatch(r"[0-9]{1,6}", count.strip()) and int(count) >= 1:  # ASCII digits only
            tokens = int(count)
        else:
            raise ValueError(f"'{quoted(match.group(0))}' is not a blank: write [blank], [blank:3] (3 tokens) "
                             f"or [blank:auto] (the model picks the length).")
        blanks.append(Blank(match.start(), match.end(), tokens))
    if not blanks:
        raise ValueError("The text has no blank: write [blank] (or ____) where the model should write, "
                         "e.g. 'The [blank] is the capital of France.'")
    if len(blanks) > settings.max_blanks:
        raise ValueError(f"The text has {len(blanks)} blanks; at most {settings.max_blanks} can be filled "
                         f"at once.")
    if sum(b.tokens is AUTO for b in blanks) > 1:
        raise ValueError("Only one blank can be [blank:auto] (every length of it is tried); give the "
                         "others a length, e.g. [blank:2].")
    masked = sum(settings.max_blank_tokens if b.tokens is AUTO else b.tokens for b in blanks)
    if masked > settings.max_masked_tokens:
        raise ValueError(f"The blanks hold {masked} masked tokens together; at most "
                         f"{settings.max_masked_tokens} can be filled at once (each costs a forward "
                         f"pass). Use fewer or shorter blanks.")
    return blanks


def segments_of(text: str, blanks: list[Blank]) -> list[str]:
    """The text around the blanks: one more segment than blanks."""
    edges = [0] + [edge for b in blanks for edge in (b.start, b.end)] + [len(text)]
    return [text[edges[i]:edges[i + 1]] for i in range(0, len(edges), 2)]


def splice(segments: list[str], fills: list[str]) -> str:
    """The text with each blank replaced by its fill; the text around the blanks stays as typed."""
    return "".join(s + f for s, f in zip(segments, fills)) + segments[-1]


def text_scores(lm, texts: list[str]) -> list[float]:
    """The model's own score of each whole text (natural log): a masked LM's PLL with the engine's
    default variant, a causal LM's exact log-likelihood. The one measure every fill is compared by."""
    if not texts:
        return []
    return [score.total for score in score_batch(lm, [("", t) for t in texts], ScoringSettings(scope="full"))]


# ---------------------------------------------------------------- results


@dataclass
class LengthTry:
    """One length tried for a [blank:auto]: the whole text filled at that length, and its score."""
    tokens: int
    fill: str
    text: str
    score: float  # the model's own score of `text` (PLL: natural log, summed over its tokens)


@dataclass
class InfillResult:
    text: str  # the text as given, blanks included
    filled: str  # the text with every blank filled
    fills: list[str]  # per blank: the text written into it
    token_ids: list[list[int]]  # per blank: its tokens' ids
    blanks: list[list[int]]  # per blank: its tokens' positions in the window ([CLS] at 0)
    order: list[int]  # the window positions in the order they were filled (one per step)
    steps: list[StepTrace]  # empty unless settings.trace; step.predicted is the filled position
    seconds: float
    # the forward passes and the tokens they read: one pass over the window per filled token, per
    # length tried, and the scoring of a [blank:auto]'s tries (one masked copy per token)
    reads: Reads
    tries: list[LengthTry] = field(default_factory=list)  # [blank:auto]: every length, in order
    notes: list[str] = field(default_factory=list)  # things the reader should know


# ---------------------------------------------------------------- one fill


@dataclass
class _Fill:
    window: list[int]
    blanks: list[list[int]]
    order: list[int]
    steps: list[StepTrace]
    reads: Reads  # what its passes read (in a batch: what it reads alone)


def fill_window(lm, segments: list[str], lengths: list[int]) -> tuple[list[int], list[list[int]]]:
    """``[CLS] segment [MASK]*n segment ... [SEP]`` and each blank's positions in it.

    Each segment is tokenized by itself, newline markers applied (``demo.engine.text``); the
    whitespace before a blank is left out, since the blank's first token carries its own space
    where the tokenizer marks spaces (BPE's "Ġ", SentencePiece's "▁"), as a word masked in
    pretraining did.
    """
    specials = WindowSpecials.of(lm.tokenizer)
    window, blanks = [specials.start], []
    for i, segment in enumerate(segments):
        read = encode_newlines(segment, lm.newline_survives)
        if i < len(lengths):
            read = read.rstrip()
        if read:
            window += lm.tokenizer(read, add_special_tokens=False, verbose=False)["input_ids"]
        if i < len(lengths):
            blanks.append(list(range(len(window), len(window) + lengths[i])))
            window += [specials.mask] * lengths[i]
    window.append(specials.end)
    lm.check_length(len(window), what="text with its blanks")
    return window, blanks


def _fill(lm, segments: list[list[str]], lengths: list[list[int]], s: InfillSettings) -> list[_Fill]:
    """Fill every mask of each text's window (its ``segments`` with blanks of its ``lengths``), one
    per forward pass, in the settings' order (the unmasking loop every any-order writer shares:
    ``demo.engine.unmasking``); the windows read together, each filled as it is alone."""
    windows = [fill_window(lm, parts, n) for parts, n in zip(segments, lengths)]
    positions = [[p for blank in blanks for p in blank] for _, blanks in windows]
    written = fill(lm, [window for window, _ in windows], positions, s.order, s, suppressed_ids(lm, end_ids=[]))
    return [_Fill(out.ids, blanks, [p for step in out.order for p in step], out.steps, out.reads)
            for out, (_, blanks) in zip(written, windows)]


def _fills(lm, fill: _Fill) -> list[str]:
    """Each blank's text: its tokens decoded after the text before it, without surrounding
    whitespace (the spaces around the marker stay as typed: ``splice``)."""
    return [decode_newlines(continuation(lm.tokenizer, fill.window[1:positions[0]],
                                         [fill.window[p] for p in positions]), lm.newline_survives).strip()
            for positions in fill.blanks]


# ---------------------------------------------------------------- infill


def _check_model(lm) -> None:
    if lm.kind != "masked":
        raise ValueError(f"{lm.label} is a causal LM: it reads only the text before a blank, so it "
                         f"cannot fill one by unmasking. Use a masked LM here (its side is "
                         f"demo.engine.infill_causal.causal_infill).")
    if lm.tokenizer.mask_token_id is None:
        raise ValueError(f"{lm.label} has no mask token, so it cannot be asked what belongs in a blank.")


def infill(lm, text: str, settings: InfillSettings | None = None) -> InfillResult:
    """Fill the blanks of ``text`` with a masked LM (``demo.engine.models.LoadedModel``).

    Blanks are written as ``parse_blanks`` reads them. With a ``[blank:auto]``, every length
    1..``settings.max_blank_tokens`` is filled and the text the model scores best (PLL, whole
    text) is kept; ``tries`` holds them all, and the steps are the kept try's.
    """
    s = settings or InfillSettings()
    _check_model(lm)
    blanks = parse_blanks(text, s)
    segments = segments_of(text, blanks)
    auto = next((i for i, b in enumerate(blanks) if b.tokens is AUTO), None)
    lengths = [[b.tokens for b in blanks]] if auto is None else [
        [n if i == auto else b.tokens for i, b in enumerate(blanks)] for n in range(1, s.max_blank_tokens + 1)]

    start = time.perf_counter()
    with counting() as reads:
        fills = [_fill(lm, [segments], [n], s)[0] for n in lengths]
        words = [_fills(lm, fill) for fill in fills]
        tries = []
        if auto is not None:
            texts = [splice(segments, w) for w in words]
            tries = [LengthTry(tokens=n[auto], fill=w[auto], text=t, score=score)
                     for n, w, t, score in zip(lengths, words, texts, text_scores(lm, texts))]
    kept = max(range(len(fills)), key=lambda k: (tries[k].score, -k)) if tries else 0  # ties: shorter
    return _result(lm, text, segments, fills[kept], words[kept], time.perf_counter() - start, reads, tries)


def infill_together(lm, texts: list[str], settings: InfillSettings | None = None) -> list[InfillResult]:
    """:func:`infill` for several texts with the same settings, each result the one it gets alone:
    texts whose blanks have their sizes are filled together, their windows read in one padded pass
    a step (the seconds are the batch's, the work counts each one's own); a text with a
    ``[blank:auto]`` alone (its lengths are tries of its own)."""
    s = settings or InfillSettings()
    _check_model(lm)
    parsed = [parse_blanks(text, s) for text in texts]
    fixed = [i for i, blanks in enumerate(parsed) if all(b.tokens is not AUTO for b in blanks)]
    if len(fixed) < 2:
        return [infill(lm, text, s) for text in texts]
    results = {i: infill(lm, text, s) for i, text in enumerate(texts) if i not in fixed}
    segments = [segments_of(texts[i], parsed[i]) for i in fixed]
    start = time.perf_counter()
    fills = _fill(lm, segments, [[b.tokens for b in parsed[i]] for i in fixed], s)
    seconds = time.perf_counter() - start
    for i, parts, filled in zip(fixed, segments, fills):
        results[i] = _result(lm, texts[i], parts, filled, _fills(lm, filled), seconds, filled.reads, [])
    return [results[i] for i in range(len(texts))]


def _result(lm, text: str, segments: list[str], fill: _Fill, words: list[str], seconds: float, reads: Reads,
            tries: list) -> InfillResult:
    note = special_token_note(text, lm.tokenizer)
    return InfillResult(text=text, filled=splice(segments, words), fills=words,
                        token_ids=[[fill.window[p] for p in positions] for positions in fill.blanks],
                        blanks=fill.blanks, order=fill.order, steps=fill.steps, seconds=seconds,
                        reads=reads, tries=tries, notes=[note] if note else [])
