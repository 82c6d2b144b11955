"""A deployment: its settings, read from the environment once at start, the models it offers, and
the one door from a model's name to a loaded model.

The web app and the command line each start from ``Deployment.current()`` and hand it down;
nothing below reads ``DEMO_*`` variables. A name resolves here, never in the engine (which loads
the Hub id, folder or file it is given):

- a listed local model by its short name (``smollm2``; ``mlm-icl models`` lists them), or, off a
  public Space, by its path;
- a Hub id; in public mode (a Space) its download size is checked against the deployment's cap
  before anything downloads;
- with ``paths=True`` (the command line, your own scripts), any model folder or ``.gguf`` file.
  The web app never takes an unlisted path, and refuses every one with the same sentence whether
  or not it exists, so the page tells nothing about the server's disks.
"""

from dataclasses import dataclass
from pathlib import Path

from ..app_settings import AppSettings
from ..engine import sources
from ..engine.sources import HUB_ID, hub_unreachable, resolve
from ..user_text import as_said, check_readable, quoted
from .catalog import Catalog, build_catalog


@dataclass(frozen=True)
class Deployment:
    settings: AppSettings
    catalog: Catalog

    @classmethod
    def current(cls, check_hub: bool = False) -> "Deployment":
        """This machine's deployment, from its ``DEMO_*`` variables (read here, the only place
        outside ``demo.settings``); ``check_hub`` as for :meth:`of`. Call it once, at start."""
        return cls.of(AppSettings(), check_hub)

    @classmethod
    def of(cls, settings: AppSettings, check_hub: bool = False) -> "Deployment":
        """A deployment with these settings. ``check_hub`` (the web app): where the Hub cannot be
        reached, offer only the models that can load here (``Catalog.offline_only``: local ones and
        those in the local Hugging Face cache), so no picker lists or defaults to one that cannot
        (this may wait up to two seconds for the network)."""
        catalog = build_catalog(settings)
        if check_hub and hub_unreachable() is not None:
            catalog = catalog.offline_only(lambda name: sources.in_hub_cache(name, None))
        return cls(settings, catalog)

    def location(self, name: str, paths: bool = False) -> str:
        """What the engine loads for ``name`` (the module's docstring says which names are
        served); ValueError, in words, for any other."""
        if name is not None and not isinstance(name, str):
            raise ValueError(f"The model name must be text, not {as_said(name)}.")
        if not name or not name.strip():
            raise ValueError("Pick a model first.")
        name = check_readable(name.strip(), "model name")
        local = self.catalog.local_entry(name)
        if paths or (local and (name == local.name or not self.settings.public)):
            return self.catalog.location(name)  # a listed model's path, else the name as given
        if not HUB_ID.match(name) or ".." in name or Path(name).expanduser().exists():
            raise ValueError(f"'{quoted(name)}' is none of this app's models: pick a model from the "
                             f"list, or type a Hugging Face Hub id (owner/name).")
        return name

    def reachable(self, name: str, revision: str | None = None, paths: bool = False) -> str:
        """:meth:`location`, and for a Hub id that it can be had here (the Hub reachable, or the
        model in the local cache): ValueError in words otherwise. Cheap (no torch), so a command
        line can ask before it imports the engine."""
        location = self.location(name, paths)
        if not resolve(location).local:
            sources.check_hub_model(location, revision)
        return location

    def load(self, name: str, kind: str | None = None, paths: bool = False, **options):
        """The model ``name`` means here (``paths`` as for :meth:`location`), loaded by
        ``demo.engine.models.load_model``, which caches it; ``kind`` "masked" or "causal", or None
        for the model's natural kind; ``options`` go to ``load_model`` (device, dtype, revision,
        ...). Remote code runs for allowlisted models only, at their pinned commits."""
        location = self.reachable(name, options.get("revision"), paths)
        from ..engine.models import REMOTE_CODE_ALLOWLIST, check_download_size, load_model  # torch

        if self.settings.public and location == str(name).strip():  # a Hub id: size-checked first
            check_download_size(location, options.get("revision"), self.settings.max_hub_gb)
        options.setdefault("trust_remote_code", location in REMOTE_CODE_ALLOWLIST)
        options.setdefault("dtype", self.dtype())
        return load_model(location, kind=kind, **options)

    def in_memory(self, name: str, kind: str | None = None, **options):
        """The model :meth:`load` would give, if it is in memory already; None where it would load
        or cannot (nothing is downloaded, read or loaded here)."""
        try:
            location = self.location(name)
        except ValueError:
            return None
        from ..engine.models import REMOTE_CODE_ALLOWLIST, in_memory  # torch

        options.setdefault("trust_remote_code", location in REMOTE_CODE_ALLOWLIST)
        options.setdefault("dtype", self.dtype())
        try:
            return in_memory(location, kind=kind, **options)
        except ValueError:  # options the load refuses: its request says why, in its own words
            return None

    def dtype(self) -> str:
        """The weights' precision the app loads models in: ``gpu_dtype`` on a GPU, ``cpu_dtype`` on
        a CPU ("auto": decided once, ``demo.engine.precision``)."""
        import torch
        return self.settings.gpu_dtype if torch.cuda.is_available() else self.settings.cpu_dtype

    def precision(self) -> str:
        """The precision models run in here: :meth:`dtype`, "auto" resolved as it was decided
        (what a Reproduce block must ask for to give a run's bits)."""
        dtype = self.dtype()
        if dtype != "auto":
            return dtype
        import torch

        from ..engine.precision import decide
        return decide("cuda" if torch.cuda.is_available() else "cpu").dtype
