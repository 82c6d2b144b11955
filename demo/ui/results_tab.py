"""Results tab: the papers' published tables and our own runs, filtered, with the usual plots.

Wiring only: ``demo.evaluation.results.load_results`` reads ``assets/results/`` and
``filter_choices`` says which filter values keep some row; ``demo.evaluation.plots`` draws score vs
model size (the BERTs paper's Figure 1) and score vs shots (its Figure 4), both in one colour per
model (``model_colours``, made once from every model the tab can show).
"""

import re
from dataclasses import fields
from typing import Any, NamedTuple

import gradio as gr
import pandas as pd

from ..evaluation_settings import ResultsFilter
from .common import Dropdown, TabParts, message, tab_help
from .handlers import shows_errors
from .outputs import components, shown_in
from .reproduce_block import reproduce_block, reproduction
from .run_marker import run_ends, run_starts
from .settings_form import endpoint, setting_args, widget
from .sharing import shares

HELP = ("The papers' published numbers next to our runs: filter, then read score against model size "
        "and against the number of examples.")

HOW = """
Browse the numbers behind the claim: the BERTs paper (DeBERTa vs GPT-3 at 0, 1 and few shots,
every DeBERTa size, the ranking ablation), the ALBERT zero-shot NormPLL paper, the instruction
induction paper, and our own runs of `mlm-icl evaluate` (source *ours*). Filter, then
read the plots: **score vs model size** (the paper's Figure 1) and **score vs shots** (its
Figure 4), masked and causal LMs in the same panels. Plot points are plain means over the tasks
shown; the papers' own averages are rows of the table (task *average*), kept as printed.
"""

# the paper says which rows are ours (the download keeps every column, the source too)
SHOWN_COLUMNS = ["paper", "table", "group", "task_label", "model", "shots_label", "metric", "value",
                 "variant"]
SHOWN_NAMES = {"task_label": "task", "shots_label": "shots"}
DEFAULT_PAPER = "Samuel 2024, BERTs are Generative In-Context Learners"


class ResultsOutputs(NamedTuple):
    """The filtered results, as /results gives them (in this order)."""
    count: str = ""  # HTML: how many numbers from how many sources; or the message shown instead
    table: pd.DataFrame | None = None
    size_plot: Any = None  # Plotly figure: score vs model size (the BERTs paper's Figure 1)
    shots_plot: Any = None  # Plotly figure: score vs shots (its Figure 4)
    files: list[str] | None = None  # the rows as CSV and both figures as HTML pages
    python: str | None = None  # Reproduce: the Python call
    shell: str | None = None  # Reproduce: the command line

    showing = shown_in("count")  # Only ``message``; no stale table or plots.


CHAR_PX, CELL_PADDING_PX = 8.4, 16  # a character of the table's monospace font (14 px), a cell's padding
PAPER_LINES = 2  # a paper's name wraps onto at most this many lines


def _pieces(text: str) -> list[str]:
    """Where a browser may wrap a cell: after a space or a hyphen."""
    return [piece for piece in re.split(r"(?<=\s)|(?<=-)", text) if piece]


def _lines(text: str, chars: int) -> int:
    """Lines ``text`` takes wrapped at ``chars`` characters (greedy, as a browser wraps)."""
    lines, used = 1, 0
    for piece in _pieces(text):
        if used and used + len(piece.rstrip()) > chars:
            lines, used = lines + 1, 0
        used += len(piece)
    return lines


def _column_widths(frame: pd.DataFrame) -> list[str]:
    """Pixel widths of the shown columns: each as narrow as its longest word (a cell wraps
    between words, never inside one), a paper's name on at most PAPER_LINES lines."""
    widths = []
    for column in SHOWN_COLUMNS:
        values = [str(v) for v in frame[column].dropna().unique()]
        header = len(SHOWN_NAMES.get(column, column)) + 1  # bold, beside its menu button
        chars = max(header, *(len(piece.rstrip()) for value in values for piece in _pieces(value)))
        if column == "paper":
            while any(_lines(value, chars) > PAPER_LINES for value in values):
                chars += 1
        widths.append(f"{chars * CHAR_PX + CELL_PADDING_PX:.1f}px")
    return widths


ABLATION_NOTE = """
The BERTs paper's Table 5 ranks ReCoRD's candidates five ways (DeBERTa 1.4B, 0-shot): the
pseudo-log-likelihood with 1 mask, with 1, 2 (the paper's) or 3 more masks to the right of the
scored token, and the exact left-to-right likelihood, which is the decoder's own (`--method
decoder`). Beside it, our runs of `mlm-icl evaluate` ranked by the same methods (every task, model
and shots ranked by two or more), and their mean over the tasks ranked by all five. Our ranked
tasks are not ReCoRD, whose data needs the Hub; `docs/method.md` (section 3) gives the command
that runs the same ablation on it.
"""


ABLATION_TITLE = "Ranking methods: the paper's Table 5 beside our runs"


def _ranking_ablation(frame: pd.DataFrame, colours: dict[str, str]) -> gr.Accordion:
    """The paper's Table 5 beside our runs by ranking method: a table and a figure, drawn once
    from every row (the filters above leave it as it is), in a closed opener (returned: a lesson
    step opens it)."""
    from ..evaluation.plots import ranking_ablation_figure
    from ..evaluation.results import ablation_table, ranking_ablation

    rows = ranking_ablation(frame)
    with gr.Accordion(ABLATION_TITLE, open=False,
                      elem_id="results-ablation") as opener:
        gr.Markdown(ABLATION_NOTE)
        gr.Dataframe(value=ablation_table(rows), label="Score by ranking method (%)", interactive=False,
                     wrap=True, elem_id="results-ablation-table")
        gr.Plot(value=ranking_ablation_figure(rows, colours=colours), label="Score by ranking method",
                elem_id="results-ablation-plot")
    return opener


# A paper's chip holds its whole name (some 50 characters): its filter takes a phone's whole width
# (a row of its own there), so the name wraps between words, not letter by letter in a narrow column
PAPER_FILTER_PX = 320


def _filters(frame: pd.DataFrame, default_papers: list[str]) -> list:
    """A dropdown per ResultsFilter field, offering the values the tables hold."""
    from ..evaluation.results import FILTER_COLUMNS, filter_choices

    offered = filter_choices(ResultsFilter(papers=default_papers), frame)
    ids = dict(papers="paper", groups="group", models="model", shots="shots", tasks="task")
    rows = [("papers", "groups"), ("models", "shots", "tasks")]
    made = {}
    for row in rows:
        with gr.Row():
            for name in row:
                made[name] = widget(ResultsFilter, name, component=Dropdown, choices=offered[name], multiselect=True,
                                    value=default_papers if name == "papers" else [], elem_id=f"results-{ids[name]}",
                                    min_width=PAPER_FILTER_PX if name == "papers" else 160)
    return [made[name] for name in FILTER_COLUMNS]


def results_lookup(frame: pd.DataFrame, colours: dict[str, str]):
    """The /results endpoint over the tables ``frame`` (no model, no torch: it need not wait for
    the core import); an empty filter clears the stale view."""
    @shows_errors(ResultsOutputs.showing)
    @shares(ResultsOutputs.showing, models={}, said=False)  # a class opening the page asks for one view
    @endpoint(*setting_args(ResultsFilter, *(f.name for f in fields(ResultsFilter))), builds=ResultsFilter,
              derived=lambda values: {name: value or [] for name, value in values.items()})
    def lookup_results(settings: ResultsFilter):
        """Published results of the papers next to our runs, filtered (an empty filter keeps all)."""
        from ..app.downloads import download
        from ..evaluation.exports import figure_download
        from ..evaluation.plots import accuracy_vs_shots, accuracy_vs_size
        from ..evaluation.results import filter_results, no_match

        filters = settings
        rows = filter_results(filters, frame)
        if rows.empty:
            raise ValueError(no_match(filters, frame))
        shown = rows[SHOWN_COLUMNS].rename(columns=SHOWN_NAMES)
        note = message(f"{len(rows)} numbers from {rows['paper'].nunique()} source(s), "
                       f"{rows['model'].nunique()} model(s).", "note")
        size = accuracy_vs_size(rows, "Score vs model size", colours)
        by_shots = accuracy_vs_shots(rows, "Score vs number of shots", colours)
        csv = download(rows, "results", *(filters.papers or ["all"])[:2])
        files = [csv, figure_download(size, csv, "results-vs-size"),
                 figure_download(by_shots, csv, "results-vs-shots")]
        python, shell = reproduction("results", None, None, filters)
        return ResultsOutputs(count=note, table=shown, size_plot=size, shots_plot=by_shots, files=files,
                              python=python, shell=shell)
    return lookup_results


def narrowing(frame: pd.DataFrame):
    """Each filter offers only the values that keep some row given the others (choices only: a
    value never changes here)."""
    from ..evaluation.results import FILTER_COLUMNS, filter_choices

    def narrow(*chosen):
        try:
            filters = ResultsFilter(**{name: values or [] for name, values in zip(FILTER_COLUMNS, chosen)})
            offered = filter_choices(filters, frame)
        except (ValueError, TypeError):  # values no page sends: the lookup says what is wrong
            return [gr.skip()] * len(chosen)
        return [gr.Dropdown(choices=offered[name]) for name in FILTER_COLUMNS]
    return narrow


def _views(frame: pd.DataFrame) -> dict:
    """The count, the table, both figures, the files and the Reproduce block, by output name."""
    views = dict(count=gr.HTML(elem_id="results-count"),
                 table=gr.Dataframe(label="Results", elem_id="results-table", interactive=False, max_height=420,
                                    wrap=True,  # pixel widths: on a phone the table scrolls sideways
                                    column_widths=_column_widths(frame)))
    # side by side on a wide screen, one above the other on a phone (a column wraps below its
    # min_width); each figure stacks its panels, so it reads the same at either width
    with gr.Row(equal_height=False):
        with gr.Column(min_width=520):
            views["size_plot"] = gr.Plot(label="Score vs model size (Figure 1)", elem_id="results-size-plot")
        with gr.Column(min_width=520):
            views["shots_plot"] = gr.Plot(label="Score vs shots (Figure 4)", elem_id="results-shots-plot")
    views["files"] = gr.File(label="These results (CSV, every column) and both figures (HTML)",
                             file_count="multiple", elem_id="results-csv")
    views["python"], views["shell"] = reproduce_block("results-reproduce")
    return views


def build() -> TabParts:
    """The Results tab's components and events (call inside a gr.Blocks/gr.Tab context).

    Its first view is the default filter's tables (none when the tables cannot be read); a lesson
    step sets the papers shown.
    """
    from ..evaluation.plots import model_colours
    from ..evaluation.results import load_results

    tab_help(HELP, HOW)
    try:
        frame = load_results()
    except ValueError as err:  # assets/results missing or broken: say so, keep the app up
        gr.Markdown(f"**The result tables could not be read:** {err}", elem_id="results-error")
        return TabParts()
    colours = model_colours(frame)  # every figure, every filter: a model keeps its colour
    filters = _filters(frame, [DEFAULT_PAPER] if DEFAULT_PAPER in set(frame["paper"]) else [])
    outputs = components(ResultsOutputs, **_views(frame))
    ablation = _ranking_ablation(frame, colours)  # the filters' view above, this fixed view under it
    lookup_results = results_lookup(frame, colours)
    # A person's edit of a filter looks the view up and narrows the others' choices. Only an edit
    # (``input``): a narrowed filter's ``change`` would fire these again, for as long as the page is open.
    looked_up = gr.on([control.input for control in filters], lookup_results, filters, outputs, api_name="results",
                      show_progress="minimal", js=run_starts("results"))
    narrow = narrowing(frame)
    narrowed = gr.on([control.input for control in filters], narrow, filters, filters,
                     api_visibility="private", show_progress="hidden", concurrency_limit=None,
                     js=run_starts("results"))
    run_ends("results", looked_up, narrowed)
    # the first view: the app runs this once when a page loads; a lesson step sets the papers
    # shown, then looks them up
    return TabParts(first_view=(lookup_results, filters, outputs), lesson_fields=tuple(filters), openers=(ablation,),
                    presses=lambda step: (lookup_results,),
                    lesson_values=lambda step: [step["papers"], [], [], [], []],
                    after_lesson=((lookup_results, filters, outputs), (narrow, filters, filters)))
