"""The Ranking tab's views: the PLL's masked copies, one colour scale, one number format, names.

References are independent of the views: the core's per-token log-probs summed here, masked
positions written out by hand from the method's definition, minima taken here, Gradio's own
rendering of the table.
"""

import html
import math
import re

import gradio as gr
import pytest

from demo.app.catalog import LOCAL_MODELS_VAR, build_catalog
from demo.app_settings import AppSettings
from demo.engine.pll import CandidateScore, TokenScore, score_candidates
from demo.engine.text import NEWLINE_MARKER
from demo.settings import ScoringSettings
from demo.ui.common import score_text
from demo.ui.pll_copies import copies_view
from demo.ui.presets import read_presets
from demo.ui.ranking import after_ranking, rank_masked, ranking_summary, ranking_table, show_copies
from demo.ui.sharing import RESULTS
from tests.conftest import STANDIN_MLM, needs_shared

VARIANTS = ["salazar", "right_masks", "within_word_l2r", "whole_word"]
ROW = re.compile(r"<tr><th>(\d+)</th>(.*?)</tr>", re.S)
CELL = re.compile(r'<td><span class="demo-tok ([a-z-]*)">')
NUMBERS = re.compile(r'<td class="demo-num">([^<]*)</td>')


def _rows(html: str) -> list[str]:
    """The masked copies' rows (the causal pass has no numbered rows)."""
    return [body for _, body in ROW.findall(html)]


def _masked_columns(row: str) -> tuple[set[int], int]:
    """(columns shown as [MASK] besides the predicted one, the predicted column) in one row."""
    kinds = CELL.findall(row)
    return {i for i, k in enumerate(kinds) if k == "demo-mask"}, kinds.index("demo-mask-predicted")


def _summary_scores(summary: str) -> dict[str, str]:
    return {candidate.strip(): shown for candidate, shown in
            re.findall(r'<li[^>]*>(.*?) <span class="demo-score">score ([^<]*)</span>', summary)}


@pytest.mark.parametrize("method", VARIANTS)
def test_copies_have_one_row_per_scored_token_and_total_the_ranking(tiny_model, method):
    lm = tiny_model("bert")
    settings = ScoringSettings(method=method, right_masks=2)
    scores = score_candidates(lm, "The show was", ["super fun.", "unbelievably entertaining."], settings)
    summary = _summary_scores(ranking_summary("Masked LM ranking", lm, "", scores))
    for score in scores:
        html = copies_view(score, method)
        rows = _rows(html)
        assert len(rows) == len(score.tokens)
        # the running sums are the core's log-probs added up here, the last one is the total
        running = [NUMBERS.findall(row)[-1] for row in rows]
        expected = [score_text(math.fsum(t.logprob for t in score.tokens[:k])) for k in range(1, len(rows) + 1)]
        assert running == expected
        assert re.search(r"Sum of log-probs: <b>([^<]*)</b>", html)[1] == expected[-1]
        # ... and the ranking's score, printed as the ranking prints it
        shown_score = re.search(r"ranking score: <b>([^<]*)</b>", html)[1]
        assert shown_score == expected[-1] == summary[score.candidate]


@pytest.mark.parametrize("p", [0, 2])
def test_the_decoders_windows_show_the_text_before_masks_after_nothing_written_yet(tiny_model, p):
    """Each row of the decoder's likelihood is the window that writes that token: the candidate's
    tokens before it shown, its own [MASK], p padding masks (past the candidate: in the "after"
    column), the rest not there yet; the sum is the ranking's score."""
    lm = tiny_model("bert")
    [score] = score_candidates(lm, "The show was", ["unbelievably entertaining today."],
                               ScoringSettings(method="decoder", padding_masks=p))
    html = copies_view(score, "the decoder", decoder=True)
    rows, n = _rows(html), len(score.tokens)
    assert len(rows) == n and "the window the masked LM reads" in html
    for i, row in enumerate(rows):
        kinds = CELL.findall(row)[:n]
        assert kinds[:i] == [""] * i and kinds[i] == "demo-mask-predicted"
        after = min(p, n - 1 - i)
        assert kinds[i + 1:i + 1 + after] == ["demo-mask"] * after
        assert kinds[i + 1 + after:] == ["demo-absent"] * (n - 1 - i - after)
        past = p - after  # padding masks beyond the candidate's last token
        assert (f"[MASK]×{past}</span></td>" in row) == (past > 0)
    assert re.search(r"ranking score: <b>([^<]*)</b>", html)[1] == score_text(score.total)


def test_copies_of_a_normalised_ranking_say_its_score_is_the_mean(tiny_model):
    lm = tiny_model("bert")
    score = score_candidates(lm, "The show was", ["super fun."], ScoringSettings(reduction="mean"))[0]
    html = copies_view(score, "right_masks")
    mean = score_text(math.fsum(t.logprob for t in score.tokens) / len(score.tokens))
    assert f"ranking score: <b>{mean}</b> (the mean per token)" in html


def test_the_causal_pass_is_one_row_of_the_causal_ranking(tiny_model):
    masked = score_candidates(tiny_model("bert"), "The show was", ["super fun."])[0]
    causal = score_candidates(tiny_model("gpt2"), "The show was", ["super fun."])[0]
    html = copies_view(masked, "right_masks", causal)
    one_pass = html.split("Causal LM: one pass", 1)[1]
    assert not _rows(one_pass)  # no copies: one pass
    logprobs = NUMBERS.findall(one_pass.split("<th>log-prob</th>")[1].split("</tr>")[0])
    assert logprobs == [score_text(t.logprob) for t in causal.tokens]
    assert f"ranking score: <b>{score_text(causal.score)}</b> (the sum)" in one_pass


def test_user_text_in_the_copies_is_shown_as_text(tiny_model):
    score = score_candidates(tiny_model("bert"), "<b>bold</b> says", ["<img src=x> yes"])[0]
    html = copies_view(score, "<i>variant</i>")
    assert "<img" not in html and "<b>bold" not in html and "<i>variant" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; says" in html and ">&lt;</span>" in html  # context, a token


@needs_shared
def test_switching_variants_masks_what_each_method_says(monkeypatch):
    """The BERTs paper's multi-token word preset on the stand-in: which of the long word's copies
    mask which pieces, written out by hand for each variant."""
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    preset = next(p for p in read_presets("ranking") if "Multi-token word" in p["name"])
    long_word = max(range(len(preset["candidates"])), key=lambda k: len(preset["candidates"][k]))
    pieces = ["super", "cal", "if", "rag", "ilis", "tic", "ex", "pia", "lid", "oc", "ious", "."]
    word = set(range(11))  # the word's pieces; column 11 is the full stop, a word of its own
    expected = {
        "salazar": [set() for _ in pieces],
        "right_masks": [{j for j in (i + 1, i + 2) if j < len(pieces)} for i in range(len(pieces))],
        "within_word_l2r": [set(range(i + 1, 11)) if i in word else set() for i in range(len(pieces))],
        "whole_word": [word - {i} if i in word else set() for i in range(len(pieces))],
    }
    seen = {}
    for method in VARIANTS:
        outputs = rank_masked(preset["context"], "\n".join(preset["candidates"]), STANDIN_MLM.name, method, 2,
                              False, "completion", "")
        assert outputs.scores, outputs.summary
        html = show_copies(long_word, outputs.variant, outputs.variant, outputs.scores, "", None, None)
        assert [t.token for t in outputs.scores[long_word].tokens] == pieces  # the hand count's basis
        rows = [_masked_columns(row) for row in _rows(html)]
        assert [predicted for _, predicted in rows] == list(range(len(pieces)))
        assert [masked for masked, _ in rows] == expected[method], method
        seen[method] = [masked for masked, _ in rows]
    assert len({str(masks) for masks in seen.values()}) == 4  # every variant draws other masks


@needs_shared
def test_the_copies_view_switches_between_the_variants_the_ranking_scored(monkeypatch):
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    ranked = rank_masked("She said the show was", "super.\nsuperb.", STANDIN_MLM.name, "right_masks", 2, False,
                         "completion", "")
    second = rank_masked("She said the show was", "super.\nsuperb.", STANDIN_MLM.name, "salazar", 2, False,
                         "completion", "")
    views = after_ranking(ranked.variant, ranked.scores, second.variant, second.scores, None)
    assert views.variant["choices"] == [ranked.variant, second.variant]
    best = max(range(2), key=lambda k: ranked.scores[k].score)
    assert views.candidate["value"] == best and views.copies.count("demo-mask-predicted") == 1 + len(
        ranked.scores[best].tokens)  # the legend's, then one per copy
    shown = show_copies(best, second.variant, ranked.variant, ranked.scores, second.variant, second.scores, None)
    assert second.variant in shown
    assert [masked for masked, _ in map(_masked_columns, _rows(shown))] == [set(), set()]  # 1 mask: no other
    assert [masked for masked, _ in map(_masked_columns, _rows(views.copies))][0] == {1}  # +2: the next too


def test_masked_and_causal_heatmaps_share_one_colour_scale(tiny_model):
    masked = score_candidates(tiny_model("bert"), "The show was", ["super fun.", "dull."])
    causal = score_candidates(tiny_model("gpt2"), "The show was", ["super fun.", "dull."])
    lowest = [min(t.logprob for s in scores for t in s.tokens) for scores in (masked, causal)]
    assert lowest[0] != lowest[1]  # so that two scales of their own would differ
    views = after_ranking("+2 right masks", masked, "", None, causal)
    traces = [views.masked_plot.data[0], views.causal_plot.data[0]]
    assert [(t.zmin, t.zmax) for t in traces] == [(min(lowest), 0.0)] * 2
    # one row order, the masked LM's ranking; each label keeps its own model's rank
    best_first = [s.candidate for s in sorted(masked, key=lambda s: s.score, reverse=True)]
    assert [[label.split(". ", 1)[1] for label in t.y] for t in traces] == [best_first] * 2
    causal_rank = {s.candidate: r for r, s in enumerate(sorted(causal, key=lambda s: s.score, reverse=True), 1)}
    assert [int(label.split(".")[0]) for label in traces[1].y] == [causal_rank[c] for c in best_first]


def _score(candidate: str, total: float, n: int) -> CandidateScore:
    tokens = [TokenScore(token="x", start=0, end=1, logprob=total / n, rank=1, masked=[]) for _ in range(n)]
    return CandidateScore(candidate=candidate, text="x", tokens=tokens, total=total, mean=total / n, score=total)


def test_the_table_prints_numbers_as_the_summary_does(tiny_model):
    scores = [_score("fourteen", -14.0, 5), _score("two point eight", -2.8, 1)]
    shown = gr.Dataframe(interactive=False).postprocess(ranking_table(scores)).metadata["display_value"]
    summary = _summary_scores(ranking_summary("Causal LM ranking", tiny_model("gpt2"), "", scores))
    assert [(row[1], row[2]) for row in shown] == list(summary.items()) == [
        ("two point eight", "-2.80"), ("fourteen", "-14.00")]
    assert [row[3] for row in shown] == ["-2.80", "-2.80"]  # per token, the same format


@needs_shared
def test_the_newline_marker_is_explained_where_its_tokens_show(monkeypatch):
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    context = "Q: is the sky blue?\nA:"
    full = rank_masked(context, "yes\nno", STANDIN_MLM.name, "salazar", 2, False, "full", "").summary
    assert "newline marker" in full and NEWLINE_MARKER.strip() in full  # the scored tokens hold it
    candidate_only = rank_masked(context, "yes\nno", STANDIN_MLM.name, "salazar", 2, False, "completion", "")
    assert "newline marker" not in candidate_only.summary  # only the candidate shows: no marker


def test_results_name_a_local_model_as_the_picker_does(tmp_path, monkeypatch):
    gguf = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: gguf)
    catalog = build_catalog(AppSettings(local_models=""))
    picker = dict(catalog.choices("causal"))
    assert picker["smollm2 · local"] == "smollm2"
    assert catalog.shown_name(str(gguf), local=True) == "smollm2"  # not the file's name
    assert catalog.shown_name("openai-community/gpt2", local=False) == "openai-community/gpt2"
    assert catalog.shown_name(str(tmp_path / "elsewhere"), local=True) == "elsewhere"  # never a path


@needs_shared
def test_fast_scoring_says_how_each_ranking_was_scored(monkeypatch, tmp_path):
    """With a made-up table (candidates of 5+ scored tokens: stride 3), a long ranking is scored as
    the engine scores it with stride 3 and says so; a short one is scored exactly and says why."""
    from demo.engine import pll_approx
    from demo.ui.ranking import fast_help
    table = tmp_path / "fast_pll.csv"
    table.write_text("span_min,span_max,stride,rescore_band,rankings,agreement,low,high,speedup,model\n"
                     "5,1000000000,3,0,120,0.99,0.955,0.998,3.5,the made-up model\n")
    monkeypatch.setattr(pll_approx, "FAST_PLL", table)
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    monkeypatch.setattr("demo.ui.ranking.EXACT_SPEED", {})  # no exact ranking timed yet in this app
    pll_approx.fast_bands.cache_clear()
    try:
        assert "candidates of 5 or more tokens: the same winner in 99.0% of 120 measured rankings" in fast_help()
        long = ["sat quietly on the old red mat by the door.", "ran off under the big kitchen table at once."]
        ranked = rank_masked("The cat", "\n".join(long), STANDIN_MLM.name, "right_masks", 2, False, "completion", "",
                             fast=True)
        assert "Fast scoring (approximate)" in ranked.summary and "120 rankings of the made-up model" in ranked.summary
        assert "3 masked copies per text" in ranked.summary and "nothing was scored again" in ranked.summary
        from demo.engine.models import load_model
        from demo.engine.pll import choices_for, tokens_read
        exact_tokens = tokens_read(load_model(str(STANDIN_MLM)), [choices_for("The cat", long)], ScoringSettings())
        assert f"exact scoring reads {exact_tokens:,} tokens" in ranked.summary
        reference = score_candidates(load_model(str(STANDIN_MLM)), "The cat", long, ScoringSettings(stride=3))
        assert [s.total for s in ranked.scores] == [s.total for s in reference]
        short = rank_masked("The cat", "sat.\nran.", STANDIN_MLM.name, "right_masks", 2, False, "completion", "",
                            fast=True)
        assert "exact scoring used: its longest candidate has 2 tokens to score" in short.summary
        off = rank_masked("The cat", "\n".join(long), STANDIN_MLM.name, "right_masks", 2, False, "completion", "")
        assert "Fast scoring" not in off.summary and [s.total for s in off.scores] != [s.total for s in reference]
        assert "untimed here yet" in ranked.summary  # no exact ranking had run to time it against
        import re
        exact_s = float(re.search(r"tokens read in ([\d.]+) s", off.summary).group(1))
        again = rank_masked("The cat", "\n".join(long), STANDIN_MLM.name, "right_masks", 2, False, "completion", "",
                            answer="the answer", fast=True)  # (another request than the first, not a shared answer)
        at = re.search(r"exact scoring reads [\d,]+ tokens, about ([\d.]+) s at the speed of this model's last "
                       r"exact ranking here \(([\d,]+) tokens/s\)", html.unescape(again.summary))
        assert at and abs(float(at.group(1)) - exact_s) <= 0.051 + 0.01 * exact_s, again.summary
        monkeypatch.setattr(pll_approx, "FAST_PLL", tmp_path / "no table.csv")
        pll_approx.fast_bands.cache_clear()
        RESULTS.forget()  # another table is another app: nothing shared from this one
        assert fast_help() == "" and "no length of candidate was measured" in rank_masked(
            "The cat", "\n".join(long), STANDIN_MLM.name, "right_masks", 2, False, "completion", "", fast=True).summary
    finally:
        pll_approx.fast_bands.cache_clear()


def _estimate(candidate: str, total: float, n: int, stderr: float) -> CandidateScore:
    """A candidate's ELBO as the engine gives it: n scored tokens, the total and its standard error."""
    score = _score(candidate, total, n)
    score.stderr = stderr
    return score


def _elbo_note(scores, judged=False, **settings) -> str:
    from demo.ui.elbo_note import elbo_note
    return html.unescape(re.sub(r"<[^>]+>", "", elbo_note(scores, ScoringSettings(method="elbo", **settings), judged)))


EXACT = ("ELBO: a candidate of at most 3 scored tokens is scored exactly, through every one of its masking "
         "patterns (2^L - 1 for L tokens), so its score has no ±.")
DRAWN_8 = (" A longer one is scored through 8 patterns drawn at random (seed 0): its score is an estimate, ± one "
           "standard error, worked out from how much those patterns' values differ, so with few patterns the ± is a "
           "rough guess too. More patterns make it smaller.")


def test_the_elbo_note_says_an_estimate_from_few_patterns_and_the_ranking_on_it_may_change_with_the_seed():
    """The issue's page: 8 patterns, seed 0, two candidates of 5 scored tokens (31 patterns each):
    -8.10 ± 1.51 where every pattern gives -17.02, and another seed ranks the two the other way.
    The note says the estimates are too rough to trust and the ranking, and the verdict, may change."""
    scores = [_estimate("the sun was rising.", -8.10, 5, 1.51), _estimate("the grass was cut.", -16.84, 5, 2.90)]
    assert _elbo_note(scores, judged=True, elbo_samples=8, elbo_seed=0) == (
        EXACT + DRAWN_8 + " Too few patterns to trust: “the sun was rising.”, “the grass was cut.” (8 patterns: "
        "too few for the ± to be trusted either). The ranking, and whether the model is right, may change with "
        "another seed: some scores are estimates from too few patterns; 31 patterns score every candidate here "
        "exactly.")
    # fewer patterns than tokens to score; "sat." (3 patterns) is scored exactly, nothing to distrust
    fewer = [_estimate("the sun was rising.", -8.10, 5, 1.51), _estimate("sat.", -3.0, 2, 0.0)]
    assert ("Too few patterns to trust: “the sun was rising.” (4 patterns for 5 tokens: a pattern masks 1 to 5 of "
            "them, and some of those counts were never drawn). The ranking may change with another seed"
            in _elbo_note(fewer, elbo_samples=4))


def test_the_elbo_note_with_one_pattern_promises_no_plus_minus():
    """One pattern: 'pattern', not 'patterns'; no standard error is promised, since one value has no
    spread; the estimate is called untrustworthy."""
    note = _elbo_note([_estimate("the sun was rising.", -0.77, 5, 0.0), _estimate("the grass was cut.", -18.17, 5, 0.0)],
                      elbo_samples=1)
    assert note == (
        "ELBO: a candidate of at most 1 scored token is scored exactly, through every one of its masking patterns "
        "(2^L - 1 for L tokens), so its score has no ±. A longer one is scored through 1 pattern drawn at random "
        "(seed 0): its score is that one pattern's value, with no ± (a single value has no spread to work one out "
        "from), and it may be far from the score every pattern would give. Too few patterns to trust: “the sun was "
        "rising.”, “the grass was cut.” (1 pattern: a single draw, no ± to go with it). The ranking may change with "
        "another seed: some scores are estimates from too few patterns; 31 patterns score every candidate here "
        "exactly.")


def test_the_elbo_note_calls_a_ranking_within_its_errors_unsure_and_one_beyond_them_not():
    """64 patterns for 10 scored tokens (1023 patterns): enough to trust each estimate. Two scores
    2.00 apart with errors 2.0 and 1.5 (2.5 for their gap) may swap with another seed; 10.00 apart
    they may not. Ranked by the mean per token, the engine gives the errors per token too (a tenth)."""
    drawn_64 = (" A longer one is scored through 64 patterns drawn at random (seed 0): its score is an estimate, ± "
                "one standard error, worked out from how much those patterns' values differ, so with few patterns the "
                "± is a rough guess too. More patterns make it smaller.")
    exact_6 = EXACT.replace("at most 3", "at most 6")
    close = [_estimate("a", -30.0, 10, 2.0), _estimate("b", -32.0, 10, 1.5)]
    assert _elbo_note(close, elbo_samples=64) == (
        exact_6 + drawn_64 + " The ranking may change with another seed: “a” and “b” are 2.00 apart, less than 2 "
        "standard errors of that gap (2 × 2.50); 1023 patterns score every candidate here exactly.")
    apart = [_estimate("a", -30.0, 10, 2.0), _estimate("b", -40.0, 10, 1.5)]
    assert _elbo_note(apart, elbo_samples=64) == exact_6 + drawn_64
    per_token = [_estimate("a", -30.0, 10, 2.0), _estimate("b", -32.0, 10, 1.5)]
    for s in per_token:
        s.score, s.stderr = s.mean, s.stderr / len(s.tokens)
    assert "are 0.20 apart, less than 2 standard errors of that gap (2 × 0.25)" in _elbo_note(
        per_token, elbo_samples=64, reduction="mean")


def test_the_elbo_note_of_candidates_all_scored_exactly_says_so():
    assert _elbo_note([_estimate("sat.", -3.0, 2, 0.0), _estimate("ran.", -4.0, 3, 0.0)], elbo_samples=8) == (
        EXACT + " Every candidate here was.")


def test_the_elbo_settings_help_uses_the_pages_names():
    """The help under the scoring method and the ELBO's settings names the methods as the page's
    choices do, never as the code spells them."""
    from demo.declared import help_line

    method = help_line(ScoringSettings, "method")
    for page_name in ("1 mask", "+ right masks", "within-word left-to-right", "whole word masked",
                      "the decoder's own likelihood", "the masked diffusion ELBO"):
        assert page_name in method
    for line in (method, help_line(ScoringSettings, "elbo_samples"), help_line(ScoringSettings, "elbo_seed")):
        assert not re.search(r"\bsalazar\b|right_masks|within_word_l2r|whole_word|\belbo\b|method elbo", line), line
    assert help_line(ScoringSettings, "elbo_samples").startswith("Masked diffusion ELBO: how many masking patterns")
    assert help_line(ScoringSettings, "elbo_seed").startswith("Masked diffusion ELBO: which masking patterns")


@needs_shared
def test_the_elbo_says_which_scores_are_exact_and_what_its_plus_minus_is(monkeypatch):
    """With 8 patterns a text (2^3 - 1 = 7 fit), a candidate of 2 scored tokens is scored exactly (no
    ±) and one of 10 with a standard error; the page's note says so, with the samples and the seed
    the call sent, and that 8 patterns for 10 tokens are too few to trust; another seed draws other
    patterns. One pattern: no ±, neither beside the score nor promised by the note."""
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    short, long = "sat.", "sat quietly on the old red mat by it."
    ranked = rank_masked("The cat", f"{short}\n{long}", STANDIN_MLM.name, "elbo", 2, False, "completion", "",
                         elbo_samples=8, elbo_seed=3)
    by_text = {s.candidate: s for s in ranked.scores}
    assert [len(by_text[c].tokens) for c in (short, long)] == [2, 10]  # words and the full stop
    assert "ELBO: a candidate of at most 3 scored tokens is scored exactly" in ranked.summary
    assert "8 patterns drawn at random (seed 3)" in ranked.summary
    assert "8 patterns for 10 tokens" in ranked.summary and "may change with another seed" in ranked.summary
    single = html.unescape(rank_masked("The cat", f"{short}\n{long}", STANDIN_MLM.name, "elbo", 2, False,
                                       "completion", "", elbo_samples=1).summary)
    assert "through 1 pattern drawn at random (seed 0)" in single and "1 patterns" not in single
    assert "± one standard error" not in single and "±" not in "".join(_summary_scores(single).values())
    assert by_text[long].stderr > 0 and not by_text[short].stderr
    shown = _summary_scores(ranked.summary)
    assert "±" in shown[long] and "±" not in shown[short]
    other = rank_masked("The cat", f"{short}\n{long}", STANDIN_MLM.name, "elbo", 2, False, "completion", "",
                        elbo_samples=8, elbo_seed=4)
    assert {s.candidate: s.score for s in other.scores}[long] != by_text[long].score
