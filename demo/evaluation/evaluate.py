"""Few-shot evaluation of masked and causal LMs on the registered tasks, resumable.

    mlm-icl evaluate --model PATH_OR_HUB_ID --task copa --task winograd --shots 1 \\
        --limit 200 --seed 0 --repetitions 3 --output-dir runs/eval [--method right_masks]

One evaluator for both kinds of model: ranked tasks go through ``demo.engine.pll.score_choices`` (a
masked LM by PLL, ``--method``; a causal LM by exact log-likelihood), generated tasks through
``demo.engine.generation.generate``. Candidates of many examples are scored in one call per chunk;
the engines apply the text conventions, so a ranked item scores exactly as it does in the app.

``--cache prefix`` generates a masked LM's items with the approximate prefix cache instead of the
exact method (``demo.engine.prefix_cache``). It does not apply to ranked tasks (scoring decodes nothing) or
to causal LMs (their own KV cache is exact): such a run is the exact one, said in a warning and in
the summary's ``cache`` column, which records the mode each run used (see ``_cache_mode``).

Outputs in ``--output-dir``, per run. A run is named by its task, model, shots, scoring (or cache
mode) and seed, and by the digest of its identity: everything its numbers depend on, the model's
precision, revision and head, every setting, the task and its items included
(``demo.evaluation.identity``). A rerun with any of them changed is another run, written beside
the first, never resumed into it:
- ``<run>.jsonl``: one line per evaluated example and repetition. Its chunks are saved in
  ``<run>.jsonl.parts/`` as they finish and added to it once all are done
  (``demo.evaluation.resumable``, also for a data-parallel launch); a rerun of the same command
  skips what is there (resume after an interruption);
- ``<run>.summary.json`` and a row per metric in ``summary.csv``: task, model, shots, metric,
  value (percent), stderr, std over repetitions, n (items evaluated), skipped (items too long
  for the model), max_tokens (its position limit), cache (exact or prefix), dtype, seconds, date,
  command, and the identity itself (one line of JSON: what a rerun must match).

``--limit N`` evaluates a fixed random sample of N items (the first N of one seeded
permutation, the same for every model and seed, so a larger limit extends a smaller one).

Items longer than an absolute-position model reads (BERT, RoBERTa, ALBERT: 512 tokens) are
skipped before anything is scored and counted (``--skip-too-long``, the default; see
``_drop_too_long``); with ``--no-skip-too-long`` the first such item stops the run, named.
"""

import datetime as dt
import json
import logging
import math
import random
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..engine.mask_window import padding_masks_of  # (no torch: listing tasks needs none)
from ..engine.pll_approx import fast_table_id  # (no torch either)
from ..evaluation_settings import RunSettings
from ..settings import PLL_METHODS, GenerationSettings, ScoringSettings, WritingSettings, cache_used
from ..tasks import Example, Task, get_task, load_examples, render_query
from ..tasks import metrics as M
from ..tasks.fewshot import choice_items, generation_prompt, mean_std, sample_demonstrations
from .data_parallel import Processes
from .identity import Identity, data_digest, model_slug, settings_identity, task_identity
from .resumable import ChunkParts, drop_cut_line, parts_folder, run_chunks

SUBSET_SEED = 0  # the --limit sample does not depend on --seed: models and seeds see the same items
log = logging.getLogger(__name__)


# ---------------------------------------------------------------- public entry point


def evaluate(lm, task: Task | str, output_dir: str | Path, settings: RunSettings | None = None,
             scoring: ScoringSettings | None = None, *, progress: bool = False, command: str = "",
             processes: Processes | None = None) -> list[dict]:
    """Evaluate one model on one task; returns the summary rows (one per metric).

    ``scoring`` applies to ranked tasks; a task's own scoring fields (its normalisation, its
    unconditional context, its PLL method) fill in whatever ``scoring`` leaves at its default. A
    generated task is written as its generation fields say (``with_writing`` puts a run's
    writing settings there).
    ``command`` is recorded in the summary (how to rerun it). ``processes``
    (``demo.evaluation.data_parallel.start``): a data-parallel launch's, each evaluating its share
    of the chunks; rank 0 writes the files and returns the rows, the others return none.
    """
    s, processes = settings or RunSettings(), processes or Processes()
    task = get_task(task) if isinstance(task, str) else task
    run = plan(lm, task, s, scoring or ScoringSettings())
    if run.cache != s.cache and processes.main:
        log.warning(_cache_note(lm, task, s))
    if run.skipped and processes.main:
        log.warning(_skipped_note(lm, task, run))
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / f"{run.id}.jsonl"
    processes.wait()  # rank 0 may still be adding an earlier run's records
    done = _read_records(predictions)
    parts = ChunkParts(parts_folder(predictions), "records", run.identity.digest)
    records = run_chunks(processes, parts, _chunks(run, s, done),
                         lambda chunk: _evaluate_chunk(lm, task, run, s, chunk), progress,
                         f"{task.name} {run.shots}-shot")
    if records is None:  # not rank 0
        return []
    with predictions.open("a", encoding="utf-8") as sink:
        sink.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    parts.remove()
    done.update({(record["repetition"], record["index"]): record for record in records})
    rows = _summarise(lm, task, run, s, done, command)
    (out / f"{run.id}.summary.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    _update_summary_csv(out / "summary.csv", rows)
    return rows


def with_writing(task: Task, writing: WritingSettings | None) -> Task:
    """The task as a run writes it: the fields ``writing`` sets (not at the paper's decoder's
    defaults) in place of the task's own generation fields. A ranked task writes nothing: there
    they do not apply, said in a warning."""
    given = {k: v for k, v in asdict(writing or WritingSettings()).items() if v != getattr(WritingSettings(), k)}
    if not given:
        return task
    if task.kind == "choice":
        log.warning(f"{task.name}: --{next(iter(given)).replace('_', '-')} and the other writing settings do "
                    f"not apply (it is ranked by scoring its candidates, which writes nothing).")
        return task
    return replace(task, generation={**task.generation, **given})


def _chunks(run, s: RunSettings, done: dict) -> dict[tuple, list]:
    """The (repetition, item) pairs not in ``done``, in chunks of ``s.chunk_size`` within a
    repetition, each keyed by its repetition and items (a key names its items whatever was done)."""
    keyed = {}
    for rep in range(run.repetitions):
        pending = [(rep, e) for e in run.examples if (rep, e.index) not in done]
        for start in range(0, len(pending), s.chunk_size):
            chunk = pending[start:start + s.chunk_size]
            keyed[(rep, tuple(e.index for _, e in chunk))] = chunk
    return keyed


# ---------------------------------------------------------------- planning


@dataclass(frozen=True)
class RunPlan:
    """Everything a run's results depend on, fixed before it starts (``plan``)."""
    id: str  # names its files: task, model, shots, scoring, seed, and its identity's digest
    identity: Identity  # everything its numbers depend on (demo.evaluation.identity)
    tag: str  # how it ranked (the scoring, ``_scoring_tag``) or wrote (``generate``, the cache)
    shots: int
    examples: list[Example]  # the items scored: the --limit sample, less those too long to read
    pool: list[Example]  # where demonstrations are drawn from
    same_split: bool  # the pool is the evaluated split (an item is never its own demonstration)
    method: str  # the scoring method, or "generate"
    scoring: ScoringSettings
    score: str | None  # choice tasks: which span of each candidate is scored
    repetitions: int
    n_total: int  # items in the evaluated split before --limit
    cache: str  # generation: the masked LM's decoding cache
    skipped: int = 0  # items left out as too long for the model
    # the demonstrations drawn for each (repetition, item), drawn once (demonstrations())
    demos: dict = field(default_factory=dict, compare=False)


def plan(lm, task: Task, s: RunSettings, scoring: ScoringSettings) -> RunPlan:
    """Check the request and fix everything a run's results depend on."""
    shots = s.shots_for(task)
    if task.max_shots is not None and shots > task.max_shots:
        raise ValueError(f"Task {task.name!r} is zero-shot by design ({task.notes}); "
                         f"--shots {shots} is not possible.")
    split = load_examples(task, "data", s.data_root)
    pool = load_examples(task, "demos", s.data_root) if shots else []
    same_split = task.demos is None
    available = len(pool) - (1 if same_split else 0)
    if shots and shots > available:
        raise ValueError(f"Task {task.name!r}: --shots {shots} is more than its demonstration pool "
                         f"holds ({available} examples"
                         f"{', the evaluated split minus the evaluated item' if same_split else ''}).")
    n_total = len(split)
    examples = fixed_sample(split, s.limit)
    if task.constrain_to_candidates and not all(e.candidates for e in examples):
        raise ValueError(f"Task {task.name!r} writes one of each item's candidates "
                         f"(constrain_to_candidates), but some of its items have none: its converter "
                         f"must give candidates and a label.")

    cache = _cache_mode(lm, task, s)
    if task.kind == "choice":
        scoring = _task_scoring(lm, task, scoring)
        method = scoring.method_for(lm)
        score = s.score or task.score
        tag = _scoring_tag(lm, scoring, _task_scoring(lm, task, ScoringSettings()))
    else:
        method, score, tag = "generate", None, "generate" + _writing_tag(task, s) + _cache_tag(task, s, cache)
    repetitions = 1 if shots == 0 else s.repetitions  # no sampling to repeat at 0 shots
    identity = _identity(lm, task, replace(s, shots=shots, score=score, cache=cache), scoring, split, pool)
    how = f"{tag}__{score}" if score else tag
    run_id = f"{task.name}__{model_slug(lm)}__{shots}shot__{how}__seed{s.seed}__{identity.digest}"
    run = RunPlan(id=run_id, identity=identity, tag=tag, shots=shots, examples=examples, pool=pool,
                  same_split=same_split, method=method, scoring=scoring, score=score,
                  repetitions=repetitions, n_total=n_total, cache=cache)
    kept, skipped = _drop_too_long(lm, task, run, s)
    return replace(run, examples=kept, skipped=skipped)


def _identity(lm, task: Task, s: RunSettings, scoring: ScoringSettings, split: list[Example],
              pool: list[Example]) -> Identity:
    """The run's identity: the model, the run's settings (shots, span, cache resolved), how it ranks
    (with the fast table's digest where it scores fast) or writes, the task and its split and pool.
    Not which items or repetitions: each record is kept under its own (repetition, item), so a
    larger --limit or more --repetitions extend a run (the summary counts the items asked for)."""
    if task.kind == "choice":
        how = {"scoring": scoring, "fast_table": fast_table_id() if scoring.fast else None}
    else:
        how = {"generation": generation_settings(task, s)}
    run = {k: v for k, v in settings_identity(s).items() if k not in ("limit", "repetitions", "skip_too_long")}
    return Identity.of(lm, run=run, **how, task=task_identity(task), data=data_digest(split), demos=data_digest(pool))


def fixed_sample(examples: list[Example], limit: int | None) -> list[Example]:
    """``--limit N``: the first N items of one seeded permutation (the same for every model and
    seed, so a larger limit extends a smaller one), kept in their order."""
    if limit is None or limit >= len(examples):
        return examples
    order = list(range(len(examples)))
    random.Random(SUBSET_SEED).shuffle(order)
    keep = {examples[i].index for i in order[:limit]}
    return [e for e in examples if e.index in keep]


def _task_scoring(lm, task: Task, scoring: ScoringSettings) -> ScoringSettings:
    """The run's scoring: the task's own fields (its normalisation, its unconditional context, its
    PLL method) fill in what the caller left at the default; a causal LM keeps its exact method."""
    defaults = ScoringSettings()
    fills = {k: v for k, v in task.scoring.items() if getattr(scoring, k) == getattr(defaults, k)}
    if lm.kind == "causal":
        fills.pop("method", None)
    return replace(scoring, **fills)


def _scoring_tag(lm, scoring: ScoringSettings, task_default: ScoringSettings) -> str:
    """The part of a run id that says how candidates were scored: the method with its masks
    (right masks; the decoder's padding masks, the family's unless set), then whatever else
    differs from the task's own definition (results differ when it does, so must the id)."""
    method = scoring.method_for(lm)
    tag = {"right_masks": f"{method}{scoring.right_masks}",
           "decoder": f"{method}{padding_masks_of(lm, scoring.padding_masks)}",
           "elbo": f"{method}{scoring.elbo_samples}" + (f"-seed{scoring.elbo_seed}" if scoring.elbo_seed else ""),
           }.get(method, method)
    if scoring.reduction != task_default.reduction:
        tag += f"-{scoring.reduction}"
    if scoring.scope != task_default.scope:
        tag += f"-{scoring.scope}"
    if scoring.unconditional_context != task_default.unconditional_context:
        tag += "-uncond" + re.sub(r"\W+", "", scoring.unconditional_context or "none")[:16]
    if scoring.stride > 1 and method in PLL_METHODS:  # the approximate PLL (demo.engine.pll_approx)
        tag += f"-stride{scoring.stride}" + (f"-band{scoring.rescore_band:g}" if scoring.rescore_band else "")
    if scoring.fast and method in PLL_METHODS:  # a setting per length band, from the measured table
        tag += f"-fast{fast_table_id()}"
    return tag


def _cache_mode(lm, task: Task, s: RunSettings) -> str:
    """The masked LM's decoding this run uses: ``s.cache`` where a masked LM generates; exact
    where the mode does not apply (a ranked task's scoring decodes nothing; a causal LM decodes with
    its own exact KV cache), so such a run is the exact run, under its id."""
    return "exact" if task.kind == "choice" else cache_used(s.cache, lm.kind)


def _cache_tag(task: Task, s: RunSettings, cache: str) -> str:
    """The part of a generated run's id that says how it decoded: nothing for the exact method;
    the prefix cache with its refresh interval and margin (the outputs depend on them), so exact
    and fast results never share a resume file."""
    if cache == "exact":
        return ""
    g = generation_settings(task, s)
    return f"-prefix-r{g.cache_refresh}-m{g.cache_margin:g}"


def _writing_tag(task: Task, s: RunSettings) -> str:
    """The part of a generated run's id that says how a masked LM writes: nothing for the paper's
    decoder; the window, tokens a step, order and what else is set, writing in any order."""
    g = generation_settings(task, s)
    if not g.any_order:
        return ""
    tag = f"-{g.window}" + (f"{g.block_length}" if g.window == "block" else "") + f"-k{g.tokens_per_step}-{g.order}"
    if g.confidence_threshold is not None:
        tag += f"-t{g.confidence_threshold:g}"
    return tag + ("-remask" if g.remask else "") + ("-ahead" if g.masks_ahead else "")


def _cache_note(lm, task: Task, s: RunSettings) -> str:
    why = ("it is ranked by scoring its candidates, which decodes nothing" if task.kind == "choice" else
           f"{lm.label} is a causal LM, which decodes with its own exact KV cache")
    return (f"{task.name}: --cache {s.cache} does not apply ({why}); this is the exact run, "
            f"recorded as cache 'exact'.")


def demonstrations(run, s: RunSettings, rep: int, e: Example) -> list[Example]:
    """An item's demonstrations in one repetition, drawn once per run (measuring an item's length
    and scoring it need the same ones; a draw from a large same-split pool is not free)."""
    key = (rep, e.index)
    if key not in run.demos:
        run.demos[key] = sample_demonstrations(run.pool, run.shots, seed=s.seed,
                                                  repetition=rep, item=e, same_split=run.same_split)
    return run.demos[key]


# ---------------------------------------------------------------- items too long for the model


def _drop_too_long(lm, task: Task, run: RunPlan, s: RunSettings) -> tuple[list[Example], int]:
    """(the examples that fit the model, how many were skipped).

    An absolute-position model (BERT, RoBERTa, ALBERT: 512 tokens) cannot read a longer input and
    the engines refuse one rather than truncate it, which would stop a run midway. So every item
    is measured before anything is scored, with its demonstrations in every repetition, and
    skipped whole (the ALBERT paper filtered long TimeDial items the same way) or, with
    --no-skip-too-long, refused here by name. An item too long in one repetition is skipped in
    all, so that every repetition averages the same items. The limit is the model's own
    (``LoadedModel.max_length``, enforced by its ``check_length``); relative-position models
    have none and skip nothing.
    """
    if lm.max_length is None:
        return run.examples, 0
    kept = [e for e in run.examples if _fits(lm, task, run, s, e)]
    if not kept:
        raise ValueError(f"Task {task.name!r} ({run.shots}-shot): all {len(run.examples)} "
                         f"items are longer than {lm.label} reads ({lm.max_length} tokens); "
                         f"nothing is left to evaluate.")
    return kept, len(run.examples) - len(kept)


def _fits(lm, task: Task, run: RunPlan, s: RunSettings, e: Example) -> bool:
    """Whether the engines accept every input of this item, asked of the engines themselves (their
    own tokenization and length checks), so the rule is never re-done here."""
    from ..engine.generation import check_prompt
    from ..engine.models import InputTooLong
    from ..engine.pll import check_choices
    for rep in range(run.repetitions):
        demos = demonstrations(run, s, rep, e)
        try:
            if task.kind == "choice":
                check_choices(lm, _choices(task, run, e, demos), run.scoring)
            else:  # induction: its induction prompt (execution prompts hold the instruction to come)
                prompt = generation_prompt(task, e, demos) if task.kind == "generate" else render_query(task, e)
                check_prompt(lm, prompt, generation_settings(task, s, e))
        except InputTooLong as err:
            if s.skip_too_long:
                return False
            raise ValueError(f"Task {task.name!r} ({run.shots}-shot), item {e.index} (id "
                             f"{e.id!r}, {len(demos)} demonstration(s)): {err} --skip-too-long "
                             f"(the default) skips such items instead.") from None
    return True


def _skipped_note(lm, task: Task, run: RunPlan) -> str:
    kept = len(run.examples)
    return (f"{task.name} {run.shots}-shot: skipped {run.skipped} of {kept + run.skipped} "
            f"items longer than {lm.label} reads ({lm.max_length} tokens, demonstrations included); "
            f"the results are over the {kept} kept (--no-skip-too-long stops at such an item instead).")


# ---------------------------------------------------------------- one chunk of examples


def _evaluate_chunk(lm, task, run, s, pairs: list[tuple[int, Example]]) -> list[dict]:
    """The records of a chunk's (repetition, item) pairs, all of one repetition."""
    rep, chunk = pairs[0][0], [e for _, e in pairs]
    start = time.perf_counter()
    demos = {e.index: demonstrations(run, s, rep, e) for e in chunk}
    if task.kind == "choice":
        records = _rank(lm, task, run, s, chunk, demos)
    elif task.kind == "generate":
        records = _generate(lm, task, chunk, demos, s)
    else:
        records = [_induce_one(lm, task, e, s) for e in chunk]
    seconds = (time.perf_counter() - start) / len(chunk)
    for e, record in zip(chunk, records):
        record.update(repetition=rep, index=e.index, id=e.id, seconds=round(seconds, 4),
                      demos=[d.index for d in demos[e.index]])
    return records


def _choices(task, run, e: Example, demos: list[Example]):
    from ..engine.pll import Choice  # engines load lazily: listing tasks needs no torch
    return [Choice(context, completion, candidate) for (context, completion), candidate in
            zip(choice_items(task, e, demos, run.score), e.candidates)]


def _rank(lm, task, run, s, chunk, demos) -> list[dict]:
    from ..engine.pll import score_choices

    choice_sets = [_choices(task, run, e, demos[e.index]) for e in chunk]
    try:
        results = score_choices(lm, choice_sets, run.scoring)
    except ValueError as err:
        raise ValueError(f"Task {task.name!r} ({run.shots}-shot): {err}") from err
    records = []
    for e, choices, got in zip(chunk, choice_sets, results):
        scores = [r.score for r in got]
        pred = max(range(len(scores)), key=lambda i: scores[i])
        records.append(dict(query=render_query(task, e), context=choices[pred].context,
                            candidates=e.candidates, scores=scores, pred=pred, label=e.label,
                            labels=list(e.labels), text=e.candidates[pred],
                            answers=e.answers or [e.target], group=e.group, correct=pred in e.labels))
    return records


def generation_settings(task: Task, s: RunSettings, item: Example | None = None) -> GenerationSettings:
    """The task's decoding with the run's cache mode (the run decides it, not the task) and token
    limit; with ``item``, a task that writes one of its candidates is constrained to them."""
    settings = replace(GenerationSettings(**task.generation), cache=s.cache)
    if s.max_new_tokens is not None:
        settings = replace(settings, max_new_tokens=s.max_new_tokens)
    if item is not None and task.constrain_to_candidates:
        settings = replace(settings, choices=list(item.candidates))
    return settings


def _generate(lm, task, chunk: list[Example], demos: dict, s: RunSettings) -> list[dict]:
    """The records of a chunk's generated items. Items with the same settings (all but those that
    write one of their own candidates) are written together: a masked LM writing in any order
    reads them in one forward pass a step (``demo.engine.generation.generate_together``), each
    output the one it gets alone."""
    from ..engine.generation import generate_together
    settings = [generation_settings(task, s, e) for e in chunk]
    prompts = [generation_prompt(task, e, demos[e.index]) for e in chunk]
    if all(g == settings[0] for g in settings):
        results = generate_together(lm, prompts, settings[0])
    else:
        results = [generate_together(lm, [p], g)[0] for p, g in zip(prompts, settings)]
    return [_generated_record(task, e, result) for e, result in zip(chunk, results)]


def _generated_record(task, e: Example, result) -> dict:
    text = result.text.strip()
    record = dict(query=render_query(task, e), text=text, answers=list(e.answers or [e.target]),
                  group=e.group, stop_reason=result.stop_reason, prompt_tokens=result.prompt_tokens)
    if task.constrain_to_candidates:  # the candidate written, as a ranked task's pred
        record.update(candidates=e.candidates, label=e.label, labels=list(e.labels),
                      pred=next((i for i, c in enumerate(e.candidates) if c.strip() == text), None))
    for name in task.metrics:
        if M.METRICS[name].level == "example":
            record[name] = M.example_score(name, record)
    return record


def _induce_one(lm, task, e: Example, s: RunSettings) -> dict:
    """Instruction induction: write an instruction, then execute it on held-out inputs."""
    from ..engine.generation import generate
    instruction = generate(lm, render_query(task, e), generation_settings(task, s)).text.strip()
    target = get_task(task.executes)
    inputs = load_examples(target, "data", s.data_root)[:s.execute_limit]
    metric = target.metrics[0]
    outputs, scores = [], []
    for x in inputs:
        prompt = f"Instruction: {instruction}\nInput: {x.fields['input']}\nOutput:"
        text = generate(lm, prompt, generation_settings(target, s)).text.strip()
        outputs.append(text)
        scores.append(M.example_score(metric, {"text": text, "answers": x.answers}))
    return dict(query="(induction prompt)", text=instruction, answers=e.answers,
                execution=sum(scores) / len(scores), executed=len(scores), outputs=outputs,
                execution_metric=metric)


# ---------------------------------------------------------------- results


def _read_records(path: Path) -> dict:
    """Finished examples of earlier runs: {(repetition, index): record}. A last line cut short by
    an interruption is removed, so that appending starts on a fresh line (that example is then
    simply evaluated again)."""
    drop_cut_line(path)
    done = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        done[(record["repetition"], record["index"])] = record
    return done


def _summarise(lm, task, run, s, done: dict, command: str) -> list[dict]:
    wanted = {e.index for e in run.examples}
    per_rep = [[r for (rep, i), r in sorted(done.items()) if rep == k and i in wanted]
               for k in range(run.repetitions)]
    seconds = sum(r["seconds"] for recs in per_rep for r in recs)
    rows = []
    for name in task.metrics:
        values, errors = zip(*(M.compute(name, recs, seed=s.seed) for recs in per_rep))
        mean, std = mean_std(list(values))
        stderr = [e for e in errors if not math.isnan(e)]
        rows.append(dict(
            run=run.id, task=task.name, title=task.title, group=task.group, model=model_slug(lm),
            model_kind=lm.kind, model_size=lm.n_parameters, shots=run.shots, metric=name,
            metric_label=M.METRICS[name].label, value=round(100 * mean, 2),
            stderr=round(100 * sum(stderr) / len(stderr), 2) if stderr else None,
            std=round(100 * std, 2), repetitions=run.repetitions, n=len(per_rep[0]),
            n_total=run.n_total, skipped=run.skipped, max_tokens=lm.max_length,
            method=run.method, score=run.score, scoring=run.tag, cache=run.cache, seed=s.seed,
            dtype=run.identity.parts["model"]["dtype"], identity=run.identity.describe(),
            seconds=round(seconds, 1), date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            command=command))
    return rows


def _update_summary_csv(path: Path, rows: list[dict]) -> None:
    """Append the run's rows, replacing earlier rows of the same run and metric."""
    import pandas as pd

    from .rows import upsert
    new = pd.DataFrame(rows)
    if path.is_file():
        new = upsert(pd.read_csv(path), new, ["run", "metric"])
    new.to_csv(path, index=False)
