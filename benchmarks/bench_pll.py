"""Benchmark: our PLL engine against minicons' MaskedLMScorer, same model, same sentences, one run.

    python benchmarks/bench_pll.py            # 200 passages of 128 tokens (about 1.5 h on 2 cores)
    python benchmarks/bench_pll.py --quick    # 8 passages (a few minutes)
    python benchmarks/bench_pll.py --n 50

Model: BERT-base-sized random weights built from the real bert-base-uncased config and tokenizer
(random weights cost the same as trained ones). Text: passages of exactly 126 WordPiece tokens
(128 with [CLS] and [SEP]) cut at word boundaries from a public-domain book in
../shared/data/haystack. Method: Salazar's PLL ("original" in minicons), full sentence.

What is measured, and why this way:
- Scores: per-passage PLL from both; the largest absolute difference is printed.
- Throughput: scored tokens per second of wall time, model loading excluded.
- Peak memory: each scorer runs in its own subprocess (so neither inherits the other's allocator
  cache). After loading the model and a short warm-up, the process records its resident set size
  and resets the kernel's high-water mark (/proc/self/clear_refs); after scoring it reads the
  high-water mark (VmHWM). Peak memory = high-water mark minus that baseline: everything the
  scoring itself allocated (torch tensors, tokenizer output, Python objects), model weights
  excluded. tracemalloc would miss torch's allocations; torch's profiler would miss the rest.
- Fairness on a shared machine: the passages are cut into chunks and the two scorers take turns
  (ours on chunk 1, minicons on chunk 1, ours on chunk 2, ...), each chunk in a fresh
  subprocess, so a change in background load hits both alike. Peak memory is the largest over
  a scorer's chunks.
- Matmul peak: the best of a few plain fp32 torch matmuls (square, 1024..4096), measured before
  every chunk of ours; the median of these samples is the CPU's peak during the run (the
  maximum is printed too).
- Our FLOPs: useful work only, counted from the real (unpadded) lengths: per masked copy and
  layer, the Q/K/V/output projections (8 L H^2), the feed-forward (4 L H I) and the attention
  products (4 L^2 H); plus the prediction head at each scored position (2 H^2 + 2 H V).
Minicons runs one passage per call (its lowest-memory use: all masked copies of one passage in
one forward pass, full-vocabulary logits for every position of every copy).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
TOKENIZER_FOLDER = SHARED / "tokenizers" / "bert-base-uncased"
BOOK = SHARED / "data" / "haystack" / "gutenberg_nltk" / "austen-emma.txt"
TEXT_TOKENS = 126  # + [CLS] and [SEP] = 128


def passages(tokenizer, n: int) -> list[str]:
    """n passages of exactly TEXT_TOKENS tokens, cut at word boundaries, in book order."""
    words = BOOK.read_text(encoding="utf-8").split()[2000:]  # skip the title pages
    out, start = [], 0
    while len(out) < n:
        end, count = start, 0
        while True:
            extra = len(tokenizer(words[end], add_special_tokens=False)["input_ids"])
            if count + extra > TEXT_TOKENS:
                break
            count, end = count + extra, end + 1
        text = " ".join(words[start:end])
        if len(tokenizer(text, add_special_tokens=False)["input_ids"]) == TEXT_TOKENS:
            out.append(text)
        start = end
    return out


def matmul_peak_gflops() -> float:
    import torch
    best = 0.0
    for n in (1024, 2048, 4096):
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b  # warm-up
        for _ in range(3):
            start = time.perf_counter()
            a @ b
            best = max(best, 2 * n**3 / (time.perf_counter() - start) / 1e9)
    return best


# ---------------------------------------------------------------- worker (one subprocess each)


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def worker(engine: str, sentences: list[str], token_budget: int) -> dict:
    import torch
    from demo.models import random_model
    lm = random_model(TOKENIZER_FOLDER, kind="masked", seed=0, shrink=False)
    if engine == "ours":
        from demo.pll import score_batch

        def run(texts):
            results = score_batch(lm, [("", t) for t in texts], method="salazar", scope="full",
                                  token_budget=token_budget, progress=False)
            return [r.total for r in results], [len(r.tokens) for r in results]
    else:
        from minicons.scorer import MaskedLMScorer
        scorer = MaskedLMScorer(lm.model, tokenizer=lm.tokenizer, device="cpu")
        # minicons 0.3.39 calls batch_encode_plus, which transformers 5 removed (SPEC section 8).
        type(scorer.tokenizer).batch_encode_plus = lambda self, *a, **k: self(*a, **k)

        def run(texts):
            totals, counts = [], []
            for t in texts:  # one passage per call: minicons' lowest-memory way
                totals += scorer.sequence_score([t], reduction=lambda x: x.sum(0).item(),
                                                PLL_metric="original")
                counts.append(len(lm.tokenizer(t, add_special_tokens=False)["input_ids"]))
            return totals, counts

    run(["A short warm-up sentence."])
    baseline_kib = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    start = time.perf_counter()
    totals, counts = run(sentences)
    seconds = time.perf_counter() - start
    return dict(engine=engine, totals=totals, scored_tokens=sum(counts), seconds=seconds,
                peak_mib=(_status_kib("VmHWM") - baseline_kib) / 1024, threads=torch.get_num_threads(),
                config=lm.model.config.to_dict())


def run_worker(engine: str, sentences: list[str], token_budget: int) -> dict:
    sentences_file = Path(tempfile.mkstemp(suffix="-sentences.json")[1])
    sentences_file.write_text(json.dumps(sentences))
    out = Path(tempfile.mkstemp(suffix=f"-{engine}.json")[1])
    subprocess.run([sys.executable, __file__, "--worker", engine, "--sentences", str(sentences_file),
                    "--token-budget", str(token_budget), "--result", str(out)], check=True)
    result = json.loads(out.read_text())
    sentences_file.unlink()
    out.unlink()
    return result


# ---------------------------------------------------------------- FLOPs


def engine_flops(config: dict, lengths: list[int]) -> float:
    """Useful FLOPs of our engine for Salazar PLL: every copy through the encoder, head at one token."""
    h, i, layers, v = (config["hidden_size"], config["intermediate_size"],
                       config["num_hidden_layers"], config["vocab_size"])
    total = 0.0
    for length in lengths:  # length incl. specials; one copy per text token
        copies = length - 2
        per_copy = layers * (8 * length * h * h + 4 * length * h * i + 4 * length * length * h)
        total += copies * (per_copy + 2 * h * h + 2 * h * v)
    return total


# ---------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="number of 128-token passages")
    parser.add_argument("--quick", action="store_true", help="8 passages")
    parser.add_argument("--chunk", type=int, default=20, help="passages per turn of each scorer")
    parser.add_argument("--token-budget", type=int, default=8192, help="our engine's tokens per forward")
    parser.add_argument("--worker", choices=["ours", "minicons"], help=argparse.SUPPRESS)
    parser.add_argument("--sentences", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    if args.worker:
        sentences = json.loads(args.sentences.read_text())
        args.result.write_text(json.dumps(worker(args.worker, sentences, args.token_budget)))
        return

    from transformers import AutoTokenizer
    n = 8 if args.quick else args.n
    chunk = 4 if args.quick else args.chunk
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_FOLDER)
    sentences = passages(tokenizer, n)
    print(f"{n} passages of {TEXT_TOKENS + 2} tokens from {BOOK.name}; BERT-base-sized random model; "
          f"load average {os.getloadavg()[0]:.1f}")

    runs, peaks = {"ours": [], "minicons": []}, []
    for start in tqdm(range(0, n, chunk), desc="chunks (ours, then minicons)"):
        peaks.append(matmul_peak_gflops())
        for engine in runs:
            runs[engine].append(run_worker(engine, sentences[start:start + chunk], args.token_budget))
    ours, theirs = ({"engine": engine, "config": r[0]["config"], "threads": r[0]["threads"],
                     "totals": [x for c in r for x in c["totals"]],
                     "scored_tokens": sum(c["scored_tokens"] for c in r),
                     "seconds": sum(c["seconds"] for c in r),
                     "peak_mib": max(c["peak_mib"] for c in r)} for engine, r in runs.items())
    peak = statistics.median(peaks)

    assert ours["scored_tokens"] == theirs["scored_tokens"], "the two scorers scored different tokens"
    max_abs_diff = max(abs(a - b) for a, b in zip(ours["totals"], theirs["totals"]))
    speed = {r["engine"]: r["scored_tokens"] / r["seconds"] for r in (ours, theirs)}
    throughput_ratio = speed["ours"] / speed["minicons"]
    memory_ratio = ours["peak_mib"] / theirs["peak_mib"]
    lengths = [TEXT_TOKENS + 2] * n  # every passage has exactly this length
    achieved = engine_flops(ours["config"], lengths) / ours["seconds"] / 1e9
    peak_fraction = achieved / peak

    for r in (ours, theirs):
        print(f"{r['engine']:>9}: {r['seconds']:8.1f} s  {speed[r['engine']]:7.1f} scored tokens/s  "
              f"peak +{r['peak_mib']:7.1f} MiB  ({r['threads']} threads)")
    print(f"fp32 matmul peak {peak:.0f} GFLOP/s (median of {len(peaks)}, max {max(peaks):.0f}); "
          f"our engine {achieved:.0f} GFLOP/s (token budget {args.token_budget}); "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"targets: throughput >= 1.3 {'met' if throughput_ratio >= 1.3 else 'MISSED'}, "
          f"memory <= 0.1 {'met' if memory_ratio <= 0.1 else 'MISSED'}, "
          f"peak >= 0.5 {'met' if peak_fraction >= 0.5 else 'MISSED'}, "
          f"scores agree (1e-3) {'yes' if max_abs_diff <= 1e-3 else 'NO'}")
    print(f"bench_pll throughput_ratio={throughput_ratio:.3f} memory_ratio={memory_ratio:.4f} "
          f"max_abs_diff={max_abs_diff:.2e} peak_fraction={peak_fraction:.3f}")


if __name__ == "__main__":
    main()
