"""Benchmark: our PLL engine against minicons' MaskedLMScorer, same model, same passages, one run.

    python benchmarks/bench_pll.py            # 200 passages of 128 tokens (about 90 min on 2 quiet cores)
    python benchmarks/bench_pll.py --quick    # 6 passages
    python benchmarks/bench_pll.py --n 50 --token-budget 4096

Model: BERT-base-sized random weights built from the real bert-base-uncased config and tokenizer
(random weights cost the same as trained ones). Text: passages of exactly 126 WordPiece tokens
(128 with [CLS] and [SEP]) cut at word boundaries from a public-domain book in
../shared/data/haystack. Method: Salazar's PLL ("original" in minicons), whole passage scored.

What is measured, and why this way:
- Scores: per-passage PLL from both; the largest absolute difference is printed.
- Throughput: scored tokens per second of wall time spent scoring (model loading excluded).
- Fairness on a shared machine: each scorer lives in its own worker process and the two take
  turns passage by passage (never at the same time), so changes in background load hit both
  alike. Minicons gets one passage per call, its lowest-memory use (all masked copies of one
  passage in one forward pass, full-vocabulary logits at every position of every copy).
- Peak memory: separate processes, so neither inherits the other's allocator cache. After loading
  the model and a short warm-up each worker records its resident set size and resets the
  kernel's high-water mark (/proc/self/clear_refs); at the end it reads the high-water mark
  (VmHWM). Peak = high-water mark minus that baseline: everything scoring allocated (torch
  tensors, tokenizer output, Python objects, allocator overhead), model weights excluded.
  tracemalloc would miss torch's allocations; torch's profiler would miss everything else.
- Matmul peak: the best of three plain fp32 2048 x 2048 torch matmuls, sampled before every
  passage; the median sample is this CPU's peak during the run (the maximum is printed too).
- Our FLOPs: useful work only: per masked copy and layer but the last the Q/K/V/output
  projections (8 L H^2), the feed-forward (4 L H I) and the attention products (4 L^2 H); the
  last layer's keys and values at every position (4 L H^2) and the rest of it at the scored
  position only (4 H^2 + 4 H I + 4 L H: demo.engine.reading); plus the prediction head there
  (2 H^2 + 2 H V). All passages have the same length, so there is no padding to leave out.
- DeBERTa's enhanced mask decoder: our engine on a random DeBERTa-base (benchmarks/random_shapes.py)
  with and without the decoder, the same passages taking turns in this process;
  deberta_emd_cost = seconds with / seconds without (the decoder's two extra passes of the last
  layer run at the scored rows only, so it should stay close to 1).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TOKENIZER_FOLDER = SHARED / "tokenizers" / "bert-base-uncased"
BOOK = SHARED / "data" / "haystack" / "gutenberg_nltk" / "austen-emma.txt"
TEXT_TOKENS = 126  # + [CLS] and [SEP] = 128
RESULT = "RESULT "  # prefix of the worker's answer lines on stdout


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


def matmul_gflops(n: int = 2048) -> float:
    import torch
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def encoder_flops(config: dict, length: int, scored: int) -> float:
    """FLOPs of our engine for one text: `scored` masked copies, head at one position each."""
    h, i, layers, v = (config["hidden_size"], config["intermediate_size"],
                       config["num_hidden_layers"], config["vocab_size"])
    per_copy = (layers - 1) * (8 * length * h * h + 4 * length * h * i + 4 * length * length * h)
    last_layer = 4 * length * h * h + 4 * h * h + 4 * h * i + 4 * length * h
    return scored * (per_copy + last_layer + 2 * h * h + 2 * h * v)


# ---------------------------------------------------------------- worker process


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def worker(engine: str, token_budget: int) -> None:
    """Score passages sent on stdin (one JSON list per line), answer on stdout."""
    import torch

    from demo.engine.models import random_model
    lm = random_model(TOKENIZER_FOLDER, kind="masked", seed=0, shrink=False)
    if engine == "ours":
        from demo.engine.pll import score_batch
        from demo.settings import ScoringSettings

        def run(texts):
            results = score_batch(lm, [("", t) for t in texts],
                                  ScoringSettings(method="salazar", scope="full", token_budget=token_budget))
            return [r.total for r in results], sum(len(r.tokens) for r in results)
    else:
        from minicons.scorer import MaskedLMScorer
        scorer = MaskedLMScorer(lm.model, tokenizer=lm.tokenizer, device="cpu")
        # minicons 0.3.39 calls batch_encode_plus, which transformers 5 removed (docs/method.md, section 7).
        type(scorer.tokenizer).batch_encode_plus = lambda self, *a, **k: self(*a, **k)

        def run(texts):
            totals = []
            for t in texts:  # one passage per call: minicons' lowest-memory way
                totals += scorer.sequence_score([t], reduction=lambda x: x.sum(0).item(),
                                                PLL_metric="original")
            return totals, None  # minicons does not say how many tokens it scored: counted below

    run(["A short warm-up sentence."])
    baseline_kib = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    print(RESULT + json.dumps({"threads": torch.get_num_threads(),
                               "config": lm.model.config.to_dict()}), flush=True)
    for line in sys.stdin:
        texts = json.loads(line)
        start = time.perf_counter()
        totals, scored = run(texts)
        seconds = time.perf_counter() - start
        if scored is None:  # counted outside the timed part
            scored = sum(len(lm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
        print(RESULT + json.dumps({"totals": totals, "scored_tokens": scored, "seconds": seconds,
                                   "peak_mib": (_status_kib("VmHWM") - baseline_kib) / 1024}),
              flush=True)


class Worker:
    def __init__(self, engine: str, token_budget: int):
        self.engine = engine
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", engine, "--token-budget", str(token_budget)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = self._answer()

    def _answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(RESULT):
                return json.loads(line[len(RESULT):])
        raise RuntimeError(f"the {self.engine} worker stopped (exit code {self.process.wait()})")

    def score(self, texts: list[str]) -> dict:
        self.process.stdin.write(json.dumps(texts) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def emd_cost(texts: list[str], token_budget: int) -> float:
    """Seconds scoring ``texts`` with DeBERTa's enhanced mask decoder over seconds without it."""
    from random_shapes import deberta_base  # benchmarks/random_shapes.py

    from demo.engine.pll import score_batch
    from demo.settings import ScoringSettings

    settings = ScoringSettings(method="salazar", scope="full", token_budget=token_budget)
    models = {"plain": deberta_base(emd=False), "emd": deberta_base(emd=True)}
    seconds = dict.fromkeys(models, 0.0)
    for lm in models.values():
        score_batch(lm, [("", "A short warm-up sentence.")], settings)
    for text in tqdm(texts, desc="passages (DeBERTa-base without, then with its decoder)"):
        for name, lm in models.items():
            start = time.perf_counter()
            score_batch(lm, [("", text)], settings)
            seconds[name] += time.perf_counter() - start
    print(f"DeBERTa-base: {seconds['plain']:.1f} s without its enhanced mask decoder, "
          f"{seconds['emd']:.1f} s with it")
    return seconds["emd"] / seconds["plain"]


# ---------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="number of 128-token passages")
    parser.add_argument("--quick", action="store_true", help="6 passages")
    parser.add_argument("--token-budget", type=int, default=1536,
                        help="our engine's copies x length per forward pass (memory vs speed)")
    parser.add_argument("--worker", choices=["ours", "minicons"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.worker:
        return worker(args.worker, args.token_budget)

    from transformers import AutoTokenizer
    n = 6 if args.quick else args.n
    texts = passages(AutoTokenizer.from_pretrained(TOKENIZER_FOLDER), n)
    print(f"{n} passages of {TEXT_TOKENS + 2} tokens from {BOOK.name}; BERT-base-sized random model; "
          f"our token budget {args.token_budget}; load average {os.getloadavg()[0]:.1f}", flush=True)

    workers = {engine: Worker(engine, args.token_budget) for engine in ("ours", "minicons")}
    runs = {engine: [] for engine in workers}
    matmul_samples = []
    for k, text in enumerate(tqdm(texts, desc="passages (ours, then minicons)"), start=1):
        matmul_samples.append(matmul_gflops())
        for engine, w in workers.items():
            runs[engine].append(w.score([text]))
        if k % 10 == 0:  # running figures, for long runs
            rate = {e: sum(r["scored_tokens"] for r in rs) / sum(r["seconds"] for r in rs)
                    for e, rs in runs.items()}
            memory = {e: max(r["peak_mib"] for r in rs) for e, rs in runs.items()}
            tqdm.write(f"after {k} passages: throughput_ratio={rate['ours'] / rate['minicons']:.3f} "
                       f"memory_ratio={memory['ours'] / memory['minicons']:.4f} "
                       f"ours {rate['ours']:.1f} tokens/s, matmul median "
                       f"{statistics.median(matmul_samples):.0f} GFLOP/s")
    for w in workers.values():
        w.close()

    totals = {e: [x for r in rs for x in r["totals"]] for e, rs in runs.items()}
    scored = {e: sum(r["scored_tokens"] for r in rs) for e, rs in runs.items()}
    seconds = {e: sum(r["seconds"] for r in rs) for e, rs in runs.items()}
    peak_mib = {e: max(r["peak_mib"] for r in rs) for e, rs in runs.items()}
    assert scored["ours"] == scored["minicons"], "the two scorers scored different tokens"
    speed = {e: scored[e] / seconds[e] for e in runs}

    max_abs_diff = max(abs(a - b) for a, b in zip(totals["ours"], totals["minicons"]))
    throughput_ratio = speed["ours"] / speed["minicons"]
    memory_ratio = peak_mib["ours"] / peak_mib["minicons"]
    peak = statistics.median(matmul_samples)
    config = workers["ours"].info["config"]
    flops = sum(encoder_flops(config, TEXT_TOKENS + 2, TEXT_TOKENS) for _ in texts)
    achieved = flops / seconds["ours"] / 1e9
    peak_fraction = achieved / peak

    deberta_emd_cost = emd_cost(texts, args.token_budget)
    for e in runs:
        print(f"{e:>9}: {seconds[e]:8.1f} s  {speed[e]:7.1f} scored tokens/s  peak +{peak_mib[e]:7.1f} MiB"
              f"  ({workers[e].info['threads']} threads)")
    print(f"fp32 matmul peak {peak:.0f} GFLOP/s (median of {len(matmul_samples)} samples, max "
          f"{max(matmul_samples):.0f}); our engine {achieved:.0f} GFLOP/s; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"targets: throughput >= 1.3 {'met' if throughput_ratio >= 1.3 else 'MISSED'}, "
          f"memory <= 0.1 {'met' if memory_ratio <= 0.1 else 'MISSED'}, "
          f"peak >= 0.5 {'met' if peak_fraction >= 0.5 else 'MISSED'}, "
          f"scores agree to 1e-3 {'yes' if max_abs_diff <= 1e-3 else 'NO'}")
    print(f"bench_pll throughput_ratio={throughput_ratio:.3f} memory_ratio={memory_ratio:.4f} "
          f"max_abs_diff={max_abs_diff:.2e} peak_fraction={peak_fraction:.3f} "
          f"deberta_emd_cost={deberta_emd_cost:.3f}")


if __name__ == "__main__":
    main()
