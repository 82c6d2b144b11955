"""Where the web app puts what people download: every download gets a folder of its own under
one folder, and folders older than a day are removed when a download is made (at most once a
minute: a class makes thousands a day, and each sweep reads them all). A Space
serving a class writes a few files per click, and the app hands them out (Gradio copies each into
its own cache, swept as often) well within that. File names and tables are the evaluation
floor's (``demo.evaluation.exports``); the command line writes where it is told."""

import shutil
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

from ..evaluation.exports import file_name

DOWNLOADS = Path(tempfile.gettempdir()) / "mlm-icl-downloads"
KEEP_SECONDS = 24 * 3600
SWEEP_EVERY_S = 60.0
_SWEPT = {"at": float("-inf")}  # when the folders were last swept (time.monotonic)
_SWEEPING = threading.Lock()


def download(frame: pd.DataFrame, *parts: str) -> str:
    """Write ``frame`` as CSV into a fresh temporary folder (the web app hands it out from there);
    returns the path."""
    path = _fresh_folder() / file_name(*parts, suffix=".csv")
    frame.to_csv(path, index=False)
    return str(path)


def _fresh_folder() -> Path:
    """A new folder under DOWNLOADS, after removing those older than KEEP_SECONDS (if the last
    sweep is over SWEEP_EVERY_S old)."""
    DOWNLOADS.mkdir(exist_ok=True)
    with _SWEEPING:
        due = time.monotonic() - _SWEPT["at"] >= SWEEP_EVERY_S
        if due:
            _SWEPT["at"] = time.monotonic()
    if due:
        _sweep()
    return Path(tempfile.mkdtemp(dir=DOWNLOADS))


def _sweep() -> None:
    for old in DOWNLOADS.iterdir():
        try:
            if time.time() - old.stat().st_mtime > KEEP_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except FileNotFoundError:  # removed meanwhile by another request
            pass
