"""A run's identity: everything that can change one of its numbers, gathered in one place.

``score``, ``probe`` (the needle grid and the mask sweep) and ``evaluate`` save their work as they
go and resume it (``demo.evaluation.resumable``). A resumed run must be the run it says it is, so
each of them names its files, its part files' fingerprint and its summary rows from one
:class:`Identity`, built here from

- the loaded model (:func:`model_identity`): its name and kind, the weights it was loaded from
  (the Hub commit transformers resolved, or a local folder's files), precision, device kind,
  DeBERTa's head (the enhanced mask decoder on or off) and chat template;
- every settings object the command ran with (their fields, less those that only change how the
  work is cut up: chunk sizes, token budgets, the data folder's path);
- its inputs: the task's definition and a digest of the items it read, the filler text, the
  input file's lines.

A rerun that changes any of them is another run: it gets files, part files and rows of its own
beside the old ones (never resumed into them), and :func:`differences` says what sets two runs
apart (the Results tab shows it).
"""

import dataclasses
import hashlib
import json
import weakref
from dataclasses import dataclass
from pathlib import Path

# Fields that change how work is cut up or where it is read from, never a number
NOT_IDENTITY = {"chunk_size", "token_budget", "data_root", "threads", "device", "filler"}
# A task's fields that say where its data are or describe it (the data's digest stands for them)
TASK_NOT_IDENTITY = {"data", "demos", "base", "paper", "license", "notes", "title", "group"}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")


def digest(value, length: int = 12) -> str:
    """A short hash of a JSON-able value (keys sorted, so a dict's order does not matter)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def model_slug(lm) -> str:
    """A short, file-safe model name: folder or file name of a local model, else the Hub id."""
    name = str(lm.name)
    path = Path(name)
    if lm.local or path.exists():
        name = path.stem if path.suffix == ".gguf" else path.name
    return name.replace("/", "--").replace(" ", "_")


def local_weights(name: str) -> str | None:
    """A digest of a local model's files (names and sizes of its weights, its config's text): a
    folder trained again in place is another model. None for a name that is no local path."""
    path = Path(name)
    if path.is_file():
        return digest([path.name, path.stat().st_size])
    if not path.is_dir():
        return None
    files = sorted(p for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES or p.name == "config.json")
    return digest([[p.name, p.stat().st_size] + ([p.read_text(errors="replace")] if p.suffix == ".json" else [])
                   for p in files])


# Identities of the models in memory, by id (with a weak reference, so a reused id is not taken
# for the old model's): a loaded model does not change, and the app asks for each request's
_KNOWN: dict[int, tuple[weakref.ref, dict]] = {}


def model_identity(lm) -> dict:
    """What of a loaded model can change a number (``demo.engine.models.LoadedModel``), read once
    per model in memory (a local model's files are read as it was loaded, not on every request)."""
    known = _KNOWN.get(id(lm))
    if known is None or known[0]() is not lm:
        known = _KNOWN[id(lm)] = (weakref.ref(lm, lambda _, key=id(lm): _KNOWN.pop(key, None)), _model_identity(lm))
    return dict(known[1])


def _model_identity(lm) -> dict:
    template = getattr(lm.tokenizer, "chat_template", None)
    return {"model": model_slug(lm), "kind": lm.kind,
            "weights": lm.revision or (local_weights(lm.name) if lm.local else None),
            "dtype": str(lm.dtype).removeprefix("torch."), "device": lm.device.type, "emd": bool(lm.emd),
            "chat_template": digest(template) if isinstance(template, str) else None}


def settings_identity(settings) -> dict:
    """A settings dataclass's fields that can change a number."""
    return {k: v for k, v in dataclasses.asdict(settings).items() if k not in NOT_IDENTITY}


def task_identity(task) -> dict:
    """A task definition's fields that can change a number (``demo.tasks.Task``)."""
    return {k: v for k, v in dataclasses.asdict(task).items() if k not in TASK_NOT_IDENTITY}


def data_digest(examples: list) -> str:
    """A digest of the items a run reads (``demo.tasks.Example``), wherever their file lies."""
    return digest([dataclasses.asdict(e) for e in examples])


def flatten(parts: dict, prefix: str = "") -> dict:
    """``{"model": {"dtype": ...}}`` -> ``{"model.dtype": ...}``: one key per setting, so that two
    identities can be compared key by key."""
    flat = {}
    for key, value in parts.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@dataclass(frozen=True)
class Identity:
    """One run's identity: ``parts`` holds the model's (:func:`model_identity`) and every settings
    object's and input's fields, by name."""
    parts: dict

    @classmethod
    def of(cls, lm, **parts) -> "Identity":
        """The identity of a run of ``lm`` with ``parts`` (settings objects, dicts or digests)."""
        values = {name: settings_identity(p) if dataclasses.is_dataclass(p) else p for name, p in parts.items()}
        return cls({"model": model_identity(lm), **values})

    @property
    def flat(self) -> dict:
        return json.loads(json.dumps(flatten(self.parts), ensure_ascii=False, default=str))

    @property
    def digest(self) -> str:
        """Names the run's files and rows, and fingerprints its part files."""
        return digest(self.parts, 8)

    def describe(self) -> str:
        """The summary rows' record of it: the flat identity as one line of JSON."""
        return json.dumps(self.flat, sort_keys=True, ensure_ascii=False)


def request_identity(endpoint: str, models: dict, arguments: dict) -> Identity:
    """The identity of one request to the app: its ``endpoint``, each model it loads (by argument
    name: its identity, :func:`model_identity` where it is loaded) and its ``arguments`` by name (a
    whole number is one value whether it came as 10 or 10.0, as page and API may send it)."""
    return Identity({"endpoint": endpoint, "models": models,
                     "arguments": {name: _one_number(value) for name, value in arguments.items()}})


def _one_number(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_one_number(v) for v in value]
    return value


def differences(described: list[str]) -> list[str]:
    """For runs described by :meth:`Identity.describe` (the summary rows' ``identity``), what sets
    each apart from the others: the settings where its value is not the usual one (the most common
    among them; the first run's in a tie), ``"model.dtype=bfloat16"``; "" for a run with the usual
    values everywhere or with no record (a table written before identities)."""
    flats = []
    for text in described:
        try:
            flats.append(json.loads(text) if isinstance(text, str) and text else {})
        except json.JSONDecodeError:
            flats.append({})
    recorded = [flat for flat in flats if flat]
    usual = {}
    for key in sorted({k for flat in recorded for k in flat}):
        values = [json.dumps(flat.get(key), sort_keys=True) for flat in recorded]
        usual[key] = max(values, key=values.count)  # max keeps the first of the most common
    return [", ".join(f"{k}={_shown(flat.get(k))}" for k in usual
                      if json.dumps(flat.get(k), sort_keys=True) != usual[k]) if flat else ""
            for flat in flats]


def _shown(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
