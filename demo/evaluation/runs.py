"""The runs behind ``mlm-icl score``, ``probe`` (the needle grid, or the mask sweep) and
``evaluate``: settings in, output files out.

Each run takes the settings objects the command line built, the models ``--model`` names (one,
or a pair's two sides: the deployment finds them) and a way to load one (``load(side,
progress)``). It runs the sides in turn, by this process alone or by every process of a
data-parallel launch (``demo.evaluation.data_parallel``), saves its work as it goes and resumes it
(``demo.evaluation.resumable``); rank 0 writes the outputs and says what it did (``say``).
"""

import dataclasses
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..engine.pll_approx import fast_table_id
from ..engine.text import special_token_note
from ..evaluation_settings import GridSettings, SweepSettings
from ..settings import ModelSettings, ScoringSettings, WritingSettings
from . import data_parallel
from .identity import Identity, digest
from .resumable import ChunkParts, chunks, parts_folder, run_chunks

Load = Callable[[ModelSettings, bool], object]  # a side's settings, progress bars -> LoadedModel


def to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def to_stdout(text: str) -> None:
    print(text, flush=True)


# ---------------------------------------------------------------- score


@dataclass(frozen=True)
class ScoreFiles:
    """What ``score`` reads and writes: a JSONL file of contexts and candidates in; one JSON (every
    detail) or CSV file (a row per candidate and token) out; ``chunk_size`` lines scored in one
    batched call and saved together in ``<output>.parts/``."""
    input: Path
    output: Path
    chunk_size: int = 256
    overwrite: bool = False  # replace an existing output file

    def __post_init__(self):
        if Path(self.output).suffix not in (".json", ".csv"):
            raise ValueError("--output must end in .json or .csv")
        if self.chunk_size < 1:
            raise ValueError(f"--chunk-size must be at least 1, not {self.chunk_size}.")


def read_requests(path: Path) -> list[tuple[str, list[str]]]:
    """(context, candidates) per line of a JSONL file, with the line number in every error."""
    requests = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                context, candidates = record.get("context", ""), record["candidates"]
            except (json.JSONDecodeError, KeyError, AttributeError) as err:
                raise ValueError(f"{path}, line {number}: expected a JSON object with 'context' and "
                                 f"'candidates' ({err}).") from err
            if not isinstance(candidates, list):
                raise ValueError(f"{path}, line {number}: 'candidates' must be a list of strings.")
            requests.append((context, candidates))
    if not requests:
        raise ValueError(f"{path} has no input lines.")
    return requests


def score_file(files: ScoreFiles, model: ModelSettings, sides: list[ModelSettings],
               scoring: ScoringSettings, load: Load, progress: bool = True, say=to_stderr) -> None:
    """Score the input in chunks, each side of ``model`` in turn, each chunk saved as it is done;
    then rank 0 writes the output from every chunk, in input order. Resumed when run again."""
    if Path(files.output).exists() and not files.overwrite:
        raise ValueError(f"{files.output} exists; pass --overwrite to replace it, or pick another file.")
    requests = read_requests(files.input)
    processes = data_parallel.start_model(model.device, model.device_map)
    progress = progress and processes.main
    scored, all_parts = [], []
    for number, side in enumerate(sides):
        lm = load(dataclasses.replace(side, device=processes.device), progress)
        identity = Identity.of(lm, scoring=scoring, input=digest(requests),
                               fast_table=fast_table_id() if scoring.fast else None)
        all_parts.append(ChunkParts(parts_folder(Path(files.output)), f"model-{number}", identity.digest))
        if processes.main:
            _special_token_notes(lm, files.input, requests, say)
        results = run_chunks(processes, all_parts[-1], dict(enumerate(chunks(len(requests), files.chunk_size))),
                             lambda items, lm=lm: _score_chunk(lm, [requests[k] for k in items], scoring),
                             progress)
        if results is not None:  # rank 0
            scored.append((side, lm, _candidates(results)))
            say(f"Scored {sum(map(len, scored[-1][2]))} candidates of {len(requests)} contexts with {lm.name}")
    if processes.main:
        _write_scores(Path(files.output), model, scoring, requests, scored)
        for parts in all_parts:  # the output holds them now
            parts.remove()
        say(f"-> {files.output}")


def _special_token_notes(lm, path: Path, requests: list, say) -> None:
    for line, (context, candidates) in enumerate(requests, start=1):
        note = special_token_note("\n".join([context, *map(str, candidates)]), lm.tokenizer)
        if note:
            say(f"note: {path}, line {line}: {note}")


def _score_chunk(lm, requests: list, scoring: ScoringSettings) -> list[list[dict]]:
    from ..engine.pll import score_candidate_sets
    return [[dataclasses.asdict(s) for s in scores] for scores in score_candidate_sets(lm, requests, scoring)]


def _candidates(results: list[list[dict]]) -> list:
    from ..engine.pll import candidate_from_dict
    return [[candidate_from_dict(s) for s in scores] for scores in results]


def _write_scores(output: Path, model: ModelSettings, scoring: ScoringSettings, requests: list,
                  scored: list) -> None:
    """The JSON file (a pair: both sides' payloads under "runs") or the tidy CSV table."""
    if output.suffix == ".json":
        payloads = [{"model": dataclasses.asdict(side), "scoring": dataclasses.asdict(scoring),
                     "results": [{"context": context, "best": max(scores, key=lambda s: s.score).candidate,
                                  "candidates": [dataclasses.asdict(s) for s in scores]}
                                 for (context, _), scores in zip(requests, results)]}
                    for side, _, results in scored]
        payload = payloads[0] if len(payloads) == 1 else {"pair": model.model, "runs": payloads}
        output.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    else:
        import pandas as pd

        from .exports import score_table
        tables = [score_table(requests, results).assign(model=lm.name) for _, lm, results in scored]
        pd.concat(tables, ignore_index=True).to_csv(output, index=False)


# ---------------------------------------------------------------- probe


@dataclass(frozen=True)
class ProbeFiles:
    """What ``probe`` writes: the grid's CSV file (resumed if it exists) and its heatmap, or the
    mask sweep's CSV file and its curve."""
    output: Path
    label: str | None = None  # the model's name in the table (one model; a pair's are their names)
    plot: Path | None = None  # .html, or .png with kaleido; a pair's grids: one per side


def probe_file(files: ProbeFiles, sides: list[ModelSettings], grid: GridSettings, load: Load,
               progress: bool = True, say=to_stdout) -> None:
    """The grid of each side into one CSV file (a pair's two told apart by their model column),
    by this process alone or by every process of a launch, each its share of the cells; rank 0
    reports each side's grid and draws its heatmap."""
    from .haystack import run_grid
    processes = data_parallel.start_model(sides[0].device, sides[0].device_map)
    progress = progress and processes.main
    for side in sides:
        lm = load(dataclasses.replace(side, device=processes.device), progress)
        table = run_grid(lm, grid, output=files.output, model_name=files.label if len(sides) == 1 else side.model,
                         progress=progress, processes=processes)
        if table is not None:  # rank 0
            _report_grid(files, lm, table, f"-{side.kind}" if len(sides) > 1 else "", say)


def _report_grid(files: ProbeFiles, lm, table, suffix: str, say) -> None:
    ok = table[table["status"] == "ok"]
    say(f"{len(table)} cells, {len(ok)} answered, accuracy {ok['correct'].mean():.3f}, "
        f"{(table['status'] == 'beyond_limit').sum()} beyond the model's limit -> {files.output}")
    if files.plot:
        from .plots import needle_heatmap, save_figure
        figure = needle_heatmap(table, title=f"Needle in a haystack: {table['model'].iloc[0]}",
                                pretrained_length=lm.pretrained_length, max_length=lm.max_length)
        path = Path(files.plot)
        path = path.with_stem(path.stem + suffix)
        try:
            say(f"plot -> {save_figure(figure, path)}")
        except ValueError as err:
            raise ValueError(f"{err} (the grid itself is saved in {files.output})") from None


def sweep_file(files: ProbeFiles, sides: list[ModelSettings], sweep: SweepSettings, load: Load,
               progress: bool = True, say=to_stdout, writing: WritingSettings | None = None) -> None:
    """The mask sweep of the masked LM (a pair's causal side reads no masks: skipped, said) into
    one CSV file, by this process alone or by every process of a launch, each its share of the
    values; rank 0 reports the curve and draws it."""
    from .mask_sweep import run_sweep
    processes = data_parallel.start_model(sides[0].device, sides[0].device_map)
    progress = progress and processes.main
    for side in sides:
        if len(sides) > 1 and side.kind == "causal":
            if processes.main:
                say(f"{side.model} is the pair's causal LM, which reads no masks: the sweep runs its masked LM.")
            continue
        lm = load(dataclasses.replace(side, device=processes.device), progress)
        table = run_sweep(lm, sweep, output=files.output, model_name=files.label if len(sides) == 1 else side.model,
                          progress=progress, processes=processes, writing=writing)
        if table is not None:  # rank 0
            _report_sweep(files, table, say)


def _report_sweep(files: ProbeFiles, table, say) -> None:
    symbol = {"padding_masks": "p", "right_masks": "N"}[table["setting"].iloc[0]]
    for row in table.itertuples():
        mark = "  (the paper's choice)" if row.value == row.paper_value else ""
        say(f"{symbol} = {row.value:<2d} {row.metric:16s} {row.score:6.2f} ± {row.stderr} "
            f"(n={row.n}, {row.seconds:.0f} s){mark}")
    say(f"-> {files.output}")
    if files.plot:
        from .plots import mask_sweep_plot, save_figure
        try:
            say(f"plot -> {save_figure(mask_sweep_plot(table), Path(files.plot))}")
        except ValueError as err:
            raise ValueError(f"{err} (the sweep itself is saved in {files.output})") from None


# ---------------------------------------------------------------- evaluate


def check_task_data(tasks: list) -> None:
    """Every split ``tasks`` (a task and its RunSettings each) read, so a missing file is said
    before any model is looked for or loaded (minutes)."""
    from ..tasks import load_examples
    for task, run in tasks:
        load_examples(task, "data", run.data_root)
        if run.shots_for(task) and task.demos is not None:
            load_examples(task, "demos", run.data_root)


def evaluate_tasks(tasks: list, sides: list[ModelSettings], scoring: ScoringSettings, load: Load,
                   output_dir: Path, command: str = "", progress: bool = True, say=to_stdout) -> None:
    """Each side on each of ``tasks`` (a task and its RunSettings each) into ``output_dir``
    (``demo.evaluation.evaluate``), by this process alone or by every process of a launch; rank 0
    says each summary row. Every split is read and checked before a model loads (minutes)."""
    from .evaluate import evaluate
    check_task_data(tasks)
    processes = data_parallel.start_model(sides[0].device, sides[0].device_map)
    progress = progress and processes.main
    for side in sides:
        lm = load(dataclasses.replace(side, device=processes.device), progress)
        for task, run in tasks:
            for row in evaluate(lm, task, output_dir, run, scoring, progress=progress, command=command,
                                processes=processes):
                say(f"{row['task']:24s} {row['model']:28s} {row['shots']:>3d}-shot {row['metric']:16s} "
                    f"{row['value']:6.2f} ± {row['stderr']} (n={row['n']}, {row['seconds']:.0f} s)")

