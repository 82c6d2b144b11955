"""Few-shot evaluation of masked and causal LMs on the registered tasks, resumable.

    python -m demo.evaluate --model PATH_OR_HUB_ID --task copa --task winograd --shots 1 \\
        --limit 200 --seed 0 --repetitions 3 --output-dir runs/eval [--method right_masks]

One evaluator for both kinds of model: ranked tasks go through ``demo.pll.score_batch`` (a
masked LM by PLL, ``--method``; a causal LM by exact log-likelihood), generated tasks through
``demo.generation.generate``. Candidates of many examples are scored in one ``score_batch``
call per chunk.

Outputs in ``--output-dir``, per run (task, model, shots, method, scored span, seed):
- ``<run>.jsonl``: one line per evaluated example and repetition, appended as chunks finish;
  a rerun of the same command skips what is there (resume after an interruption);
- ``<run>.summary.json`` and a row per metric in ``summary.csv``: task, model, shots, metric,
  value (percent), stderr, std over repetitions, n, seconds, date, command.

``--limit N`` evaluates a fixed random sample of N items (the first N of one seeded
permutation, the same for every model and seed, so a larger limit extends a smaller one).
"""

import argparse
import datetime as dt
import json
import math
import random
import shlex
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path

from tqdm.auto import tqdm

from . import metrics as M
from .fewshot import choice_items, generation_prompt, mean_std, sample_demonstrations
from .tasks import TASKS, Example, Task, get_task, load_examples, render_query
from .text import encode_newlines

SUBSET_SEED = 0  # the --limit sample does not depend on --seed: models and seeds see the same items


@dataclass
class RunSettings:
    shots: int | None = None  # None: the task's paper default
    limit: int | None = None
    seed: int = 0
    repetitions: int = 1
    method: str | None = None  # masked-LM scoring method; None: the task's, else right_masks
    right_masks: int = 2
    score: str | None = None  # scored span of ranked tasks; None: the task's
    chunk_size: int = 16  # examples whose candidates share one score_batch call
    token_budget: int = 8192
    execute_limit: int = 20  # instruction induction: held-out inputs each instruction runs on
    max_new_tokens: int | None = None  # generated tasks: overrides the task's limit
    data_root: str | None = None
    progress: bool = True
    command: str = ""


# ---------------------------------------------------------------- public entry point


def evaluate(lm, task: Task | str, output_dir: str | Path, settings: RunSettings | None = None,
             **overrides) -> list[dict]:
    """Evaluate one model on one task; returns the summary rows (one per metric)."""
    unknown = sorted(set(overrides) - {f.name for f in fields(RunSettings)})
    if unknown:
        raise ValueError(f"Unknown evaluation setting(s) {', '.join(map(repr, unknown))}.")
    s = replace(settings or RunSettings(), **overrides)
    task = get_task(task) if isinstance(task, str) else task
    run = _plan(lm, task, s)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / f"{run['id']}.jsonl"

    done = _read_records(predictions)
    todo = [(rep, e) for rep in range(run["repetitions"]) for e in run["examples"]
            if (rep, e.index) not in done]
    bar = tqdm(total=len(todo), desc=f"{task.name} {run['shots']}-shot", unit="ex",
               disable=not s.progress)
    with predictions.open("a", encoding="utf-8") as sink:
        for rep in range(run["repetitions"]):
            pending = [e for r, e in todo if r == rep]
            for start in range(0, len(pending), s.chunk_size):
                chunk = pending[start:start + s.chunk_size]
                for record in _evaluate_chunk(lm, task, run, s, rep, chunk):
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    done[(rep, record["index"])] = record
                sink.flush()  # a chunk is either on disk or redone on resume
                bar.update(len(chunk))
    bar.close()

    rows = _summarise(lm, task, run, s, done)
    (out / f"{run['id']}.summary.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    _update_summary_csv(out / "summary.csv", rows)
    return rows


# ---------------------------------------------------------------- planning


def _plan(lm, task: Task, s: RunSettings) -> dict:
    """Check the request and fix everything a run's results depend on."""
    shots = task.shots if s.shots is None else s.shots
    if not isinstance(shots, int) or shots < 0:
        raise ValueError(f"--shots must be a whole number >= 0, not {shots!r}.")
    if task.max_shots is not None and shots > task.max_shots:
        raise ValueError(f"Task {task.name!r} is zero-shot by design ({task.notes}); "
                         f"--shots {shots} is not possible.")
    if s.repetitions < 1:
        raise ValueError(f"--repetitions must be 1 or more, not {s.repetitions}.")
    if s.limit is not None and s.limit < 1:
        raise ValueError(f"--limit must be 1 or more, not {s.limit}.")
    examples = load_examples(task, "data", s.data_root)
    pool = load_examples(task, "demos", s.data_root) if shots else []
    same_split = task.demos is None
    available = len(pool) - (1 if same_split else 0)
    if shots and shots > available:
        raise ValueError(f"Task {task.name!r}: --shots {shots} is more than its demonstration pool "
                         f"holds ({available} examples"
                         f"{', the evaluated split minus the evaluated item' if same_split else ''}).")
    n_total = len(examples)
    if s.limit is not None and s.limit < n_total:
        order = list(range(n_total))
        random.Random(SUBSET_SEED).shuffle(order)
        keep = set(order[:s.limit])
        examples = [e for e in examples if e.index in keep]

    if task.kind == "choice":
        if lm.kind == "causal":
            if s.method not in (None, "causal"):
                raise ValueError(f"{lm.name} is a causal LM: it is scored by exact log-likelihood; "
                                 f"--method {s.method} is for masked LMs.")
            method = "causal"
        else:
            method = s.method or task.method or "right_masks"
            if method == "causal":
                raise ValueError(f"{lm.name} is a masked LM; --method causal needs a causal LM.")
        score = s.score or task.score
        method_tag = f"{method}{s.right_masks}" if method == "right_masks" else method
        tag = f"{method_tag}__{score}"
    else:
        method, score, tag = "generate", None, "generate"
    repetitions = 1 if shots == 0 else s.repetitions  # no sampling to repeat at 0 shots
    run_id = f"{task.name}__{model_slug(lm)}__{shots}shot__{tag}__seed{s.seed}"
    return dict(id=run_id, shots=shots, examples=examples, pool=pool, same_split=same_split,
                method=method, score=score, repetitions=repetitions, n_total=n_total)


def model_slug(lm) -> str:
    """A short, file-safe model name: folder or file name of a local model, else the Hub id."""
    name = str(lm.name)
    path = Path(name)
    if lm.local or path.exists():
        name = path.stem if path.suffix == ".gguf" else path.name
    return name.replace("/", "--").replace(" ", "_")


# ---------------------------------------------------------------- one chunk of examples


def _evaluate_chunk(lm, task, run, s, rep, chunk: list[Example]) -> list[dict]:
    start = time.perf_counter()
    demos = {e.index: sample_demonstrations(run["pool"], run["shots"], seed=s.seed, repetition=rep,
                                            item=e, same_split=run["same_split"]) for e in chunk}
    if task.kind == "choice":
        records = _rank(lm, task, run, s, chunk, demos)
    elif task.kind == "generate":
        records = [_generate_one(lm, task, e, demos[e.index], s) for e in chunk]
    else:
        records = [_induce_one(lm, task, e, s) for e in chunk]
    seconds = (time.perf_counter() - start) / len(chunk)
    for e, record in zip(chunk, records):
        record.update(repetition=rep, index=e.index, id=e.id, seconds=round(seconds, 4),
                      demos=[d.index for d in demos[e.index]])
    return records


def _rank(lm, task, run, s, chunk, demos) -> list[dict]:
    from .pll import score_batch  # engines load lazily: listing tasks needs no torch

    items, spans = [], []
    for e in chunk:
        pairs = [_encode(lm, c, x) for c, x in choice_items(task, e, demos[e.index], run["score"])]
        if task.unconditional is not None:
            pairs += [_encode(lm, task.unconditional, " " + c.strip()) for c in e.candidates]
        spans.append((len(items), len(pairs)))
        items += pairs
    try:
        results = score_batch(lm, items, method=run["method"], right_masks=s.right_masks,
                              scope="completion", normalize=task.normalize,
                              token_budget=s.token_budget, progress=False)
    except ValueError as err:
        raise ValueError(f"Task {task.name!r} ({run['shots']}-shot): {err}") from err
    records = []
    for e, (first, count) in zip(chunk, spans):
        got = results[first:first + count]
        k = len(e.candidates)
        scores = [r.score for r in got[:k]]
        if task.unconditional is not None:
            scores = [c - u.score for c, u in zip(scores, got[k:])]
        pred = max(range(k), key=lambda i: scores[i])
        records.append(dict(query=render_query(task, e), candidates=e.candidates, scores=scores,
                            pred=pred, label=e.label, text=e.candidates[pred],
                            answers=e.answers or [e.target], group=e.group,
                            correct=pred == e.label))
    return records


def _encode(lm, context: str, completion: str) -> tuple[str, str]:
    """Newlines as the paper's marker for tokenizers that lose them; junction space to the completion."""
    context = encode_newlines(context, lm.newline_survives)
    completion = encode_newlines(completion, lm.newline_survives)
    stripped = context.rstrip(" ")
    return stripped, context[len(stripped):] + completion


def _generation_settings(task: Task, s: RunSettings):
    from .generation import GenerationSettings
    settings = GenerationSettings(**task.generation)
    if s.max_new_tokens is not None:
        settings.max_new_tokens = s.max_new_tokens
    return settings


def _generate_one(lm, task, e: Example, demos: list[Example], s: RunSettings) -> dict:
    from .generation import generate
    prompt = generation_prompt(task, e, demos)
    result = generate(lm, prompt, _generation_settings(task, s))
    text = result.text.strip()
    record = dict(query=render_query(task, e), text=text, answers=e.answers, group=e.group,
                  stop_reason=result.stop_reason, prompt_tokens=result.prompt_tokens)
    for name in task.metrics:
        if M.METRICS[name].level == "example":
            record[name] = M.example_score(name, record)
    return record


def _induce_one(lm, task, e: Example, s: RunSettings) -> dict:
    """Instruction induction: write an instruction, then execute it on held-out inputs."""
    from .generation import generate
    instruction = generate(lm, render_query(task, e), _generation_settings(task, s)).text.strip()
    target = get_task(task.executes)
    inputs = load_examples(target, "data", s.data_root)[:s.execute_limit]
    metric = target.metrics[0]
    outputs, scores = [], []
    for x in inputs:
        prompt = f"Instruction: {instruction}\nInput: {x.fields['input']}\nOutput:"
        text = generate(lm, prompt, _generation_settings(target, s)).text.strip()
        outputs.append(text)
        scores.append(M.example_score(metric, {"text": text, "answers": x.answers}))
    return dict(query="(induction prompt)", text=instruction, answers=e.answers,
                execution=sum(scores) / len(scores), executed=len(scores), outputs=outputs,
                execution_metric=metric)


# ---------------------------------------------------------------- results


def _read_records(path: Path) -> dict:
    """Finished examples of an earlier (possibly interrupted) run: {(repetition, index): record}.

    A last line cut short by the interruption is removed, so that appending starts on a fresh line
    (that example is simply evaluated again).
    """
    done = {}
    if not path.is_file():
        return done
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[:data.rfind(b"\n") + 1]
        path.write_bytes(data)
    for line in data.decode("utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        done[(record["repetition"], record["index"])] = record
    return done


def _summarise(lm, task, run, s, done: dict) -> list[dict]:
    wanted = {e.index for e in run["examples"]}
    per_rep = [[r for (rep, i), r in sorted(done.items()) if rep == k and i in wanted]
               for k in range(run["repetitions"])]
    seconds = sum(r["seconds"] for recs in per_rep for r in recs)
    rows = []
    for name in task.metrics:
        values, errors = zip(*(M.compute(name, recs, seed=s.seed) for recs in per_rep))
        mean, std = mean_std(list(values))
        stderr = [e for e in errors if not math.isnan(e)]
        rows.append(dict(
            run=run["id"], task=task.name, title=task.title, group=task.group, model=model_slug(lm),
            model_kind=lm.kind, model_size=lm.n_parameters, shots=run["shots"], metric=name,
            metric_label=M.METRICS[name].label, value=round(100 * mean, 2),
            stderr=round(100 * sum(stderr) / len(stderr), 2) if stderr else None,
            std=round(100 * std, 2), repetitions=run["repetitions"], n=len(per_rep[0]),
            n_total=run["n_total"], method=run["method"], score=run["score"], seed=s.seed,
            seconds=round(seconds, 1), date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            command=s.command))
    return rows


def _update_summary_csv(path: Path, rows: list[dict]) -> None:
    """Append the run's rows, replacing earlier rows of the same run and metric."""
    import pandas as pd
    new = pd.DataFrame(rows)
    if path.is_file():
        old = pd.read_csv(path)
        keys = set(zip(new["run"], new["metric"]))
        old = old[[(r, m) not in keys for r, m in zip(old["run"], old["metric"])]]
        new = pd.concat([old, new], ignore_index=True)
    new.to_csv(path, index=False)


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m demo.evaluate", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="Hub id, local model folder or .gguf file")
    parser.add_argument("--task", action="append", default=[],
                        help="task name (repeatable, or comma-separated); NAME:N sets --limit N for "
                             "that task only; see --list")
    parser.add_argument("--shots", type=int, default=None, help="demonstrations (default: the paper's)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate a fixed sample of N items")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repetitions", type=int, default=1, help="demonstration draws to average")
    parser.add_argument("--output-dir", default="runs/eval")
    parser.add_argument("--method", default=None, help="masked-LM PLL method (default: right_masks)")
    parser.add_argument("--right-masks", type=int, default=2)
    parser.add_argument("--score", choices=("answer", "suffix", "example"), default=None,
                        help="which span of a ranked example is scored (default: the task's)")
    parser.add_argument("--data-root", default=None, help="folder with the datasets (default ../shared/data)")
    parser.add_argument("--execute-limit", type=int, default=20,
                        help="instruction induction: held-out inputs per induced instruction")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="generated tasks: token limit (default: the task's)")
    parser.add_argument("--chunk-size", type=int, default=16)
    parser.add_argument("--kind", choices=("masked", "causal"), default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (1 is fastest on a crowded machine)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    args = parser.parse_args(argv)

    if args.list:
        for t in TASKS.values():
            print(f"{t.name:34s} {t.group:22s} {t.kind:8s} shots={t.shots:<3d} {','.join(t.metrics)}")
        return 0
    try:
        if not args.model or not args.task:
            raise ValueError("Give --model and at least one --task (python -m demo.evaluate --list shows the tasks).")
        tasks = [_task_and_limit(name, args.limit) for arg in args.task for name in arg.split(",") if name]
        if args.threads:
            import torch
            torch.set_num_threads(args.threads)
        from .models import load_model
        lm = load_model(args.model, kind=args.kind, device=args.device)
        settings = dict(shots=args.shots, seed=args.seed, repetitions=args.repetitions,
                        method=args.method, right_masks=args.right_masks, score=args.score,
                        chunk_size=args.chunk_size, execute_limit=args.execute_limit,
                        max_new_tokens=args.max_new_tokens,
                        data_root=args.data_root, progress=not args.no_progress,
                        command="python -m demo.evaluate " + shlex.join(argv))
        for task, limit in tasks:
            for row in evaluate(lm, task, args.output_dir, RunSettings(limit=limit, **settings)):
                print(f"{row['task']:24s} {row['model']:28s} {row['shots']:>3d}-shot "
                      f"{row['metric']:16s} {row['value']:6.2f} ± {row['stderr']} (n={row['n']}, "
                      f"{row['seconds']:.0f} s)", flush=True)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def _task_and_limit(spec: str, default_limit: int | None) -> tuple[Task, int | None]:
    """"copa" or "copa:100" (a limit for this task only)."""
    name, _, limit = spec.partition(":")
    if limit and not limit.isdigit():
        raise ValueError(f"In --task {spec!r}, what follows ':' must be a number of items.")
    return get_task(name.strip()), int(limit) if limit else default_limit


if __name__ == "__main__":
    sys.exit(main())
