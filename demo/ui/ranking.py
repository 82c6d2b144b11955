"""Ranking tab: score 2 to 8 candidate completions with an MLM (PLL) and a causal LM, side by side.

Wiring only: ``demo.engine.pll.score_candidates`` scores, ``demo.evaluation.plots`` draws,
``demo.ui.pll_copies`` shows one candidate's masked copies.
"""

import functools
import time
from dataclasses import replace
from typing import Any, Literal, NamedTuple

import gradio as gr
import pandas as pd

from ..app import budget
from ..app.catalog import Catalog
from ..app.in_effect import head_in_effect, in_effect
from ..app.limits import MAX_CANDIDATES, MIN_CANDIDATES, check_text, parse_candidates
from ..engine.text import newline_marker_note, special_token_note
from ..settings import (
    DEFAULT_MASKED_METHOD,
    MASKED_METHODS,
    PLL_METHODS,
    ScoringSettings,
)
from ..user_text import as_said, quoted
from .common import Dropdown, TabParts, Textbox, deployment, escape, message, notes, score_text, tab_help, work_line
from .elbo_note import elbo_note
from .handlers import handler
from .loading import load
from .outputs import components, shown_in
from .pickers import EMD, emd_radio, model_note
from .pll_copies import copies_view
from .presets import preset_named, read_presets
from .reproduce_block import reproduction
from .run_marker import run_ends, run_starts
from .settings_form import Own, Setting, endpoint, model_argument, setting_args, shown_value, widget
from .sides import KIND_NAMES, side_columns, side_pickers
from .turns import together

VARIANTS = [(shown_value(ScoringSettings, "method", m), m) for m in MASKED_METHODS]
VARIANT_NAMES = {value: label for label, value in VARIANTS}
TABLE_WIDTHS = ["40px", "220px", "80px", "80px", "70px"]  # pixels: a phone scrolls, never squeezes

HELP = ("Which ending does each model find likelier? A **causal LM** reads left to right; a **masked "
        "LM** masks each token in turn (a pseudo-log-likelihood).")

HOW = """
Rank candidate completions of a context by how likely each model finds them. A **causal LM**
gives an exact log-likelihood (one pass, left to right). A **masked LM** has no left-to-right
probability, so it is scored by a **pseudo-log-likelihood (PLL)**: mask each token of the
candidate in turn and add up the log-probabilities of the right token. The BERTs paper also
masks the next tokens to the right (*+ right masks*), because with one mask a multi-token word
gives itself away and looks far likelier than it is; the **difference view** below shows where,
and **the PLL made visible** shows one candidate's masked copies, row by row. Only the candidate
is scored unless *Score* says *full text*.

*The decoder's own likelihood* scores each token the way the masked LM writes it in the
Prompting tab: the text before it, `[MASK]` and the padding masks, nothing after. It is the
exact probability that the masked LM's greedy or sampled decoding writes the candidate; the
paper's Table 5 ranks ReCoRD with it at 77.2 EM, below the PLL with 2 right masks (87.1).

*Fast scoring*, where offered, masks several tokens per copy, far apart, so a candidate
needs a few copies instead of one per token, and scores the close calls again exactly. It is
offered only for the candidate lengths where it was measured to keep the exact ranking; the
box says how often it did, and each ranking says whether it was used.
"""


FEW_SHOT_PRESETS = {"copa": 3, "winograd": 2}  # task -> shots, from the examples shipped in assets/


def task_presets() -> list[dict]:
    """Few-shot ranking presets built by the task registry: the paper's templates, in context."""
    from ..tasks import get_task, preset_examples
    from ..tasks.fewshot import choice_items, sample_demonstrations

    presets = []
    for name, shots in FEW_SHOT_PRESETS.items():
        try:
            task = get_task(name)
            examples = preset_examples(task)
        except ValueError:  # the shipped examples are missing: no such preset
            continue
        item = examples[-1]
        demos = sample_demonstrations(examples, shots, seed=0, item=item, same_split=True)
        items = choice_items(task, item, demos, score="answer")  # one shared context per item
        presets.append(dict(
            name=f"{task.title}, {shots}-shot in context (the paper's template)",
            source=f"demo.tasks preset examples; {task.license}", context=items[0][0],
            candidates=[completion.strip() for _, completion in items], answer=item.label))
    return presets


def page_scoring(values: dict) -> dict:
    """ScoringSettings' values from the page's own two arguments (by name): ``normalize``, a view
    of the reduction (mean when ticked), and ``unconditional``, the unconditional context (empty
    for none)."""
    unconditional = check_text(values.get("unconditional"), "unconditional context",
                               deployment().settings.max_prompt_chars, allow_empty=True)
    if not isinstance(values.get("normalize"), bool):
        raise ValueError(f"normalize must be true or false, not {as_said(values.get('normalize'))}.")
    return dict(reduction="mean" if values["normalize"] else "sum", unconditional_context=unconditional.strip() or None)


def fast_help() -> str:
    """What fast scoring does, in plain words, from the measured table (empty when no band qualified)."""
    from ..engine.pll_approx import fast_bands
    bands = fast_bands()
    if not bands:
        return ""
    return ("Approximate: each masked copy hides several tokens far apart, so fewer copies are read, and "
            "candidates that come out close are scored again exactly. The scores differ a little from exact "
            "ones. Used only where it was measured to keep the exact winner: " + "; ".join(
                f"{_span_text(b)}: the same winner in {b.agreement:.1%} of {b.rankings} measured rankings, "
                f"{b.speedup:.1f}x as fast" for b in bands) + ". Other rankings are scored exactly.")


def _span_text(band) -> str:
    top = "or more" if band.span_max >= 10**6 else f"to {band.span_max}"
    return f"candidates of {band.span_min} {top} tokens"


# Tokens a second of each model's exact scoring, as its last exact ranking here ran: what fast
# scoring's time saved is told against (the approximate copies run at another speed)
EXACT_SPEED: dict[tuple[str, str], float] = {}


def fast_note(lm, choices, settings: ScoringSettings, band, reads, seconds: float, exact_speed=None) -> str:
    """With fast scoring: how this ranking was scored (``band``: its ``fast_plan``; ``reads``: what
    it read, as counted), what exact scoring would have read and, at ``exact_speed`` (tokens a
    second, where measured), how long it would have taken; and why (HTML); empty without it."""
    from ..engine.pll import scored_span, tokens_read
    from ..engine.pll_approx import fast_bands
    if not settings.fast:
        return ""
    if band is not None:
        before = tokens_read(lm, [choices], settings)  # the approximate copies, before any close call
        exact = tokens_read(lm, [choices], replace(settings, fast=False))
        again = ("close calls were scored again exactly" if reads.tokens > before
                 else "no close call: nothing was scored again")
        saved = (f"about {exact / exact_speed:.1f} s at the speed of this model's last exact ranking here "
                 f"({exact_speed:,.0f} tokens/s): about {max(0.0, exact / exact_speed - seconds):.1f} s saved"
                 if exact_speed else "untimed here yet (rank once with Fast scoring off to compare)")
        return message(
            f"Fast scoring (approximate): the scores differ a little from exact ones; {again}. It read "
            f"{reads.tokens:,} tokens in {seconds:.1f} s; exact scoring reads {exact:,} tokens, {saved}. "
            f"Measured on {band.rankings} rankings of {band.model}: the same winner as exact scoring in "
            f"{band.agreement:.1%}.", "note")
    if settings.method_for(lm) not in PLL_METHODS:
        why = f"{VARIANT_NAMES[settings.method_for(lm)]} has no approximation"
    elif not fast_bands():
        why = "no length of candidate was measured to keep rankings with it"
    else:
        why = (f"its longest candidate has {scored_span(lm, choices, settings)} tokens to score; fast scoring "
               f"was measured for " + "; ".join(_span_text(b) for b in fast_bands()))
    return message(f"Fast scoring asked, exact scoring used: {why}.", "note")


class _Scored(NamedTuple):
    """A ranking as the scoring turn scored it, alone or in a batch."""
    lm: Any
    choices: list
    band: Any  # its fast_plan: the approximate PLL's setting, or None (exact)
    scores: list
    reads: Any  # what it read: as counted alone; in a batch, what it reads alone
    seconds: float  # the run's (a batch's: all of its rankings')


def _score(model_name, kind, context, candidates_text, settings: ScoringSettings, emd="auto"):
    """(model, scores, the work line: what the scoring's passes read, as the engine counted).
    The model loads in the scoring turn, so a request waiting for it holds none; rankings of one
    model and settings that wait for the turn together are scored as one batch
    (``turns.together``). Fast scoring runs alone: what it reads again is counted only for the
    whole run."""
    context = check_text(context, "context", deployment().settings.max_prompt_chars, allow_empty=True)
    candidates = parse_candidates(candidates_text, deployment().settings)
    key = None if settings.fast else (model_name, kind, emd, repr(settings))
    run, batch = together("score", key, (context, candidates), functools.partial(_scored, model_name, kind, emd,
                                                                                  settings))
    lm, how = run.lm, budget.ranking_reads(kind, settings.method_for(run.lm), settings.elbo_samples,
                                           run.band.stride if run.band else 1)
    if batch == 1 and run.band is None and settings.method_for(lm) in PLL_METHODS and run.seconds > 0:
        EXACT_SPEED[(model_name, kind)] = run.reads.tokens / run.seconds
    together_note = "" if batch == 1 else message(
        f"Scored in one batch with {batch - 1} other ranking{'' if batch == 2 else 's'} of this model and "
        f"settings, waiting at the same time: {run.seconds:.2f} s for all of them. Its scores are what it gets "
        f"alone; the work counts are its own.", "note")
    return lm, run.scores, work_line(run.reads, how, run.seconds) + together_note + fast_note(
        lm, run.choices, settings, run.band, run.reads, run.seconds, EXACT_SPEED.get((model_name, kind)))


def _scored(model_name, kind, emd, settings: ScoringSettings, items: list) -> list:
    """Each (context, candidates)'s ``_Scored``, or the ValueError refusing it (work over the
    budget, a text the model cannot read), before any run: the model loaded, the rankings scored
    in one batched run."""
    from ..engine.counting import counting
    from ..engine.pll import check_choices, choice_reads, choices_for, fast_plan, score_choices

    lm = load(model_name, kind, emd)
    checked = []
    for context, candidates in items:
        try:
            budget.ranking_work(lm, context, candidates, settings).check(deployment().settings)
            choices = choices_for(context, candidates)
            check_choices(lm, choices, settings)
            checked.append(choices)
        except ValueError as err:
            checked.append(err)
    rankings = [c for c in checked if not isinstance(c, ValueError)]
    start = time.perf_counter()
    with counting() as reads:
        scores = iter(score_choices(lm, rankings, settings, progress=True) if rankings else [])
    seconds = time.perf_counter() - start
    return [c if isinstance(c, ValueError) else _Scored(
        lm, c, fast_plan(lm, [c], settings)[0], next(scores),
        reads if len(rankings) == 1 else choice_reads(lm, [c], settings), seconds) for c in checked]


def _typed_specials(lm, context: str, candidates: str) -> str:
    note = special_token_note(f"{context}\n{candidates}", lm.tokenizer)
    return message(note, "note") if note else ""


def ranking_table(scores):
    """The ranking as a table, best first; its numbers printed as the summary prints them."""
    ranked = sorted(scores, key=lambda s: s.score, reverse=True)
    frame = pd.DataFrame({
        "#": range(1, len(ranked) + 1),
        "candidate": [s.candidate for s in ranked],
        "score": [round(s.score, 2) for s in ranked],
        "per token": [round(s.mean, 2) for s in ranked],
        "tokens": [len(s.tokens) for s in ranked],
    })
    # A Styler sets only what the page shows (-14.00, not -14); API clients get the numbers.
    return frame.style.format(score_text, subset=["score", "per token"])


TIE = 1e-6  # scores closer than this are a tie (both are printed with 2 decimals)


def ranking_summary(title: str, lm, what: str, scores, answer: str = "", work: str = "") -> str:
    """The ranking as HTML: user text escaped, ties called ties, the correct answer marked;
    ``work``: the work line (HTML) under the method."""
    ranked = sorted(scores, key=lambda s: s.score, reverse=True)
    answer = (answer or "").strip()
    items = []
    for i, s in enumerate(ranked):
        first = abs(s.score - ranked[0].score) <= TIE
        right = answer and s.candidate.strip() == answer
        mark = ' <span class="demo-correct">✓ correct answer</span>' if right else ""
        error = f" ± {score_text(s.stderr)}" if s.stderr else ""  # the ELBO's Monte Carlo error
        items.append(f'<li class="{"demo-best" if first else ""}">{escape(s.candidate)} '
                     f'<span class="demo-score">score {score_text(s.score)}{error}</span>{mark}</li>')
    notes = []
    tied = [s for s in ranked if abs(s.score - ranked[0].score) <= TIE]
    if len(tied) > 1:
        notes.append(message(f"Tie: {len(tied)} candidates share the top score ({score_text(ranked[0].score)}); "
                             f"this model cannot tell them apart.", "note"))
    if answer:
        place = next((i for i, s in enumerate(ranked, 1) if s.candidate.strip() == answer), None)
        if place is None:
            notes.append(message(f"The correct answer you gave ({quoted(answer)}) is not one of the "
                                 f"candidates.", "note"))
        else:
            verdict = "right" if place == 1 and len(tied) == 1 else "not sure (a tie)" if place == 1 else "wrong"
            notes.append(message(f"The correct answer ranks {place} of {len(ranked)}: the model is {verdict}.",
                                 "note"))
    return (f"<h3>{escape(title)}</h3><div>{model_note(lm)}</div><div>{escape(what)}</div>{work}"
            f'<ol class="demo-ranking">{"".join(items)}</ol>' + "".join(notes))


def variant_name(method, right_masks) -> str:
    """A scoring method as the page names it (a masked LM's PLL variant, else a causal LM's)."""
    if method == "right_masks":
        return f"+{right_masks} right masks (Samuel 2024)"
    return VARIANT_NAMES.get(method, "exact log-likelihood") if method else "exact log-likelihood"


def _what(s: ScoringSettings) -> str:
    """How a ranking scored, in words."""
    extras = ["mean per token (NormPLL)" if s.reduction == "mean" else "sum of log-probs",
              "full text scored" if s.scope == "full" else "candidate scored"]
    if s.unconditional_context:
        extras.append(f"minus score after {s.unconditional_context!r}")
    return f"{variant_name(s.method, s.right_masks)}, {', '.join(extras)}"


class RankingOutputs(NamedTuple):
    """One model's ranking, as /rank_mlm and /rank_causal give it (in this order)."""
    summary: str = ""  # HTML: the ranking with its work (forward passes, tokens read, time), or the message shown instead of one
    table: pd.DataFrame | None = None
    plot: Any = None  # Plotly figure: the log-prob of each scored token
    scores: list | None = None  # a gr.State: the full scores, for the difference view
    files: list[str] | None = None  # the per-token CSV and the heatmap as an HTML page
    python: str | None = None  # Reproduce: the Python call
    shell: str | None = None  # Reproduce: the command line
    variant: str = ""  # a gr.State: the PLL variant the scores come from ("" for a causal LM)

    showing = shown_in("summary")  # an error, or why this side did not run; no stale ranking


class DifferenceOutputs(NamedTuple):
    """The difference view between two PLL variants."""
    plot: Any = None  # Plotly figure: per token, how much likelier under one variant
    note: str = ""  # HTML: how the ranking changes, or the message shown instead
    scores: list | None = None  # a gr.State: the second variant's scores, for the copies view
    variant: str = ""  # a gr.State: the second variant's name

    showing = shown_in("note")


def heatmap(title: str, scores, zmin: float | None = None, order: list[int] | None = None):
    """A side's per-token heatmap (``zmin`` as ``token_heatmap`` takes it)."""
    from ..evaluation.plots import token_heatmap
    return token_heatmap(scores, title=f"{title}: log-prob of each scored token", zmin=zmin, order=order)


def _newline_note(lm, scores) -> str:
    """The newline marker's note, when the scored tokens (what the views show) include it."""
    shown = " ".join(s.text[s.tokens[0].start:s.tokens[-1].end] for s in scores)
    note = newline_marker_note(shown, lm.newline_survives)
    return message(note, "note") if note else ""


class _Asked(NamedTuple):
    """What a ranking request names beside its settings."""
    context: str
    candidates: str
    answer: str
    model_name: str
    emd: str = "auto"


def _outputs(lm, asked: _Asked, settings: ScoringSettings, scores, work, variant="", unused=()) -> RankingOutputs:
    """A side's outputs, from its scores (``unused``: what ``in_effect`` said of its settings)."""
    from ..app.downloads import download
    from ..evaluation.exports import figure_download, score_table

    title, kind, (context, candidates, answer, model_name, emd) = KIND_NAMES[lm.kind], lm.kind, asked
    what = _what(settings)

    figure = heatmap(title, scores)
    summary = ranking_summary(f"{title} ranking", lm, what, scores, answer, work)
    typed = parse_candidates(candidates, deployment().settings)
    csv = download(score_table([(context, typed)], [scores]).assign(model=model_name),
                   "ranking", model_name, kind)
    files = [csv, figure_download(figure, csv, "ranking-heatmap", model_name, kind)]
    python, shell = reproduction("score", model_name, kind, settings, emd, context=context,
                                 candidates=typed)
    judged = any(s.candidate.strip() == (answer or "").strip() for s in scores)  # the page says right or wrong
    elbo = elbo_note(scores, settings, judged) if settings.method_for(lm) == "elbo" else ""
    return RankingOutputs(summary=summary + notes(unused) + elbo + _typed_specials(lm, context, candidates)
                          + _newline_note(lm, scores),
                          table=ranking_table(scores), plot=figure, scores=scores, files=files,
                          python=python, shell=shell, variant=variant)


def ranking_estimate(settings: ScoringSettings, arguments: dict, kind: str, parameters: float) -> budget.Work:
    """One ranking's work, from its unchecked arguments (``common.handler``'s ``estimate``)."""
    candidates = [c for c in str(arguments.get("candidates") or "").splitlines() if c.strip()]
    return budget.estimated_ranking_work(kind, parameters, str(arguments.get("context") or ""), candidates)


# The page's own arguments: the texts, the model, and views of ScoringSettings' reduction
# (normalize) and unconditional context (page_scoring)
CONTEXT = Own("context", "text before the candidates (may be empty, may hold few-shot examples)", takes=str | None)
CANDIDATES = Own("candidates", "2 to 8 completions, one per line")
NORMALIZE = Own("normalize", "rank by the mean log-prob per token instead of the sum (NormPLL): reduction 'mean'", False,
                bool)
ANSWER = Own("answer", "optional correct candidate, marked in the ranking", "", str | None)
SCOPE_AND_UNCONDITIONAL = [Setting(ScoringSettings, "scope"), Setting(ScoringSettings, "unconditional_context",
                                                                         "unconditional")]
ELBO = setting_args(ScoringSettings, "elbo_samples", "elbo_seed")
FAST = Setting(ScoringSettings, "fast")


@handler("score", RankingOutputs.showing, estimate=ranking_estimate, batches=True)
@endpoint(CONTEXT, CANDIDATES, model_argument("a masked LM"),
          Setting(ScoringSettings, "method", only=MASKED_METHODS), Setting(ScoringSettings, "right_masks"),
          NORMALIZE, *SCOPE_AND_UNCONDITIONAL, ANSWER, EMD,
          FAST, *ELBO, builds=ScoringSettings, derived=page_scoring, defaults=dict(method=DEFAULT_MASKED_METHOD))
def rank_masked(context, candidates, model_name, answer, emd, settings: ScoringSettings,
                progress=gr.Progress(track_tqdm=True)):
    """Rank candidate completions of a context with a masked LM's pseudo-log-likelihood (PLL)."""
    check_text(answer, "correct answer", deployment().settings.max_candidate_chars, allow_empty=True)
    settings, unused = in_effect(settings, "masked")
    lm, scores, work = _score(model_name, "masked", context, candidates, settings, emd)
    emd, head = head_in_effect(emd, lm)
    return _outputs(lm, _Asked(context, candidates, answer, model_name, emd), settings, scores, work,
                    variant_name(settings.method, settings.right_masks), unused + head)


@handler("score", RankingOutputs.showing, estimate=ranking_estimate, models={"model_name": "causal"}, batches=True)
@endpoint(CONTEXT, CANDIDATES, model_argument("a causal LM", "; empty skips it"),
          NORMALIZE, *SCOPE_AND_UNCONDITIONAL, ANSWER, builds=ScoringSettings, derived=page_scoring)
def rank_causal(context, candidates, model_name, answer, settings: ScoringSettings,
                progress=gr.Progress(track_tqdm=True)):
    """Rank candidate completions of a context by a causal LM's exact log-likelihood."""
    if not model_name:
        return RankingOutputs.showing(message("Skipped: no causal LM picked.", "note"))
    check_text(answer, "correct answer", deployment().settings.max_candidate_chars, allow_empty=True)
    settings, unused = in_effect(settings, "causal")
    lm, scores, work = _score(model_name, "causal", context, candidates, settings)
    return _outputs(lm, _Asked(context, candidates, answer, model_name), settings, scores, work, unused=unused)


@handler("score", DifferenceOutputs.showing, estimate=ranking_estimate, batches=True)
@endpoint(CONTEXT, CANDIDATES, Own("model_name", "the masked LM of the first ranking", takes=str | None),
          Own("method", "the first ranking's PLL variant", takes=Literal[MASKED_METHODS] | None),
          Own("compare_method", "the second PLL variant, scored here", takes=Literal[MASKED_METHODS] | None),
          Own("first_scores", "the first ranking's scores", takes=list | None), Setting(ScoringSettings, "right_masks"), NORMALIZE,
          *SCOPE_AND_UNCONDITIONAL, EMD, FAST, *ELBO, builds=ScoringSettings,
          derived=lambda values: dict(page_scoring(values), method=values["compare_method"] or None))
def compare_variants(context, candidates, model_name, method, first_scores, emd, settings: ScoringSettings,
                     progress=gr.Progress(track_tqdm=True)):
    """The difference view: the same MLM and texts under a second PLL variant (``compare_method``,
    the settings' method), scored with the first ranking's settings (fast as the first)."""
    from ..evaluation.plots import pll_difference

    if not settings.method or settings.method == method or not first_scores:
        return DifferenceOutputs.showing(message("Pick a second PLL variant, different from the first, "
                                                 "to see where they disagree.", "note") if first_scores else "")
    _, second_scores, _ = _score(model_name, "masked", context, candidates, settings, emd)
    first_label = variant_name(method, settings.right_masks)
    second_label = variant_name(settings.method, settings.right_masks)
    figure = pll_difference(first_scores, second_scores, first_label, second_label)

    def order(scores):
        return [s.candidate for s in sorted(scores, key=lambda s: s.score, reverse=True)]

    same = order(first_scores) == order(second_scores)
    change = "is the same" if same else "changes to: " + " > ".join(order(second_scores))
    second_by = {s.candidate: s.score for s in second_scores}
    moved = "; ".join(f"{quoted(s.candidate, 40)} {second_by[s.candidate] - s.score:+.2f}" for s in first_scores)
    note = (f"{second_label} vs {first_label}: the ranking {change.rstrip('.')}. Blue tokens are likelier "
            f"under {second_label}, red ones under {first_label}. Each score's change (the figure's Δ: under "
            f"{second_label} minus under {first_label}): {moved}.")
    return DifferenceOutputs(plot=figure, note=message(note, "note"), scores=second_scores, variant=second_label)


def _scored_variants(masked_variant, masked_scores, compare_variant, compare_scores) -> dict:
    """The PLL variants one ranking scored, by name: its own and the difference view's second."""
    variants = {masked_variant: masked_scores} if masked_scores else {}
    if compare_scores:
        variants[compare_variant] = compare_scores
    return variants


def show_copies(index, variant, masked_variant, masked_scores, compare_variant, compare_scores,
                causal_scores) -> str:
    """The copies view of the candidate typed ``index``-th, under ``variant`` (one the ranking
    scored), with the causal LM's pass for the same candidate: from the scores kept, no model run."""
    scores = _scored_variants(masked_variant, masked_scores, compare_variant, compare_scores).get(variant)
    if not scores or index is None or not 0 <= index < len(scores):
        return ""
    masked = scores[index]
    same = causal_scores and len(causal_scores) == len(scores) and causal_scores[index].candidate == masked.candidate
    return copies_view(masked, variant, causal_scores[index] if same else None,
                       decoder=variant == VARIANT_NAMES["decoder"])


class SharedViews(NamedTuple):
    """What a ranking shows once both sides and the difference view have run."""
    masked_plot: Any  # the two heatmaps again, on one colour scale and in one row order (or left as they are)
    causal_plot: Any
    candidate: Any  # the copies view's pickers: the candidates, best first, and the variants scored
    variant: Any
    copies: str  # HTML: the best candidate's masked copies


def after_ranking(masked_variant, masked_scores, compare_variant, compare_scores, causal_scores) -> SharedViews:
    """The views that need both sides: the heatmaps on one colour scale (one colour, one log-prob)
    with their rows in one order (the masked LM's ranking), and the copies view of the best candidate, with pickers for the others and the variants."""
    from ..evaluation.plots import log_prob_floor

    plots = (gr.update(), gr.update())
    if not masked_scores:
        return SharedViews(*plots, gr.update(choices=[], value=None), gr.update(choices=[], value=None), "")
    order = sorted(range(len(masked_scores)), key=lambda k: masked_scores[k].score, reverse=True)
    same = causal_scores and [s.candidate for s in causal_scores] == [s.candidate for s in masked_scores]
    if same:
        # rows in the masked LM's order in both figures, so that a row reads across; each label
        # keeps its own model's rank
        zmin = log_prob_floor(masked_scores, causal_scores)
        plots = (heatmap("Masked LM", masked_scores, zmin, order), heatmap("Causal LM", causal_scores, zmin, order))
    candidates = [(f"{rank}. {masked_scores[k].candidate}", k) for rank, k in enumerate(order, 1)]
    variants = list(_scored_variants(masked_variant, masked_scores, compare_variant, compare_scores))
    copies = show_copies(order[0], masked_variant, masked_variant, masked_scores, compare_variant, compare_scores,
                         causal_scores)
    return SharedViews(*plots, gr.update(choices=candidates, value=order[0]),
                       gr.update(choices=variants, value=masked_variant), copies)


def preset_note(preset: dict | None) -> str:
    """What a preset expects, shown under it (the asset's own text, escaped)."""
    if not preset:
        return ""
    lines = []
    if preset.get("answer") is not None:
        lines.append(f"Correct answer: {preset['candidates'][preset['answer']]}")
    if preset.get("note"):
        lines.append(preset["note"])
    lines.append(f"Source: {preset.get('source', '')}")
    return "".join(message(line, "note") for line in lines)


def _inputs(catalog: Catalog, presets: list[dict]) -> dict:
    """The preset, the texts, the models and the scoring settings, by name."""
    first = presets[0] if presets else {"context": "", "candidates": [], "answer": None}
    w = {}
    w["preset"] = gr.Dropdown(
        choices=[p["name"] for p in presets], value=presets[0]["name"] if presets else None,
        label="Preset",
        info="COPA, Winograd and Winogradversarial items, and the BERTs paper's multi-token word "
             "example. Picking one fills the context, the candidates and the correct answer.",
        elem_id="rank-preset")
    w["note"] = gr.HTML(preset_note(presets[0] if presets else None), elem_id="rank-preset-note")
    w["context"] = Textbox(
        value=first["context"], label="Context", lines=3, elem_id="rank-context",
        max_length=deployment().settings.max_prompt_chars,
        info=f"Text before the candidates (may be empty, may hold few-shot examples); at most "
             f"{deployment().settings.max_prompt_chars:,} characters. Each candidate is appended after a space.")
    w["candidates"] = Textbox(
        value="\n".join(first["candidates"]), label="Candidates, one per line", lines=4,
        elem_id="rank-candidates",
        info=f"{MIN_CANDIDATES} to {MAX_CANDIDATES} completions, one per line, "
             f"each at most {deployment().settings.max_candidate_chars} characters.")
    w["answer"] = Textbox(
        value=_answer_of(first), label="Correct answer (optional)", elem_id="rank-answer",
        info="If you know it, the ranking marks where it lands; presets fill it in.")
    w["run"] = gr.Button("Rank candidates", variant="primary", elem_id="rank-run")
    w["masked_model"], w["causal_model"] = side_pickers(catalog, "rank")
    with gr.Row():
        with gr.Column():
            w["method"] = widget(ScoringSettings, "method", only=MASKED_METHODS, value=DEFAULT_MASKED_METHOD,
                                 elem_id="rank-variant")
            w["right_masks"] = widget(ScoringSettings, "right_masks", elem_id="rank-right-masks")
            w["elbo_samples"] = widget(ScoringSettings, "elbo_samples", visible=False, elem_id="rank-elbo-samples")
            w["elbo_seed"] = widget(ScoringSettings, "elbo_seed", visible=False, elem_id="rank-elbo-seed")
            w["fast"] = widget(ScoringSettings, "fast", visible=bool(fast_help()), elem_id="rank-fast")
            gr.HTML(message(fast_help(), "note"), visible=bool(fast_help()), elem_id="rank-fast-measured")
        with gr.Column():
            w["compare_method"] = Dropdown(
                choices=[("(no difference view)", "")] + VARIANTS, value="salazar",
                label="Difference view: compare with", elem_id="rank-compare",
                info="A second PLL variant for the same masked LM; the view shows, token by "
                     "token, where the two disagree.")
            w["emd"] = emd_radio("rank-deberta-head", w["masked_model"])
    with gr.Accordion("Scoring options", open=False):
        with gr.Row():
            w["normalize"] = gr.Checkbox(
                value=False, label="Normalise by length (NormPLL)", elem_id="rank-normalize",
                info="Rank by the mean log-prob per scored token instead of the sum (the ALBERT "
                     "paper's NormPLL); helps when candidates differ in length.")
            w["scope"] = widget(ScoringSettings, "scope", elem_id="rank-scope")
            w["unconditional"] = widget(ScoringSettings, "unconditional_context", value="",
                                        elem_id="rank-unconditional")
    return w


def _outputs_panel(w: dict) -> None:
    """Both rankings, their heatmaps, the copies view and the difference view, added to ``w``."""
    # Rankings side by side; the per-token heatmaps full width below, so tokens stay readable.
    w["sides"] = side_columns("rank", {
        "summary": lambda kind, elem_id: gr.HTML(elem_id=elem_id),
        # the summary above is titled "Masked LM ranking": the table does not say it again
        "table": lambda kind, elem_id: gr.Dataframe(label=f"{KIND_NAMES[kind]} scores", show_label=False,
                                                    elem_id=elem_id, interactive=False,
                                                    column_widths=TABLE_WIDTHS, wrap=True),
        "files": lambda kind, elem_id: gr.File(label="Per-token scores (CSV) and the heatmap (HTML)",
                                               file_count="multiple", elem_id=elem_id)})
    # a cell per token at a readable width: a long text scrolls sideways inside the figure's box
    w["masked_plot"] = gr.Plot(label="Masked LM: per-token log-probs", elem_id="rank-mlm-plot",
                               elem_classes=["demo-scroll-plot"])
    w["causal_plot"] = gr.Plot(label="Causal LM: per-token log-probs", elem_id="rank-causal-plot",
                               elem_classes=["demo-scroll-plot"])
    with gr.Accordion("The PLL made visible: one candidate's masked copies", open=False, elem_id="rank-copies"):
        with gr.Row():
            w["copies_candidate"] = gr.Dropdown(
                choices=[], value=None, label="Candidate", elem_id="rank-copies-candidate",
                info="Filled by a ranking, best first.")
            w["copies_variant"] = gr.Radio(
                choices=[], value=None, label="PLL variant shown", elem_id="rank-copies-variant",
                info="The ranking's variant and the difference view's: switch to see which positions "
                     "each masks. Another variant: pick it there and rank again.")
        w["copies"] = gr.HTML(elem_id="rank-copies-view")
    w["difference_note"] = gr.HTML(elem_id="rank-diff-note")
    w["difference_plot"] = gr.Plot(label="Difference between two PLL variants", elem_id="rank-diff-plot",
                                   elem_classes=["demo-scroll-plot"])


def _edited_note(presets: list[dict], lines, given, name) -> str:
    """The preset's note, or, where edited candidates lost the preset's answer, a word on it."""
    chosen = preset_named(presets, name)
    lost = chosen and chosen.get("answer") is not None and _answer_of(chosen) not in {
        line.strip() for line in (lines or "").splitlines()}
    if not lost or (given or "").strip():
        return preset_note(chosen)
    return message(f"The candidates were edited: the preset's correct answer ({_answer_of(chosen)}) is no "
                   "longer one of them, so none is marked. Type one in, or pick the preset again.",
                   "note") + preset_note(dict(chosen, answer=None))


# A correct answer the edited candidates no longer hold is cleared in the browser, at once (a server
# round trip could clear an answer typed meanwhile); a preset's fill and a lesson step set candidates
# and answer together, so their answer stays. Then the note says why.
CLEAR_LOST_ANSWER = """
    (lines, given) => (given && !lines.split('\\n').map((l) => l.trim()).includes(given.trim())) ? '' : given
"""


def _wire_inputs(w: dict, presets: list[dict]):
    """Presets fill the texts; edits keep the note true; the right-masks slider follows the variant.
    Returns the preset filler (a lesson step's too)."""
    def fill(name):
        chosen = preset_named(presets, name)
        if chosen is None:
            return gr.update(), gr.update(), gr.update(), gr.update()
        return chosen["context"], "\n".join(chosen["candidates"]), _answer_of(chosen), preset_note(chosen)

    # select, not change: picking the same preset again restores its text after an edit
    w["preset"].select(fill, w["preset"], [w["context"], w["candidates"], w["answer"], w["note"]],
                       api_visibility="private")
    edited = w["candidates"].change(None, [w["candidates"], w["answer"]], w["answer"], api_visibility="private",
                                    js=run_starts("rank-edit", CLEAR_LOST_ANSWER)).then(
        lambda lines, given, name: _edited_note(presets, lines, given, name),
        [w["candidates"], w["answer"], w["preset"]], w["note"], api_visibility="private", show_progress="hidden",
        concurrency_limit=None)
    run_ends("rank-edit", edited)
    # The right-masks slider only means something for the right-masks variant, the ELBO's patterns
    # for the ELBO.
    w["method"].change(lambda m: (gr.update(interactive=m == "right_masks"), gr.update(visible=m == "elbo"),
                                  gr.update(visible=m == "elbo")),
                       w["method"], [w["right_masks"], w["elbo_samples"], w["elbo_seed"]], api_visibility="private")
    return fill


def _wire_runs(w: dict) -> None:
    """One chain, in order: the views that need both sides (one colour scale, the copies view with
    the causal pass) run once both have, never on one side's new scores and the other's old."""
    masked_scores, causal_scores, compare_scores = gr.State(), gr.State(), gr.State()
    masked_variant, causal_variant, compare_variant = gr.State(""), gr.State(""), gr.State("")
    masked, causal = dict(w, model_name=w["masked_model"]), dict(w, model_name=w["causal_model"])
    masked_event = w["run"].click(
        rank_masked, rank_masked.inputs(masked),
        components(RankingOutputs, **w["sides"]["masked"], plot=w["masked_plot"], scores=masked_scores,
                   variant=masked_variant),
        api_name="rank_mlm", concurrency_id=rank_masked.group, show_progress_on=w["sides"]["masked"]["summary"],
        js=run_starts("rank"))
    causal_event = masked_event.then(
        rank_causal, rank_causal.inputs(causal),
        components(RankingOutputs, **w["sides"]["causal"], plot=w["causal_plot"], scores=causal_scores,
                   variant=causal_variant),
        api_name="rank_causal", concurrency_id=rank_causal.group, show_progress_on=w["sides"]["causal"]["summary"])
    difference_event = causal_event.then(
        compare_variants, compare_variants.inputs(dict(masked, first_scores=masked_scores)),
        components(DifferenceOutputs, plot=w["difference_plot"], note=w["difference_note"], scores=compare_scores,
                   variant=compare_variant),
        api_visibility="private", concurrency_id=compare_variants.group, show_progress_on=w["difference_plot"])
    kept = [masked_variant, masked_scores, compare_variant, compare_scores, causal_scores]
    shared = difference_event.then(
        after_ranking, kept,
        components(SharedViews, masked_plot=w["masked_plot"], causal_plot=w["causal_plot"],
                   candidate=w["copies_candidate"], variant=w["copies_variant"], copies=w["copies"]),
        api_visibility="private")
    run_ends("rank", shared)
    pickers = [w["copies_candidate"], w["copies_variant"]]
    for picker in pickers:  # a redraw from the kept scores: no model run
        picker.input(show_copies, pickers + kept, w["copies"], api_visibility="private")


def build(catalog: Catalog) -> TabParts:
    """The Ranking tab's components and events (call inside a gr.Blocks/gr.Tab context)."""
    presets = read_presets("ranking") + task_presets()
    tab_help(HELP, HOW)
    w = _inputs(catalog, presets)
    _outputs_panel(w)
    fill = _wire_inputs(w, presets)
    _wire_runs(w)
    return TabParts(lesson_fields=tuple(w[n] for n in ("preset", "context", "candidates", "answer", "note", "method",
                                                        "compare_method")),
                    lesson_values=lambda step: [step["preset"], *fill(step["preset"]),
                                                step.get("method", DEFAULT_MASKED_METHOD),
                                                step.get("compare", "salazar")],
                    presses=lambda step: (rank_masked, rank_causal, compare_variants))


def _answer_of(preset: dict) -> str:
    return preset["candidates"][preset["answer"]] if preset.get("answer") is not None else ""
