"""Our model under lm-evaluation-harness against our own evaluator, on the same 200 requests.

    python benchmarks/bench_lm_eval.py [--model FOLDER_OR_HUB_ID] [--device cpu] [--threads 1] [--rounds 5]

The requests: 50 ARC-Easy validation questions with four answers each, zero-shot, the same
template on both sides ("Question: ...\\nAnswer: <answer>"), written to one local JSONL that an
lm-eval task YAML and one of our task YAMLs both read. Model: the stand-in MLM in
../shared/models/minilm-l6-mlm-standin unless --model says otherwise; PLL with +2 right masks.

Timed in the same run, taking turns (the order flips every round, so neither side always runs on
a warm or a cold machine), each turn a whole evaluation:
- plugin: ``lm_eval.simple_evaluate(model=MaskedLMEval(...), tasks=[...])``: lm-eval builds the
  200 requests from the YAML, our model scores them in one engine call, lm-eval computes accuracy;
- evaluator: ``demo.evaluation.evaluate.evaluate`` on our task (into a fresh folder, so nothing is resumed),
  all items in one chunk, so it too makes one engine call: the sides differ by harness, not batches.
Each turn also says how much of it was the model (``MaskedLMEval.loglikelihood``, resp.
``demo.engine.pll.score_choices``) and how much the harness around it.
The plugin's seconds leave out what ``simple_evaluate`` spends on its results' metadata
(``add_env_info``: torch's environment report, which runs ``pip list``; ``get_git_commit_hash``):
about 0.7 s per call whatever the model and however many requests, paid by lm-eval's own models
alike, so not the plugin's cost. It is timed and printed, with the ratio it would give.
The last line: ``time_ratio`` = plugin seconds / evaluator seconds (best turn of each: on a shared
machine other processes only ever add time); ``max_abs_diff`` = the largest difference between
the two sides' log-likelihoods of the same 200 requests.
"""

import argparse
import json
import random
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import lm_eval
import lm_eval.evaluator
import yaml
from lm_eval.tasks import TaskManager

from demo.engine import pll  # the package is installed (pip install -e .)
from demo.evaluation.evaluate import evaluate
from demo.evaluation_settings import RunSettings
from demo.harness.model import MaskedLMEval
from demo.tasks import read_task_file

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STANDIN = SHARED / "models" / "minilm-l6-mlm-standin"
ARC = SHARED / "data" / "arc" / "arc_easy_validation_hf.jsonl"
QUESTIONS, CHOICES = 50, 4  # 200 loglikelihood requests
TEMPLATE = "Question: {question}\nAnswer:"


def write_tasks(folder: Path) -> None:
    """The items as one JSONL, an lm-eval YAML and one of our task YAMLs over it."""
    records = [json.loads(line) for line in ARC.read_text().splitlines()]
    records = [r for r in records if len(r["choices"]["text"]) == CHOICES]
    random.Random(0).shuffle(records)
    items = [{"question": r["question"], "options": r["choices"]["text"],
              "answer": r["choices"]["text"][r["choices"]["label"].index(r["answerKey"])]}
             for r in records[:QUESTIONS]]
    data = folder / "arc200.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in items))
    (folder / "lm_eval").mkdir()
    (folder / "lm_eval" / "arc200.yaml").write_text(yaml.safe_dump(dict(
        task="arc200", dataset_path="json", dataset_kwargs={"data_files": {"test": str(data)}},
        test_split="test", output_type="multiple_choice",
        doc_to_text=TEMPLATE.replace("{question}", "{{question}}"), doc_to_choice="{{options}}",
        doc_to_target="answer",
        metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True}])))
    (folder / "ours").mkdir()
    (folder / "ours" / "arc200.yaml").write_text(yaml.safe_dump({"tasks": [dict(
        name="arc200_ours", data={"local": str(data)}, convert="fields",
        convert_args={"candidates": "options", "label": "answer"}, template=TEMPLATE + " {answer}",
        kind="choice", shots=0, metrics=["accuracy"])]}))


@contextmanager
def timing(owner, name: str, clock: list):
    """Adds the seconds spent in ``owner.name`` during the block to ``clock[0]``."""
    inner, own = getattr(owner, name), name in vars(owner)  # a module's function, or a method

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            clock[0] += time.perf_counter() - start

    setattr(owner, name, timed)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, inner)
        else:
            delattr(owner, name)  # the instance attribute goes: the class's method shows again


def run_plugin(model, manager) -> tuple[float, float, float, dict]:
    """(seconds, of which in the model, of which in lm-eval's run metadata, results) of a whole
    lm-eval evaluation."""
    in_model, in_metadata = [0.0], [0.0]
    with (timing(model, "loglikelihood", in_model),
          timing(lm_eval.evaluator, "add_env_info", in_metadata),
          timing(lm_eval.evaluator, "get_git_commit_hash", in_metadata)):
        start = time.perf_counter()
        results = lm_eval.simple_evaluate(model=model, tasks=["arc200"], task_manager=manager,
                                          log_samples=True, bootstrap_iters=0)
        seconds = time.perf_counter() - start
    return seconds, in_model[0], in_metadata[0], results


def run_evaluator(lm, task, folder: Path) -> tuple[float, float, float, list[dict]]:
    """(seconds, of which in the engine, 0 (no metadata step), records) of a whole evaluation by
    our evaluator."""
    in_engine = [0.0]
    with timing(pll, "score_choices", in_engine):  # the evaluator imports it at call time
        start = time.perf_counter()
        # one chunk: one engine call, as the plugin makes, so the sides differ by harness, not batches
        evaluate(lm, task, folder, RunSettings(shots=0, chunk_size=QUESTIONS))
        seconds = time.perf_counter() - start
    records = [json.loads(line) for line in next(folder.glob("*.jsonl")).read_text().splitlines()]
    return seconds, in_engine[0], 0.0, records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(STANDIN))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (1 is fastest on a crowded machine)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_tasks(tmp)
        model = MaskedLMEval(pretrained=args.model, device=args.device, threads=args.threads)
        manager = TaskManager(include_path=str(tmp / "lm_eval"), include_defaults=False)
        task = read_task_file(tmp / "ours" / "arc200.yaml", base=tmp / "ours")[0]
        run_plugin(model, manager)  # warm-up: datasets' cache of the JSONL, torch's first passes
        run_evaluator(model.lm, task, tmp / "warm")

        turns = {"plugin": [], "evaluator": []}  # (seconds, in the model, in metadata) per round
        for k in range(args.rounds):
            for side in (("plugin", "evaluator") if k % 2 == 0 else ("evaluator", "plugin")):
                if side == "plugin":
                    *took, results = run_plugin(model, manager)
                else:
                    *took, records = run_evaluator(model.lm, task, tmp / f"round{k}")
                turns[side].append(took)

    samples = sorted(results["samples"]["arc200"], key=lambda s: s["doc_id"])
    plugin_scores = [r[0][0] for s in samples for r in s["resps"]]
    ours = {r["index"]: r for r in records}
    evaluator_scores = [x for s in samples for x in ours[s["doc_id"]]["scores"]]
    assert len(plugin_scores) == len(evaluator_scores) == QUESTIONS * CHOICES
    max_abs_diff = max(abs(a - b) for a, b in zip(plugin_scores, evaluator_scores))
    plugin_acc = results["results"]["arc200"]["acc,none"]
    evaluator_acc = sum(r["correct"] for r in records) / len(records)

    # best of the rounds: on a shared machine the other processes only ever add time
    best = {side: min(t - meta for t, _, meta in runs) for side, runs in turns.items()}
    model_best = {side: min(m for _, m, _ in runs) for side, runs in turns.items()}
    harness = {side: statistics.median(t - m - meta for t, m, meta in runs)
               for side, runs in turns.items()}
    metadata = statistics.median(meta for _, _, meta in turns["plugin"])
    print(f"model {model.lm.label} ({model.lm.kind}, {model.lm.device}), {len(plugin_scores)} "
          f"requests, {args.rounds} rounds each, best of them:")
    for side in turns:
        print(f"{side:>10}: {best[side]:7.3f} s, in the model {model_best[side]:7.3f} s, the "
              f"harness around it {harness[side]:.3f} s (median)  "
              f"all: {' '.join(f'{t - meta:.2f}' for t, _, meta in turns[side])}")
    print(f"accuracy: plugin {plugin_acc:.3f}, evaluator {evaluator_acc:.3f}")
    ratio = best["plugin"] / best["evaluator"]
    print(f"left out above: lm-eval's run metadata (environment report, git hash), "
          f"{metadata:.3f} s per simple_evaluate (median); with it the ratio would be "
          f"{(best['plugin'] + metadata) / best['evaluator']:.3f}")
    print(f"target: plugin at most 10% over the evaluator {'met' if ratio <= 1.10 else 'MISSED'}")
    print(f"bench_lm_eval time_ratio={ratio:.3f} max_abs_diff={max_abs_diff:.2e}")


if __name__ == "__main__":
    main()
