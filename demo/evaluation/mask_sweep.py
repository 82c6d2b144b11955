"""How many masks? One task evaluated at each number of masks a masked LM reads.

The BERTs paper fixes two numbers of masks by hand (docs/method.md, "How many masks?"): the
padding masks after the predicted one when it generates (p, its family's default: 2 for DeBERTa)
and the extra masks right of each scored token of its PLL (N = 2, Table 5). "Masks Can Be
Distracting" (arXiv 2511.21338) finds that more appended masks hurt masked diffusion LMs'
comprehension. The sweep shows what each number does on one task:

    mlm-icl probe --model M --sweep padding_masks --values 0 1 2 3 4 --limit 40 --output sweep.csv
    mlm-icl probe --model M --sweep right_masks --task copa --shots 4 --output sweep.csv --plot sweep.html

Every point is the evaluator's run (``demo.evaluation.evaluate``) of the task at that setting:
padding masks as the task's own generation setting, right masks as the scoring's; the same items
(the evaluator's fixed ``--limit`` sample) and demonstrations at every value, so the points
differ by the masks alone. The table is tidy: a row per value and metric (``COLUMNS``).

Resumable and data parallel as the needle grid (``demo.evaluation.resumable``): a chunk per value,
saved in ``<output>.parts/`` as it finishes; rank 0 writes the output, replacing the same run's
earlier rows and keeping any other rows (a pair's other side, the other setting, a rerun with
another precision: every row names its run, the digest of what it depends on but the value,
``demo.evaluation.identity``, and its precision).
"""

import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from ..evaluation_settings import RunSettings, SweepSettings
from ..settings import ScoringSettings, WritingSettings
from ..tasks import Task, data_root, get_task, load_examples
from .data_parallel import Processes
from .identity import Identity, data_digest, settings_identity, task_identity
from .resumable import ChunkParts, parts_folder, run_chunks
from .rows import upsert

DEFAULT_TASKS = {"padding_masks": "ii_singular_to_plural", "right_masks": "copa"}
KINDS = {"padding_masks": "generate", "right_masks": "choice"}  # the task kind each setting acts in
KIND_WORDS = {"generate": "generated", "choice": "ranked", "induce": "an instruction induction task"}
PAPER_RIGHT_MASKS = 2  # the BERTs paper's "+2 right masks" (its Table 5)
COLUMNS = ["run", "model", "dtype", "task", "shots", "setting", "value", "metric", "score", "stderr", "n",
           "seconds", "paper_value"]


def paper_value(lm, setting: str) -> int:
    """The paper's choice for ``lm``: its family's padding masks (``demo.engine.families``; the
    paper's p = 2 for DeBERTa), or N = 2 right masks."""
    return lm.padding_masks if setting == "padding_masks" else PAPER_RIGHT_MASKS


def sweep_tasks(setting: str, root: str | Path | None = None) -> list[Task]:
    """The tasks ``setting`` acts in whose data are local files here (no Hub download)."""
    def local(task: Task, source) -> bool:
        folder = Path(task.base) if task.base else data_root(root)
        return source is None or bool(source.local and (folder / source.local).is_file())
    from ..tasks import all_tasks
    return [t for t in all_tasks() if t.kind == KINDS[setting] and local(t, t.data) and local(t, t.demos)]


# ---------------------------------------------------------------- one point


def point_task(task: Task, setting: str, value: int) -> Task:
    """The task as evaluated at ``value``: padding masks are part of its generation settings."""
    if setting == "padding_masks":
        return replace(task, generation={**task.generation, "padding_masks": value})
    return task


def point_scoring(setting: str, value: int) -> ScoringSettings:
    """The scoring at ``value``: right masks are the PLL's; generation scores nothing."""
    return ScoringSettings(method="right_masks", right_masks=value) if setting == "right_masks" else ScoringSettings()


def run_settings(settings: SweepSettings) -> RunSettings:
    return RunSettings(shots=settings.shots, limit=settings.limit, seed=settings.demos_seed,
                       max_new_tokens=settings.max_new_tokens, data_root=settings.data_root)


@dataclass(frozen=True)
class Sweep:
    """One model's sweep, checked: everything a point's rows depend on but the value."""
    lm: object
    settings: SweepSettings
    task: Task
    model_name: str
    identity: Identity  # what every row depends on, the value aside (demo.evaluation.identity)

    def rows(self, value: int, progress: bool = False) -> list[dict]:
        """The evaluator's summary at ``value``, a row per metric of the task. Its files go to a
        folder of their own: the evaluator's run id does not name the padding masks."""
        from .evaluate import evaluate
        setting = self.settings.sweep
        with tempfile.TemporaryDirectory(prefix="mask-sweep-") as folder:
            summary = evaluate(self.lm, point_task(self.task, setting, value), folder,
                               run_settings(self.settings), point_scoring(setting, value), progress=progress)
        return [dict(run=self.identity.digest, model=self.model_name, dtype=row["dtype"], task=self.task.name,
                     shots=row["shots"], setting=setting, value=value, metric=row["metric"], score=row["value"],
                     stderr=row["stderr"], n=row["n"], seconds=row["seconds"],
                     paper_value=paper_value(self.lm, setting))
                for row in summary]


def sweep_of(lm, settings: SweepSettings, model_name: str | None = None,
             writing: WritingSettings | None = None) -> Sweep:
    """The checked :class:`Sweep`: a masked LM, a setting, a task of the kind it acts in, written
    as ``writing`` says (``demo.evaluation.evaluate.with_writing``)."""
    from .evaluate import with_writing
    if settings.sweep is None:
        raise ValueError("Say what to sweep: padding_masks (generation, on a generated task) or "
                         "right_masks (ranking, on a ranked task).")
    if lm.kind != "masked":
        raise ValueError(f"{lm.label} is a causal LM: it reads no masks. The mask sweep is for masked LMs.")
    task = with_writing(get_task(settings.task or DEFAULT_TASKS[settings.sweep]), writing)
    wanted = KINDS[settings.sweep]
    if task.kind != wanted:
        what = KIND_WORDS[wanted]
        raise ValueError(f"{settings.sweep.replace('_', ' ').capitalize()} act on a {what} task, and "
                         f"{task.name!r} is {KIND_WORDS[task.kind]}: pick a {what} task (e.g. "
                         f"{DEFAULT_TASKS[settings.sweep]}; mlm-icl evaluate --list shows each task's kind).")
    examples = load_examples(task, "data", settings.data_root)  # a missing file refused before any work
    pool = load_examples(task, "demos", settings.data_root) if settings.shots != 0 else []
    model_name = model_name or lm.name
    # each value is a chunk of its own: a sweep over more values extends one over fewer
    swept = {k: v for k, v in settings_identity(settings).items() if k != "values"}
    identity = Identity.of(lm, label=model_name, sweep=swept, task=task_identity(task),
                           data=data_digest(examples), demos=data_digest(pool))
    return Sweep(lm, settings, task, model_name, identity)


def point_inputs(lm, settings: SweepSettings, value: int) -> list[tuple]:
    """What the engines read for each item at ``value``, for the app's work count
    (``demo.app.budget.sweep_work``): (choices, scoring) per ranked item, (prompt, generation
    settings) per generated one; the evaluator's items and demonstrations."""
    from ..engine.pll import Choice
    from ..tasks.fewshot import choice_items, generation_prompt
    from .evaluate import demonstrations, generation_settings, plan
    sweep = sweep_of(lm, settings)
    task, s = point_task(sweep.task, settings.sweep, value), run_settings(settings)
    run = plan(lm, task, s, point_scoring(settings.sweep, value))
    inputs = []
    for e in run.examples:
        demos = demonstrations(run, s, 0, e)
        if task.kind == "choice":
            choices = [Choice(c, completion, candidate) for (c, completion), candidate in
                       zip(choice_items(task, e, demos, run.score), e.candidates)]
            inputs.append((choices, run.scoring))
        else:
            inputs.append((generation_prompt(task, e, demos), generation_settings(task, s, e)))
    return inputs


# ---------------------------------------------------------------- the sweep


def table_of(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["model", "value", "metric"]).reset_index(drop=True)


def iter_sweep(lm, settings: SweepSettings, *, model_name: str | None = None, progress: bool = False,
               time_limit: float | None = None) -> Iterator[pd.DataFrame]:
    """The sweep value by value, into no file: yields the table after every value (for a page
    that shows progress). With ``time_limit`` (seconds), no value starts after that time."""
    sweep = sweep_of(lm, settings, model_name)
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    rows = []
    for value in settings.values:
        if deadline is not None and time.perf_counter() > deadline:
            return
        rows += sweep.rows(value, progress)
        yield table_of(rows)


def run_sweep(lm, settings: SweepSettings, *, output: str | Path | None = None, model_name: str | None = None,
              progress: bool = False, processes: Processes | None = None,
              writing: WritingSettings | None = None) -> pd.DataFrame | None:
    """The sweep's table: a row per value and metric. ``output``: a CSV file, written once every
    value is done, each value saved in ``<output>.parts/`` as it finishes (an interrupted run
    resumes there). ``processes``: a data-parallel launch's, each evaluating its share of the
    values; rank 0 writes the output and returns the table, the others return None."""
    sweep = sweep_of(lm, settings, model_name, writing)
    if output is None:
        return table_of([row for value in settings.values for row in sweep.rows(value, progress)])
    output, processes = Path(output), processes or Processes()
    processes.wait()  # rank 0 may still be writing an earlier sweep (a pair's other side)
    name = "sweep-" + re.sub(r"[^\w.\-]+", "-", f"{sweep.model_name}-{sweep.identity.digest}")
    parts = ChunkParts(parts_folder(output), name, sweep.identity.digest)
    results = run_chunks(processes, parts, {value: [value] for value in settings.values},
                         lambda values: [sweep.rows(v, progress) for v in values], progress, "mask sweep")
    if results is None:  # not rank 0
        return None
    table = table_of([row for rows in results for row in rows])
    _write(output, table)
    parts.remove()
    return table


def _write(output: Path, table: pd.DataFrame) -> None:
    """``table`` into ``output``, in place of the same run's earlier rows at the same values: other
    runs' rows stay (another model, a pair's other side, the other setting, a rerun with another
    precision or task)."""
    if output.is_file() and output.stat().st_size:
        kept = pd.read_csv(output, dtype={"model": str, "run": str})
        missing = set(COLUMNS) - set(kept.columns)
        if missing:
            why = ("it has no 'run' column, so the settings its rows were made with are unknown"
                   if "run" in missing else f"it lacks the columns {sorted(missing)}")
            raise ValueError(f"{output} is not a mask sweep file of this version ({why}); give another "
                             f"--output file.")
        table = upsert(kept, table, ["run", "value", "metric"])
    table[COLUMNS].to_csv(output, index=False)
