"""Benchmark: the approximate PLL against the exact one on the shipped ranked tasks, one run:
ranking agreement, tokens read, wall-clock speed-up.

    python benchmarks/bench_pll_approx.py                # 16 items per task (about 7 min on 2 cores)
    python benchmarks/bench_pll_approx.py --items 48    # docs/method.md's frontier, 324 items (about 25 min)
    python benchmarks/bench_pll_approx.py --quick        # 2 items per task, one stride: a smoke test
    python benchmarks/bench_pll_approx.py --items 48 --task-items arc_easy=144 arc_challenge=144 \
        --strides 8 12 16 24 --speed-items 0 --records runs/pll_approx.json \
        --fast-table assets/scoring/fast_pll.csv           # fast scoring's table (about 25 min)
    python benchmarks/bench_pll_approx.py --min-span 64 --task-items piqa=600 hellaswag=60 \
        arc_easy=800 arc_challenge=600 --strides 8 12 16 24 --speed-items 0 \
        --records runs/pll_approx_long.json --fast-table assets/scoring/fast_pll.csv
                                                         # the long band alone, about 200 rankings

The approximate PLL is ``ScoringSettings(stride=s, rescore_band=b)`` (``demo.engine.pll``,
``demo.engine.pll_approx``): s masked copies score a text instead of one per token, a ranking's
shared tokens and the others apart; the candidates within b nats of the best are scored again,
exactly.

What is measured, and why this way:
- Items: COPA, PIQA, HellaSwag, WSC, Winograd, ARC-Easy and ARC-Challenge, 0-shot: each task's own
  items, candidates, scored span and scoring (+2 right masks, sums, ARC's unconditional
  normalisation), built by the evaluator's own loading (``demo.evaluation.evaluate.plan``), so
  these are the texts ``mlm-icl evaluate --shots 0`` scores; ``--items`` per task, the
  evaluator's fixed ``--limit`` sample. Model: the offline stand-in MLM (real weights).
- Agreement: the approximate ranking's top candidate is the exact ranking's. Pooled over all
  items, with a Wilson 95% interval (n items resolve a share only so far), and per task.
- Bands, held out: each task's items alternate between two halves. A stride's band for one half
  is the LEVEL-quantile, over the other half's items, of how far the exact winner's approximate
  score fell below the best approximate score: the band that would have kept that share of the
  other half's rankings. No item is judged with a band it helped choose.
- Wall clock: chunks of 16 items (as the evaluator batches); in each chunk the exact run and every
  stride's run take turns, their order rotating, so a change in the machine's load hits all
  alike. Speed-up = exact seconds / setting seconds over the same items. A banded setting also
  runs the exact pass over its near-ties (``score_choices`` runs exactly these two passes); that
  pass is charged at the chunk's exact seconds per token read, times the near-ties' tokens.
- Tokens read: ``demo.engine.pll.tokens_read`` (every masked copy's length), plus the near-ties'
  exact copies; the share of the exact run's.
- Per scored-span length (the scored tokens of a ranking's longest candidate: short < 16, medium
  16-63, long >= 64): each band's own frontier, bands set on its own other half, and fast
  scoring's setting there: the fastest that keeps >= 0.98 of the band's rankings with a lower
  Wilson bound >= 0.95 (so at least 73 rankings). ``--fast-table`` writes them as the table fast
  scoring reads (``ScoringSettings.fast``; the app's is ``assets/scoring/fast_pll.csv``).
- Bands that grow with the span ("band/sqrt(n)": nats per square root of the scored span), set
  the same way, against bands in nats: whether a longer text's larger errors need a wider band.
- Other architectures, for speed only (random weights: their rankings mean nothing): ModernBERT-base
  and DeBERTa-v3-base shapes (``benchmarks/random_shapes.py``), exact vs strides 8 and 16, on
  ``--speed-items`` items per task, taking turns the same way.
- The target (issue 28): agreement >= 0.98 and speed-up >= 3, pooled. The last line names the
  fastest setting that meets it, or ``setting=none`` and the fastest setting at >= 0.98 agreement,
  with its lower Wilson bound; then fast scoring over all items (``fast_speedup``,
  ``fast_agreement``, ``fast_lower_bound``): each span band's setting, exact where none qualified.
"""

import argparse
import csv
import dataclasses
import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STANDIN = SHARED / "models" / "minilm-l6-mlm-standin"
TASKS = ("copa", "piqa", "hellaswag", "wsc", "winograd", "arc_easy", "arc_challenge")
STRIDES = (6, 8, 12, 16)
SPEED_STRIDES = (8, 16)  # the random-weight architectures' (each costs minutes there)
LEVELS = (0.9, 0.95, 0.98, 0.99)  # held-out quantiles the bands are set at
CHUNK = 16
TARGET_AGREEMENT, TARGET_SPEEDUP = 0.98, 3.0
FAST_LOWER_BOUND = 0.95  # fast scoring's bar for a span band: this lower Wilson bound too ...
FAST_MIN_SPEEDUP = 1.1  # ... and worth an approximation: at least this much faster than exact
FAST_MODEL = "the offline stand-in MLM (MiniLM-L6)"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval of a share k/n (Wilson score interval)."""
    p, d = k / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def quantile(values: list[float], level: float) -> float:
    """The smallest value at or above a share ``level`` of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(level * len(ordered)) - 1)]


def best(scores: list[float]) -> int:
    return max(range(len(scores)), key=lambda i: scores[i])


# ---------------------------------------------------------------- items


def task_items(lm, name: str, items: int, min_span: int = 0) -> tuple[list[list], object]:
    """A task's choice sets (the evaluator's 0-shot texts) and its scoring settings; with
    ``min_span``, only the rankings of that sample whose scored span is at least that long."""
    from demo.engine.pll import Choice, scored_span
    from demo.evaluation.evaluate import plan
    from demo.evaluation_settings import RunSettings
    from demo.settings import ScoringSettings
    from demo.tasks import get_task
    from demo.tasks.fewshot import choice_items

    task = get_task(name)
    run = plan(lm, task, RunSettings(shots=0, limit=items), ScoringSettings())
    sets = [[Choice(context, completion, candidate) for (context, completion), candidate in
             zip(choice_items(task, e, [], run.score), e.candidates)] for e in run.examples]
    if min_span:
        sets = [s for s in sets if scored_span(lm, s, run.scoring) >= min_span]
    return sets, run.scoring


def timed(lm, sets, settings) -> tuple[list[list[float]], float, list[int]]:
    """(scores, seconds, per ranking the scored tokens of its longest candidate)."""
    from demo.engine.pll import score_choices
    start = time.perf_counter()
    results = score_choices(lm, sets, settings)
    seconds = time.perf_counter() - start
    return ([[r.score for r in ranking] for ranking in results], seconds,
            [max(len(r.tokens) for r in ranking) for ranking in results])


def run_chunks(lm, tasks: dict, strides, what: str) -> list[dict]:
    """One record per item: its exact and strided scores, its share of each run's seconds and
    tokens read, each candidate's exact tokens read. Exact and strides take turns per chunk."""
    from demo.engine.pll import tokens_read

    chunks = [(name, sets[k:k + CHUNK], scoring) for name, (sets, scoring) in tasks.items()
              for k in range(0, len(sets), CHUNK)]
    records = []
    for turn, (name, chunk, scoring) in enumerate(tqdm(chunks, desc=what)):
        runs = [1, *strides]
        runs = runs[turn % len(runs):] + runs[:turn % len(runs)]  # a rotating order
        scores, seconds, tokens, scored = {}, {}, {}, {}
        for s in runs:
            settings = replace(scoring, stride=s)
            scores[s], seconds[s], scored[s] = timed(lm, chunk, settings)
            tokens[s] = tokens_read(lm, chunk, settings)
        weights = [tokens_read(lm, [ranking], scoring) for ranking in chunk]  # a chunk's time, shared
        for k, ranking in enumerate(chunk):
            share = weights[k] / sum(weights)
            position = sum(r["task"] == name for r in records)  # in the task's sample
            records.append(dict(
                task=name, position=position, half=position % 2, span=scored[1][k],
                scores={s: scores[s][k] for s in runs}, seconds={s: seconds[s] * share for s in runs},
                tokens={s: tokens[s] * share for s in runs},
                exact_per_token=seconds[1] / tokens[1],
                candidate_tokens=[tokens_read(lm, [[choice]], scoring) for choice in ranking]))
    return records


# ---------------------------------------------------------------- settings' rows


def deficit(record: dict, s: int) -> float:
    """Nats by which the exact winner's approximate score fell below the best approximate score."""
    approximate = record["scores"][s]
    return max(approximate) - approximate[best(record["scores"][1])]


def banded(record: dict, s: int, band: float) -> tuple[bool, float, float]:
    """(agrees with exact, seconds, tokens read) of stride s with ``band``, as score_choices runs it:
    the near-ties' exact scores replace their approximate ones."""
    from demo.engine.pll_approx import near_ties
    exact, approximate = record["scores"][1], record["scores"][s]
    again = near_ties(approximate, band) if band > 0 else []
    final = [exact[i] if i in again else approximate[i] for i in range(len(exact))]
    extra = sum(record["candidate_tokens"][i] for i in again)
    return (best(final) == best(exact), record["seconds"][s] + extra * record["exact_per_token"],
            record["tokens"][s] + extra)


# How a band grows with the ranking's scored span n (its longest candidate's scored tokens): a
# constant (nats), or nats per square root of n (each approximated token adds its own error)
SCALES = {"": lambda n: 1.0, "/sqrt(n)": lambda n: math.sqrt(n)}


def rows(records: list[dict], strides) -> list[dict]:
    """Every setting: each stride alone, and with bands set on the other half at each level."""
    out = []
    for s in strides:
        settings = [(f"stride{s}", {0: 0.0, 1: 0.0}, "")]
        for unit, scale in SCALES.items():
            for level in LEVELS:
                bands = {h: round(quantile([deficit(r, s) / scale(r["span"]) for r in records if r["half"] != h],
                                           level) + 0.005, 2)
                         for h in (0, 1)}  # set on the other half (+ half a rounding step, kept inside)
                settings.append((f"stride{s}+band{unit}@q{level:g}", bands, unit))
        for name, bands, unit in settings:
            judged = [banded(r, s, bands[r["half"]] * SCALES[unit](r["span"])) for r in records]
            agree = sum(j[0] for j in judged)
            by_task = {}
            for r, j in zip(records, judged):
                by_task.setdefault(r["task"], []).append(j[0])
            out.append(dict(
                name=name, stride=s, bands=bands, unit=unit, n=len(records), agree=agree,
                agreement=agree / len(records), interval=wilson(agree, len(records)),
                speedup=sum(r["seconds"][1] for r in records) / sum(j[1] for j in judged),
                tokens=sum(j[2] for j in judged) / sum(r["tokens"][1] for r in records),
                by_task={t: sum(v) / len(v) for t, v in by_task.items()}))
    return out


# Scored-span length bands (tokens scored in a ranking's longest candidate): where the time goes
SPAN_BANDS = (("short (< 16)", 0, 15), ("medium (16-63)", 16, 63), ("long (>= 64)", 64, 10**9))
MIN_BAND_ITEMS = 4  # fewer: no frontier for the band


def measured_bands(records: list[dict]) -> list[tuple[int, int]]:
    """The span bands with enough items for a frontier (``band_frontiers`` decides these)."""
    return [(low, high) for _, low, high in SPAN_BANDS
            if sum(low <= r["span"] <= high for r in records) >= MIN_BAND_ITEMS]


def band_frontiers(records: list[dict], strides) -> list[tuple[int, int, dict]]:
    """Per span band, the settings on its own frontier (bands set on its own other half); returns
    fast scoring's choices, (lowest span, highest span, setting's row): per band, the fastest
    setting with a band in nats that keeps >= TARGET_AGREEMENT of its rankings with a lower Wilson
    bound >= FAST_LOWER_BOUND."""
    fast = []
    for label, low, high in SPAN_BANDS:
        inside = [r for r in records if low <= r["span"] <= high]
        if len(inside) < MIN_BAND_ITEMS:
            print(f"{label}: {len(inside)} item(s), too few for a frontier")
            continue
        table = rows(inside, strides)
        print(f"{label}: {len(inside)} items; frontier:", "; ".join(
            f"{r['name']} {r['speedup']:.2f}x at {r['agreement']:.3f} [{r['interval'][0]:.3f}, {r['interval'][1]:.3f}]"
            for r in sorted(table, key=lambda r: -r["speedup"]) if on_frontier(r, table)))
        kept = [r for r in table if r["unit"] == "" and r["speedup"] >= FAST_MIN_SPEEDUP
                and r["agreement"] >= TARGET_AGREEMENT
                and r["interval"][0] >= FAST_LOWER_BOUND]
        chosen = max(kept, key=lambda r: r["speedup"]) if kept else None
        print(f"  fast scoring (>= {TARGET_AGREEMENT} kept, lower bound >= {FAST_LOWER_BOUND}): "
              + (f"{chosen['name']} {chosen['speedup']:.2f}x" if chosen else "none: exact"))
        if chosen:
            fast.append((max(low, 1), high, chosen))
    return fast


def fast_pooled(records: list[dict], fast: list[tuple[int, int, dict]]) -> dict:
    """Fast scoring over every item, as ``ScoringSettings.fast`` runs it: an item in a chosen span
    band gets that band's stride and its half's held-out band, every other item the exact PLL."""
    agree, seconds = 0, 0.0
    for r in records:
        chosen = next((row for low, high, row in fast if low <= r["span"] <= high), None)
        ok, spent, _ = banded(r, chosen["stride"], chosen["bands"][r["half"]]) if chosen else (
            True, r["seconds"][1], 0)
        agree, seconds = agree + ok, seconds + spent
    return dict(agreement=agree / len(records), interval=wilson(agree, len(records)),
                speedup=sum(r["seconds"][1] for r in records) / seconds)


def fast_table_rows(fast: list[tuple[int, int, dict]]) -> list[dict]:
    """Fast scoring's table (``demo.engine.pll_approx.FastBand``): per chosen band its setting, the
    band the wider of the two halves' (so at least as close as measured)."""
    return [dict(span_min=low, span_max=high, stride=row["stride"], rescore_band=max(row["bands"].values()),
                 rankings=row["n"], agreement=round(row["agreement"], 4), low=round(row["interval"][0], 4),
                 high=round(row["interval"][1], 4), speedup=round(row["speedup"], 2), model=FAST_MODEL)
            for low, high, row in fast]


def write_fast_table(path: Path, fast: list[dict], measured: list[tuple[int, int]]) -> None:
    """Fast scoring's table (``demo.paths.FAST_PLL``): one row per band that qualified. The span
    bands this run measured (``measured``: lowest, highest span) are decided by it; the table's rows
    for bands it did not measure (a ``--min-span`` run measures the long band only) stay."""
    from demo.engine.pll_approx import FastBand
    columns = [f.name for f in dataclasses.fields(FastBand)]
    kept = []
    if path.exists():
        with path.open(newline="") as f:
            kept = [row for row in csv.DictReader(f)
                    if not any(low <= int(row["span_max"]) and int(row["span_min"]) <= high for low, high in measured)]
    rows_out = sorted(kept + fast, key=lambda row: int(row["span_min"]))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows_out)
    print(f"wrote {path}: {len(fast)} band(s) from this run, {len(kept)} kept from the table there")


def on_frontier(row: dict, table: list[dict]) -> bool:
    return not any(o["speedup"] > row["speedup"] and o["agreement"] >= row["agreement"]
                   or o["speedup"] >= row["speedup"] and o["agreement"] > row["agreement"] for o in table)


def print_table(table: list[dict]) -> None:
    tasks = list(table[0]["by_task"])
    print(f"{'setting':<31} {'bands (half 0/1)':>16} {'tokens':>7} {'speed-up':>8} {'agreement':>9} "
          f"{'95% interval':>14}  " + " ".join(f"{t[:9]:>9}" for t in tasks))
    for row in sorted(table, key=lambda r: -r["speedup"]):
        bands = "-" if not any(row["bands"].values()) else f"{row['bands'][0]:g}/{row['bands'][1]:g}"
        mark = "*" if on_frontier(row, table) else " "
        low, high = row["interval"]
        print(f"{mark}{row['name']:<30} {bands:>16} {row['tokens']:>7.2f} {row['speedup']:>7.2f}x "
              f"{row['agreement']:>9.3f} [{low:.3f}, {high:.3f}]  "
              + " ".join(f"{row['by_task'][t]:>9.3f}" for t in tasks))


# ---------------------------------------------------------------- other architectures (speed only)


def speed_line(label: str, records: list[dict], strides) -> str:
    exact = sum(r["seconds"][1] for r in records)
    return f"{label}: " + ", ".join(
        f"stride{s} {exact / sum(r['seconds'][s] for r in records):.2f}x "
        f"({sum(r['tokens'][s] for r in records) / sum(r['tokens'][1] for r in records):.2f} of the tokens)"
        for s in strides)


def speed_rows(tasks: dict, items: int, strides, standin_records: list[dict]) -> None:
    few = {name: (sets[:items], scoring) for name, (sets, scoring) in tasks.items()}
    print(f"Speed on other architectures, the first {items} item(s) of each task "
          f"({sum(len(s) for s, _ in few.values())} items; random weights, so speed only):")
    same = [r for r in standin_records if r["position"] < items]
    print(speed_line("  the stand-in, on these items (from the runs above)", same, strides))
    from random_shapes import speed_shapes  # benchmarks/random_shapes.py
    for label, lm in speed_shapes().items():
        print(speed_line(f"  {label}", run_chunks(lm, few, strides, label), strides), flush=True)


# ---------------------------------------------------------------- main


def load_records(path: Path) -> list[dict]:
    """Records as ``run_chunks`` made them (JSON keeps the strides as strings)."""
    records = json.loads(path.read_text())
    for r in records:
        for key in ("scores", "seconds", "tokens"):
            r[key] = {int(s): v for s, v in r[key].items()}
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=16, help="items per task (a fixed sample)")
    parser.add_argument("--task-items", nargs="+", default=[], metavar="TASK=N",
                        help="items for some tasks instead of --items (e.g. more of the long-span ones)")
    parser.add_argument("--speed-items", type=int, default=1,
                        help="items per task for the random-weight architectures' speed (0: none)")
    parser.add_argument("--min-span", type=int, default=0,
                        help="only the sample's rankings with at least this many scored tokens (64: the long band)")
    parser.add_argument("--quick", action="store_true", help="2 items per task, stride 8: a smoke test")
    parser.add_argument("--strides", type=int, nargs="+", default=list(STRIDES), help="strides to measure")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--fast-table", type=Path, default=None,
                        help="write fast scoring's table of span bands here (the app's: assets/scoring/fast_pll.csv)")
    parser.add_argument("--records", type=Path, default=None,
                        help="a JSON file of the runs' per-item records: read when it exists (no model is "
                             "run), else written, so the tables can be remade without the runs")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from demo.engine.models import load_model
    if args.threads:
        torch.set_num_threads(args.threads)
    items, strides = (2, (8,)) if args.quick else (args.items, tuple(args.strides))
    start, tasks = time.perf_counter(), None
    if args.records and args.records.exists():
        records = load_records(args.records)
        strides = tuple(sorted(set(records[0]["scores"]) - {1}))
        counts = {name: sum(r["task"] == name for r in records) for name in TASKS}
        print(f"{len(records)} items from {args.records} (no model run): "
              + ", ".join(f"{name} {n}" for name, n in counts.items()))
    else:
        lm = load_model(str(STANDIN), device="cpu")
        counts = {name: items for name in TASKS} | {k: int(v) for k, v in (a.split("=") for a in args.task_items)}
        tasks = {name: task_items(lm, name, counts[name], args.min_span) for name in TASKS}
        print(f"{sum(len(s) for s, _ in tasks.values())} items ("
              + ", ".join(f"{name} {len(s)}" for name, (s, _) in tasks.items())
              + f"), 0-shot{f', scored spans >= {args.min_span} tokens' if args.min_span else ''}; "
              f"the stand-in MLM; {torch.get_num_threads()} threads; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        records = run_chunks(lm, tasks, strides, "chunks (exact and strides, taking turns)")
        if args.records:
            args.records.parent.mkdir(parents=True, exist_ok=True)
            args.records.write_text(json.dumps(records))
    table = rows(records, strides)
    print(f"\nExact: {sum(r['seconds'][1] for r in records):.1f} s; all runs {time.perf_counter() - start:.0f} s"
          f"{' (read from the records)' if tasks is None else ''}; "
          f"load average {os.getloadavg()[0]:.1f}. tokens = share of the exact run's tokens read; "
          f"* = on the frontier (nothing both faster and as close to exact).")
    print_table(table)
    print("\nPer scored-span length (the longest candidate's scored tokens):")
    fast = band_frontiers(records, strides)
    pooled = fast_pooled(records, fast)
    print(f"fast scoring over all {len(records)} items (exact outside its bands): {pooled['speedup']:.2f}x at "
          f"{pooled['agreement']:.3f} [{pooled['interval'][0]:.3f}, {pooled['interval'][1]:.3f}]")
    if args.fast_table:
        write_fast_table(args.fast_table, fast_table_rows(fast), measured_bands(records))
    if args.speed_items and tasks:
        print()
        speed_rows(tasks, args.speed_items, strides if args.quick else SPEED_STRIDES, records)

    meets = [r for r in table if r["agreement"] >= TARGET_AGREEMENT and r["speedup"] >= TARGET_SPEEDUP]
    close = [r for r in table if r["agreement"] >= TARGET_AGREEMENT]
    chosen = max(meets or close or table, key=lambda r: (r["speedup"], r["agreement"]))
    name = chosen["name"]
    print(f"\ntarget: agreement >= {TARGET_AGREEMENT} and speed-up >= {TARGET_SPEEDUP}, pooled: "
          + (f"met by {chosen['name']}" if meets else
             f"no setting meets it; the fastest at >= {TARGET_AGREEMENT} agreement is {chosen['name']}"
             if close else f"no setting meets it, none reaches {TARGET_AGREEMENT} agreement; the "
             f"closest is {chosen['name']}"))
    print(f"bench_pll_approx setting={name if meets else 'none'} speedup={chosen['speedup']:.2f} "
          f"agreement={chosen['agreement']:.3f} lower_bound={chosen['interval'][0]:.3f}"
          + ("" if meets else f" nearest={name}")
          + f" fast_speedup={pooled['speedup']:.2f} fast_agreement={pooled['agreement']:.3f} "
          f"fast_lower_bound={pooled['interval'][0]:.3f}")


if __name__ == "__main__":
    main()
