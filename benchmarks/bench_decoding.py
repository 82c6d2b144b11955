"""Writing in any order at the field's speed: the frontier of tokens a step, confidence thresholds
and the block cache against the exact any-order decoder, and batches against one prompt at a time.

    python benchmarks/bench_decoding.py [--task ii_sentence_similarity] [--items 20] [--shots 5]
        [--max-new-tokens 128] [--block-length 32] [--ks 1 2 4 8] [--thresholds 0.5 0.7 0.9 0.95]
        [--batch 8] [--threads 1] [--model PATH] [--shape-items 2] [--shape-tokens 64] [--figure PATH]

The stand-in MLM (../shared/models/minilm-l6-mlm-standin) on a generated task whose data is in
../shared/data. Default: instruction induction's Sentence Similarity, the in-context check (5
Input/Output demonstrations, then the input; greedy, stop at the newline, exact match of the first
sentence, lower-cased). It is the one offline generated task on which the stand-in's paper
decoder scores above 0 (16 instruction-induction tasks tried on 4 to 10 items each; the closed-book
QA sets are Hub only). The prompts are the evaluator's (``demo.tasks.fewshot``: the first
``--items`` of the task's fixed sample, demonstrations drawn from (seed 0, item), as ``mlm-icl
evaluate`` draws them); outputs are scored with the task's first metric (``demo.tasks.metrics``).

Decoders, all greedy, each item run by every decoder in turn (so a busy machine slows all alike):
- paper: the task's own settings (window="slide", left to right, one token a pass: the BERTs
  paper's decoder, through transformers' generate()), the exact match every other is held to;
- exact: dLLM's BERT-Chat way, the baseline of speed and agreement: ``--max-new-tokens`` masks
  ahead of the text from the first step (masks_ahead), filled a block of ``--block-length`` at a
  time, the surest mask first, one token a pass, every pass over the whole window;
- k=K: K tokens a pass; t=T: every mask at least T sure (and at least one), Fast-dLLM's threshold;
  each also "+cache": the block cache (``demo.engine.block_cache``: what precedes the open block
  read once a block).
Per decoder: the score (percent), seconds (wall clock, sum over the items), forward passes, tokens
read and tokens per pass (``GenerationResult.reads``), speedup = the exact decoder's seconds / its
seconds, same = the share of items on which it writes the exact decoder's text (stripped),
prefix = the share of the exact decoder's tokens it writes before its text first differs, and
em_ratio = its score / the paper's.

Other architectures, speed only (random weights, ``benchmarks/random_shapes.py``): ModernBERT-base
and DeBERTa-v3-base shapes write the first ``--shape-items`` prompts with ``--shape-tokens`` masks
ahead in blocks of ``--block-length``: the exact decoder against its block cache and k = 2 and 8
with it, seconds against the exact decoder's in the same run.

``--figure PATH`` draws the frontier (score against forward passes per item, one point per
decoder; docs/figures/decoding_frontier.svg is this command's with the defaults and ``--items 10``).

Batches: the exact decoder's settings, the items written ``--batch`` at a time
(``demo.engine.generation.generate_together``: one padded forward pass a step for all of them)
against one at a time, the same outputs (counted); throughput = one-at-a-time seconds / batched
seconds.

Target (issue 44): a setting whose texts equal the exact decoder's on >= 95% of items at >= 4x
its wall clock, and batches of 8 at >= 2x the throughput of one at a time. Last line:
``bench_decoding task=<t> items=<n> exact_passes=<n> best=<name> best_same_speedup=<x>
best_same=<share> best_passes_ratio=<x> batch<B>_throughput=<x> batch_same=<share>
exact_step_ms=<ms> outside_forward_ms=<ms> target_met=true|false``, where best is the fastest
setting with same >= 0.95 (the exact decoder itself, speedup 1, where none is), and the last two
are the exact decoder's time a step and, of it, the time outside the model's forward pass (its
layers and its head): the unmasking loop's own.
"""

import argparse
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from demo.engine.generation import generate, generate_together
from demo.engine.models import load_model
from demo.evaluation.evaluate import fixed_sample
from demo.settings import GenerationSettings
from demo.tasks import get_task, load_examples
from demo.tasks import metrics as M
from demo.tasks.fewshot import generation_prompt, sample_demonstrations

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STANDIN = SHARED / "models" / "minilm-l6-mlm-standin"
SAME_BAR, SPEED_BAR, BATCH_BAR = 0.95, 4.0, 2.0  # the targets


@dataclass
class Tally:
    """One decoder's totals over the items."""
    name: str
    settings: GenerationSettings
    score: float = 0.0
    seconds: float = 0.0
    passes: int = 0
    tokens_read: int = 0
    outputs: int = 0
    same: int = 0  # items on which it wrote the exact decoder's text
    texts: list = field(default_factory=list)
    ids: list = field(default_factory=list)  # each item's token ids
    same_tokens: float = 0.0  # the share of the exact decoder's tokens it wrote alike, before the first difference
    forward_seconds: float = 0.0  # of ``seconds``, inside the model's forward passes (any-order writing only)


def prompts(task_name: str, items: int, shots: int | None, data_root: Path):
    """(task, [(prompt, answers)]) as the evaluator builds them for seed 0, repetition 0."""
    task = get_task(task_name)
    if task.kind != "generate":
        raise SystemExit(f"{task_name} is not a generated task (kind {task.kind}).")
    k = task.shots if shots is None else shots
    examples = fixed_sample(load_examples(task, "data", data_root), items)
    pool = load_examples(task, "demos", data_root) if k else []
    same = task.demos is None
    out = []
    for e in examples:
        demos = sample_demonstrations(pool, k, seed=0, repetition=0, item=e, same_split=same)
        out.append((generation_prompt(task, e, demos), list(e.answers or [e.target])))
    return task, out


def decoders(task, ks: list[int], thresholds: list[float], max_new_tokens: int, block: int) -> list[Tally]:
    """The paper's decoder, the exact any-order decoder (BERT-Chat's settings), then each faster
    setting without and with the block cache."""
    paper = GenerationSettings(**task.generation)
    exact = replace(paper, max_new_tokens=max_new_tokens, window="block", block_length=block, masks_ahead=True,
                    order="confidence", tokens_per_step=1)
    faster = [(f"k={k}", replace(exact, tokens_per_step=k)) for k in ks if k > 1 and k <= block] + [
        (f"t={t:g}", replace(exact, confidence_threshold=t)) for t in thresholds]
    return [Tally("paper", paper), Tally("exact", exact), Tally("exact+cache", replace(exact, cache="prefix"))] + [
        Tally(name + cached, replace(s, cache="prefix") if cached else s)
        for name, s in faster for cached in ("", "+cache")]


@contextmanager
def forward_timed(t: Tally):
    """The unmasking loop's forward passes (the model's layers and its head) timed into
    ``t.forward_seconds``."""
    import demo.engine.unmasking as unmasking

    def timed(fn):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                t.forward_seconds += time.perf_counter() - start
        return run

    saved = (unmasking.hidden_at, unmasking.mlm_head)
    unmasking.hidden_at, unmasking.mlm_head = timed(saved[0]), lambda model: timed(saved[1](model))
    try:
        yield
    finally:
        unmasking.hidden_at, unmasking.mlm_head = saved


def run(lm, task, items, tallies: list[Tally]) -> None:
    """Every item by every decoder in turn; scored with the task's first metric (no task: unscored)."""
    for prompt, answers in items:
        for t in tallies:
            start = time.perf_counter()
            with forward_timed(t):
                result = generate(lm, prompt, t.settings)
            t.seconds += time.perf_counter() - start
            t.texts.append(result.text.strip())
            t.ids.append(result.token_ids)
            t.passes += result.reads.passes
            t.tokens_read += result.reads.tokens
            if task is not None:
                t.score += M.example_score(task.metrics[0], {"text": t.texts[-1], "answers": answers})
            t.outputs += 1
    exact = next(t for t in tallies if t.name == "exact")
    for t in tallies:
        t.same = sum(a == b for a, b in zip(t.texts, exact.texts))
        t.same_tokens = sum(_common_start(a, b) for a, b in zip(t.ids, exact.ids)) / max(sum(map(len, exact.ids)), 1)


def _common_start(a: list[int], b: list[int]) -> int:
    """How many tokens two outputs share before they first differ."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def batched(lm, items, settings: GenerationSettings, batch: int, alone: list[str]) -> tuple[float, float]:
    """(seconds writing the items ``batch`` at a time, the share whose text is the one written alone)."""
    start, texts = time.perf_counter(), []
    for at in range(0, len(items), batch):
        texts += [r.text.strip() for r in generate_together(lm, [p for p, _ in items[at:at + batch]], settings)]
    return time.perf_counter() - start, sum(a == b for a, b in zip(texts, alone)) / len(items)


def best(tallies: list[Tally]) -> Tally:
    """The fastest setting writing the exact decoder's text on >= SAME_BAR of the items."""
    exact = tallies[1]
    kept = [t for t in tallies[1:] if t.same >= SAME_BAR * exact.outputs]
    return min(kept, key=lambda t: t.seconds)


def report(task, tallies: list[Tally], batch: int, batch_seconds: float, batch_same: float) -> None:
    paper, exact = tallies[0], tallies[1]
    n = paper.outputs
    print(f"{'decoder':>14} | {'score %':>7} {'seconds':>8} {'passes':>7} {'tok/pass':>8} | "
          f"{'speedup':>7} {'same %':>6} {'prefix %':>8} {'em_ratio':>8}")
    for t in tallies:
        em = t.score / paper.score if paper.score else float("nan")
        print(f"{t.name:>14} | {100 * t.score / n:>7.1f} {t.seconds:>8.1f} {t.passes:>7} "
              f"{t.tokens_read / max(t.passes, 1):>8.1f} | {exact.seconds / t.seconds:>7.2f} "
              f"{100 * t.same / n:>6.1f} {100 * t.same_tokens:>8.1f} {em:>8.2f}")
    throughput = exact.seconds / batch_seconds
    print(f"batches of {batch}: {batch_seconds:.1f} s against {exact.seconds:.1f} s one at a time "
          f"({throughput:.2f}x), {100 * batch_same:.0f}% of the texts the same")
    step_ms = 1000 * exact.seconds / exact.passes
    outside_ms = 1000 * (exact.seconds - exact.forward_seconds) / exact.passes
    print(f"the exact decoder: {step_ms:.1f} ms a step, {outside_ms:.2f} ms of it outside the model's forward pass "
          f"({100 * outside_ms / step_ms:.0f}%)")

    top = best(tallies)
    speedup = exact.seconds / top.seconds
    met = speedup >= SPEED_BAR and throughput >= BATCH_BAR
    print(f"bench_decoding task={task.name} items={n} exact_passes={exact.passes} best={top.name} "
          f"best_same_speedup={speedup:.2f} best_same={top.same / n:.3f} "
          f"best_passes_ratio={exact.passes / max(top.passes, 1):.2f} batch{batch}_throughput={throughput:.2f} "
          f"batch_same={batch_same:.3f} exact_step_ms={step_ms:.2f} outside_forward_ms={outside_ms:.3f} "
          f"target_met={str(met).lower()}")


def shape_speed(items, tallies: list[Tally], shape_items: int, shape_tokens: int) -> None:
    """Seconds of the exact decoder, its block cache and k = 2, 8 with it, on real-size random
    shapes (speed only: their texts mean nothing)."""
    from random_shapes import speed_shapes  # benchmarks/random_shapes.py

    chosen = [t for t in tallies if t.name in ("exact", "exact+cache", "k=2+cache", "k=8+cache")]
    for label, lm in speed_shapes().items():
        shaped = [Tally(t.name, replace(t.settings, max_new_tokens=shape_tokens)) for t in chosen]
        run(lm, None, items[:shape_items], shaped)
        exact = shaped[0]
        print(f"{label}, {shape_items} item(s), {shape_tokens} masks ahead: exact {exact.seconds:.1f} s "
              f"({exact.passes} passes); " + ", ".join(
                  f"{t.name} {exact.seconds / t.seconds:.2f}x ({t.passes} passes)" for t in shaped[1:]), flush=True)


def frontier_figure(path: Path, task, tallies: list[Tally], model: str) -> None:
    """Score against forward passes per item: a colour per way of writing, an open circle reading
    the whole window every pass, a dot inside it with the block cache (the same passes: the cache
    makes each cheaper, not fewer); the legend gives the share of items each writes as the exact
    decoder does."""
    import plotly.graph_objects as go

    n, ways = tallies[0].outputs, {}
    per_item = [max(t.passes, 1) / n for t in tallies]
    for t in tallies:
        ways.setdefault(t.name.removesuffix("+cache"), []).append(t)
    figure = go.Figure()
    for way, shown in ways.items():
        same = " · ".join(f"{100 * t.same / n:.0f}%" for t in shown)
        figure.add_trace(go.Scatter(
            x=[t.passes / n for t in shown], y=[100 * t.score / n for t in shown], mode="markers",
            name=f"{way}: same {same}", legendgroup=way,
            marker=dict(size=[8 if t.name.endswith("+cache") else 16 for t in shown], line=dict(width=2),
                        symbol=["circle" if t.name.endswith("+cache") else "circle-open" for t in shown])))
    figure.update_layout(title=f"{model}: {task.name}, {n} items: score against forward passes<br><sup>"
                               "open circle: every pass reads the whole window; dot: the block cache · "
                               "same: items written as the exact any-order decoder writes them (window · cache)</sup>",
                         xaxis=dict(title="forward passes per item (log)", type="log",
                                    tickvals=[2 ** i for i in range(int(math.log2(min(per_item))),
                                                                    math.ceil(math.log2(max(per_item))) + 1)]),
                         yaxis=dict(title=f"{task.metrics[0]} (%)"), width=900, height=560,
                         template="plotly_white")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.write_image(path)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(STANDIN))
    parser.add_argument("--task", default="ii_sentence_similarity")
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--shots", type=int, default=None, help="default: the task's")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="masks ahead (BERT-Chat: 128)")
    parser.add_argument("--block-length", type=int, default=32, help="BERT-Chat: 32")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--thresholds", type=float, nargs="*", default=[0.5, 0.7, 0.9, 0.95])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--data-root", type=Path, default=SHARED / "data")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shape-items", type=int, default=2, help="items for the random shapes' speed (0: none)")
    parser.add_argument("--shape-tokens", type=int, default=64, help="masks ahead on the random shapes")
    parser.add_argument("--figure", type=Path, default=None, help="write the frontier figure here (.svg, .png)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model(args.model, device="cpu")
    task, items = prompts(args.task, args.items, args.shots, args.data_root)
    tallies = decoders(task, args.ks, args.thresholds, args.max_new_tokens, args.block_length)
    print(f"model: {Path(args.model).name}; task {task.name} ({task.metrics[0]}), {len(items)} items, "
          f"{task.shots if args.shots is None else args.shots} shots; {args.max_new_tokens} masks ahead, blocks of "
          f"{args.block_length}; {args.threads} thread(s)")
    run(lm, task, items, tallies)
    batch_seconds, batch_same = batched(lm, items, tallies[1].settings, args.batch, tallies[1].texts)
    if args.figure:
        frontier_figure(args.figure, task, tallies, Path(args.model).name)
    if args.shape_items:
        shape_speed(items, tallies, args.shape_items, args.shape_tokens)
    report(task, tallies, args.batch, batch_seconds, batch_same)


if __name__ == "__main__":
    main()
