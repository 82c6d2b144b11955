"""Command line: score candidate completions from a JSONL file with a masked or causal LM.

    python -m demo.score --model bert-base-uncased --input in.jsonl --output out.json
    python -m demo.score --model ./my-model --input in.jsonl --output out.csv --method whole_word

Each input line is ``{"context": "...", "candidates": ["...", ...]}``. JSON output keeps every
detail (per-token and, with --word-level, per-word scores for each candidate); CSV output is
tidy: one row per scored token (and per word with --word-level), candidate scores repeated.
All candidates of all lines are batched together; a progress bar shows the masked copies.
"""

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from .models import DTYPES, load_model
from .pll import METHODS, score_candidate_sets


def read_requests(path: Path) -> list[tuple[str, list[str]]]:
    requests = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                context, candidates = record.get("context", ""), record["candidates"]
            except (json.JSONDecodeError, KeyError, AttributeError) as err:
                raise ValueError(f"{path}, line {number}: expected a JSON object with 'context' and "
                                 f"'candidates' ({err}).") from err
            if not isinstance(candidates, list):
                raise ValueError(f"{path}, line {number}: 'candidates' must be a list of strings.")
            requests.append((context, candidates))
    if not requests:
        raise ValueError(f"{path} has no input lines.")
    return requests


def to_records(requests, results) -> list[dict]:
    records = []
    for (context, _), scores in zip(requests, results):
        best = max(range(len(scores)), key=lambda k: scores[k].score)
        records.append({"context": context, "best": scores[best].candidate,
                        "candidates": [asdict(s) for s in scores]})
    return records


def to_table(requests, results) -> pd.DataFrame:
    rows = []
    for line, ((context, _), scores) in enumerate(zip(requests, results)):
        for index, s in enumerate(scores):
            common = dict(line=line, context=context, candidate_index=index, candidate=s.candidate,
                          total=s.total, mean=s.mean, score=s.score, unconditional=s.unconditional)
            for k, t in enumerate(s.tokens):
                rows.append(dict(common, level="token", index=k, text=t.token, start=t.start,
                                 end=t.end, logprob=t.logprob, rank=t.rank, n_tokens=1,
                                 masked=" ".join(map(str, t.masked))))
            for k, w in enumerate(s.words or []):
                rows.append(dict(common, level="word", index=k, text=w.word, start=w.start, end=w.end,
                                 logprob=w.logprob, rank=None, n_tokens=w.n_tokens, masked=""))
    table = pd.DataFrame(rows)
    table["rank"] = table["rank"].astype("Int64")  # empty for word rows, not a float
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Hugging Face Hub id, local folder or .gguf file")
    parser.add_argument("--input", required=True, type=Path, help="JSONL: {context, candidates} per line")
    parser.add_argument("--output", required=True, type=Path, help="out.json or out.csv")
    parser.add_argument("--method", choices=METHODS, default=None,
                        help="default: right_masks for masked LMs, causal for causal LMs")
    parser.add_argument("--right-masks", type=int, default=2, help="extra masks right of the scored token")
    parser.add_argument("--scope", choices=["completion", "full"], default="completion")
    parser.add_argument("--normalize", action="store_true", help="rank by mean log-prob (NormPLL)")
    parser.add_argument("--word-level", action="store_true", help="also report per-word scores")
    parser.add_argument("--unconditional-context", default=None,
                        help='subtract score(candidate | this context), e.g. "Answer:"')
    parser.add_argument("--token-budget", type=int, default=8192, help="tokens per forward pass")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.output.suffix not in (".json", ".csv"):
        parser.error("--output must end in .json or .csv")

    try:
        requests = read_requests(args.input)
        lm = load_model(args.model, device=args.device, dtype=args.dtype)
        results = score_candidate_sets(
            lm, requests, unconditional_context=args.unconditional_context, method=args.method,
            right_masks=args.right_masks, scope=args.scope, normalize=args.normalize,
            word_level=args.word_level, token_budget=args.token_budget, progress=not args.no_progress)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    if args.output.suffix == ".json":
        settings = {k: v for k, v in vars(args).items() if k not in ("input", "output", "no_progress")}
        payload = {"settings": settings, "results": to_records(requests, results)}
        args.output.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    else:
        to_table(requests, results).to_csv(args.output, index=False)
    print(f"Scored {sum(len(r) for r in results)} candidates of {len(requests)} contexts "
          f"with {lm.name} -> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
