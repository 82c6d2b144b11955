"""Our tasks as lm-evaluation-harness tasks: a folder for ``--include_path``, same items, same text.

    mlm-icl export-tasks --task copa --task winograd --shots 4 --output-dir lm_eval_tasks
    python -m demo.lm_eval --model mlm --model_args pretrained=... --include_path lm_eval_tasks \\
        --tasks mlm_icl_copa,mlm_icl_winograd

For each task a JSONL file holds every evaluated item as our evaluator builds it (the template,
and the demonstrations drawn with our seed, baked into the text), and a YAML file tells lm-eval
to read it with zero shots of its own. lm-eval then sends our model exactly the (context,
continuation) pairs our evaluator scores, so the two evaluators can be compared item by item:

- a ranked task with one context per item: lm-eval's ``multiple_choice`` (the candidates'
  continuations as its choices, no delimiter: the engine joins them as our evaluator does);
- a ranked task whose context differs per candidate (Winograd's partial scoring, ``score:
  suffix``): lm-eval's "multiple input" form (the contexts as its choices, one continuation);
- a generated task: ``generate_until`` with the task's stop rule and token limit, scored by
  lm-eval's ``exact_match`` against any accepted answer (our own metrics, e.g. the instruction-
  induction ones, can differ from it; the generated text is the same).

Task names are prefixed ``mlm_icl_`` so they never shadow lm-eval's own tasks of the same name.
"""

import json
from pathlib import Path

import yaml

from .evaluate import fixed_sample
from .fewshot import choice_items, generation_prompt, sample_demonstrations
from .settings import GenerationSettings, RunSettings
from .tasks import Task, get_task, load_examples

PREFIX = "mlm_icl_"
METRIC = {"aggregation": "mean", "higher_is_better": True}


def export_task(task: Task | str, folder: str | Path, settings: RunSettings | None = None) -> Path:
    """Write ``<prefix><task>.jsonl`` and ``.yaml`` into ``folder``; returns the YAML's path."""
    s = settings or RunSettings()
    task = get_task(task) if isinstance(task, str) else task
    if task.kind not in ("choice", "generate"):
        raise ValueError(f"Task {task.name!r} ({task.kind}) has no lm-eval form: its model writes "
                         f"an instruction that is then run, which lm-eval's request types cannot say.")
    if task.constrain_to_candidates:
        raise ValueError(f"Task {task.name!r} generates under a constraint to each item's own "
                         f"candidates, which lm-eval's generate_until cannot say; its ranked form "
                         f"(e.g. copa for copa_generate) exports as multiple choice.")
    shots = task.shots if s.shots is None else s.shots
    examples = fixed_sample(load_examples(task, "data", s.data_root), s.limit)  # the evaluator's
    pool = load_examples(task, "demos", s.data_root) if shots else []
    docs = []
    for e in examples:
        demos = sample_demonstrations(pool, shots, seed=s.seed, item=e, same_split=task.demos is None)
        docs.append(_choice_doc(task, e, demos, s) if task.kind == "choice"
                    else dict(prompt=generation_prompt(task, e, demos), answers=list(e.answers or [e.target])))
    form = _choice_config(docs) if task.kind == "choice" else _generation_config(task, s)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{PREFIX}{task.name}"
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    config = dict(task=name, dataset_path="json", dataset_kwargs={"data_files": {"test": str(data.resolve())}},
                  test_split="test", num_fewshot=0,
                  metadata={"source": "mlm-icl export-tasks", "task": task.name, "shots": shots,
                            "seed": s.seed, "description": task.title}, **form)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _choice_doc(task: Task, e, demos, s: RunSettings) -> dict:
    items = choice_items(task, e, demos, s.score)
    contexts, completions = [c for c, _ in items], [x for _, x in items]
    return dict(contexts=contexts, completions=completions, label=e.label)


def _choice_config(docs: list[dict]) -> dict:
    """lm-eval's multiple-choice form for these docs (each rewritten to the fields it reads)."""
    one_context = all(len(set(d["contexts"])) == 1 for d in docs)
    for d in docs:  # the form lm-eval reads: one context, or one continuation
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
