"""What the app and the command line let people download: tidy tables, and file names that say
what a file holds (model, what, date), so a folder of downloads stays readable (the web app's
download folder: ``demo.app.downloads``)."""

import datetime as dt
import re
from pathlib import Path

import pandas as pd


def file_name(*parts: str, suffix: str) -> str:
    """``ranking_minilm-l6-mlm-standin_2026-11-23.csv``: the parts made file-safe, then the date."""
    safe = [re.sub(r"[^\w.\-]+", "-", str(p)).strip("-") for p in parts if p]
    return "_".join(safe + [dt.date.today().isoformat()]) + suffix


def figure_download(figure, csv_path: str, *parts: str) -> str:
    """A figure as a standalone HTML page beside ``csv_path``. It loads plotly.js from the CDN:
    embedding it would put the whole library in every download, too much for a class on one Space."""
    from .plots import save_figure
    path = Path(csv_path).with_name(file_name(*parts, suffix=".html"))
    return str(save_figure(figure, path, offline=False))


def score_table(requests, results):
    """Tidy scores: a "candidate" row per candidate, then its "token" (and "word") rows."""
    rows = []
    for line, ((context, _), scores) in enumerate(zip(requests, results)):
        best = max(s.score for s in scores)
        for index, s in enumerate(scores):
            common = dict(line=line, context=context, candidate_index=index, candidate=s.candidate,
                          total=s.total, mean=s.mean, score=s.score, unconditional=s.unconditional,
                          best=s.score == best, scored_text=s.text)
            rows.append(dict(common, level="candidate", n_tokens=len(s.tokens)))
            rows += [dict(common, level="token", index=k, text=t.token, start=t.start, end=t.end,
                          logprob=t.logprob, rank=t.rank, n_tokens=1,
                          masked=" ".join(map(str, t.masked))) for k, t in enumerate(s.tokens)]
            rows += [dict(common, level="word", index=k, text=w.word, start=w.start, end=w.end,
                          logprob=w.logprob, n_tokens=w.n_tokens) for k, w in enumerate(s.words or [])]
    table = pd.DataFrame(rows)
    table["rank"] = table["rank"].astype("Int64")  # empty on candidate and word rows, not a float
    return table
