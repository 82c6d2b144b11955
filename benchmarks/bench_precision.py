"""Benchmark: reduced precision against float32, one run: ranking agreement, greedy token
agreement, speed-up, per family.

    python benchmarks/bench_precision.py                 # 8 ranked items a task, 12 generated (about 15 min)
    python benchmarks/bench_precision.py --quick         # 2 and 3: a smoke test
    python benchmarks/bench_precision.py --device cuda   # every model on the GPU (default: cpu)
    python benchmarks/bench_precision.py --students 0    # without the lesson's steps

What is measured, and why this way:
- Dtypes: float32 (the reference), bfloat16 and float16, the weights cast as ``load_model(dtype=)``
  casts them (``ModelSettings.dtype``); the engine computes in the weights' dtype and takes the
  log-softmax in float32.
- Ranking: the shipped ranked tasks (COPA, PIQA, HellaSwag, WSC, Winograd, ARC-Easy and
  ARC-Challenge), 0-shot, each task's own scoring, the evaluator's texts and fixed sample
  (``bench_pll_approx.task_items``), scored by ``score_choices`` exactly. Agreement: the dtype's
  top candidate is float32's, with a Wilson 95% interval. Also the largest change of a score (nats)
  and how many scores are not finite (an overflow).
- Generation: instruction induction's Sentence Similarity, the evaluator's 5-shot prompts
  (``bench_decoding.prompts``), greedy, the task's decoding. Token agreement: the share of
  float32's tokens that the dtype writes at the same place; identical: the share of outputs equal
  to float32's.
- Speed-up: float32 seconds / the dtype's seconds over the same items; per chunk of items the
  dtypes take turns in a rotating order, so a change in the machine's load hits all alike.
  On a GPU after an untimed first pass of the same work (bf16/fp16 pay far more at each shape's first call).
- Families: the offline stand-in (real MiniLM weights: the only one whose rankings mean
  something), and random weights at real size for ModernBERT-base, DeBERTa-v3-base (DeBERTa-v2
  code, its last layer) and DeBERTa-base with its enhanced mask decoder (the BERTs paper's head):
  their agreement measures only how far a dtype moves the arithmetic (random models rank by
  near-ties, so it is a lower bound), their speed is what trained weights cost.
- The lesson's steps as a class asks them (on the CPU): steps 2 and 5, ``--students`` own texts
  (``class_load``'s names appended), the page's settings, both models of the offline pair (the
  stand-in and SmolLM2, loaded in float32 and cast): outputs identical to float32's and rankings
  whose winner is float32's.
Last line: ``bench_precision bf16_rank_agreement=... bf16_speedup=... fp16_rank_agreement=...
fp16_speedup=...`` for the stand-in's ranking, then its greedy token agreement per dtype, then per
dtype on the lesson: ``bf16_lesson_identical=<same>/<outputs> bf16_lesson_rankings=<kept>/<rankings>``.
"""

import argparse
import copy
import dataclasses
import math
import os
import time
from pathlib import Path

import torch
from bench_decoding import prompts  # benchmarks/bench_decoding.py
from bench_pll_approx import TASKS, task_items, wilson  # benchmarks/bench_pll_approx.py

from demo.engine.generation import generate
from demo.engine.models import DTYPES, load_model, prepare_attention
from demo.engine.pll import score_choices
from demo.settings import GenerationSettings

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STANDIN = SHARED / "models" / "minilm-l6-mlm-standin"
SHORT = {"bfloat16": "bf16", "float16": "fp16"}
GENERATED_TASK = "ii_sentence_similarity"
CHUNK = 4


def cast(lm, name: str):
    """``lm`` with its weights in the dtype ``name`` (a copy): what ``load_model(dtype=name)``
    loads, attention kernels included."""
    prepare_attention(lm.device, name)
    return dataclasses.replace(lm, model=copy.deepcopy(lm.model).to(DTYPES[name]))


def moved(lm, device: str):
    """``lm`` with its model on ``device`` (the random families are built on the CPU)."""
    return dataclasses.replace(lm, model=lm.model.to(device))


def families(quick: bool, device: str) -> dict:
    """{family label: (float32 model on ``device``, whether its weights are trained)}."""
    from random_shapes import deberta_base, speed_shapes  # benchmarks/random_shapes.py

    out = {"stand-in (MiniLM, trained)": (load_model(str(STANDIN), device=device), True)}
    if quick:
        return out
    out.update({label: (moved(lm, device), False) for label, lm in speed_shapes().items()})
    out["DeBERTa-base + EMD (random)"] = (moved(deberta_base(emd=True), device), False)
    return out


def synchronize() -> None:
    """Wait for the GPU's queued work (a no-op on the CPU), so the clock reads finished work."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(fn):
    synchronize()
    start = time.perf_counter()
    value = fn()
    synchronize()
    return value, time.perf_counter() - start


def rotating(n_chunks: int):
    """Each chunk's order of the dtypes (a rotation, so no dtype always runs first)."""
    names = list(DTYPES)
    for turn in range(n_chunks):
        yield names[turn % len(names):] + names[:turn % len(names)]


def ranking(models: dict, tasks: dict) -> dict:
    """{dtype: dict(agree, n, seconds, largest change, not finite)} over every task's items."""
    items = [(sets[k:k + CHUNK], scoring) for sets, scoring in tasks.values() for k in range(0, len(sets), CHUNK)]
    out = {name: dict(agree=0, n=0, seconds=0.0, moved=0.0, infinite=0) for name in DTYPES}
    for (chunk, scoring), order in zip(items, rotating(len(items))):
        scores = {}
        for name in order:
            results, seconds = timed(lambda: score_choices(models[name], chunk, scoring))
            scores[name] = [[r.score for r in ranked] for ranked in results]
            out[name]["seconds"] += seconds
        for name in DTYPES:
            for got, reference in zip(scores[name], scores["float32"]):
                top = max(range(len(reference)), key=reference.__getitem__)
                finite = [s for s in got if math.isfinite(s)]
                out[name]["infinite"] += len(got) - len(finite)
                out[name]["agree"] += len(finite) == len(got) and max(range(len(got)), key=got.__getitem__) == top
                out[name]["n"] += 1
                out[name]["moved"] = max(out[name]["moved"], *(abs(a - b) if math.isfinite(a) else math.inf
                                                              for a, b in zip(got, reference)))
    return out


def generation(models: dict, items: list, settings: GenerationSettings) -> dict:
    """{dtype: dict(tokens agreeing, float32's tokens, identical outputs, n, seconds)}."""
    out = {name: dict(same_tokens=0, tokens=0, identical=0, n=0, seconds=0.0) for name in DTYPES}
    for (prompt, _), order in zip(items, rotating(len(items))):
        written = {}
        for name in order:
            result, seconds = timed(lambda: generate(models[name], prompt, settings))
            written[name] = result.token_ids
            out[name]["seconds"] += seconds
        reference = written["float32"]
        for name in DTYPES:
            out[name]["same_tokens"] += sum(a == b for a, b in zip(written[name], reference))
            out[name]["tokens"] += len(reference)
            out[name]["identical"] += written[name] == reference
            out[name]["n"] += 1
    return out


def warm_up(models: dict, tasks: dict, prompted: list, settings: GenerationSettings) -> None:
    """On a GPU, an untimed first pass of the same work (a kernel's first call at a shape costs far more)."""
    if models["float32"].device.type == "cuda":
        ranking(models, tasks)
        generation(models, prompted, settings)


def lesson_work(students: int) -> dict:
    """The lesson's steps 2 (both models generate) and 5 (both models rank) as a class asks them,
    each student's own text (``class_load.own_text``), with the settings the page sends:
    {kind: (the model's name, [(prompt, None)], GenerationSettings, {"step 5": (choice sets,
    ScoringSettings)})}."""
    from dataclasses import replace

    from class_load import own_text, step_presses  # benchmarks/class_load.py

    from demo.engine.pll import choices_for
    from demo.ui import prompting, ranking
    handlers = {"/generate_mlm": prompting.generate_masked, "/generate_causal": prompting.generate_causal,
                "/rank_mlm": ranking.rank_masked, "/rank_causal": ranking.rank_causal}
    presses = step_presses([str(STANDIN)])
    work = {}
    for step in (2, 5):
        for endpoint, values in presses[step - 1][1]:
            fn = handlers[endpoint]
            asked = [dict(zip([t.argument for t in fn.takes], own_text([(endpoint, values)], i)[0][1]))
                     for i in range(students)]
            kind = "masked" if endpoint.endswith("mlm") else "causal"
            name, prompts, generation_settings, tasks = work.get(kind, (asked[0]["model_name"], [], None, {}))
            settings = fn.settings(asked[0])
            if step == 2:
                prompts = [(a["prompt"], None) for a in asked]
                generation_settings = replace(settings, padding_masks=None) if kind == "causal" else settings
            else:
                tasks = {"step 5": ([choices_for(a["context"], [c for c in a["candidates"].splitlines() if c.strip()])
                                     for a in asked], settings)}
            work[kind] = (name, prompts, generation_settings, tasks)
    return work


def lesson(students: int) -> dict:
    """{dtype: (identical outputs, outputs, rankings kept, rankings)} over the lesson's steps 2 and 5,
    both models, each printed with its figures."""
    from demo.ui.common import deployment
    totals = {name: [0, 0, 0, 0] for name in SHORT}
    for kind, (name, prompted, settings, tasks) in lesson_work(students).items():
        lm = deployment().load(name, kind, dtype="float32")
        models = {dtype: lm if dtype == "float32" else cast(lm, dtype) for dtype in DTYPES}
        ranked, written = ranking(models, tasks), generation(models, prompted, settings)
        print_family(f"lesson steps 2 and 5, {students} own texts: {kind} LM ({lm.label})", ranked, written)
        for dtype in SHORT:
            totals[dtype] = [a + b for a, b in zip(totals[dtype], (written[dtype]["identical"], written[dtype]["n"],
                                                                    ranked[dtype]["agree"], ranked[dtype]["n"]))]
    return totals


def print_family(label: str, ranked: dict, written: dict) -> None:
    print(f"{label}")
    print(f"  {'dtype':<9} {'rank agreement':>14} {'95% interval':>14} {'largest change':>14} {'not finite':>10} "
          f"{'speed-up':>8} | {'token agreement':>15} {'identical':>9} {'speed-up':>8}")
    for name in DTYPES:
        r, g = ranked[name], written[name]
        low, high = wilson(r["agree"], r["n"])
        print(f"  {name:<9} {r['agree'] / r['n']:>14.3f} [{low:.3f}, {high:.3f}] {r['moved']:>14.3g} "
              f"{r['infinite']:>10} {ranked['float32']['seconds'] / r['seconds']:>7.2f}x | "
              f"{g['same_tokens'] / max(g['tokens'], 1):>15.3f} {g['identical'] / g['n']:>9.3f} "
              f"{written['float32']['seconds'] / g['seconds']:>7.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=8, help="ranked items per task, the stand-in")
    parser.add_argument("--family-items", type=int, default=2, help="ranked items per task, random families")
    parser.add_argument("--gen-items", type=int, default=12, help="generated items")
    parser.add_argument("--quick", action="store_true", help="the stand-in only, 2 ranked items a task, 3 generated")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--device", default="cpu", help='where every model runs: "cpu" or "cuda"')
    parser.add_argument("--students", type=int, default=30, help="own texts on the lesson's steps 2 and 5 (0: none)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.threads:
        torch.set_num_threads(args.threads)
    items, gen_items = (2, 3) if args.quick else (args.items, args.gen_items)
    task, prompted = prompts(GENERATED_TASK, gen_items, None, SHARED / "data")
    greedy = GenerationSettings(**task.generation)
    gpu = f"{torch.cuda.get_device_name(args.device)}; " if args.device.startswith("cuda") else ""
    print(f"{len(TASKS)} ranked tasks, 0-shot; {task.name} generated ({len(prompted)} items, greedy); "
          f"{gpu}{torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.1f}\n", flush=True)
    stand_in = None
    for label, (lm, trained) in families(args.quick, args.device).items():
        models = {name: lm if name == "float32" else cast(lm, name) for name in DTYPES}
        tasks = {name: task_items(lm, name, items if trained else args.family_items) for name in TASKS}
        gen = prompted if trained else prompted[:2]
        warm_up(models, tasks, gen, greedy)
        ranked = ranking(models, tasks)
        written = generation(models, gen, greedy)
        print_family(label, ranked, written)
        stand_in = stand_in or (ranked, written)
    ranked, written = stand_in
    on_lesson = lesson(args.students) if args.students and args.device == "cpu" else {}
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    print("bench_precision " + " ".join(
        f"{SHORT[name]}_rank_agreement={ranked[name]['agree'] / ranked[name]['n']:.3f} "
        f"{SHORT[name]}_speedup={ranked['float32']['seconds'] / ranked[name]['seconds']:.2f}" for name in SHORT)
        + " " + " ".join(f"{SHORT[name]}_token_agreement="
                         f"{written[name]['same_tokens'] / max(written[name]['tokens'], 1):.3f}" for name in SHORT)
        + "".join(f" {SHORT[name]}_lesson_identical={same}/{n} {SHORT[name]}_lesson_rankings={kept}/{rankings}"
                  for name, (same, n, kept, rankings) in on_lesson.items()))


if __name__ == "__main__":
    main()
