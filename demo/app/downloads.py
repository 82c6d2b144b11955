"""Where the web app puts what people download: every download gets a folder of its own under
one folder, and folders older than a day are removed when the next download is made. A Space
serving a class writes a few files per click, and the app hands them out (Gradio copies each into
its own cache, swept as often) well within that. File names and tables are the evaluation
floor's (``demo.evaluation.exports``); the command line writes where it is told."""

import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

from ..evaluation.exports import file_name

DOWNLOADS = Path(tempfile.gettempdir()) / "mlm-icl-downloads"
KEEP_SECONDS = 24 * 3600


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
