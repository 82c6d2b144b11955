"""The prefix cache against the exact method: speed-up and greedy token agreement.

    python benchmarks/bench_cache.py [--refresh R] [--margin M] [--sweep 16,0 32,0.05] [--prompts 20]
                                     [--parallel 0.9 0.5 0.2] [--padding-masks P]

Part 1, the stand-in MLM (../shared/models/minilm-l6-mlm-standin, a real 6-layer BERT), per prompt
length (128, 256, 500 tokens): 20 few-shot prompts, 16 from the seed tasks (demonstrations drawn
by ``demo.tasks.fewshot`` from each task's pool, then the evaluated item, as the evaluator builds them)
and 4 from the shipped presets (``assets/presets``: the two in-context instruction-induction
prompts and two COPA contexts, each after demonstrations of its task). Each prompt holds as many
demonstrations as fit the length. For each prompt, 32 greedy tokens with the exact method and with
the prefix cache (refreshed every R tokens and on doubt, margin M), run alternately so that a busy
machine slows both:
- speed-up: tokens/s of the prefix cache over tokens/s of the exact method, over all 20 prompts;
- agreement: share of the 32 output positions (of the longer output, when one stops early) where
  both hold the same token, pooled over the prompts: a first difference changes the context, so
  everything after it usually differs too (also shown: prompts with identical outputs);
- stepwise: share of the exact output's steps at which the prefix cache, fed the exact output so
  far, picks the same token (the approximation's error per step, without that cascade);
- refreshes: share of the prefix cache's steps that encoded the whole window.
The stand-in reads 512 positions, and the exact method's last window holds the prompt, 31
generated tokens, the masks and [SEP], so the "500" prompts are 477 tokens (their last window is
512); the table shows the real mean length. ``--sweep R,M ...`` adds 500-token rows for other
R and margins.

Part 2, random weights at real size, 2048-token prompt (filler text): DeBERTa-v2 (deberta-v3-base's
architecture) and ModernBERT (ModernBERT-base's sizes on the shared ModernBERT config). Speed-up
alone (random weights make agreement meaningless): 32 tokens with the prefix cache against the
exact method's tokens/s over its first ``--exact-steps`` steps (its steps all cost the same: each
re-reads a 2048 + k window, and at about 8-30 s a step on a CPU, 32 of them would take long).
Without refresh on doubt (margin 0): a random-weight model's top two tokens are near-ties at
almost every step, which would make every step a refresh; a trained model's are not.

Part 3, parallel unmasking on top of the prefix cache (``demo.engine.parallel_unmasking``), at
the last length, per threshold (``--parallel``): the same 32 greedy tokens with the prefix cache
(R, margin as above) and, after each pass, the padding masks' guesses whose top probability
passes the threshold written too. Speed-up over the prefix cache alone (same prompts, same run,
alternating), agreement with the exact method as above, and the share of tokens guessed (no
pass of their own). The stand-in's family has one padding mask (``--padding-masks`` gives all
three runs more: each then guesses at most that many tokens per pass, and the exact method it
is compared with uses as many). ``--model`` runs parts 1 and 3 on another masked LM (a Hub id or
folder, e.g. the BERTs paper's microsoft/deberta-v2-xxlarge on a GPU, ``--device cuda``): how
confident the padding masks' guesses are is the model's own.

Last line: ``bench_cache speedup_500=<x> agreement_500=<a> speedup_2048_deberta=<y>
speedup_2048_modernbert=<z> speedup_500_parallel=<u> agreement_500_parallel=<v>`` (at the
default or given R and margin, and the first threshold of ``--parallel``).
"""

import argparse
import json
import math
import random
import sys
from pathlib import Path

import torch
from random_shapes import deberta_v3_base, modernbert_base  # benchmarks/random_shapes.py

from demo.engine.generation import generate
from demo.engine.mlm_decoder import MaskedLMAsCausalLM
from demo.engine.models import load_model
from demo.engine.text import prompt_as_read
from demo.settings import GenerationSettings
from demo.tasks import get_task, load_examples
from demo.tasks.fewshot import demonstrations_text, generation_prompt

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
STANDIN = SHARED / "models" / "minilm-l6-mlm-standin"
FILLER = SHARED / "data" / "haystack" / "gutenberg_nltk"

SEED_TASKS = ["copa", "piqa", "arc_easy", "openbookqa", "hellaswag", "ii_active_to_passive",
              "ii_cause_and_effect", "ii_diff", "ii_first_word_letter", "ii_larger_animal",
              "ii_negation", "ii_num_to_verbal", "ii_rhymes", "ii_sentiment", "ii_sum",
              "ii_translation_en-fr"]
# preset (assets/presets/<file>.json, by name) -> the task whose demonstrations come before it
PRESETS = {("prompting", "Instruction induction: antonyms, in context"): "ii_antonyms",
           ("prompting", "Instruction induction: singular to plural, in context"): "ii_singular_to_plural",
           ("ranking", "COPA: surprise party (cause)"): "copa",
           ("ranking", "COPA: misdiagnosis (effect)"): "copa"}


# ---------------------------------------------------------------- prompts


def n_tokens(lm, prompt: str) -> int:
    """Tokens the model reads for the prompt (the newline convention applied, no specials)."""
    return len(lm.tokenizer(prompt_as_read(prompt, lm.newline_survives), add_special_tokens=False,
                            verbose=False)["input_ids"])


def longest_fitting(lm, build, demos: list, length: int) -> str:
    """build(demos[:k]) for the largest k whose prompt is at most ``length`` tokens (k >= 0)."""
    lo, hi = 0, len(demos)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if n_tokens(lm, build(demos[:mid])) <= length:
            lo = mid
        else:
            hi = mid - 1
    return build(demos[:lo])


def pool_of(task, skip=None) -> list:
    """The task's demonstrations in a fixed random order (its pool minus ``skip``)."""
    pool = [e for e in load_examples(task, "demos") if skip is None or e.index != skip.index]
    return random.Random(f"bench_cache/{task.name}").sample(pool, min(len(pool), 400))


def few_shot_prompts(lm, length: int) -> list[str]:
    """20 few-shot prompts of at most ``length`` tokens: 16 seed tasks, 4 presets."""
    prompts = []
    for name in SEED_TASKS:
        task = get_task(name)
        item = load_examples(task, "data")[0]
        prompts.append(longest_fitting(lm, lambda d: generation_prompt(task, item, d),
                                       pool_of(task, item), length))
    for (file, preset_name), task_name in PRESETS.items():
        presets = json.loads((ROOT / "assets" / "presets" / f"{file}.json").read_text(encoding="utf-8"))
        preset = next(p for p in presets["presets"] if p["name"] == preset_name)
        text = preset.get("prompt") or preset["context"]
        task = get_task(task_name)
        prompts.append(longest_fitting(lm, lambda d: demonstrations_text(task, d) + text,
                                       pool_of(task), length))
    return prompts


def filler_prompt(lm, length: int) -> str:
    books = sorted(FILLER.glob("*.txt"))
    words = books[0].read_text(encoding="utf-8", errors="ignore")[20_000:].split()[:2 * length]
    return longest_fitting(lm, " ".join, words, length)


# ---------------------------------------------------------------- measurements


def agreement(a: list[int], b: list[int]) -> tuple[int, int]:
    """(positions holding the same token, positions) over the longer of two outputs."""
    positions = max(len(a), len(b))
    return sum(x == y for x, y in zip(a, b)), positions


def stepwise(lm, prompt: str, exact_ids: list[int], variant: tuple, p: int) -> int:
    """Steps at which the fast decoder, fed the exact output so far, picks the exact method's
    token (greedy, specials other than the end token banned as generate() bans them)."""
    refresh, margin, threshold = variant
    ids = lm.tokenizer(prompt_as_read(prompt, lm.newline_survives), add_special_tokens=False,
                       verbose=False)["input_ids"]
    decoder = MaskedLMAsCausalLM(lm.model, lm.tokenizer, p, refresh, margin, threshold)
    banned = sorted(set(lm.tokenizer.all_special_ids) - {decoder.specials.end})
    same = 0
    with torch.no_grad():
        for t, token in enumerate(exact_ids):
            logits = decoder.next_token_logits(torch.tensor([ids + exact_ids[:t]]))[0]
            logits[banned] = float("-inf")
            same += int(logits.argmax()) == token
    return same


def compare(lm, prompts: list[str], settings: GenerationSettings, variants: list[tuple]) -> dict:
    """Exact vs the fast decoders (per (R, margin, parallel threshold or None)) on the prompts:
    speed-ups and agreements; the runs of one prompt alternate, so a busy machine slows all."""
    exact_time = exact_tokens = 0.0
    per_v = {v: dict(time=0.0, tokens=0, same=0, positions=0, identical=0, steps_same=0, steps=0,
                     refreshes=0, guessed=0) for v in variants}
    p = settings.padding_masks
    for prompt in prompts:
        exact = generate(lm, prompt, settings)
        exact_time, exact_tokens = exact_time + exact.seconds, exact_tokens + len(exact.token_ids) + (
            exact.stop_reason == "eos")  # the end token was a step too
        for variant in variants:
            r, margin, threshold = variant
            fast = generate(lm, prompt, settings, cache="prefix", cache_refresh=r, cache_margin=margin,
                            parallel_threshold=threshold)
            row = per_v[variant]
            row["time"] += fast.seconds
            row["tokens"] += len(fast.token_ids) + (fast.stop_reason == "eos")
            row["refreshes"] += fast.refreshes
            row["guessed"] += fast.guessed or 0
            same, positions = agreement(exact.token_ids, fast.token_ids)
            row["same"] += same
            row["positions"] += positions
            row["identical"] += exact.token_ids == fast.token_ids
            row["steps_same"] += stepwise(lm, prompt, exact.token_ids, variant, p)
            row["steps"] += len(exact.token_ids)
    for row in per_v.values():
        row["speedup"] = (row["tokens"] / row["time"]) / (exact_tokens / exact_time)
        row["agreement"] = row["same"] / max(row["positions"], 1)
        row["stepwise"] = row["steps_same"] / max(row["steps"], 1)
        row["refreshed"] = row["refreshes"] / max(row["tokens"], 1)
        row["guessed_share"] = row["guessed"] / max(row["tokens"], 1)
        row["exact_tok_s"], row["fast_tok_s"] = exact_tokens / exact_time, row["tokens"] / row["time"]
    return per_v


def speedup_long(lm, label: str, length: int, new_tokens: int, refresh: int, exact_steps: int) -> float:
    prompt = filler_prompt(lm, length)
    n = n_tokens(lm, prompt)
    settings = GenerationSettings(max_new_tokens=new_tokens, cache_refresh=refresh, cache_margin=0)
    generate(lm, prompt, max_new_tokens=1)  # warm-up
    exact = generate(lm, prompt, settings, max_new_tokens=exact_steps)
    fast = generate(lm, prompt, settings, cache="prefix")
    exact_step = exact.seconds / (len(exact.token_ids) + (exact.stop_reason == "eos"))
    fast_step = fast.seconds / (len(fast.token_ids) + (fast.stop_reason == "eos"))
    print(f"  {label}: {n}-token prompt, exact {exact_step:.2f} s/token (over {exact_steps} "
          f"steps), prefix cache {fast_step:.3f} s/token (over {len(fast.token_ids)} tokens)")
    return exact_step / fast_step


def main(argv=None):
    default = GenerationSettings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refresh", type=int, default=default.cache_refresh,
                        help=f"R of the headline rows (default: GenerationSettings' {default.cache_refresh})")
    parser.add_argument("--margin", type=float, default=default.cache_margin,
                        help=f"refresh-on-doubt margin of the headline rows (default: "
                             f"GenerationSettings' {default.cache_margin})")
    parser.add_argument("--sweep", nargs="*", default=[], metavar="R,MARGIN",
                        help="more (R, margin) rows at the last length, e.g. 16,0 32,0.05")
    parser.add_argument("--parallel", type=float, nargs="*", default=[0.9, 0.5, 0.2], metavar="THRESHOLD",
                        help="parallel unmasking thresholds of part 3 (the first is the last line's; "
                             "none: skip part 3)")
    parser.add_argument("--padding-masks", type=int, help="padding masks of every run (default: "
                                                          "the family's)")
    parser.add_argument("--model", default=str(STANDIN), help="parts 1 and 3: the masked LM (default: "
                                                                 "the stand-in)")
    parser.add_argument("--device", default="cpu", help="parts 1 and 3: cpu, cuda, ...")
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--lengths", type=int, nargs="*", default=[128, 256, 500],
                        help="part 1's prompt lengths (none: skip part 1)")
    parser.add_argument("--long", type=int, default=2048, help="prompt length of part 2 (0: skip it)")
    parser.add_argument("--exact-steps", type=int, default=3, help="part 2: exact steps timed")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: steadiest on a busy machine)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not SHARED.is_dir():
        sys.exit(f"{SHARED} is missing: this benchmark needs ../shared beside the clone (its tasks' "
                 f"prompts, the stand-in, the random models' tokenizers).")

    lm = load_model(args.model, device=args.device)
    p = lm.padding_masks if args.padding_masks is None else args.padding_masks
    # the exact method's last window fits (a model with relative positions has no limit)
    room = lm.max_length - (args.new_tokens - 1) - p - 3 if lm.max_length else max(args.lengths, default=0)
    settings = GenerationSettings(max_new_tokens=args.new_tokens, padding_masks=p)
    print(f"{lm.name} ({lm.model.config.model_type}, {lm.model.num_parameters() / 1e6:.1f}M); "
          f"{args.new_tokens} greedy tokens; {args.prompts} "
          f"few-shot prompts per length; {p} padding mask(s); torch threads {torch.get_num_threads()}")
    print(f"{'length':>6} {'mean tok':>8} {'R':>3} {'margin':>6} {'parallel':>8} | {'exact tok/s':>11} "
          f"{'fast tok/s':>10} {'speed-up':>8} {'refreshed':>9} {'guessed':>7} | {'agreement':>9} "
          f"{'identical':>9} {'stepwise':>8}")
    headline_variant = (args.refresh, args.margin, None)
    swept = [(int(r), float(m), None) for r, m in (v.split(",") for v in args.sweep)]
    parallel = [(args.refresh, args.margin, t) for t in args.parallel]
    headline = {}
    generate(lm, "Warm up.", max_new_tokens=2)
    for length in args.lengths:
        prompts = few_shot_prompts(lm, min(length, room))[:args.prompts]
        mean = sum(n_tokens(lm, q) for q in prompts) / len(prompts)
        last = length == args.lengths[-1]
        more = [v for v in swept if v != headline_variant] + parallel if last else []
        for (r, margin, threshold), row in compare(lm, prompts, settings, [headline_variant] + more).items():
            print(f"{length:>6} {mean:>8.0f} {r:>3} {margin:>6} {threshold or 'off':>8} | "
                  f"{row['exact_tok_s']:>11.1f} {row['fast_tok_s']:>10.1f} {row['speedup']:>7.1f}x "
                  f"{row['refreshed']:>9.1%} {row['guessed_share']:>7.1%} | {row['agreement']:>9.1%} "
                  f"{row['identical']:>6}/{len(prompts)} {row['stepwise']:>8.1%}", flush=True)
            if (r, margin, threshold) == headline_variant:
                headline[length] = row
            if last and parallel and (r, margin, threshold) == parallel[0]:
                headline["parallel"] = row

    long = {}
    if args.long:
        print(f"random weights at real size, {args.long}-token prompt, {args.new_tokens} greedy "
              f"tokens, R = {args.refresh}, margin 0 (see the docstring):")
        for name, label, build in (("deberta", "DeBERTa-v2 (v3-base)", deberta_v3_base),
                                   ("modernbert", "ModernBERT (base)", modernbert_base)):
            long[name] = speedup_long(build(), label, args.long, args.new_tokens, args.refresh,
                                      args.exact_steps)
        print(f"  speed-up: DeBERTa-v2 {long['deberta']:.1f}x, ModernBERT {long['modernbert']:.1f}x")

    nothing = dict(speedup=math.nan, agreement=math.nan, fast_tok_s=math.nan)
    last = headline[args.lengths[-1]] if args.lengths else nothing
    both = headline.get("parallel", nothing)
    print(f"bench_cache speedup_500={last['speedup']:.2f} agreement_500={last['agreement']:.3f} "
          f"speedup_2048_deberta={long.get('deberta', math.nan):.1f} "
          f"speedup_2048_modernbert={long.get('modernbert', math.nan):.1f} "
          f"speedup_500_parallel={both['fast_tok_s'] / last['fast_tok_s']:.2f} "
          f"agreement_500_parallel={both['agreement']:.3f}")


if __name__ == "__main__":
    main()
