"""Command line for ``demo.generation.generate``: continue a prompt with a masked or causal LM.

    python -m demo.generate --model ../shared/models/minilm-l6-mlm-standin \\
        --prompt "The capital of France is Paris. The capital of Germany is" --strategy beam --trace

Prints the continuation (or, with --json, the whole GenerationResult as JSON); --trace adds a
step-by-step table: the window the model saw (masks marked), its top tokens, the chosen one and,
for beam search, the live hypotheses.
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from .generation import MAX_NEW_TOKENS_CAP, STRATEGIES, GenerationResult, GenerationSettings, generate


def _window_text(step, width: int = 12) -> str:
    """The end of the window, masks in brackets, '...' where it was cut."""
    tokens = [f"<{t}>" if i in step.mask_positions else t for i, t in enumerate(step.window)]
    shown = tokens[-width:]
    return ("... " if len(tokens) > width else "") + " ".join(shown)


def format_trace(result: GenerationResult) -> str:
    lines = []
    for step in result.steps:
        top = ", ".join(f"{t!r} {p:.3f}" for t, p in step.top)
        lines.append(f"step {step.step:>3}  window: {_window_text(step)}")
        lines.append(f"          top: {top}")
        lines.append(f"          chosen: {step.chosen!r}")
        for text, score in step.beams or []:
            lines.append(f"          beam {score:9.3f}  {text!r}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    d = GenerationSettings()
    parser = argparse.ArgumentParser(
        prog="python -m demo.generate",
        description="Generate text with a masked LM (the BERTs paper's [MASK] trick) or a causal LM.")
    parser.add_argument("--model", required=True, help="Hub id, local folder or .gguf file")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="the text to continue")
    source.add_argument("--prompt-file", type=Path, help="UTF-8 file holding the prompt")
    parser.add_argument("--strategy", choices=STRATEGIES, default=d.strategy)
    parser.add_argument("--num-beams", type=int, default=d.num_beams)
    parser.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens,
                        help=f"1..{MAX_NEW_TOKENS_CAP}")
    parser.add_argument("--top-k", type=int, default=d.top_k, help="sampling; 0 = off")
    parser.add_argument("--top-p", type=float, default=d.top_p, help="sampling; 1 = off")
    parser.add_argument("--temperature", type=float, default=d.temperature, help="sampling")
    parser.add_argument("--repetition-penalty", type=float, default=d.repetition_penalty)
    parser.add_argument("--padding-masks", type=int, help="masked LMs: extra masks (default: family's)")
    parser.add_argument("--stop-at-newline", action="store_true")
    parser.add_argument("--stop", action="append", default=[], metavar="STR",
                        help="stop string (repeatable); removed from the output")
    parser.add_argument("--digits", type=int, help="answer with exactly this many digits")
    parser.add_argument("--choice", action="append", metavar="STR",
                        help="allowed continuation (repeatable); the output is one of them")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--trace", action="store_true", help="print the step-by-step trace")
    parser.add_argument("--trace-top-k", type=int, default=d.trace_top_k)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def main(argv=None) -> GenerationResult:
    args = build_parser().parse_args(argv)
    prompt = args.prompt if args.prompt is not None else args.prompt_file.read_text(encoding="utf-8")
    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens, strategy=args.strategy, num_beams=args.num_beams,
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        repetition_penalty=args.repetition_penalty, padding_masks=args.padding_masks,
        stop_at_newline=args.stop_at_newline, stop_strings=tuple(args.stop), digits=args.digits,
        choices=tuple(args.choice) if args.choice else None, seed=args.seed, trace=args.trace,
        trace_top_k=args.trace_top_k, progress=not args.no_progress)
    from .models import load_model  # torch-heavy: after argument errors are reported
    try:
        lm = load_model(args.model, device=args.device)
        result = generate(lm, prompt, settings)
    except ValueError as err:
        sys.exit(f"error: {err}")
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=1, ensure_ascii=False))
        return result
    if args.trace:
        print(format_trace(result))
        print()
    print(result.text)
    print(f"[{result.stop_reason}; {len(result.tokens)} tokens; prompt {result.prompt_tokens} tokens; "
          f"{result.seconds:.2f} s, {result.seconds_per_step * 1000:.0f} ms/step]", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
