"""Length probe tab: the BERTs paper's needle in a haystack, run live on a small grid, two models;
below it, how many masks? (``demo.ui.mask_sweep``).

Wiring only: ``demo.evaluation.haystack.run_grid`` runs the grid, ``demo.evaluation.plots.needle_heatmap`` draws it;
precomputed grids are the CSV files in ``assets/needle_grids/``.
"""

import functools
from pathlib import Path
from typing import Any, NamedTuple

import gradio as gr
import pandas as pd

from ..app import budget
from ..app.catalog import Catalog, standin_note
from ..app.limits import check_grid, whole
from ..app.shared_results import cut_short
from ..evaluation_settings import GridSettings
from ..paths import ASSETS
from . import mask_sweep
from .common import TabParts, deployment, message, tab_help
from .handlers import handler, shows_errors
from .loading import load
from .outputs import FigureOutputs, components, shown_in
from .pickers import model_note
from .reproduce_block import reproduction
from .run_marker import run_ends, run_starts
from .settings_form import Setting, endpoint, model_argument, panel, setting_args, widget
from .sides import KIND_NAMES, side_columns, side_pickers

GRIDS = ASSETS / "needle_grids"

HELP = ("Can the model find a number hidden in a long text? Each cell of the grid is a text length "
        "and the depth the number hides at.")

HOW = """
A random 6-digit number is hidden in public-domain filler text at some **depth** (0 = start,
1 = end), the whole prompt being **length** tokens long; the model must answer with exactly 6
digits. A cell shows the share of runs answered exactly. Models with absolute positions (BERT,
RoBERTa, ALBERT, OPT, GPT-2) cannot read past their limit: those cells say so instead of running.
DeBERTa's relative positions let it go beyond the 512 tokens it was trained on (the paper's
Figure 3). Small grids run here live; larger ones computed offline are listed at the bottom.
"""


class PrecomputedGridOutputs(NamedTuple):
    """A grid computed offline, from assets/needle_grids/."""
    plot: Any = None  # Plotly figure: its heatmap
    note: str = ""  # HTML: where it comes from; or the message shown instead

    showing = shown_in("note")


def precomputed_grids() -> list[tuple[str, str]]:
    """(label, value) for every model of every grid CSV in assets/needle_grids/."""
    choices = []
    for path in sorted(GRIDS.glob("*.csv")) if GRIDS.is_dir() else []:
        try:
            models = pd.read_csv(path, usecols=["model"], dtype=str)["model"].unique()
        except (ValueError, OSError):  # not a grid file: not offered
            continue
        # (the file named only where it is not the model's own: a phone shows some 30 characters)
        choices += [(model if model.lower() == path.stem.lower() else f"{model} ({path.stem})",
                     f"{path.name}::{model}") for model in models]
    return choices


def _side(catalog: Catalog, model: str) -> tuple[int, bool]:
    """Where a precomputed grid's model goes: masked LMs first, causal ones last, models the
    catalog does not know between; the offline stand-in (a masked LM) after real ones."""
    standin = standin_note(model) is not None
    name = Path(model).name.casefold()
    kind = "masked" if standin else next(
        (m.kind for m in catalog.models if Path(m.name).name.casefold() == name), None)
    return {"masked": 0, None: 1, "causal": 2}[kind], standin


def _figure(table: pd.DataFrame, title: str, lm=None):
    from ..evaluation.plots import needle_heatmap

    return needle_heatmap(table, title=title,
                          pretrained_length=getattr(lm, "pretrained_length", None),
                          max_length=getattr(lm, "max_length", None))


def _short(name: str) -> str:
    """A model's name as a plot title: a local path becomes its folder or file name."""
    return Path(name).name if name.startswith(("/", ".", "~")) else name


def _summary(lm, table: pd.DataFrame, grid: GridSettings) -> str:
    answered = table[table["status"] == "ok"]
    beyond = int((table["status"] == "beyond_limit").sum())
    accuracy = f"{answered['correct'].mean():.0%}" if len(answered) else "n/a"
    line = (f"{len(table)} of {grid.cells} runs · exact match {accuracy} over {len(answered)} answered"
            + (f" · {beyond} beyond the model's {lm.max_length}-token limit" if beyond else "")
            + (" · decoded with the prefix cache" if (table["cache"] == "prefix").any() else ""))
    trained = ""  # relative positions run past pretraining: say so
    if lm.max_length is None and lm.pretrained_length and max(grid.lengths) > lm.pretrained_length:
        why = (": its enhanced mask decoder's position table ends there, and later positions reuse its "
               "last row (docs/method.md)" if lm.emd else "")
        trained = message(f"Lengths past {lm.pretrained_length:,} tokens are beyond what {lm.family.name} "
                          f"read in pretraining{why}.", "note")
    return f"<div>{model_note(lm)}</div><div>{line}</div>{trained}"


def page_grid(values: dict) -> dict:
    """GridSettings' values from the page's (by name): an empty seed 0."""
    seed = values.get("seed")
    return dict(seed=0 if seed in (None, "") else whole(seed))


def _stream(model_name, kind, grid: GridSettings):
    """The FigureOutputs after every finished cell; the grid stops at the time limit."""
    from ..app.budget import grid_work
    from ..evaluation.haystack import iter_grid  # torch: imported on first use

    check_grid(grid, deployment().settings)
    lm = load(model_name, kind)
    grid_work(lm, grid).check(deployment().settings)  # refused before it runs
    python, shell = reproduction("probe", model_name, kind, grid)
    table = None
    for table in iter_grid(lm, grid, model_name=lm.label, progress=True,
                           time_limit=deployment().settings.max_request_seconds):
        if len(table):
            figure = _figure(table, lm.label, lm)
            yield FigureOutputs(plot=figure, summary=_summary(lm, table, grid), table=table,
                              files=_downloads(table, figure, model_name), python=python, shell=shell)
    if len(table) < grid.cells:
        cut_short()  # stopped by the time limit: not an answer to share
        figure = _figure(table, lm.label, lm) if len(table) else None
        stopped = message(f"Stopped after {deployment().settings.max_request_seconds:.0f} s, the time one request may take "
                          f"here: {len(table)} of {grid.cells} runs are shown. Run fewer or shorter cells, "
                          f"or the whole grid on your own machine with mlm-icl probe.", "note")
        yield FigureOutputs(plot=figure, summary=_summary(lm, table, grid) + stopped, table=table,
                          files=_downloads(table, figure, model_name) if figure else None,
                          python=python, shell=shell)


def _downloads(table, figure, model_name) -> list[str]:
    """The grid as CSV and its heatmap as a standalone HTML page (a PNG comes from the plot's own
    camera button, drawn by the browser)."""
    from ..app.downloads import download
    from ..evaluation.exports import figure_download
    csv = download(table, "needle-grid", model_name)
    return [csv, figure_download(figure, csv, "needle-grid", model_name)]


GRID = (model_argument(),
        *setting_args(GridSettings, "lengths", "depths", "repetitions", "seed"))  # what both grids take


def grid_estimate(grid: GridSettings, arguments: dict, kind: str, parameters: float) -> budget.Work:
    """One grid's work, from the request's settings (``handlers.handler``'s ``estimate``)."""
    return budget.estimated_grid_work(kind, parameters, grid.lengths, len(grid.depths) * grid.repetitions)


@handler("probe", FigureOutputs.showing, estimate=grid_estimate)
@endpoint(*GRID, Setting(GridSettings, "cache"), builds=GridSettings, derived=page_grid)
def probe_masked(model_name, settings: GridSettings, progress=gr.Progress(track_tqdm=True)):
    """Needle in a haystack with a masked LM: can it find a number hidden at each depth of each
    prompt length? Streams the grid as it fills in."""
    yield from _stream(model_name, "masked", settings)


@handler("probe", FigureOutputs.showing, estimate=grid_estimate, models={"model_name": None})
@endpoint(*GRID, builds=GridSettings, derived=page_grid)
def probe_second(model_name, settings: GridSettings, progress=gr.Progress(track_tqdm=True)):
    """Needle in a haystack with a second model (a causal LM, or any model in its natural kind)."""
    if not model_name:
        yield FigureOutputs.showing(message("Skipped: no second model picked.", "note"))
        return
    yield from _stream(model_name, None, settings)


@shows_errors(PrecomputedGridOutputs.showing)  # a bundled CSV: no GPU slot, no wait for torch
@functools.lru_cache(maxsize=16)  # static files; a page load asks for the plot and the note
def show_precomputed(choice):
    if not choice:
        return PrecomputedGridOutputs()
    name, _, model = choice.partition("::")
    path = GRIDS / name
    if not path.is_file():
        raise ValueError(f"No precomputed grid named {name!r}.")
    table = pd.read_csv(path, dtype={"needle": str, "answer": str, "model": str})
    rows = table[table["model"] == model]
    if rows.empty:
        raise ValueError(f"{name} holds no runs of {model!r}.")
    caveat = standin_note(model)
    read = rows[rows["status"] == "ok"] if "status" in rows else rows
    beyond = f"; {len(rows) - len(read)} beyond the model's length limit, not run" if len(read) < len(rows) else ""
    note = message(f"{name}: {len(rows)} runs of {model}, computed offline with mlm-icl probe: the needle found "
                   f"in {int(read['correct'].sum())} of the {len(read)} it read{beyond}.", "note")
    return PrecomputedGridOutputs(plot=_figure(rows, _short(model)),
                                  note=note + (message(caveat, "note") if caveat else ""))


SIDE_LABELS = {"masked": KIND_NAMES["masked"], "causal": "Compared model"}


def _precomputed(catalog: Catalog) -> tuple[list, list]:
    """Two precomputed grids side by side: (the grid each shows first, their outputs)."""
    gr.Markdown("### Precomputed grids")
    grids = precomputed_grids()
    # As the live grids above: a masked LM's grid on the left, a causal LM's on the right; of
    # two of a kind, a real model's before the offline stand-in's (labelled as such).
    ordered = sorted(grids, key=lambda choice: _side(catalog, choice[1].partition("::")[2]))
    defaults = [ordered[0][1] if ordered else None, ordered[-1][1] if len(ordered) > 1 else None]
    shown = []
    with gr.Row():
        for k, default in enumerate(defaults):
            with gr.Column():
                picker = gr.Dropdown(
                    choices=grids, value=default, label="Precomputed grid", elem_id=f"probe-precomputed-{k}",
                    info="Larger grids computed offline with `mlm-icl probe` (assets/needle_grids/).")
                note = gr.HTML(elem_id=f"probe-precomputed-note-{k}")
                plot = gr.Plot(label="Precomputed grid", elem_id=f"probe-precomputed-plot-{k}")
                view = components(PrecomputedGridOutputs, plot=plot, note=note)
                picker.change(show_precomputed, picker, view, api_visibility="private")
                shown += view
    return defaults, shown


def build(catalog: Catalog):
    """The Length probe tab's components and events (call inside a gr.Blocks/gr.Tab context).

    Its first view shows the precomputed grids; a lesson step fills its lengths and depths."""
    tab_help(HELP, HOW)
    masked_model, causal_model = side_pickers(catalog, "probe", "Compare with", any_kind=True)
    decoding = widget(GridSettings, "cache", elem_id="probe-decoding")
    # a short first grid, one run a cell: a page's request finishes in seconds
    grid = panel(GridSettings, [tuple(t.name for t in GRID if isinstance(t, Setting))], "probe", dict(
        lengths="128, 256", depths="0, 0.5, 1", repetitions=1))
    run = gr.Button("Run the grid", variant="primary", elem_id="probe-run")
    gr.Markdown(f"<sub>At most {deployment().settings.max_grid_cells} runs (lengths x depths x repetitions) and "
                f"{deployment().settings.max_grid_tokens:,} tokens per request here (the paper went to 12,288); "
                f"the heatmap fills in run by run. The compared model always decodes exactly.</sub>")
    sides = side_columns("probe", {
        "plot": lambda kind, elem_id: gr.Plot(label=SIDE_LABELS[kind], elem_id=elem_id),
        "summary": lambda kind, elem_id: gr.HTML(elem_id=elem_id),
        "files": lambda kind, elem_id: gr.File(label="The grid (CSV) and its heatmap (HTML)",
                                               file_count="multiple", elem_id=elem_id)})
    with gr.Accordion("Every run (needle, answer, seconds)", open=False):
        with gr.Row():
            for kind in SIDE_LABELS:
                sides[kind]["table"] = gr.Dataframe(label=f"{SIDE_LABELS[kind]} runs", interactive=False)
    defaults, shown = _precomputed(catalog)

    # Grids are long jobs: their own queue, so rankings and generations never wait behind them.
    masked_event = run.click(probe_masked, probe_masked.inputs(dict(grid, model_name=masked_model, cache=decoding)),
                             components(FigureOutputs, **sides["masked"]),
                             api_name="probe_mlm", concurrency_id=probe_masked.group,
                             show_progress_on=sides["masked"]["plot"], js=run_starts("probe"))
    causal_event = run.click(probe_second, probe_second.inputs(dict(grid, model_name=causal_model)),
                             components(FigureOutputs, **sides["causal"]),
                             api_name="probe_second", concurrency_id=probe_second.group,
                             show_progress_on=sides["causal"]["plot"], js=run_starts("probe"))
    run_ends("probe", masked_event, causal_event)

    sweep = mask_sweep.build(catalog)  # how many masks? below the needle grids

    def first_view():  # computed when a page loads, not when the app starts
        return [part for d in defaults for part in (show_precomputed(d) if d else PrecomputedGridOutputs())]

    def lesson_values(step: dict) -> list:
        """A grid step fills the lengths and depths; a sweep step opens the sweep with its task,
        numbers of masks, shots and items."""
        if "sweep" not in step:
            return [step["lengths"], step["depths"]] + [gr.update()] * len(sweep)
        s = step["sweep"]
        return [gr.update(), gr.update(), gr.update(open=True), s["task"], s["values"], s["shots"], s["limit"]]

    return TabParts(first_view=(first_view, [], shown), lesson_fields=(grid["lengths"], grid["depths"], *sweep),
                    lesson_values=lesson_values,
                    presses=lambda step: (mask_sweep.sweep_masks,) if "sweep" in step else (probe_masked, probe_second))
