"""Results tab: the papers' published tables and our own runs, filtered, with the usual plots.

Wiring only: ``demo.evaluation.results.load_results`` reads ``assets/results/``; ``demo.evaluation.plots`` draws
score vs model size (the BERTs paper's Figure 1) and score vs shots (its Figure 4).
"""

from typing import Any, NamedTuple

import gradio as gr
import pandas as pd

from ..settings import ResultsFilter
from .common import Dropdown, TabParts, message, reproduce_block, reproduction, shows_errors, tab_help
from .outputs import components

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

SHOWN_COLUMNS = ["paper", "table", "group", "task_label", "model", "shots_label", "metric", "value",
                 "variant", "source"]
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

    @classmethod
    def showing(cls, message: str) -> "ResultsOutputs":
        """Only ``message``; no stale table or plots."""
        return cls(count=message)


def _choices(frame: pd.DataFrame, column: str) -> list[str]:
    return sorted(str(v) for v in frame[column].dropna().unique())


def build() -> TabParts:
    """The Results tab's components and events (call inside a gr.Blocks/gr.Tab context).

    Its first view is the default filter's tables (none when the tables cannot be read); a lesson
    step sets the papers shown.
    """
    from ..evaluation.results import load_results

    tab_help(HELP, HOW)
    try:
        frame = load_results()
    except ValueError as err:  # assets/results missing or broken: say so, keep the app up
        gr.Markdown(f"**The result tables could not be read:** {err}", elem_id="results-error")
        return TabParts()

    default_papers = [DEFAULT_PAPER] if DEFAULT_PAPER in set(frame["paper"]) else []
    with gr.Row():
        papers = Dropdown(
            choices=_choices(frame, "paper"), value=default_papers, multiselect=True, label="Paper",
            elem_id="results-paper",
            info="Which source: a paper's published tables, or 'ours' (runs of mlm-icl evaluate). "
                 "Empty = all.")
        groups = Dropdown(
            choices=_choices(frame, "group"), value=[], multiselect=True, label="Task group",
            elem_id="results-group",
            info="SuperGLUE, language modeling, translation, question answering, ... Empty = all.")
    with gr.Row():
        models = Dropdown(
            choices=_choices(frame, "model"), value=[], multiselect=True, label="Model",
            elem_id="results-model", info="Models to keep (masked and causal). Empty = all.")
        shots = Dropdown(
            choices=_choices(frame, "shots_label"), value=[], multiselect=True, label="Shots",
            elem_id="results-shots",
            info="Number of in-context examples (few-shot = the paper's k per task). Empty = all.")
        tasks = Dropdown(
            choices=_choices(frame, "task_label"), value=[], multiselect=True, label="Task",
            elem_id="results-task", info="Single tasks to keep. Empty = all.")
    count = gr.HTML(elem_id="results-count")
    table = gr.Dataframe(label="Results", elem_id="results-table", interactive=False, max_height=420,
                         wrap=True,  # pixel widths: on a phone the table scrolls sideways, stays readable
                         column_widths=["220px", "80px", "140px", "120px", "160px", "90px", "110px",
                                        "70px", "150px", "80px"])
    with gr.Row():
        size_plot = gr.Plot(label="Score vs model size (Figure 1)", elem_id="results-size-plot")
    with gr.Row():
        shots_plot = gr.Plot(label="Score vs shots (Figure 4)", elem_id="results-shots-plot")

    # no model, no torch: need not wait for the core import; an empty filter clears the stale view
    @shows_errors(ResultsOutputs.showing)
    def lookup_results(papers, groups, models, shots, tasks):
        """Published results of the papers next to our runs, filtered (an empty filter keeps all).

        Args:
            papers: papers to show ("ours" for our runs)
            groups: task groups
            models: models, as the tables name them
            shots: numbers of demonstrations, e.g. "0-shot"
            tasks: tasks, as the tables name them
        """
        from ..evaluation.exports import download, figure_download
        from ..evaluation.plots import accuracy_vs_shots, accuracy_vs_size
        from ..evaluation.results import filter_results

        filters = ResultsFilter(papers=papers or [], groups=groups or [], models=models or [],
                                shots=shots or [], tasks=tasks or [])
        rows = filter_results(filters, frame)
        if rows.empty:
            raise ValueError("No result matches these filters: remove some of them.")
        shown = rows[SHOWN_COLUMNS].rename(columns=SHOWN_NAMES)
        note = message(f"{len(rows)} numbers from {rows['paper'].nunique()} source(s), "
                       f"{rows['model'].nunique()} model(s).", "note")
        size = accuracy_vs_size(rows, "Score vs model size")
        by_shots = accuracy_vs_shots(rows, "Score vs number of shots")
        csv = download(rows, "results", *(papers or ["all"])[:2])
        files = [csv, figure_download(size, csv, "results-vs-size"),
                 figure_download(by_shots, csv, "results-vs-shots")]
        python, shell = reproduction("results", None, None, filters)
        return ResultsOutputs(count=note, table=shown, size_plot=size, shots_plot=by_shots, files=files,
                              python=python, shell=shell)

    filters = [papers, groups, models, shots, tasks]
    csv = gr.File(label="These results (CSV, every column) and both figures (HTML)",
                  file_count="multiple", elem_id="results-csv")
    python, shell = reproduce_block("results-reproduce")
    outputs = components(ResultsOutputs, count=count, table=table, size_plot=size_plot, shots_plot=shots_plot,
                         files=csv, python=python, shell=shell)
    gr.on([control.change for control in filters], lookup_results, filters, outputs, api_name="results",
          show_progress="minimal")
    # the first view: the app runs this once when a page loads; a lesson step sets the papers shown
    return TabParts(first_view=(lookup_results, filters, outputs), lesson_fields=tuple(filters),
                    lesson_values=lambda step: [step["papers"], [], [], [], []])
