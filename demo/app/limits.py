"""Per-request input caps of the web app, and the parsing of what people type.

A public Space is shared: one huge prompt or grid would hold the queue for everyone. Every cap
is a field of ``demo.app_settings.AppSettings`` (the deployment's, passed in) and can be raised by its
``DEMO_*`` environment variable for a private deployment. Checks raise ValueError with a message
the page shows as is; nothing is silently cut.
"""

import math
import threading
import time
from collections import defaultdict, deque

from ..app_settings import AppSettings
from ..evaluation_settings import GridSettings
from ..user_text import as_said, check_readable

MIN_CANDIDATES, MAX_CANDIDATES = 2, 8


def whole(value):
    """A whole number from a widget or an API call (a slider's 2.0 is 2); anything else, text
    included, is returned unchanged, so the settings dataclass refuses it with a sentence naming
    the setting."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def check_text(text: str, what: str, limit: int, allow_empty: bool = False) -> str:
    if text is not None and not isinstance(text, str):
        raise ValueError(f"The {what} must be text, not {as_said(text)}.")
    text = text or ""
    if not allow_empty and not text.strip():
        raise ValueError(f"The {what} is empty: type something or pick a preset.")
    check_readable(text, what)
    if len(text) > limit:
        raise ValueError(f"The {what} is {len(text):,} characters long; this app accepts at most "
                         f"{limit:,} per request. Shorten it (or run the Python core locally).")
    return text


def parse_candidates(lines: str, limits: AppSettings) -> list[str]:
    """One candidate per non-empty line; 2 to 8 of them, each within the character cap."""
    each = f"at most {MAX_CANDIDATES} candidates of at most {limits.max_candidate_chars:,} characters each"
    if isinstance(lines, str) and len(lines) > MAX_CANDIDATES * (limits.max_candidate_chars + 1):
        raise ValueError(f"The candidates are {len(lines):,} characters long in all; give {each}.")
    lines = check_text(lines, "list of candidates", limit=MAX_CANDIDATES * (limits.max_candidate_chars + 1),
                       allow_empty=True)
    candidates = [line.strip() for line in lines.splitlines() if line.strip()]
    if len(candidates) < MIN_CANDIDATES:
        raise ValueError(f"Give at least {MIN_CANDIDATES} candidates, one per line "
                         f"(got {len(candidates)}).")
    if len(candidates) > MAX_CANDIDATES:
        raise ValueError(f"Give at most {MAX_CANDIDATES} candidates, one per line "
                         f"(got {len(candidates)}).")
    for number, candidate in enumerate(candidates, 1):
        if len(candidate) > limits.max_candidate_chars:
            raise ValueError(f"Candidate {number} is {len(candidate):,} characters long; give {each}.")
        check_text(candidate, "candidate", limits.max_candidate_chars)
    return candidates


def check_grid(grid: GridSettings, limits: AppSettings) -> None:
    if grid.cells > limits.max_grid_cells:
        raise ValueError(f"{len(grid.lengths)} lengths x {len(grid.depths)} depths x {grid.repetitions} "
                         f"repetitions = {grid.cells} runs; this app does at most {limits.max_grid_cells} "
                         f"per request. Drop some lengths, depths or repetitions.")
    if max(grid.lengths) > limits.max_grid_tokens:
        raise ValueError(f"Lengths above {limits.max_grid_tokens:,} tokens are not run live here; see the "
                         f"precomputed grids below, or run `mlm-icl probe` locally.")


class RunsPerVisitor:
    """At most ``limit`` (``AppSettings.runs_per_minute``) model runs per visitor in any minute, so that on a
    public Space one visitor (or one script) cannot fill the queue everyone shares. A visitor is
    the first address of ``X-Forwarded-For`` (a Space runs behind a proxy), else the client's
    address, else the page session."""

    def __init__(self):
        self._runs: dict[str, deque] = defaultdict(deque)
        self._lock = threading.Lock()

    def check(self, request, limit: int) -> None:
        now = time.monotonic()
        with self._lock:
            runs = self._runs[_visitor(request)]
            while runs and now - runs[0] > 60:
                runs.popleft()
            if len(runs) >= limit:
                wait = 60 - (now - runs[0])
                raise ValueError(f"You started {limit} model runs in the last minute, the most this "
                                 f"shared app allows one visitor, so that everyone gets a turn. Try "
                                 f"again in {math.ceil(wait)} s.")
            runs.append(now)


def _visitor(request) -> str:
    if request is None:
        return "local"
    forwarded = (request.headers.get("x-forwarded-for") or "").split(",")[0].strip()
    host = getattr(request.client, "host", None) if request.client else None
    return forwarded or host or request.session_hash or "unknown"


RUNS = RunsPerVisitor()
