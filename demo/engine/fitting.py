"""Fitting a text to a model: inputs longer than an absolute-position model reads, and long texts
scored in windows. The engines refuse such inputs (``InputTooLong``) rather than truncate them; the
callers that must answer anyway ask here how to fit them, and each fit is the engines' own length
check, so the rule of what fits is never re-done.

- ``fit_pair`` / ``fit_generation``: cut the context or prompt from the left, at a token start, until
  the engine accepts it (lm-eval's HFLM's rule; a generation keeps room for its new tokens); what
  cannot fit is skipped. ``accepts`` is the check alone. (The evaluator skips an item the engines
  refuse instead: ``demo.evaluation.evaluate``.)
- ``rolling_pairs``: a text longer than a window, as (context, chunk) pairs that score every token
  once (lm-eval's ``loglikelihood_rolling``).

docs/method.md section 5 states the rules and where each is used.
"""

from collections import Counter
from dataclasses import replace

from ..settings import GenerationSettings, ScoringSettings
from .generation import check_prompt
from .models import InputTooLong
from .pll import Choice, check_choices, input_length, score_batch


def rolling_window(lm) -> int | None:
    """Tokens one scored window may hold: the model's hard limit (absolute positions), else the
    length it was trained on (relative positions read further, but PLL costs length squared and
    the model never learnt to use more), else None (no limit)."""
    return lm.max_length or lm.pretrained_length


def rolling_pairs(lm, text: str, scoring: ScoringSettings | None = None) -> list[tuple[str, str]]:
    """(context, chunk) pairs whose chunks tile ``text``, so every token is scored exactly once.
    Lengths are the longest input ``scoring``'s method reads (``demo.engine.pll.input_length``:
    the decoder's last window is longer than its text).

    The rule: a text that fits the window is one pair, ("", text), every token scored with all
    the others in view. A longer text is cut at token starts into chunks of at most half a window;
    each chunk is scored after as much of the text before it as fits in the window with it (so
    every token but the first half-window's sees at least half a window of context to its left;
    for a masked LM, nothing to the right of its chunk). lm-eval's HFLM rolls causal models over
    disjoint full-length windows, where the first tokens of each window see almost no context;
    half-window chunks cost up to twice the passes and give every token at least half a window.
    """
    window = rolling_window(lm)
    if window is None or input_length(lm, text, scoring) <= window:
        return [("", text)]
    offsets = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                           verbose=False)["offset_mapping"]
    cuts = sorted({0, len(text), *(start for start, _ in offsets[1:])})

    def fits(a: int, b: int, room: int) -> bool:
        return input_length(lm, text[cuts[a]:cuts[b]], scoring) <= room

    pairs, a = [], 0
    while a < len(cuts) - 1:
        b = _last_true(lambda j: fits(a, j, window // 2), a + 1, len(cuts) - 1)
        c = _first_true(lambda i: fits(i, b, window), 0, a)
        pairs.append((text[cuts[c]:cuts[a]], text[cuts[a]:cuts[b]]))
        a = b
    return pairs


def _last_true(ok, low: int, high: int) -> int:
    """The largest j in [low, high] with ok(j) (ok true then false as j grows); low if none."""
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if ok(mid) else (low, mid - 1)
    return low


def _first_true(ok, low: int, high: int) -> int:
    """The smallest i in [low, high] with ok(i) (ok false then true as i grows); high if none."""
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid + 1, high)
    return high


CUT, LOWERED, SKIPPED = "cut from the left", "max_gen_toks lowered", "skipped"


def cut_from_left(lm, text: str, fits, *, may_empty: bool) -> str | None:
    """The longest end of ``text`` that starts at a token start and that ``fits`` accepts (the whole
    text counts; the empty end too when ``may_empty``), or None when none does. ``fits`` is the
    engine's own check, so the rule of what fits is never re-done here; a shorter end never needs
    more positions, so the first accepted cut is found by bisection."""
    offsets = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                           verbose=False)["offset_mapping"]
    cuts = sorted({0, *(start for start, _ in offsets)} | ({len(text)} if may_empty else set()))
    cuts = [c for c in cuts if c < len(text) or may_empty]
    if not cuts:
        return None
    k = _first_true(lambda i: fits(text[cuts[i]:]), 0, len(cuts) - 1)
    return text[cuts[k]:] if fits(text[cuts[k]:]) else None


def accepts(check) -> bool:
    """Whether the engine's length check ``check()`` accepts an input (no ``InputTooLong``)."""
    try:
        check()
    except InputTooLong:
        return False
    return True


def fit_generation(lm, prompt: str, settings: GenerationSettings) -> tuple[str, GenerationSettings, tuple[str, ...]]:
    """(prompt, settings, what was changed) for a generation request the engine accepts.

    Only an absolute-position model's window (``lm.max_length``) bounds a request; a relative-
    position model reads every prompt whole and writes up to ``max_gen_toks``. In a window:

    - HFLM's rule: ``max_gen_toks`` keeps its room and the prompt is cut from the left to what
      fits before it (HFLM cuts token ids; we cut the text at a token start, so a tokenizer's BOS
      stays first).
    - ``max_gen_toks`` larger than the window holds after any prompt (HFLM refuses such a request;
      lm-eval's configs ask for up to 32768): the prompt keeps at most half the window, cut from
      the left if longer, and generation gets the rest, up to the model's own limit.
    - Nothing fits (a window too small for even that): skipped (the caller answers "").
    """
    def fits(text: str, s: GenerationSettings = settings) -> bool:
        return bool(text.strip()) and accepts(lambda: check_prompt(lm, text, s))

    if lm.max_length is None or fits(prompt):
        return prompt, settings, ()
    cut = cut_from_left(lm, prompt, fits, may_empty=False)
    if cut is not None:
        return cut, settings, (CUT,)
    half = replace(settings, max_new_tokens=lm.max_length - lm.max_length // 2)
    cut = cut_from_left(lm, prompt, lambda text: fits(text, half), may_empty=False)
    if cut is None:
        return prompt, settings, (SKIPPED,)
    most = _last_true(lambda n: fits(cut, replace(settings, max_new_tokens=n)),
                      half.max_new_tokens, settings.max_new_tokens)
    return cut, replace(settings, max_new_tokens=most), (LOWERED,) + ((CUT,) if cut != prompt else ())


def fit_pair(lm, context: str, continuation: str, scoring: ScoringSettings) -> tuple[str, tuple[str, ...]]:
    """(context, what was changed) for a loglikelihood request the engine accepts: as HFLM does for
    causal LMs, a context too long for an absolute-position model's window is cut from the left
    (to nothing if need be); a continuation that does not fit even alone is skipped."""
    def fits(text: str) -> bool:
        return accepts(lambda: check_choices(lm, [Choice(text, continuation, continuation)], scoring))

    if lm.max_length is None or fits(context):
        return context, ()
    cut = cut_from_left(lm, context, fits, may_empty=True)
    return (context, (SKIPPED,)) if cut is None else (cut, (CUT,))


def fitted_note(what: str, changes: list[tuple[str, ...]], lm) -> str | None:
    """How many of ``what``'s requests were changed to fit the model, and how (``changes``: per
    request, what :func:`fit_generation` / :func:`fit_pair` changed); None if none."""
    counts = Counter(change for changed in changes for change in changed)
    if not counts:
        return None
    n_changed = sum(1 for changed in changes if changed)
    return (f"{what}: {n_changed} of {len(changes)} request(s) longer than {lm.label} reads "
            f"({lm.max_length} positions): {', '.join(f'{n} {change}' for change, n in counts.items())}")


def score_fitted(lm, pairs: list[tuple[str, str]], scoring: ScoringSettings,
                 progress: bool = False) -> tuple[list, list]:
    """(each (context, continuation)'s score, None where skipped; what each fit changed): the
    contexts fitted first (:func:`fit_pair`), then every kept pair scored in one engine call."""
    fitted = [fit_pair(lm, context, continuation, scoring) for context, continuation in pairs]
    kept = [(context, continuation) for (context, changed), (_, continuation) in zip(fitted, pairs)
            if SKIPPED not in changed]
    scores = iter(score_batch(lm, kept, scoring, progress=progress))
    return [None if SKIPPED in changed else next(scores) for _, changed in fitted], [c for _, c in fitted]


def score_rolling(lm, texts: list[str], scoring: ScoringSettings, progress: bool = False) -> list[float]:
    """Each text's total log-likelihood (PLL for a masked LM) over its windows (:func:`rolling_pairs`),
    all in one engine call. Always the sum over tokens, whatever ``scoring.reduction`` says:
    perplexity-style metrics divide the total by words or bytes themselves."""
    windows = [rolling_pairs(lm, text, scoring) for text in texts]
    scores = iter(score_batch(lm, [pair for pairs in windows for pair in pairs], scoring, progress=progress))
    return [sum(next(scores).total for _ in pairs) for pairs in windows]
