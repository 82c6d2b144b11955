"""How many masks? In the Length probe tab, below the needle grid: a masked LM evaluated on one
task at each number of padding masks (generation) or right masks (ranking).

Wiring only: ``demo.evaluation.mask_sweep`` runs the sweep (the evaluator at each value),
``demo.evaluation.plots.mask_sweep_plot`` draws it, ``demo.app.budget.sweep_work`` counts it.
"""

from dataclasses import replace

import gradio as gr
import pandas as pd

from ..app import budget
from ..app.catalog import Catalog
from ..app.shared_results import cut_short
from ..evaluation_settings import SweepSettings
from .common import Dropdown, deployment, escape, message
from .handlers import handler
from .loading import load
from .outputs import FigureOutputs, components
from .pickers import model_note, model_picker
from .reproduce_block import reproduce_block, reproduction
from .run_marker import run_ends, run_starts
from .settings_form import Setting, endpoint, model_argument, panel, setting_args, widget

SYMBOLS = {"padding_masks": "p", "right_masks": "N"}
SHOWN = ["value", "metric", "score", "stderr", "n", "seconds"]  # the table's columns in the page

HOW = """
The paper fixes two numbers of masks by hand. **Padding masks** (p) follow the predicted
`[MASK]` when the model generates, so the end token does not sit right after it; the paper uses
its family's default (p = 2 for DeBERTa, pretrained to fill spans of up to 3 tokens).
**Right masks** (N) hide the tokens right of each scored token of the PLL; the paper ranks with
N = 2 (its Table 5). Each point below is the evaluator's score on the same items and
demonstrations at one number of masks; the star is the paper's choice. "Masks Can Be
Distracting" (arXiv 2511.21338) finds that more appended masks hurt masked diffusion LMs.
"""


def task_choices(setting: str) -> list[tuple[str, str]]:
    """(label, name) of the few-shot tasks ``setting`` acts in whose data are on this machine."""
    from ..evaluation.mask_sweep import sweep_tasks
    tasks = sweep_tasks(setting, deployment().settings.data_root or None)
    return [(f"{t.title} ({t.name})", t.name) for t in tasks if t.max_shots != 0]


def _default_task(setting: str, choices: list[tuple[str, str]]) -> str | None:
    from ..evaluation.mask_sweep import DEFAULT_TASKS
    default = DEFAULT_TASKS.get(setting)
    return default if any(name == default for _, name in choices) else None


def _summary(lm, table: pd.DataFrame, sweep: SweepSettings) -> str:
    metric = table[table["metric"] == table["metric"].iloc[0]]
    top = metric[metric["score"] >= metric["score"].max() - 1e-9]  # every value that reaches the best: a tie is a tie
    best = top.iloc[0]
    symbol, paper = SYMBOLS[sweep.sweep], int(table["paper_value"].iloc[0])
    at_paper = metric[metric["value"] == paper]
    paper_text = (f"{at_paper['score'].iloc[0]:.1f}" if len(at_paper) else "not run")
    if len(top) > 1 and paper in set(top["value"]):
        paper_text += " (tied for best)"
    where = (f"at {symbol} = {int(best['value'])}" if len(top) == 1 else
             f"a tie at {symbol} = {', '.join(str(int(v)) for v in sorted(top['value']))}")
    line = (f"{escape(table['task'].iloc[0])}, {int(table['shots'].iloc[0])}-shot, {int(best['n'])} items · "
            f"best {escape(best['metric'])} {best['score']:.1f}, {where} · the "
            f"paper's choice {symbol} = {paper}: {paper_text}")
    return f"<div>{model_note(lm)}</div><div>{line}</div>"


def _downloads(table, figure, model_name) -> list[str]:
    from ..app.downloads import download
    from ..evaluation.exports import figure_download
    csv = download(table, "mask-sweep", model_name)
    return [csv, figure_download(figure, csv, "mask-sweep", model_name)]


def sweep_estimate(sweep: SweepSettings, arguments: dict, kind: str, parameters: float) -> budget.Work:
    """A sweep's work, from the request's settings (``handlers.handler``'s ``estimate``)."""
    return budget.estimated_sweep_work(kind, parameters, sweep.sweep, len(sweep.values), sweep.limit)


@handler("probe", FigureOutputs.showing, estimate=sweep_estimate)
@endpoint(model_argument("the masked LM"),
          Setting(SweepSettings, "sweep", "setting"), *setting_args(SweepSettings, "task", "values", "shots", "limit"),
          builds=SweepSettings, derived=lambda values: dict(data_root=deployment().settings.data_root or None))
def sweep_masks(model_name, settings: SweepSettings, progress=gr.Progress(track_tqdm=True)):
    """How many masks? A masked LM evaluated on one task at each number of padding masks
    (generation) or right masks (ranking), the paper's choice marked. Streams the curve value by value."""
    from ..evaluation.mask_sweep import iter_sweep
    from ..evaluation.plots import mask_sweep_plot

    sweep = settings
    lm = load(model_name, "masked")
    budget.sweep_work(lm, sweep).check(deployment().settings)  # refused before it runs
    python, shell = reproduction("sweep", model_name, "masked", replace(sweep, data_root=None))
    seconds = deployment().settings.max_request_seconds
    table = None
    for table in iter_sweep(lm, sweep, model_name=lm.label, progress=True, time_limit=seconds):
        figure = mask_sweep_plot(table)
        yield FigureOutputs(plot=figure, summary=_summary(lm, table, sweep), table=table[SHOWN],
                           files=_downloads(table, figure, model_name), python=python, shell=shell)
    done = 0 if table is None else table["value"].nunique()
    if done < len(sweep.values):
        cut_short()  # stopped by the time limit: not an answer to share
        stopped = message(f"Stopped after {seconds:.0f} s, the time one request may take here: {done} of "
                          f"{len(sweep.values)} values are shown. Evaluate fewer items or values, or the "
                          f"whole sweep on your own machine with mlm-icl probe --sweep.", "note")
        yield FigureOutputs(plot=mask_sweep_plot(table) if done else None,
                           summary=(_summary(lm, table, sweep) if done else "") + stopped,
                           table=table[SHOWN] if done else None, python=python, shell=shell)


def build(catalog: Catalog) -> tuple:
    """The "How many masks?" accordion (call inside the Length probe tab); returns what a lesson
    step fills: the accordion (to open it), the task, the numbers of masks, the shots, the items."""
    with gr.Accordion("How many masks?", open=False, elem_id="sweep") as opener:
        gr.Markdown("What do the paper's extra masks do? One task, evaluated at each number of masks.")
        with gr.Accordion("How does this work?", open=False):
            gr.Markdown(HOW)
        model = model_picker(catalog, "masked", "Masked LM", "sweep-mlm")
        with gr.Row():
            setting = widget(SweepSettings, "sweep", value="right_masks", elem_id="sweep-what")
            choices = task_choices("right_masks")
            task = widget(SweepSettings, "task", component=Dropdown, choices=choices, elem_id="sweep-task",
                          value=_default_task("right_masks", choices))
        values, shots, limit = panel(SweepSettings, [("values", "shots", "limit")], "sweep", dict(
            shots=4, limit=min(20, deployment().settings.max_sweep_items))).values()
        run = gr.Button("Run the sweep", variant="primary", elem_id="sweep-run")
        plot = gr.Plot(label="Score at each number of masks", elem_id="sweep-plot")
        summary = gr.HTML(elem_id="sweep-summary")
        table = gr.Dataframe(label="Each number of masks", interactive=False, elem_id="sweep-table")
        files = gr.File(label="The sweep (CSV) and its plot (HTML)", file_count="multiple", elem_id="sweep-files")
        python, shell = reproduce_block("sweep-reproduce")

    def tasks_of(chosen):  # the task list follows what is swept
        names = task_choices(chosen) if chosen in SYMBOLS else []
        return gr.update(choices=names, value=_default_task(chosen, names))

    setting.change(tasks_of, setting, task, api_visibility="private")
    swept = run.click(sweep_masks, sweep_masks.inputs(dict(model_name=model, setting=setting, task=task, values=values,
                                                           shots=shots, limit=limit)),
                      components(FigureOutputs, plot=plot, summary=summary, table=table, files=files,
                                 python=python, shell=shell),
                      api_name="sweep_masks", concurrency_id=sweep_masks.group, show_progress_on=plot,
                      js=run_starts("sweep"))
    run_ends("sweep", swept)
    return opener, task, values, shots, limit
