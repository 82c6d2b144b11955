"""Our tasks as lm-evaluation-harness tasks: a folder for ``--include_path``, same items, same text.

    mlm-icl export-tasks --model M --task copa --task winograd --shots 4 --output-dir lm_eval_tasks
    python -m demo.harness --model mlm --model_args pretrained=M --include_path lm_eval_tasks \\
        --tasks mlm_icl_copa,mlm_icl_winograd

For each task a JSONL file holds every item our evaluator evaluates with that model, as it builds
it (the template, and the demonstrations drawn with our seed, baked into the text), and a YAML file
tells lm-eval to read it with zero shots of its own. lm-eval then sends the model exactly the
(context, continuation) pairs our evaluator scores, so the two evaluators can be compared item by
item:

- a ranked task with one context per item: lm-eval's ``multiple_choice`` (the candidates'
  continuations as its choices, no delimiter: the engine joins them as our evaluator does);
- a ranked task whose context differs per candidate (Winograd's partial scoring, ``score:
  suffix``): lm-eval's "multiple input" form (the contexts as its choices, one continuation);
- a generated task: ``generate_until`` with the task's stop rule and token limit, scored by
  lm-eval's ``exact_match`` against any accepted answer (our own metrics, e.g. the instruction-
  induction ones, can differ from it; the generated text is the same).

The items are the evaluator's own plan for the model (``demo.evaluation.evaluate``): its ``--limit`` sample,
its demonstrations, and its skip rule, so an item longer than an absolute-position model reads is
left out here as it is there (counted in the YAML's metadata). The run options that have no
lm-eval form are refused (:data:`NOT_EXPORTED`).

Task names are prefixed ``mlm_icl_`` so they never shadow lm-eval's own tasks of the same name.
"""

import json
import logging
from dataclasses import fields
from pathlib import Path

import yaml

from ..evaluation_settings import RunSettings
from ..settings import GenerationSettings, ScoringSettings
from ..tasks import Task, get_task
from ..tasks.fewshot import choice_items, generation_prompt
from .evaluate import demonstrations, plan

PREFIX = "mlm_icl_"
METRIC = {"aggregation": "mean", "higher_is_better": True}
# RunSettings fields that change how our evaluator runs, not which items it evaluates, and that
# lm-eval cannot be told through a task file.
NOT_EXPORTED = {
    "repetitions": "lm-eval evaluates each item once; export one folder per --seed and average "
                   "their results",
    "chunk_size": "it sizes our evaluator's batches; under lm-eval the mlm model batches by its "
                  "token_budget",
    "cache": "it is how a masked LM decodes, not part of a task; lm-eval's mlm model decodes with "
             "the exact method",
    "execute_limit": "instruction induction (write an instruction, then run it) has no lm-eval form",
}
log = logging.getLogger(__name__)


def refuse_unexported(settings: RunSettings) -> None:
    """ValueError naming every option set away from its default that a task file cannot carry."""
    defaults = RunSettings()
    wrong = [(f.name, getattr(settings, f.name)) for f in fields(RunSettings)
             if f.name in NOT_EXPORTED and getattr(settings, f.name) != getattr(defaults, f.name)]
    if wrong:
        raise ValueError("export-tasks cannot honour " + "; ".join(
            f"--{name.replace('_', '-')} {value} ({NOT_EXPORTED[name]})" for name, value in wrong)
            + ". Leave it out.")


def export_task(lm, task: Task | str, folder: str | Path, settings: RunSettings | None = None) -> Path:
    """Write ``<prefix><task>.jsonl`` and ``.yaml`` into ``folder``: the items our evaluator
    evaluates with ``lm`` (``demo.engine.models.LoadedModel``) and these settings. Returns the YAML's path."""
    s = settings or RunSettings()
    refuse_unexported(s)
    task = get_task(task) if isinstance(task, str) else task
    if task.kind not in ("choice", "generate"):
        raise ValueError(f"Task {task.name!r} ({task.kind}) has no lm-eval form: its model writes "
                         f"an instruction that is then run, which lm-eval's request types cannot say.")
    if task.constrain_to_candidates:
        raise ValueError(f"Task {task.name!r} generates under a constraint to each item's own "
                         f"candidates, which lm-eval's generate_until cannot say; its ranked form "
                         f"(e.g. copa for copa_generate) exports as multiple choice.")
    # The evaluator's own plan (default scoring, as `mlm-icl evaluate` without scoring options):
    # its sample, demonstrations and skip rule, never re-done here.
    run = plan(lm, task, s, ScoringSettings())
    docs = []
    for e in run.examples:
        demos = demonstrations(run, s, 0, e)
        doc = (_choice_doc(task, e, demos, run.score) if task.kind == "choice"
               else dict(prompt=generation_prompt(task, e, demos), answers=list(e.answers or [e.target])))
        docs.append(dict(index=e.index, id=e.id, **doc))
    if run.skipped:
        log.warning(f"{task.name} {run.shots}-shot: left out {run.skipped} of "
                    f"{len(docs) + run.skipped} items longer than {lm.label} reads "
                    f"({lm.max_length} tokens), as `mlm-icl evaluate` skips them.")
    form = _choice_config(docs) if task.kind == "choice" else _generation_config(task, s)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{PREFIX}{task.name}"
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    config = dict(task=name, dataset_path="json", dataset_kwargs={"data_files": {"test": str(data.resolve())}},
                  test_split="test", num_fewshot=0,
                  metadata={"source": "mlm-icl export-tasks", "task": task.name, "shots": run.shots,
                            "seed": s.seed, "model": lm.label, "max_tokens": lm.max_length,
                            "skipped": run.skipped, "description": task.title}, **form)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _choice_doc(task: Task, e, demos, score: str) -> dict:
    items = choice_items(task, e, demos, score)
    contexts, completions = [c for c, _ in items], [x for _, x in items]
    return dict(contexts=contexts, completions=completions, label=e.label, labels=list(e.labels))


def _choice_config(docs: list[dict]) -> dict:
    """lm-eval's multiple-choice form for these docs (each rewritten to the fields it reads)."""
    one_context = all(len(set(d["contexts"])) == 1 for d in docs)
    several_correct = any(len(d["labels"]) > 1 for d in docs)
    for d in docs:  # the form lm-eval reads: one context, or one continuation
        labels = d.pop("labels")
        if several_correct:
            # lm-eval reads a list target as "any of these is right" (its multiple_target), deciding
            # from the first document, so every document's target is a list
            d["label"] = labels
        if several_correct and not one_context:
            raise ValueError("Items with several correct candidates and a context per candidate have "
                             "no lm-eval form.")
        if one_context:
            d["context"] = d.pop("contexts")[0]
        elif len(set(d["completions"])) == 1:
            d["completion"] = d.pop("completions")[0]
        else:
            raise ValueError("Items whose candidates differ in both context and continuation have "
                             "no lm-eval form.")
    common = dict(output_type="multiple_choice", target_delimiter="",
                  metric_list=[dict(metric="acc", **METRIC)])
    if one_context:
        return dict(common, doc_to_text="context", doc_to_choice="{{completions}}", doc_to_target="label")
    # lm-eval's multiple input: doc_to_text gives the gold index, the choices are the contexts
    return dict(common, doc_to_text="label", doc_to_choice="{{contexts}}", doc_to_target="completion")


def _generation_config(task: Task, s: RunSettings) -> dict:
    g = GenerationSettings(**task.generation)
    until = list(g.stop_strings) + (["\n"] if g.stop_at_newline else [])
    return dict(output_type="generate_until", doc_to_text="prompt", doc_to_target="answers",
                generation_kwargs=dict(until=until, max_gen_toks=s.max_new_tokens or g.max_new_tokens,
                                       do_sample=False, temperature=0.0),
                # the evaluator compares the stripped text: so does lm-eval, through this filter
                filter_list=[dict(name="strip", filter=[dict(function="remove_whitespace"),
                                                         dict(function="take_first")])],
                metric_list=[dict(metric="exact_match", **METRIC)])
