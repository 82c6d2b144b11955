"""What the app and the command line let people download: tidy tables, and file names that say
what a file holds (model, what, date), so a folder of downloads stays readable."""

import datetime as dt
import re
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

# Every download gets a folder of its own under one folder, and folders older than a day are
# removed when the next download is made: a Space serving a class writes a few files per click,
# and the app hands them out (Gradio copies each into its own cache, swept as often) well within that.
DOWNLOADS = Path(tempfile.gettempdir()) / "mlm-icl-downloads"
KEEP_SECONDS = 24 * 3600


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


def download(frame: pd.DataFrame, *parts: str) -> str:
    """Write ``frame`` as CSV into a fresh temporary folder (the web app hands it out from there);
    returns the path."""
    path = _fresh_folder() / file_name(*parts, suffix=".csv")
    frame.to_csv(path, index=False)
    return str(path)


def _fresh_folder() -> Path:
    """A new folder under DOWNLOADS, after removing those older than KEEP_SECONDS."""
    DOWNLOADS.mkdir(exist_ok=True)
    for old in DOWNLOADS.iterdir():
        try:
            if time.time() - old.stat().st_mtime > KEEP_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except FileNotFoundError:  # removed meanwhile by another request
            pass
    return Path(tempfile.mkdtemp(dir=DOWNLOADS))


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
