"""Generation speed: our generate() against a naive loop, and batched beams against greedy runs.

    python benchmarks/bench_generate.py [--model FOLDER] [--new-tokens 8] [--repeats 2]

Model: the stand-in MLM in ../shared/models/minilm-l6-mlm-standin (real BERT, 6 layers), or a
random BERT-base (real size) when it is absent. Both have 512 absolute positions, and every step
of the exact method reads [CLS] prompt generated [MASK]*(1+p) [SEP], so a 512-token window cannot
also hold generated tokens: the "512" row uses the longest prompt whose last window is exactly
512 tokens (512 - new tokens - p - 2). Cost per step depends on the window length, which is what
the rows compare. (A random DeBERTa-v2 would allow a literal 512-token prompt, but at real size
it is about 8x slower per step here and measures the same thing.)

Measured in the same run, per prompt length (best of --repeats, seconds per decoding step):
- naive: a hand-written loop, full forward pass and vocabulary projection at every position,
  argmax at the first mask (what the paper's code does, batch size 1);
- greedy: ``demo.engine.generation.generate(strategy="greedy")``;
- beam4: ``generate(strategy="beam", num_beams=4)``, the four beams in one forward pass.
- whole-last: ``generate(strategy="greedy")`` with every position's last layer computed and the
  predicted mask's row picked from the model's output, as before issue 28 (the baseline of the
  last-layer change, kept here only: ``whole_last_layer``); it must give the same tokens.
Ratios (below 1 = ours faster): greedy_vs_naive = greedy / naive step time; beam4_vs_4greedy =
one beam-4 step / four greedy steps (batched beams vs four separate greedy runs); last-layer x =
whole-last / greedy step time (above 1 = the last layer at the read row only is faster). The last
line gives the first two's geometric means over the prompt lengths, last_layer_speedup at the
longest prompt, and deberta_emd_cost: greedy steps of a random DeBERTa-base
(benchmarks/random_shapes.py) with its enhanced mask decoder over without it, on a 256-token
prompt (the decoder's two extra passes of the last layer read one row per step).
"""

import argparse
import math
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from demo.engine import mlm_decoder  # the package is installed (pip install -e .)
from demo.engine.generation import generate
from demo.engine.models import load_model, random_model

ROOT = Path(__file__).resolve().parents[1]

SHARED = ROOT.parent / "shared"
STANDIN = SHARED / "models" / "minilm-l6-mlm-standin"
BERT_BASE = SHARED / "tokenizers" / "bert-base-uncased"
FILLER = SHARED / "data" / "haystack" / "gutenberg_nltk"


def filler_text() -> str:
    books = sorted(FILLER.glob("*.txt")) if FILLER.is_dir() else []
    if books:
        return books[0].read_text(encoding="utf-8", errors="ignore")[20_000:80_000]
    return "The quick brown fox jumps over the lazy dog while the cat sleeps on the mat. " * 400


def prompt_of(tokenizer, text: str, n_tokens: int) -> str:
    """The longest run of whole words from ``text`` that encodes to at most ``n_tokens``."""
    words = text.split()[:4 * n_tokens]
    lo, hi = 1, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        ids = tokenizer(" ".join(words[:mid]), add_special_tokens=False, verbose=False)["input_ids"]
        if len(ids) <= n_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def naive_greedy(lm, prompt: str, new_tokens: int, p: int) -> tuple[list[int], float]:
    """(ids, seconds per step) of the plain loop the engine replaces."""
    tok = lm.tokenizer
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    banned = [i for i in tok.all_special_ids if i != tok.sep_token_id]
    out = []
    start = time.perf_counter()
    steps = 0
    for _ in range(new_tokens):
        window = [tok.cls_token_id] + ids + out + [tok.mask_token_id] * (1 + p) + [tok.sep_token_id]
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([window])).logits[0, len(ids) + len(out) + 1]
        steps += 1
        logits[banned] = float("-inf")
        nxt = int(logits.argmax())
        if nxt == tok.sep_token_id:
            break
        out.append(nxt)
    return out, (time.perf_counter() - start) / steps


def whole_last_layer_read(model, input_ids, attention_mask, rows, cols):
    """The read before issue 28: the whole model at every position, then the rows picked (for a
    head that reads the last layer, not DeBERTa's enhanced mask decoder)."""
    return model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[rows, cols]


@contextmanager
def whole_last_layer():
    """Exact generation reads through ``whole_last_layer_read`` while inside (the baseline)."""
    read = mlm_decoder.hidden_at
    mlm_decoder.hidden_at = whole_last_layer_read
    try:
        yield
    finally:
        mlm_decoder.hidden_at = read


def best_of(repeats: int, run):
    results = [run() for _ in range(repeats)]
    return min(results, key=lambda r: r[-1])


def emd_cost(text: str, new_tokens: int, repeats: int) -> float:
    """Seconds per greedy step of DeBERTa-base with its enhanced mask decoder over without it."""
    from random_shapes import deberta_base  # benchmarks/random_shapes.py

    steps = {}
    for emd in (False, True):
        lm = deberta_base(emd)
        prompt = prompt_of(lm.tokenizer, text, 256)
        generate(lm, prompt, max_new_tokens=2)  # warm-up
        steps[emd] = best_of(repeats, lambda: (r := generate(lm, prompt, max_new_tokens=new_tokens),
                                               r.seconds_per_step))[1]
    print(f"DeBERTa-base, 256-token prompt: {1 / steps[False]:.1f} greedy steps/s without its enhanced "
          f"mask decoder, {1 / steps[True]:.1f} with it")
    return steps[True] / steps[False]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="masked LM folder (default: the stand-in, else random BERT-base)")
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 512])
    args = parser.parse_args(argv)

    if args.model:
        lm, label = load_model(args.model, device="cpu"), args.model
    elif STANDIN.is_dir():
        lm, label = load_model(str(STANDIN), device="cpu"), "stand-in MLM (BERT, 6 layers, 22.7M)"
    else:
        lm, label = random_model(BERT_BASE, shrink=False), "random BERT-base (110M)"
    p = lm.padding_masks
    text = filler_text()
    print(f"model: {label}; padding masks {p}; {args.new_tokens} new tokens; "
          f"torch threads {torch.get_num_threads()}; best of {args.repeats}")
    print(f"{'prompt':>7} {'window':>7} | {'naive tok/s':>11} {'greedy tok/s':>12} "
          f"{'beam4 tok/s':>11} {'whole-last tok/s':>16} | {'greedy/naive':>12} {'beam4/4greedy':>13} "
          f"{'last-layer x':>12}")

    greedy_ratios, beam_ratios, last_layer_speedups = [], [], []
    for length in args.lengths:
        room = lm.max_length - args.new_tokens - p - 2 if lm.max_length else length
        prompt = prompt_of(lm.tokenizer, text, min(length, room))
        n = len(lm.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        generate(lm, prompt, max_new_tokens=2)  # warm-up
        naive_ids, naive_step = best_of(args.repeats, lambda: naive_greedy(lm, prompt, args.new_tokens, p))
        # greedy and the whole-last-layer baseline take turns, so a change in the machine's load
        # hits both alike (their ratio is the figure the last line reports)
        greedy_runs, whole_runs = [], []
        for _ in range(args.repeats):
            greedy_runs.append(generate(lm, prompt, max_new_tokens=args.new_tokens))
            with whole_last_layer():
                whole_runs.append(generate(lm, prompt, max_new_tokens=args.new_tokens))
        greedy = min(greedy_runs, key=lambda r: r.seconds_per_step)
        whole = min(whole_runs, key=lambda r: r.seconds_per_step)
        if greedy.token_ids != naive_ids:
            raise SystemExit(f"greedy output differs from the naive loop at {n} tokens")
        beam = best_of(args.repeats, lambda: (r := generate(lm, prompt, max_new_tokens=args.new_tokens,
                                                            strategy="beam", num_beams=4),
                                              r.seconds_per_step))[0]
        if whole.token_ids != greedy.token_ids:
            raise SystemExit(f"the whole last layer gives other tokens than the rows read at {n} tokens")
        g_ratio = greedy.seconds_per_step / naive_step
        b_ratio = beam.seconds_per_step / (4 * greedy.seconds_per_step)
        last_layer_speedup = whole.seconds_per_step / greedy.seconds_per_step
        greedy_ratios.append(g_ratio)
        beam_ratios.append(b_ratio)
        last_layer_speedups.append((n, last_layer_speedup))
        window = n + args.new_tokens + p + 2
        print(f"{n:>7} {window:>7} | {1 / naive_step:>11.1f} {1 / greedy.seconds_per_step:>12.1f} "
              f"{1 / beam.seconds_per_step:>11.1f} {1 / whole.seconds_per_step:>16.1f} | {g_ratio:>12.2f} "
              f"{b_ratio:>13.2f} {last_layer_speedup:>12.2f}")

    def geomean(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    print("tok/s = decoding steps per second (beam4: one step advances all four beams)")
    deberta_emd_cost = emd_cost(text, args.new_tokens, args.repeats)
    print(f"bench_generate greedy_vs_naive={geomean(greedy_ratios):.2f} "
          f"beam4_vs_4greedy={geomean(beam_ratios):.2f} deberta_emd_cost={deberta_emd_cost:.2f} "
          f"last_layer_speedup={max(last_layer_speedups)[1]:.2f}")


if __name__ == "__main__":
    main()
