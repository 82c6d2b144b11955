"""The weights' precision when it is left to the machine (``ModelSettings.dtype="auto"``).

bfloat16 halves the bytes a matrix multiply moves and, where the CPU has units for it (Intel's AMX
since Sapphire Rapids, AVX-512 BF16 on AMD's Zen 4 and later), multiplies several times faster than
float32; elsewhere it is emulated and slower. Rather than guess from CPU flags, "auto" measures:
a matrix multiply at the model's width (a feed-forward layer over a short text), in both dtypes,
once per width and device, a few milliseconds. bfloat16 is taken only where it is at least
``AUTO_GAIN`` times faster, since it moves scores (docs/method.md section 3). No torch at import:
the page quotes what bfloat16 was measured to keep (``BFLOAT16_AGREEMENT``).
"""

import functools
import time
from dataclasses import dataclass

AUTO_GAIN = 2.0  # bfloat16 is taken where it multiplies at least this many times faster
TOKENS = 128  # the rows of the measured multiply: a short text's tokens


@dataclass(frozen=True)
class Precision:
    dtype: str  # "float32" or "bfloat16"
    why: str  # in words, for the start-up log and the model line's title
    short: str  # a few words, for the model line


@functools.lru_cache(maxsize=None)
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


def choose(width: int, device: str = "cpu") -> Precision:
    """bfloat16 where it multiplies at least ``AUTO_GAIN`` times faster than float32 at ``width``
    on ``device``, else float32; why, with the measured speeds."""
    fp32, bf16 = matmul_gflops(width, "float32", device), matmul_gflops(width, "bfloat16", device)
    gain = bf16 / fp32
    said = (f"a {width}-wide matrix multiply measured {bf16:,.0f} GFLOP/s in bfloat16, {fp32:,.0f} in float32 "
            f"({gain:.1f}x)")
    here = "CPU" if device == "cpu" else "GPU"
    if gain >= AUTO_GAIN:
        return Precision("bfloat16", f"auto: {said} on this {here}", f"auto: {gain:.1f}x float32's speed here")
    return Precision("float32", f"auto: {said} on this {here}, under the {AUTO_GAIN:g}x that bfloat16's "
                                f"rounding is worth", f"auto: bfloat16 only {gain:.1f}x faster here")

# What bfloat16 kept of float32's answers on the lesson's steps and the shipped tasks
# (benchmarks/bench_precision.py; docs/method.md section 3)
BFLOAT16_AGREEMENT = ("on the lesson's steps 2 and 5 (30 own texts, both offline models) it wrote float32's text "
                      "in 44 of 60 generations and kept 58 of 60 rankings, scores within 0.3 nats")
