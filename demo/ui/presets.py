"""A tab's presets: examples from the papers and the tasks, in ``assets/presets/<tab>.json``."""

import json

from ..paths import ASSETS


def read_presets(name: str) -> list[dict]:
    """The presets of ``assets/presets/<name>.json`` (an empty list if the file is missing)."""
    path = ASSETS / "presets" / f"{name}.json"
    if not path.is_file():
        return []
    return json.loads(path.read_text(encoding="utf-8"))["presets"]


def preset_named(presets: list[dict], name) -> dict | None:
    """The preset a picker names (None for a name no preset has)."""
    return next((p for p in presets if p["name"] == name), None)
