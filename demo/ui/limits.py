"""Per-request input caps of the web app, and the parsing of what people type.

A public Space is shared: one huge prompt or grid would hold the queue for everyone. Every cap
can be raised by an environment variable for a private deployment. Checks raise ValueError with
a message the page shows as is; nothing is silently cut.
"""

import os
from dataclasses import dataclass


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass(frozen=True)
class Limits:
    prompt_chars: int = _env_int("DEMO_MAX_PROMPT_CHARS", 6000)
    candidate_chars: int = _env_int("DEMO_MAX_CANDIDATE_CHARS", 400)
    min_candidates: int = 2
    max_candidates: int = 8
    max_new_tokens: int = _env_int("DEMO_MAX_NEW_TOKENS", 128)
    grid_cells: int = _env_int("DEMO_MAX_GRID_CELLS", 24)
    grid_tokens: int = _env_int("DEMO_MAX_GRID_TOKENS", 2048)


LIMITS = Limits()


def check_text(text: str, what: str, limit: int = LIMITS.prompt_chars, allow_empty: bool = False) -> str:
    text = text or ""
    if not allow_empty and not text.strip():
        raise ValueError(f"The {what} is empty: type something or pick a preset.")
    if len(text) > limit:
        raise ValueError(f"The {what} is {len(text):,} characters long; this app accepts at most "
                         f"{limit:,} per request. Shorten it (or run the Python core locally).")
    return text


def parse_candidates(lines: str, limits: Limits = LIMITS) -> list[str]:
    """One candidate per non-empty line; 2 to 8 of them, each within the character cap."""
    candidates = [line.strip() for line in (lines or "").splitlines() if line.strip()]
    if len(candidates) < limits.min_candidates:
        raise ValueError(f"Give at least {limits.min_candidates} candidates, one per line "
                         f"(got {len(candidates)}).")
    if len(candidates) > limits.max_candidates:
        raise ValueError(f"Give at most {limits.max_candidates} candidates, one per line "
                         f"(got {len(candidates)}).")
    for candidate in candidates:
        check_text(candidate, "candidate", limits.candidate_chars)
    return candidates


def parse_numbers(text: str, what: str, kind=int, low=None, high=None) -> list:
    """'256, 512 1024' -> [256, 512, 1024]; a clear message for anything else."""
    parts = (text or "").replace(",", " ").split()
    if not parts:
        raise ValueError(f"Give at least one {what}.")
    try:
        values = [kind(p) for p in parts]
    except ValueError:
        raise ValueError(f"The {what}s must be numbers separated by commas or spaces, "
                         f"not {text!r}.") from None
    for v in values:
        if (low is not None and v < low) or (high is not None and v > high):
            raise ValueError(f"Each {what} must lie between {low} and {high}; {v} does not.")
    return sorted(set(values))


def check_grid(lengths: list[int], depths: list[float], repetitions: int = 1,
               limits: Limits = LIMITS) -> None:
    cells = len(lengths) * len(depths) * int(repetitions)
    if cells > limits.grid_cells:
        raise ValueError(f"{len(lengths)} lengths x {len(depths)} depths x {int(repetitions)} "
                         f"repetitions = {cells} runs; this app does at most {limits.grid_cells} per "
                         f"request. Drop some lengths, depths or repetitions.")
    if max(lengths) > limits.grid_tokens:
        raise ValueError(f"Lengths above {limits.grid_tokens:,} tokens are not run live here; see the "
                         f"precomputed grids below, or run `demo.haystack` locally.")
