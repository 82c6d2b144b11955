"""The weights' precision when it is left to the machine (``ModelSettings.dtype="auto"``).

bfloat16 halves the bytes a matrix multiply moves and, where the CPU has units for it (Intel's AMX
since Sapphire Rapids, AVX-512 BF16 on AMD's Zen 4 and later), multiplies several times faster than
float32; elsewhere it is emulated and slower. "auto" is decided once per process and device, before
any model work, and never again (a class's load must not flip it, and every restart of one machine
must choose alike): from the CPU's flags first (AMX: bfloat16; neither AMX nor AVX-512 BF16:
float32), and where the flags leave it open (AVX-512 BF16 only, or a GPU) from a matrix multiply at
a 768-wide model's size, repeated until two rounds agree, against ``AUTO_GAIN``. No torch at import.
"""

import functools
import time
from dataclasses import dataclass
from pathlib import Path

AUTO_GAIN = 2.0  # bfloat16 is taken where it multiplies at least this many times faster
TOKENS = 128  # the rows of the measured multiply: a short text's tokens
WIDTH = 768  # the measured multiply's width: a base-sized model's
ROUNDS = 8  # at most this many measurements, until two in a row agree within AGREE
AGREE = 0.1


@dataclass(frozen=True)
class Precision:
    dtype: str  # "float32" or "bfloat16"
    why: str  # in words, for the start-up log and the model line's title
    short: str  # a few words, for the model line


def matmul_gflops(width: int, dtype: str, device: str = "cpu") -> float:
    """GFLOP/s of a [TOKENS, width] x [width, 4 width] multiply in ``dtype`` on ``device`` (the best
    of a few tries after a warm-up: the machine's speed, not its noise)."""
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(TOKENS, width, generator=generator, device=device).to(getattr(torch, dtype))
    b = torch.randn(width, 4 * width, generator=generator, device=device).to(getattr(torch, dtype))
    best = float("inf")
    for attempt in range(6):
        start = time.perf_counter()
        for _ in range(3):
            a @ b
        if device != "cpu":
            torch.cuda.synchronize(device)
        if attempt:  # the first warms up
            best = min(best, (time.perf_counter() - start) / 3)
    return 2 * TOKENS * width * 4 * width / best / 1e9


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (Linux); empty where they cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[1].split()}


def probe(device: str = "cpu") -> tuple[float, float]:
    """(bfloat16's, float32's) GFLOP/s at ``WIDTH``, measured until two rounds agree (the median
    of the rounds), so a passing load does not decide."""
    gains, speeds = [], []
    for _ in range(ROUNDS):
        bf16, fp32 = matmul_gflops(WIDTH, "bfloat16", device), matmul_gflops(WIDTH, "float32", device)
        speeds.append((bf16, fp32))
        gains.append(bf16 / fp32)
        if len(gains) > 1 and abs(gains[-1] - gains[-2]) <= AGREE * gains[-2]:
            break
    middle = sorted(range(len(gains)), key=gains.__getitem__)[len(gains) // 2]
    return speeds[middle]


@functools.lru_cache(maxsize=None)
def decide(device: str = "cpu") -> Precision:
    """The precision "auto" runs every model in on ``device`` in this process, decided at the first
    call (the app makes it at start-up) and kept."""
    if device == "cpu":
        flags = cpu_flags()
        if "amx_bf16" not in flags and "avx512_bf16" not in flags:
            return Precision("float32", "auto: this CPU has no bfloat16 matrix units (neither AMX nor AVX-512 BF16)",
                             "auto: no bfloat16 units on this CPU")
    bf16, fp32 = probe(device)
    gain = bf16 / fp32
    said = (f"a {WIDTH}-wide matrix multiply measured {bf16:,.0f} GFLOP/s in bfloat16, {fp32:,.0f} in float32 "
            f"({gain:.1f}x)")
    if device == "cpu" and "amx_bf16" in flags:
        return Precision("bfloat16", f"auto: this CPU has AMX; {said}", f"auto: AMX, {gain:.1f}x float32's speed here")
    here = "CPU (AVX-512 BF16)" if device == "cpu" else "GPU"
    if gain >= AUTO_GAIN:
        return Precision("bfloat16", f"auto: {said} on this {here}", f"auto: {gain:.1f}x float32's speed here")
    return Precision("float32", f"auto: {said} on this {here}, under the {AUTO_GAIN:g}x that bfloat16's "
                                f"rounding is worth", f"auto: bfloat16 only {gain:.1f}x faster here")

# What bfloat16 kept of float32's answers on the lesson's steps and the shipped tasks
# (benchmarks/bench_precision.py; docs/method.md section 3)
BFLOAT16_AGREEMENT = ("on the lesson's steps 2 and 5 (30 own texts, both offline models) it wrote float32's text "
                      "in 44 of 60 generations and kept 58 of 60 rankings, scores within 0.3 nats")
