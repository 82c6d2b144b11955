"""The lesson above the tabs (demo.ui.lesson, assets/presets/lesson.json): every step loads its
tab's inputs, and each step's request, sent as the page sends it after loading, runs on the
offline models without a message."""

import html
import json
import re
from typing import NamedTuple

import pytest

from tests.conftest import STANDIN_MLM, needs_shared

pytest.importorskip("gradio")
from demo.paths import ASSETS  # noqa: E402
from demo.ui import lesson  # noqa: E402

REQUESTS = {"prompting": ["generate_mlm", "generate_causal", "generate_mlm_any_order"], "infill": ["infill_mlm", "infill_causal"], "ranking": ["rank_mlm", "rank_causal"],
            "length": ["probe_mlm", "probe_second"], "results": ["results"]}


def presets(tab: str) -> dict:
    return {p["name"]: p for p in json.loads((ASSETS / "presets" / f"{tab}.json").read_text())["presets"]}


@pytest.fixture(scope="module")
def app():
    from demo.ui.app import build_app
    return build_app()


def handler(app, name):
    return next(f for f in app.fns.values() if f.api_name == name or getattr(f.fn, "__name__", "") == name)


def test_the_lesson_has_about_six_steps_each_with_a_question():
    steps = lesson.steps()
    assert 6 <= len(steps) <= 10 and len({s["title"] for s in steps}) == len(steps)
    assert [s["tab"] for s in steps] == ["infill"] + ["prompting"] * 3 + ["ranking"] * 3 + ["length"] * 2 + ["results"]
    assert [s["title"][:2] for s in steps if "results-ablation" in s.get("opens", [])] == ["7.", "10"]
    for step in steps:
        assert step["do"] and step["look"] and step["question"].endswith("?")
        if step["tab"] in ("prompting", "infill", "ranking"):
            assert step["preset"] in presets(step["tab"]), step["preset"]


def test_loading_a_step_opens_its_tab_with_its_inputs(app):
    import gradio as gr
    load = handler(app, "load")
    for step in lesson.steps():
        tabs, *values = load.fn(step["title"])
        assert tabs.selected == step["tab"]
        loaded = {c.elem_id: v for c, v in zip(load.outputs[1:], values) if not _skipped(v)}
        if step["tab"] == "prompting":
            preset = presets("prompting")[step["preset"]]
            assert loaded["gen-preset"] == step["preset"] and loaded["gen-prompt"] == preset["prompt"]
            assert loaded["gen-max"] == preset["settings"]["max_new_tokens"]
            assert loaded["gen-any-order"] == step.get("any_order", False)
        elif step["tab"] == "infill":
            assert loaded["fill-preset"] == step["preset"]
            assert loaded["fill-text"] == presets("infill")[step["preset"]]["text"]
        elif step["tab"] == "ranking":
            preset = presets("ranking")[step["preset"]]
            assert loaded["rank-context"] == preset["context"]
            assert loaded["rank-candidates"] == "\n".join(preset["candidates"])
            assert (loaded["rank-variant"], loaded["rank-compare"]) == (step.get("method", "right_masks"),
                                                                        step.get("compare", "salazar"))
        elif step["tab"] == "length" and "sweep" in step:
            sweep = step["sweep"]
            assert loaded["sweep"] == {"__type__": "update", "open": True}
            assert [loaded[f"sweep-{k}"] for k in ("task", "values", "shots", "limit")] == \
                [sweep[k] for k in ("task", "values", "shots", "limit")]
        elif step["tab"] == "length":
            assert (loaded["probe-lengths"], loaded["probe-depths"]) == (step["lengths"], step["depths"])
        else:
            assert loaded["results-paper"] == step["papers"]
        opened = {c.elem_id for c, v in zip(load.outputs[1:], values) if isinstance(v, gr.Accordion) and v.open}
        assert opened == {"lesson", *step.get("opens", [])}  # the lesson stays open: a link reopens it
        filled = [c for c, v in zip(load.outputs[1:], values) if not _skipped(v) and not isinstance(v, gr.Accordion)]
        assert {tab_of(c) for c in filled} == {step["tab"]}  # the other tabs keep what they show


def tab_of(component) -> str:
    import gradio as gr
    while not isinstance(component, gr.Tab):
        component = component.parent
    return component.id


def _skipped(value) -> bool:
    return isinstance(value, dict) and value.get("__type__") == "update" and len(value) == 1


def run_request(app, name: str, loaded: dict, changed: dict | None = None) -> dict:
    """One request as the page sends it (the step's loaded inputs, the others as they are, ``changed``
    by elem_id): {elem_id: what the page shows, as text}, with the raw outputs under None."""
    import html
    import re
    request = handler(app, name)
    changed = changed or {}
    arguments = [changed.get(c.elem_id, loaded.get(c, c.value)) for c in request.inputs]
    outputs = request.fn(*arguments)
    if not isinstance(outputs, tuple):  # a streaming handler (the needle grid): its last view
        outputs = list(outputs)[-1]
    shown = {c.elem_id: re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", str(o)))).strip()
             for c, o in zip(request.outputs, outputs) if c.elem_id}
    return {**shown, None: outputs}


class Ran(NamedTuple):
    loaded: dict  # component -> the value the step loaded
    views: dict  # request name -> {elem_id: text shown, None: the raw outputs}


@pytest.fixture(scope="module")
def ran(app):
    """Every step loaded, then its tab's requests run once, in order (step 3 compares with step 2's
    run): {step number: its loaded inputs and {request name: ``run_request``'s view}}."""
    load, out = handler(app, "load"), {}
    for number, step in enumerate(lesson.steps(), 1):
        _, *values = load.fn(step["title"])
        loaded = {c: v for c, v in zip(load.outputs[1:], values) if not _skipped(v)}
        out[number] = Ran(loaded, {name: run_request(app, name, loaded)
                                   for name in (["sweep_masks"] if "sweep" in step else REQUESTS[step["tab"]])})
    return out


@needs_shared
def test_every_step_runs_on_the_offline_models(ran):
    """Load, then press the tab's button: each request, with the page's other inputs as they are."""
    for number, step in ran.items():
        for name, shown in step.views.items():
            text = " ".join(str(o) for o in shown[None])
            assert "demo-error" not in text, (number, name, text[:600])
            assert any(o not in ("", None) for o in shown[None]), (number, name)


# ---------------------------------------------------------------- the guide says what the page shows

def guide_paragraph(number: int) -> str:
    """Step ``number``'s paragraph of docs/lesson.md, its whitespace collapsed."""
    import re
    text = (ASSETS.parent / "docs" / "lesson.md").read_text()
    return " ".join(re.search(rf"\*\*{number}\. .*?(?=\n\n)", text, re.S).group(0).split())


def number_after(pattern: str, text: str) -> float:
    import re
    return float(re.search(pattern, text).group(1).replace(",", ""))


def work(text: str) -> tuple[int, int]:
    """(forward passes, tokens read) of a Work line."""
    import re
    passes, tokens = re.search(r"Work: ([\d,]+) forward pass(?:es)? · ([\d,]+) tokens? read", text).groups()
    return int(passes.replace(",", "")), int(tokens.replace(",", ""))


def ranked(view: dict, summary_id: str, candidates: list[str]) -> list[float]:
    """Each candidate's score as the summary prints it (2 decimals)."""
    import re
    return [number_after(re.escape(c) + r" score (-?[\d.]+)", view[summary_id]) for c in candidates]


def first_kept(trace: str) -> str:
    import re
    return re.search(r"kept '(.*?)'", trace).group(1).strip()


def table5() -> dict[str, float]:
    """The paper's Table 5, ReCoRD EM by our short name of each ranking method."""
    import pandas as pd

    from demo.evaluation.results import RANKING_METHODS
    table = pd.read_csv(ASSETS / "results" / "samuel2024_table5_ranking_ablation.csv")
    return {RANKING_METHODS[m][0]: em for m, em in zip(table.ranking_method, table.ReCoRD_EM)}


def _infill(app, ran):
    she = ran[1].views
    he = run_request(app, "infill_mlm", ran[1].loaded,
                     {"fill-text": presets("infill")["Who: 'he' after the blank"]["text"]})
    he_causal = run_request(app, "infill_causal", ran[1].loaded,
                            {"fill-text": presets("infill")["Who: 'he' after the blank"]["text"]})
    word = [v.split()[1] for v in (she["infill_mlm"]["fill-mlm-filled"], he["fill-mlm-filled"],
                                   she["infill_causal"]["fill-causal-filled"], he_causal["fill-causal-filled"])]
    assert word[2] == word[3]  # "the same for both texts"
    return [f'fills "{word[0]}" with "she" and "{word[1]}" with "he"', f'SmolLM2 writes "{word[2]}" for both']


def _appending(app, ran):
    mlm, causal = ran[2].views["generate_mlm"], ran[2].views["generate_causal"]
    import re
    windows = re.findall(r"this step: 1 forward pass · ([\d,]+) tokens read", mlm["gen-trace"])
    (passes, tokens), (c_passes, c_tokens) = work(mlm["gen-mlm-stats"]), work(causal["gen-causal-stats"])
    prompt = int(number_after(r"prompt (\d+) tokens", causal["gen-causal-stats"]))
    return [f"{passes} passes reading {tokens} tokens (its window grows from {windows[0]} to {windows[-1]} tokens)",
            f"SmolLM2's {c_passes} passes reading {c_tokens} (a {prompt}-token prompt, then {c_passes - 1} single tokens)"]


def _padding(app, ran):
    without, default = (first_kept(ran[n].views["generate_mlm"]["gen-trace"]) for n in (3, 2))
    return [f'writes "{without}" as its first token with no padding masks, against "{default}" with its default one']


def _two_ways(app, ran):
    paper, anyway = ran[4].views["generate_mlm"], ran[4].views["generate_mlm_any_order"]
    likelihood = r"Log-likelihood of this output: (-?[\d.]+)"
    return [f"the paper's way writes `{paper['gen-mlm-text']}` in {work(paper['gen-mlm-stats'])[0]} steps "
            f"(log-likelihood {number_after(likelihood, paper['gen-mlm-stats']):.1f})",
            f"the any-order way writes `` {anyway['gen-any-text']} `` in {work(anyway['gen-any-stats'])[0]} steps "
            f"({number_after(likelihood, anyway['gen-any-stats']):.1f})"]


def _copa(app, ran, number):
    """(right masks, one mask, causal) scores of COPA's right and wrong cause: step 5's with right
    masks and causal, and with one mask from step ``number``'s inputs."""
    candidates = presets("ranking")["COPA: shadow over the grass (cause)"]["candidates"]  # the right cause first
    one_mask = run_request(app, "rank_mlm", ran[number].loaded, {"rank-variant": "salazar"})
    return (ranked(ran[5].views["rank_mlm"], "rank-mlm-summary", candidates),
            ranked(one_mask, "rank-mlm-summary", candidates),
            ranked(ran[5].views["rank_causal"], "rank-causal-summary", candidates))


def heatmap_rows(view: dict) -> list[dict[str, tuple[float, int]]]:
    """A side's token heatmap as the page draws it, one row per candidate: {token: (log-prob,
    rank)}, the log-prob from the cell's colour value, the rank from its hover text."""
    from demo.ui.ranking import RankingOutputs
    cells = RankingOutputs(*view[None]).plot.data[0]
    return [{token: (logprob, int(number_after(r"rank (\d+)", hover)))
             for token, logprob, hover in zip(tokens, row, hovers)}
            for tokens, row, hovers in zip(cells.text, cells.z, cells.customdata)]


def _pll(app, ran):
    right_masks, one_mask, causal = _copa(app, ran, 5)
    assert one_mask[0] > one_mask[1] and right_masks[0] < right_masks[1] and causal[0] > causal[1]
    # each model's heatmap: the row of the right cause and of the wrong one
    (standin_sun, standin_grass), (smollm2_sun, smollm2_grass) = (
        sorted(heatmap_rows(ran[5].views[name]), key=lambda row: "sun" not in row) for name in ("rank_mlm", "rank_causal"))
    for row, last in ((standin_sun, "rising"), (standin_grass, "cut"), (smollm2_sun, "rising"), (smollm2_grass, "cut")):
        assert min(row, key=lambda token: row[token][0]) == last  # "the last word costs most"
        word = "sun" if last == "rising" else "grass"
        assert abs(row[word][0] - row["the"][0]) < 1.0  # "about what 'the' does"

    def cost(row, token):
        return f"{row[token][0]:.1f}"

    def the(sun, grass):  # "the" costs the same in both texts where the model reads only the text before it
        return " and ".join(dict.fromkeys((cost(sun, "the"), cost(grass, "the"))))

    assert standin_sun["sun"][1] == smollm2_sun["sun"][1] == 1
    return [f"with one mask it prefers the right answer ({one_mask[0]:.1f} against {one_mask[1]:.1f}), with the "
            f"paper's right masks it narrowly does not ({right_masks[0]:.1f} against {right_masks[1]:.1f})",
            f"SmolLM2 prefers the right answer ({causal[0]:.1f} against {causal[1]:.1f})",
            f'In both heatmaps the last word costs most ("rising" {cost(standin_sun, "rising")} and "cut" '
            f'{cost(standin_grass, "cut")} on the stand-in, {cost(smollm2_sun, "rising")} and '
            f'{cost(smollm2_grass, "cut")} on SmolLM2); "sun" and "grass" cost about what "the" does '
            f'({cost(standin_sun, "sun")} and {cost(standin_grass, "grass")} against '
            f'{the(standin_sun, standin_grass)} on the stand-in, {cost(smollm2_sun, "sun")} and '
            f'{cost(smollm2_grass, "grass")} against {the(smollm2_sun, smollm2_grass)} on SmolLM2), and "sun" is '
            f"both models' first guess"]


def _right_masks(app, ran):
    """The difference view's note (the step compares with one mask): each score with one mask
    minus with right masks (the figure's Δ), as the summaries' scores give it."""
    from demo.ui.ranking import RankingOutputs, compare_variants
    candidates = presets("ranking")["Multi-token word looks too likely (BERTs paper, 2.2)"]["candidates"]
    short, long = ranked(ran[6].views["rank_mlm"], "rank-mlm-summary", candidates)
    short_1, long_1 = ranked(run_request(app, "rank_mlm", ran[6].loaded, {"rank-variant": "salazar"}),
                             "rank-mlm-summary", candidates)
    loaded = {c.elem_id: v for c, v in ran[6].loaded.items()}
    first = RankingOutputs(*ran[6].views["rank_mlm"][None]).scores
    note = html.unescape(compare_variants(loaded["rank-context"], loaded["rank-candidates"], STANDIN_MLM.name,
                                          "right_masks", "salazar", first, 2, False, "completion", "", "auto",
                                          False).note)
    moved = [number_after(re.escape(c) + r" ([-+]\d+\.\d+)", note) for c in candidates]
    assert abs(moved[0] - (short_1 - short)) <= 0.011 and abs(moved[1] - (long_1 - long)) <= 0.011  # (2 decimals each)
    assert moved[1] > moved[0]  # one mask favours the long word: right masks take more from it
    return [f'"{candidates[0]}" {moved[0]:+.2f}, the long word {moved[1]:+.2f}']


def _decoder(app, ran):
    candidates = presets("ranking")["COPA: shadow over the grass (cause)"]["candidates"]
    decoder = ranked(ran[7].views["rank_mlm"], "rank-mlm-summary", candidates)
    right_masks, one_mask, _ = _copa(app, ran, 7)
    assert decoder[0] > decoder[1]
    paper = table5()
    return [f"{paper['decoder']:.1f} EM for the decoder's likelihood, {paper['right_masks2']:.1f} for the PLL with "
            f"2 right masks (the paper's method), {paper['salazar']:.1f} with one mask",
            f"the decoder's likelihood prefers the right cause ({decoder[0]:.1f} against {decoder[1]:.1f}), as one "
            f"mask does ({one_mask[0]:.1f} against {one_mask[1]:.1f}), while the PLL with right masks narrowly does "
            f"not ({right_masks[0]:.1f} against {right_masks[1]:.1f})"]


def _length(app, ran):
    import pandas as pd
    mlm, causal = ran[8].views["probe_mlm"]["probe-mlm-summary"], ran[8].views["probe_second"]["probe-causal-summary"]
    assert "exact match 0%" in mlm and "beyond the model's 512-token limit" in mlm and "exact match 100%" in causal
    grids = ASSETS / "needle_grids"
    standin, smollm2 = (pd.read_csv(grids / f) for f in ("minilm-l6-mlm-standin.csv", "smollm2-135m-instruct.csv"))
    answered = standin[standin.status == "ok"]
    found = smollm2.groupby("length")["correct"].mean()
    assert found.eq(1).all()
    from demo.ui.length_probe import precomputed_grids, show_precomputed
    note = show_precomputed(precomputed_grids()[0][1]).note  # the page's words for the stand-in's grid
    said = f"the needle found in {int(answered.correct.sum())} of the {len(answered)} it read"
    assert said in note
    runs, beyond = (int(number_after(pattern, mlm)) for pattern in (r"(\d+) of \d+ runs", r"(\d+) beyond the model's"))
    ran_cells, causal_cells = (int(number_after(r"over (\d+) answered", summary)) for summary in (mlm, causal))
    return [f'the stand-in answers {ran_cells} of its {runs} cells (the {beyond} past 512 tokens say "beyond limit" '
            f'and do not run) and SmolLM2 all {causal_cells}',
            f'its 768-token cells say "beyond limit"; it finds no needle at any length '
            f'(its precomputed grid: "{said}")',
            f"SmolLM2 finds all of them up to {found.index.max():,}"]


def _masks(app, ran):
    import pandas as pd
    sweep = next(o for o in ran[9].views["sweep_masks"][None] if isinstance(o, pd.DataFrame))
    step = lesson.steps()[8]["sweep"]
    top = sweep[sweep.score == sweep.score.max()]["value"].tolist()
    paper = table5()
    return [f"(ReCoRD EM: 1 mask {paper['salazar']:.1f}, +1 {paper['right_masks1']:.1f}, +2 "
            f"{paper['right_masks2']:.1f}, +3 {paper['right_masks3']:.1f})",
            f"{sweep.score.min():.0f} to {sweep.score.max():.0f}% at every N on {step['limit']} items, "
            f"{step['shots']} shots; best at N = {' and '.join(str(v) for v in top)}"]


def _results(app, ran):
    from demo.evaluation.results import SAMUEL, load_results
    frame = load_results()
    tables = set(frame[frame.paper == SAMUEL].table)
    assert {"Table 5", "Table 6"} <= tables
    from demo.ui.results_tab import ABLATION_TITLE
    opened = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "results-ablation")
    assert opened.label == ABLATION_TITLE  # the section the page shows under that heading
    return ["(BERTs paper, table 6 and figure 1)", ABLATION_TITLE]


GUIDE = {1: _infill, 2: _appending, 3: _padding, 4: _two_ways, 5: _pll, 6: _right_masks, 7: _decoder,
         8: _length, 9: _masks, 10: _results}


@needs_shared
@pytest.mark.parametrize("number", list(GUIDE))
def test_the_guide_quotes_what_the_step_shows(app, ran, number):
    """docs/lesson.md's figures for each step (the stand-in's, SmolLM2's, the paper's tables) are
    the ones the page shows when the step's requests run: the guide cannot drift from the page."""
    paragraph = guide_paragraph(number)
    for phrase in GUIDE[number](app, ran):
        assert phrase in paragraph, f"step {number}: the page shows {phrase!r}; docs/lesson.md says:\n{paragraph}"


@needs_shared
def test_each_ranking_steps_work_line_says_what_its_method_reads(ran):
    """The Work line under a ranking speaks of the method it ran: the decoder's likelihood reads the
    text before each token, never the whole text; the PLL reads the whole text, masked."""
    for number in (5, 6, 7):
        summary = ran[number].views["rank_mlm"]["rank-mlm-summary"]
        decoder = ran[number].loaded.get(next(c for c in ran[number].loaded if c.elem_id == "rank-variant")) == "decoder"
        assert ("the text before it" in summary) == decoder and ("each the whole text" in summary) == (not decoder)
    assert "one pass per text" in ran[5].views["rank_causal"]["rank-causal-summary"]


def test_the_lesson_cards_quote_table_5_as_the_results_hold():
    """The cards students read (steps 7 and 9) quote the paper's Table 5 as the shipped table has it."""
    paper = table5()
    steps = lesson.steps()
    assert (f"{paper['decoder']:.1f} EM for the decoder's likelihood against {paper['right_masks2']:.1f} for the PLL "
            f"with 2 right masks") in steps[6]["look"]
    assert (f"1 mask {paper['salazar']:.1f}, +1 {paper['right_masks1']:.1f}, +2 {paper['right_masks2']:.1f}, "
            f"+3 {paper['right_masks3']:.1f}") in steps[8]["look"]


def test_the_ranking_help_quotes_table_5_as_the_results_hold():
    """The right-masks setting's help and the Ranking tab's help name the counts as the Results
    tab does (right masks beyond the scored one) and quote the shipped figures."""
    from demo.declared import help_line
    from demo.settings import ScoringSettings
    from demo.ui import ranking
    paper = table5()
    assert (f"0 right masks {paper['salazar']:.1f}, +1 {paper['right_masks1']:.1f}, +2 {paper['right_masks2']:.1f}, "
            f"+3 {paper['right_masks3']:.1f} EM") in help_line(ScoringSettings, "right_masks")
    assert (f"at {paper['decoder']:.1f} EM, below the PLL with 2 right masks ({paper['right_masks2']:.1f})"
            in " ".join(ranking.HOW.split()))
