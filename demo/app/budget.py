"""How much work a request is, counted before it runs, so a shared app can refuse what is too big.

A transformer's forward pass costs about 2 x parameters floating-point operations per token it
reads (attention's extra cost is left out: small next to the weights at these lengths). So the
work of a request is 2 x parameters x the tokens all its forward passes read:

- ranking a masked LM: one masked copy per scored token (the tokenizer's specials are read, never
  scored), each as long as the whole text (context + candidate; plus the unconditional context's
  copies if asked); with the decoder's likelihood, one generation window per scored token
  instead, each as long as the text before it plus the masks and two specials;
- ranking a causal LM: one pass per text, with a start token before it where its first token is
  scored;
- generating with a masked LM: every step re-reads the window (text so far, masks, end token),
  once per beam; with a causal LM (KV cache) the first step reads the prompt, every later step
  the one token written last (the last token written is never read back), once per beam;
- filling blanks with a masked LM: one pass over the window (text + masks) per masked token; with
  a causal LM, each blank generated after its prompt; a [blank:auto] is filled at every length it
  tries, and each try's text scored whole. Scoring the filled texts afterwards (the Infill page's
  last step) is its own request;
- a needle grid: per cell, the answer's steps over the whole prompt (masked) or the prompt once
  (causal); cells beyond the model's limit cost nothing;
- a mask sweep: every item of the task at every value, ranked or generated as above.

Counts use the model's own tokenizer on the text it will read (``demo.engine.text``), so they are exact
in tokens: the engine counts what its passes read as they run (``demo.engine.counting``), and for a
request that runs every step it may (no early stop) and fills of known length, the two are equal
(tested). The seconds shown are a rough guide from an assumed speed (``AppSettings``). Before a
model is loaded (ZeroGPU asks for its GPU time before the request runs), the same formulas take
tokens estimated from characters and the catalog's parameter count (the ``estimated_*`` functions).
"""

import math
from dataclasses import dataclass, replace

from ..app_settings import AppSettings
from ..engine.mask_window import open_masks, padding_masks_of, unmasking_windows, window_length
from ..engine.text import join, prompt_ids_of
from ..evaluation_settings import GridSettings, SweepSettings
from ..settings import GenerationSettings, InfillSettings, ScoringSettings


@dataclass(frozen=True)
class Work:
    tokens: int  # tokens read by all forward passes together
    parameters: int
    what: str  # how the tokens were counted, in words
    passes: int = 0  # forward passes, one per text read (a beam, a masked copy); 0: not counted

    @property
    def tflop(self) -> float:
        return 2 * self.parameters * self.tokens / 1e12

    def seconds(self, gflops: float) -> float:
        return self.tflop * 1e3 / gflops

    def fits(self, app: AppSettings) -> bool:
        return self.tflop <= app.max_request_tflop

    def size(self, app: AppSettings) -> str:
        """The work in words, for a person deciding what to shorten."""
        return (f"{self.what}, about {self.tflop:,.1f} trillion operations (roughly "
                f"{_duration(self.seconds(app.assumed_gflops))} here)")

    def check(self, app: AppSettings) -> None:
        """Refuse, before it runs, work beyond the deployment's per-request budget."""
        if not self.fits(app):
            raise ValueError(
                f"This request is too big for this app: {self.size(app)}; a request may use "
                f"{app.max_request_tflop:,.1f} trillion. Use fewer or shorter inputs, a smaller model, or "
                f"mlm-icl on your own machine.")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _count(lm, text: str, specials: bool = True) -> int:
    return len(lm.tokenizer(text, add_special_tokens=specials, verbose=False)["input_ids"])


def ranking_tokens(kind: str, total: int, scored: int, starts: bool = True) -> int:
    """One text of ``total`` tokens, ``scored`` of them scored: a causal LM reads it once (with a
    start token where ``starts``: its first token is scored), a masked LM once per scored token."""
    return total + starts if kind == "causal" else max(scored, 1) * total


def ranking_passes(kind: str, scored: int) -> int:
    """One text, ``scored`` of its tokens scored: a pass, or a masked copy per scored token."""
    return 1 if kind == "causal" else max(scored, 1)


def generation_tokens(kind: str, prompt_tokens: int, steps: int, rows: int, padding_masks: int) -> int:
    """``steps`` new tokens on ``rows`` beams after a prompt of ``prompt_tokens``, one a step; a
    masked LM's window holds 1 + ``padding_masks`` masks after its text."""
    if kind == "masked":  # step t re-reads a window of n + t text tokens: window_length(n, .) + t
        return rows * (steps * window_length(prompt_tokens, padding_masks) + steps * (steps - 1) // 2)
    # step 1 reads the prompt, step t > 1 the token step t - 1 wrote; every beam its own
    return rows * (prompt_tokens + max(steps - 1, 0))


def grid_tokens(kind: str, lengths: list[int], runs: int) -> int:
    """``runs`` needle runs at each of ``lengths`` (those the model reads)."""
    from ..evaluation.haystack import ANSWER_TOKENS  # the grid's own answer length
    return runs * sum(ANSWER_TOKENS * n if kind == "masked" else n for n in lengths)


def _pairs_work(lm, pairs: list[tuple[str, str]], settings: ScoringSettings) -> tuple[int, int]:
    """(tokens, passes) of scoring each (context, completion) pair exactly as ``settings`` say, as
    the engine plans them (``demo.engine.pll.planned_reads``): the approximate PLL reads less."""
    from ..engine.pll import planned_reads
    reads = planned_reads(lm, pairs, None, replace(settings, fast=False, stride=1, rescore_band=0.0))
    return reads.tokens, reads.passes


def ranking_reads(kind: str, method: str | None, elbo_samples: int, stride: int = 1) -> str:
    """What a ranking's passes read, in a sentence (the Work line's and a refusal's): per scoring
    method, as ``_pairs_work`` counts it; ``stride`` > 1: the approximate PLL."""
    if kind == "causal":
        return "one pass per text, every token read once"
    if stride > 1:
        return (f"{stride} masked copies per text, each scoring every {stride}th token; close calls scored "
                f"again exactly")
    return {"decoder": "one window per scored token: the text before it, then masks, nothing after it",
            "elbo": f"one masked copy of the whole text per masking pattern, up to {elbo_samples} per text"}.get(
        method, "one masked copy per scored token, each the whole text")


def ranking_work(lm, context: str, candidates: list[str], settings: ScoringSettings) -> Work:
    pairs = [(context, join(context, c)) for c in candidates]
    if settings.unconditional_context is not None:
        neutral = settings.unconditional_context
        pairs += [(neutral, join(neutral, c.strip())) for c in candidates]
    tokens, passes = _pairs_work(lm, pairs, settings)
    what = (f"{len(candidates)} candidates" + (" twice (with the unconditional context)"
                                               if settings.unconditional_context is not None else "")
            + (f", {ranking_reads(lm.kind, settings.method_for(lm), settings.elbo_samples)}"
               if lm.kind == "masked" else ""))
    return Work(tokens, lm.n_parameters, what, passes)


def generation_work(lm, prompt: str, settings: GenerationSettings) -> Work:
    """Every step ``max_new_tokens`` allows: a generation that stops early reads less."""
    n = len(prompt_ids_of(lm, prompt, settings.chat))  # the prompt's tokens as generate() reads them
    steps, rows = settings.max_new_tokens, settings.num_beams if settings.strategy == "beam" else 1
    padding_masks = padding_masks_of(lm, settings.padding_masks)
    if lm.kind == "masked" and settings.any_order:  # the unmasking loop's steps (typed masks are read, not written)
        s = settings
        windows = unmasking_windows(n, s.max_new_tokens, open_masks(lm, s), s.tokens_per_step, s.window, s.order,
                                    s.masks_ahead)
        return Work(sum(windows), lm.n_parameters, f"up to {len(windows)} steps for {steps} tokens, each re-reading "
                    f"a window of {n}+ tokens", len(windows))
    tokens = generation_tokens(lm.kind, n, steps, rows, padding_masks)
    what = (f"{steps} steps x {rows} beam(s), each re-reading a window of {n}+ tokens" if lm.kind == "masked"
            else f"a {n}-token prompt, then {steps} steps x {rows} beam(s)")
    return Work(tokens, lm.n_parameters, what, steps * rows)


def infill_work(lm, text: str, settings: InfillSettings) -> Work:
    """Filling the blanks of ``text`` as the engine does, and nothing after it. A masked LM
    (``demo.engine.infill``) reads its window, the text and its masks, once per masked token; a
    causal LM (``demo.engine.infill_causal``) generates each blank after its prompt. Only a
    [blank:auto] is filled at every length 1..max_blank_tokens, and only its tries are scored
    whole, to keep the best. Scoring the filled texts afterwards is :func:`filled_texts_work`."""
    from ..engine.infill import AUTO, fill_window, parse_blanks, segments_of
    from ..engine.pll import input_length

    blanks = parse_blanks(text, settings)
    segments = segments_of(text, blanks)
    auto = any(b.tokens is AUTO for b in blanks)
    tries = range(1, settings.max_blank_tokens + 1) if auto else [0]  # the [blank:auto]'s lengths
    fixed = sum(b.tokens or 0 for b in blanks)
    if lm.kind == "masked":
        text_tokens = len(fill_window(lm, segments, [0] * len(blanks))[0])  # the window without masks
        tokens = sum((fixed + n) * (text_tokens + fixed + n) for n in tries)
        passes = sum(fixed + n for n in tries)
    else:
        text_tokens = input_length(lm, "".join(segments))  # as scoring reads it (a start token where it needs one)
        tokens, passes = _causal_fill_work(lm, segments, blanks, settings)
    if auto:  # each try's filled text, scored whole
        specials = 2 if lm.kind == "masked" else 0  # the window's start and end: read, never scored
        for n in tries:
            total = text_tokens + fixed + n
            tokens += ranking_tokens(lm.kind, total, total - specials, starts=False)
            passes += ranking_passes(lm.kind, total - specials)
    masked = f"{fixed + tries[0]} to {fixed + tries[-1]}" if auto else f"{fixed}"
    what = (f"filling {masked} masked token(s), one pass each over the {text_tokens}-token text"
            if lm.kind == "masked" else f"writing {masked} token(s) into the blanks of a {text_tokens}-token text")
    return Work(tokens, lm.n_parameters, what + (", each length tried scored whole" if auto else ""), passes)


def _causal_fill_work(lm, segments: list[str], blanks: list, settings: InfillSettings) -> tuple[int, int]:
    """(tokens, passes) of the causal LM's blanks, one generation each, of every step it may take:
    its prompt (``demo.engine.infill_causal.blank_prompt``) is the text before the blank, the
    earlier blanks filled (their fills unknown here: as many tokens as they may take), and with
    fill-in-the-middle tokens the text after it, up to the next blank."""
    from ..engine.infill import AUTO
    from ..engine.infill_causal import blank_prompt, fill_mode

    mode = fill_mode(lm, settings)
    tokens = passes = written = 0
    for i, blank in enumerate(blanks):
        steps = settings.max_blank_tokens if blank.tokens is AUTO else blank.tokens
        prompt = blank_prompt(lm, "".join(segments[:i + 1]), segments[i + 1], mode)
        tokens += generation_tokens("causal", len(prompt_ids_of(lm, prompt)) + written, steps, 1, 0)
        passes += steps
        written += steps
    return tokens, passes


def filled_texts_work(lm, texts: list[str]) -> Work:
    """Scoring filled texts whole (``demo.engine.infill.text_scores``): a ranking of the texts
    with no context, every token scored."""
    work = ranking_work(lm, "", texts, ScoringSettings(scope="full"))
    return replace(work, what=f"{len(texts)} filled texts scored whole"
                   + (", one masked copy per token" if lm.kind == "masked" else ""))


def sweep_work(lm, sweep: SweepSettings) -> Work:
    """A mask sweep: the evaluator's items at every value, each as its engine reads it
    (``demo.evaluation.mask_sweep.point_inputs``): a ranked item's candidates (and their
    unconditional copies), a generated item's every step (more padding masks: longer windows)."""
    from ..evaluation.mask_sweep import point_inputs
    tokens = passes = items = 0
    for value in sweep.values:
        for read, settings in point_inputs(lm, sweep, value):
            items += 1
            if isinstance(read, str):  # a generated item's prompt
                work = generation_work(lm, read, settings)
                tokens, passes = tokens + work.tokens, passes + work.passes
                continue
            pairs = [(choice.context, choice.completion) for choice in read]
            if settings.unconditional_context is not None:
                neutral = settings.unconditional_context
                pairs += [(neutral, join(neutral, choice.candidate.strip())) for choice in read]
            more_tokens, more_passes = _pairs_work(lm, pairs, settings)
            tokens, passes = tokens + more_tokens, passes + more_passes
    what = f"{len(sweep.values)} values x {items // max(len(sweep.values), 1)} items of the task"
    return Work(tokens, lm.n_parameters, what, passes)


def grid_work(lm, grid: GridSettings) -> Work:
    fits = [n for n in grid.lengths if lm.max_length is None or n <= lm.max_length]
    runs = len(grid.depths) * grid.repetitions
    what = f"{len(fits) * runs} needle runs of up to {max(fits, default=0):,} tokens"
    return Work(grid_tokens(lm.kind, fits, runs), lm.n_parameters, what)


# ---------------------------------------------------------------- before the model is loaded

CHARS_PER_TOKEN = 4  # English text in the usual subword vocabularies, roughly
SPECIALS = 2  # start and end tokens around a text
MOST_PADDING_MASKS = 2  # the most any family's default uses (demo.engine.families)


def estimated_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimated_ranking_work(kind: str, parameters: float, context: str, candidates: list[str]) -> Work:
    tokens = sum(ranking_tokens(kind, estimated_tokens(f"{context} {c}") + SPECIALS, estimated_tokens(c))
                 for c in candidates)
    return Work(tokens, int(parameters), f"{len(candidates)} candidates (estimated from characters)")


def estimated_generation_work(kind: str, parameters: float, prompt: str, steps: int, rows: int,
                              masks_ahead: bool = False) -> Work:
    n = estimated_tokens(prompt)
    if kind == "masked" and masks_ahead:  # every step reads the prompt and all the masks, one token a step at most
        tokens = rows * sum(unmasking_windows(n, steps, steps, window="block", masks_ahead=True))
    else:
        tokens = generation_tokens(kind, n, steps, rows, MOST_PADDING_MASKS)
    return Work(tokens, int(parameters), f"{steps} steps x {rows} beam(s) (estimated from characters)")


SWEEP_ITEM_TOKENS = 256  # a few-shot item, demonstrations included, taken as typical
SWEEP_SCORED_TOKENS = 16  # a ranked item's scored tokens, its candidates together
SWEEP_STEPS = 16  # a generated item's new tokens (the instruction tasks' limit)


def estimated_sweep_work(kind: str, parameters: float, setting: str, values: int, items: int) -> Work:
    """A mask sweep of ``values`` x ``items`` evaluations of a typical few-shot item."""
    if setting == "padding_masks":
        each = generation_tokens(kind, SWEEP_ITEM_TOKENS, SWEEP_STEPS, 1, MOST_PADDING_MASKS)
    else:
        each = ranking_tokens(kind, SWEEP_ITEM_TOKENS, SWEEP_SCORED_TOKENS)
    return Work(values * items * each, int(parameters), f"{values} values x {items} items (estimated)")


def estimated_grid_work(kind: str, parameters: float, lengths: list[int], runs: int) -> Work:
    return Work(grid_tokens(kind, lengths, runs), int(parameters), f"{runs} runs per length")
