"""The causal LM's side of infilling, and the fills of both sides ranked (docs/method.md, section 8).

A causal LM reads left to right, so it fills the blanks one after another, each from the text
before it (earlier blanks filled): the words after a blank are invisible to it. A model whose
tokenizer has fill-in-the-middle tokens (``<fim_prefix>``, ``<fim_suffix>``, ``<fim_middle>``,
as StarCoder's and SmolLM's have) can be shown them instead,

    <fim_prefix> text before the blank <fim_suffix> text after it, up to the next blank <fim_middle>

and writes the middle. Either way the engine's ``generate()`` decodes, with the masked side's
strategy, sampling and seed. A blank of k tokens lets the causal LM write up to k tokens of its
own tokenizer; a ``[blank:auto]`` up to ``max_blank_tokens``, of which the prefix whose whole
text the model scores best is kept (the masked side's rule, ``demo.engine.infill``).

``rank_fills`` then has every model score every filled text whole, each by its own measure (PLL,
exact log-likelihood): if the causal LM, too, prefers the masked LM's fill, the right context
the masked LM read made the difference.
"""

import time
from dataclasses import dataclass, field, fields

from ..settings import GenerationSettings, InfillSettings, SamplingSettings, TraceSettings
from .counting import Reads, counting
from .generation import generate
from .infill import AUTO, LengthTry, parse_blanks, segments_of, splice, text_scores
from .text import special_token_note

FIM_TOKENS = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")


@dataclass
class CausalInfillResult:
    text: str  # the text as given, blanks included
    filled: str  # the text with every blank filled
    fills: list[str]  # per blank: the text written into it
    mode: str  # "left": continued from the text before each blank; "fim": filled in the middle
    seconds: float
    # the forward passes and the tokens they read: each blank's generation (its prompt once, then
    # one token per step) and the scoring of a [blank:auto]'s tries
    reads: Reads
    tries: list[LengthTry] = field(default_factory=list)  # [blank:auto]: every length it wrote
    notes: list[str] = field(default_factory=list)  # always says what the model could read
    # settings.trace: every blank's decoding steps, one blank after the other (demo.engine.trace;
    # a window is what the model read for that blank: the text before it, or the FIM prompt)
    steps: list = field(default_factory=list)


@dataclass
class FillRanking:
    scorer: str  # the model that scored (its label)
    kind: str  # "masked": PLL (the engine's default variant); "causal": exact log-likelihood
    scores: list[float]  # per text, in the order given: its whole-text score (natural log)
    best: int  # index of the text this model finds likeliest


def has_fim(tokenizer) -> bool:
    """Does the tokenizer have the three fill-in-the-middle tokens?"""
    vocabulary = tokenizer.get_vocab()
    return all(token in vocabulary for token in FIM_TOKENS)


def fill_mode(lm, s: InfillSettings) -> str:
    """How the causal LM fills: in the middle ("fim") where the settings allow it and its
    tokenizer has the tokens, else from the left ("left")."""
    fim = has_fim(lm.tokenizer)
    if s.fim == "on" and not fim:
        raise ValueError(f"{lm.label}'s tokenizer has no fill-in-the-middle tokens "
                         f"({', '.join(FIM_TOKENS)}); set fim to 'auto' or 'off' to continue from the "
                         f"left of each blank.")
    return "fim" if fim and s.fim != "off" else "left"


def blank_prompt(lm, before: str, after: str, mode: str) -> str:
    """What the causal LM continues to fill the blank between ``before`` and ``after``."""
    # The blank's first token brings its own space, as in the masked window (demo.engine.infill);
    # so does the next blank's, where the text after this one stops. A blank at the very start
    # follows the start-of-text token, as scoring's first token does.
    before = before.rstrip() or (lm.tokenizer.bos_token or lm.tokenizer.eos_token or "")
    if mode == "left":
        return before
    prefix, suffix, middle = FIM_TOKENS
    return f"{prefix}{before}{suffix}{after.rstrip()}{middle}"


def causal_infill(lm, text: str, settings: InfillSettings | None = None) -> CausalInfillResult:
    """Fill the blanks of ``text`` with a causal LM: from the left, or in the middle where its
    tokenizer can (``settings.fim``). Blanks are read as ``demo.engine.infill.parse_blanks`` reads them."""
    s = settings or InfillSettings()
    if lm.kind != "causal":
        raise ValueError(f"{lm.label} is a masked LM: fill its blanks with demo.engine.infill.infill.")
    blanks = parse_blanks(text, s)
    segments = segments_of(text, blanks)
    mode = fill_mode(lm, s)
    start = time.perf_counter()
    fills, tries, steps = [], [], []
    with counting() as reads:
        for i, blank in enumerate(blanks):
            before = splice(segments[:i + 1], fills)  # the earlier blanks filled
            generation = GenerationSettings(
                max_new_tokens=s.max_blank_tokens if blank.tokens is AUTO else blank.tokens,
                # the infilling's own sampling and trace, whole
                **{f.name: getattr(s, f.name) for group in (SamplingSettings, TraceSettings) for f in fields(group)},
                stop_at_newline=True)  # a blank holds words, not lines
            written = generate(lm, blank_prompt(lm, before, segments[i + 1], mode), generation)
            steps += written.steps or []
            if blank.tokens is not AUTO:
                fills.append(written.text.strip())
                continue
            tries = _tries(lm, segments, fills, written.tokens)
            fills.append(max(tries, key=lambda t: (t.score, -t.tokens)).fill if tries else "")  # ties: shorter
    seconds = time.perf_counter() - start

    notes = ["The causal LM read only the text before each blank: the words after it were invisible to it."
             if mode == "left" else
             "The causal LM filled in the middle (its <fim_prefix>, <fim_suffix>, <fim_middle> tokens): it "
             "read the text after each blank too, up to the next blank."]
    note = special_token_note(text, lm.tokenizer)
    return CausalInfillResult(text=text, filled=splice(segments, fills), fills=fills, mode=mode,
                              seconds=seconds, reads=reads, tries=tries, notes=notes + ([note] if note else []),
                              steps=steps)


def _tries(lm, segments: list[str], fills: list[str], pieces: list[str]) -> list[LengthTry]:
    """Each prefix of what was written into the [blank:auto] (its first line), scored whole; the
    blanks after it stay empty in the scored text, the same for every try."""
    rest = [""] * (len(segments) - 2 - len(fills))
    tried = {}
    for n in range(1, len(pieces) + 1):
        fill = "".join(pieces[:n]).split("\n")[0].strip()
        if fill and fill not in tried.values():
            tried[n] = fill
    texts = [splice(segments, fills + [fill] + rest) for fill in tried.values()]
    return [LengthTry(tokens=n, fill=fill, text=t, score=score)
            for (n, fill), t, score in zip(tried.items(), texts, text_scores(lm, texts))]


def rank_fills(lms: list, texts: list[str]) -> list[FillRanking]:
    """Every model scores every filled text whole, by its own measure (a masked LM: PLL with the
    engine's default variant; a causal LM: exact log-likelihood). One ranking per model."""
    if not texts:
        raise ValueError("Give at least one filled text to rank.")
    rankings = []
    for lm in lms:
        scores = text_scores(lm, texts)
        rankings.append(FillRanking(scorer=lm.label, kind=lm.kind, scores=scores,
                                    best=max(range(len(texts)), key=lambda k: (scores[k], -k))))
    return rankings
