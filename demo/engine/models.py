"""``load_model``: one entry point for masked and causal LMs, from the Hub or a local folder.

Returns a :class:`LoadedModel` (model + tokenizer + the family facts the engines need) and keeps
the last few in a cache bounded by count and by parameter memory, so the app can switch models
without reloading and without running out of memory.

Where a model name points (Hub id, local folder, GGUF file) is decided by ``demo.engine.sources``.
``random_model`` builds random weights from a real config and tokenizer: tests and benchmarks only.

DeBERTa's enhanced mask decoder (``demo.engine.families.deberta``) is switched here (``emd``): its
position table is read from the checkpoint's files, which transformers leaves unread.
"""

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

from .. import settings
from ..app_settings import AppSettings
from ..settings import ModelSettings
from . import gguf_cache, sources
from .batch_invariance import make_batch_invariant
from .families import FAMILIES, Family, deberta, family_of, max_positions, pretrained_length
from .precision import Precision, decide
from .sources import ModelSource, label, resolve
from .text import newline_survives

# Models whose Hub code may run (``trust_remote_code``), each at the full 40-character commit id
# whose code was reviewed: remote code runs with the Space's permissions, and a later push to the
# repository must not change what runs. Empty: no model the catalog offers needs Hub code (the
# BERTs paper's DeBERTa models load from Microsoft's checkpoints through transformers' own classes,
# with their real head and enhanced mask decoder).
REMOTE_CODE_ALLOWLIST: dict[str, str] = {}


def remote_code_revision(name: str, revision: str | None) -> str:
    """The pinned commit an allowlisted model's code is loaded at; ValueError for anything else."""
    if name not in REMOTE_CODE_ALLOWLIST:
        raise ValueError(f"'{name}' is not on the remote-code allowlist; it can only be loaded "
                         f"with transformers' own model classes.")
    pinned = REMOTE_CODE_ALLOWLIST[name]
    if revision not in (None, pinned):
        raise ValueError(f"'{name}' runs Hub code only at its reviewed commit {pinned[:12]}, not at "
                         f"{revision!r}.")
    return pinned


class InputTooLong(ValueError):
    """An input longer than an absolute-position model reads (the engines refuse, never truncate;
    the evaluator skips such items)."""


DTYPES = {name: getattr(torch, name) for name in settings.DTYPES}  # "float32" -> torch.float32
KINDS = settings.KINDS


@dataclass
class LoadedModel:
    name: str  # what the user asked for (Hub id or path)
    kind: str  # "masked" or "causal"
    model: torch.nn.Module
    tokenizer: object
    family: Family
    max_length: int | None  # hard limit in tokens incl. specials; None = relative positions
    pretrained_length: int | None
    newline_survives: bool  # does "\n" come back from encode -> decode?
    local: bool
    # DeBERTa's head reads the enhanced mask decoder (the position table is on the model:
    # ``demo.engine.families.deberta.table_of``); False: the last layer, as transformers does
    emd: bool = False
    # Why a DeBERTa masked LM runs without the decoder under emd="auto", in one sentence; None
    # when it runs with it, when it was switched off, and for other families
    emd_note: str | None = None
    # The Hub commit its files came from (what a branch or tag resolved to); None for a local model
    revision: str | None = None
    # Why it runs in its precision where that was left to the machine (dtype "auto":
    # ``demo.engine.precision``); None where the caller chose it
    precision: Precision | None = None

    @property
    def label(self) -> str:
        return label(self.name, self.local)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def padding_masks(self) -> int:
        return self.family.padding_masks

    @property
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def nbytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def check_length(self, n_tokens: int, what: str = "input") -> None:
        """Refuse (never truncate) an input longer than an absolute-position model allows."""
        if self.max_length is not None and n_tokens > self.max_length:
            raise InputTooLong(
                f"The {what} is {n_tokens} tokens long, but {self.label} ({self.family.name}, "
                f"absolute positions) can read at most {self.max_length} tokens. Shorten it or "
                f"pick a model with relative positions (DeBERTa, ModernBERT).")


# ---------------------------------------------------------------- loading


def prepare_attention(device: torch.device, dtype: str) -> None:
    """Half precision on CUDA turns cuDNN's attention off: it builds a plan at each new input
    shape, which cost seconds per shape (every new text length) and gained nothing once built;
    PyTorch's other attention kernels need no plan (docs/method.md section 3, measured on an H100)."""
    if device.type == "cuda" and dtype != "float32":
        torch.backends.cuda.enable_cudnn_sdp(False)


def _pick_device(device: str | None) -> torch.device:
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _head_missing(model, missing_keys) -> list[str]:
    """Missing weights outside the encoder: a newly initialised (useless) prediction head."""
    prefix = getattr(model, "base_model_prefix", "") + "."
    return sorted(k for k in missing_keys if not k.startswith(prefix))


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf")


def check_download_size(name: str, revision: str | None, max_gb: float) -> None:
    """Refuse, before any download, a Hub model whose weights are larger than ``max_gb``: its
    safetensors files if it has them (what transformers loads), else its other weight files, as
    the Hub's metadata lists them. Nothing to check for a model already in the local cache."""
    if sources.in_hub_cache(name, revision):
        return
    sources.check_hub_model(name, revision)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
    try:
        info = HfApi().model_info(name, revision=revision, files_metadata=True)
    except RepositoryNotFoundError:
        raise ValueError(f"There is no model '{name}' on the Hugging Face Hub (or it is private).") from None
    except (HfHubHTTPError, OSError) as err:
        raise ValueError(f"Could not read the Hub's record of '{name}': {str(err).splitlines()[0]}") from None
    files = [f for f in info.siblings or [] if f.rfilename.endswith(WEIGHT_SUFFIXES)]
    safetensors = [f for f in files if f.rfilename.endswith(".safetensors")]
    size_gb = sum(f.size or 0 for f in safetensors or files) / 1e9
    if size_gb > max_gb:
        raise ValueError(f"'{name}' has {size_gb:.1f} GB of weights; this app downloads Hub models of "
                         f"up to {max_gb:g} GB. Pick a smaller model.")


def _revision(name: str, remote_code: bool, revision: str | None) -> dict:
    """The ``revision`` argument of every ``from_pretrained`` call for ``name``: an allowlisted
    model's pinned commit when its code runs, else the one asked for (none: the default branch)."""
    if remote_code:
        return {"revision": remote_code_revision(name, revision)}
    return {} if revision is None else {"revision": revision}


def load_tokenizer(name: str, revision: str | None = None, trust_remote_code: bool = False, **options):
    """The tokenizer of the model ``name`` (Hub id, folder or .gguf file) from the files
    :func:`load_model` reads, with more ``from_pretrained`` options: lm-eval's HFLM loads its
    tokenizer with ``add_bos_token``, and the tokenizer alone decides what that option does."""
    source = resolve(name)
    return AutoTokenizer.from_pretrained(source.location, trust_remote_code=bool(trust_remote_code),
                                         **source.extra, **_revision(name, bool(trust_remote_code), revision),
                                         **options)


def with_bos_token(lm: LoadedModel, add_bos_token: bool | None, revision: str | None = None,
                   trust_remote_code: bool = False) -> LoadedModel:
    """``lm`` reading texts as lm-eval's HFLM does with ``add_bos_token``: None, as its tokenizer
    starts them; true or false, with the tokenizer loaded again from the same files with
    ``from_pretrained(add_bos_token=...)`` (the cached model's own tokenizer stays as it is). The
    tokenizer decides what the option does (SmolLM2's GGUF tokenizer ignores it, GPT-2's obeys),
    so lm-eval and we read the same tokens; a warning says when it changes nothing. The scoring
    engine adds its start token only where a text's first token is scored and the tokenizer put
    none there (``demo.engine.pll``), as HFLM's prefix token."""
    if add_bos_token is None:
        return lm
    tokenizer = load_tokenizer(lm.name, revision, trust_remote_code, add_bos_token=add_bos_token)
    if tokenizer.pad_token_id is None:  # as load_model sets it; padding is masked out
        tokenizer.pad_token = lm.tokenizer.pad_token
    ids = tokenizer("a", verbose=False)["input_ids"]
    if tokenizer.bos_token_id is None or (ids[:1] == [tokenizer.bos_token_id]) != add_bos_token:
        logging.getLogger(__name__).warning(
            "add_bos_token=%s changes nothing for %s's tokenizer (%s): its texts start as without it, "
            "under lm-eval's HFLM too.", add_bos_token, lm.label, type(tokenizer).__name__)
    return replace(lm, tokenizer=tokenizer)


def _load_uncached(source: ModelSource, o: ModelSettings, device: torch.device) -> LoadedModel:
    name, location, extra, local = source.name, source.location, dict(source.extra), source.local
    shown = source.label  # messages name a local model by its folder, never the server's path

    def said(err: Exception) -> str:
        return str(err).splitlines()[0].replace(location, shown)
    remote_code = bool(o.trust_remote_code)
    if local and o.revision is not None:
        raise ValueError(f"'{shown}' is a local model, which has only the files in its folder: a revision "
                         f"({o.revision!r}) names a Hub branch, tag or commit. Leave it unset, or give a Hub id.")
    extra.update(_revision(name, remote_code, o.revision))
    if not local:
        sources.check_hub_model(name, extra.get("revision"))
    location, gguf_file = gguf_cache.readable(location, extra)  # a GGUF file: its kept plain folder
    try:
        config = AutoConfig.from_pretrained(location, trust_remote_code=remote_code, **extra)
        tokenizer = AutoTokenizer.from_pretrained(location, trust_remote_code=remote_code, **extra)
    except (OSError, ValueError) as err:
        where = "local folder" if local else "Hugging Face Hub (is the network reachable?)"
        raise ValueError(f"Could not load model '{shown}' from the {where}: {said(err)}") from err
    family = family_of(config)
    kind = o.kind or family.kind
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if kind != family.kind and family.name in FAMILIES:
        # e.g. BERT as a causal LM: transformers would build BertLMHeadModel, which reads the
        # text in both directions and so "predicts" tokens it can see.
        raise ValueError(f"'{shown}' is a {family.kind} LM ({config.model_type}), not a {kind} one: "
                         f"pick a {kind} LM here.")

    dtype, precision = _weights_dtype(o.dtype, device)
    prepare_attention(device, dtype)
    kwargs = dict(extra, dtype=DTYPES[dtype], trust_remote_code=remote_code, output_loading_info=True)
    if o.device_map is not None:  # model parallel: accelerate places the layers across devices
        kwargs["device_map"] = o.device_map
    auto_class = AutoModelForMaskedLM if kind == "masked" else AutoModelForCausalLM
    try:
        model, info = _from_pretrained(auto_class, location, kwargs, family,
                                       lambda: deberta.weight_names(location, local, extra.get("revision")))
        if gguf_file is not None:
            gguf_cache.came_from(model, source.location, shown, dtype)
    except ValueError as err:  # e.g. "Unrecognized configuration class ... for AutoModelForMaskedLM"
        raise ValueError(f"'{shown}' ({config.model_type}) has no {kind} language-model head in "
                         f"transformers: {said(err)}") from err
    missing = _head_missing(model, info.get("missing_keys", ()))
    if missing:
        raise ValueError(
            f"'{shown}' has no trained {kind} LM head: these weights are missing from the checkpoint "
            f"and would be random: {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}. "
            f"Pick a checkpoint that includes its prediction head.")
    note = None
    if kind == "masked" and family.emd:
        note = _switch_emd(model, config, o.emd, shown, remote_code,
                           lambda: deberta.weight_files(location, local, extra.get("revision")))
    lm = replace(_wrap(name, kind, model, tokenizer, config, family, local, note), precision=precision)
    if o.device_map is None:  # (with a device_map, accelerate has placed it)
        model.to(device)
    make_batch_invariant(model)
    return lm


def _weights_dtype(dtype: str, device: torch.device) -> tuple[str, Precision | None]:
    """The dtype the weights load in, and why where it was left to the machine ("auto": decided
    once per process and device, ``demo.engine.precision``)."""
    if dtype != "auto":
        return dtype, None
    chosen = decide("cpu" if device.type == "cpu" else str(device))
    return chosen.dtype, chosen


def _from_pretrained(auto_class, location: str, kwargs: dict, family: Family, names):
    """``auto_class.from_pretrained`` -> (model, loading info); a DeBERTa with the head layout its
    weight names (``names()``) hold, the family's where they hold none. A Hub model's files reach
    the disk during its first load, so there the names are read after it, and a head left missing
    by the family's layout is loaded again in theirs."""
    if family.legacy is None:
        return auto_class.from_pretrained(location, **kwargs)
    legacy = deberta.legacy_of(names())
    model, info = auto_class.from_pretrained(
        location, **kwargs, legacy=family.legacy if legacy is None else legacy)
    if legacy is None and _head_missing(model, info.get("missing_keys", ())):
        legacy = deberta.legacy_of(names())
        if legacy not in (None, family.legacy):
            model, info = auto_class.from_pretrained(location, **kwargs, legacy=legacy)
    return model, info


def _switch_emd(model, config, emd: str, shown: str, remote_code: bool, files) -> str | None:
    """Put DeBERTa's enhanced mask decoder on ``model`` as ``emd`` asks (``files()``: the
    checkpoint's weight files); returns the note saying why it stays off under "auto"."""
    if emd == "off":
        return None
    if remote_code:
        reason = "it runs its own Hub code, which decides what its head reads"
    else:
        reason = deberta.refusal(config)
    table = None
    if reason is None:
        table = deberta.read_table(files())
        if table is None:
            reason = (f"its checkpoint has no absolute position table ({deberta.TABLE_SUFFIX}), "
                      f"which the decoder needs")
        else:
            reason = deberta.table_refusal(config, table)
    if reason is not None:
        if emd == "on":
            raise ValueError(f"'{shown}' cannot run DeBERTa's enhanced mask decoder: {reason}. "
                             f"Load it with emd='auto' or 'off' (its head then reads the last layer).")
        return (f"DeBERTa's enhanced mask decoder is off for '{shown}': {reason}; its head reads "
                f"the last layer, as transformers does.")
    deberta.attach(model, table)
    return None


def _wrap(name, kind, model, tokenizer, config, family, local, emd_note=None) -> LoadedModel:
    """The model and its tokenizer, ready for the engines (in eval mode; placing it is the
    caller's)."""
    if kind == "masked" and tokenizer.mask_token_id is None:
        raise ValueError(f"'{label(name, local)}' has no mask token, so it cannot be used as a "
                         f"masked LM.")
    if tokenizer.pad_token_id is None:
        # Causal tokenizers often lack a pad token; padding is always masked out by attention.
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    model.eval()
    return LoadedModel(name=name, kind=kind, model=model, tokenizer=tokenizer, family=family,
                       max_length=max_positions(config, family),
                       pretrained_length=pretrained_length(config, family),
                       newline_survives=newline_survives(tokenizer), local=local,
                       emd=deberta.table_of(model) is not None if kind == "masked" else False,
                       emd_note=emd_note, revision=None if local else getattr(config, "_commit_hash", None))


class _ModelCache:
    """LRU cache bounded by number of models and by parameter bytes (whichever bites first)."""

    def __init__(self, max_models: int, max_bytes: int):
        self.max_models, self.max_bytes = max_models, max_bytes
        self._models: OrderedDict = OrderedDict()
        self._lock = threading.Lock()  # the table
        self._loading = threading.Lock()  # one load at a time: two at once could double memory use

    def get(self, key, load, loading=None):
        """The model under ``key``, loaded by ``load()`` if it is not in memory; ``loading()`` is
        called before waiting for that load (this request's, or another's of the same model),
        never for a model in memory. A model in memory is served while another one loads."""
        lm = self._lookup(key)
        if lm is not None:
            return lm
        if loading is not None:
            loading()
        with self._loading:
            lm = self._lookup(key)  # loaded meanwhile by the request this one waited for
            if lm is not None:
                return lm
            lm = load()
            with self._lock:
                self._models[key] = lm
                while len(self._models) > 1 and (
                        len(self._models) > self.max_models
                        or sum(m.nbytes for m in self._models.values()) > self.max_bytes):
                    self._models.popitem(last=False)
            return lm

    def peek(self, key):
        """The model under ``key`` if it is in memory, else None (never loads)."""
        return self._lookup(key)

    def _lookup(self, key):
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
            return None

    def clear(self):
        with self._lock:
            self._models.clear()

    def bound(self, max_models: int, max_gb: float) -> None:
        """Set the bounds (the app does, from its deployment settings, when it starts)."""
        with self._lock:
            self.max_models, self.max_bytes = max_models, int(max_gb * 2**30)


# Bounded by AppSettings' defaults until the app sets its deployment's (ui.app.launch); nothing
# here reads the environment.
CACHE = _ModelCache(max_models=0, max_bytes=0)
CACHE.bound(AppSettings().max_models, AppSettings().max_model_gb)


def load_model(name: str, options: ModelSettings | None = None, *,
               loading: Callable[[], None] | None = None, **keywords) -> LoadedModel:
    """Load (or fetch from the cache) a masked or causal LM with its tokenizer: ``name`` is a Hub
    id, a local folder or a .gguf file (a local model's short name, ``smollm2``, is the app's to
    resolve: ``demo.app.deployment``). ``options`` (a ``demo.settings.ModelSettings``, but its ``model`` and
    ``threads``) says how; its fields
    can be given or overridden by keyword (``load_model(name, device="cpu", emd="off")``):

    ``kind`` defaults to the family's natural kind ("masked" for BERT-likes). ``revision``: a Hub
    branch, tag or commit; remote code runs only for allowlisted models, at their pinned commit.
    ``device_map`` ("auto" or a transformers map) spreads a model too large for one GPU across
    several (model parallel, through accelerate); inputs then go to its first layer's device.
    ``emd`` (DeBERTa v1/v2 masked LMs; ignored for other families): "auto" runs the enhanced mask
    decoder where the checkpoint holds its position table (``LoadedModel.emd``; otherwise
    ``LoadedModel.emd_note`` says why not), "on" requires it (ValueError saying why it cannot),
    "off" reads the last layer as transformers does.
    ``loading()``, if given, is called once the weights are about to load, never when the model is
    in memory already (the app then says a first request waits for it).
    Raises ValueError with a readable message for unknown ids, folders that are not models,
    missing heads.
    """
    o, dev, source, key = _asked(name, options, keywords)
    return CACHE.get(key, lambda: _load_uncached(source, o, dev), loading)


def in_memory(name: str, options: ModelSettings | None = None, **keywords) -> LoadedModel | None:
    """What :func:`load_model` with these arguments gives, if that model is in memory already;
    None where it would load (nothing is read or loaded here)."""
    return CACHE.peek(_asked(name, options, keywords)[3])


def _asked(name: str, options: ModelSettings | None, keywords: dict):
    """(the settings, the device, where the weights are, the cache's key) of a load."""
    o = replace(options, model=name, **keywords) if options else ModelSettings(model=name, **keywords)
    dev = _pick_device(o.device)
    source = resolve(name)
    # Keyed on where the weights are, not on the spelling ("m" and "m/" are one model), and on
    # the kind the files tell when the caller leaves it to the model.
    key = (source.location, tuple(sorted(source.extra.items())), o.kind or source.kind, str(dev), o.dtype,
           o.revision, o.trust_remote_code, str(o.device_map), o.emd)
    return o, dev, source, key


def random_model(folder: str | Path, kind: str | None = None, seed: int = 0, shrink: bool = True,
                 tokenizer=None, emd: bool = False, **config_overrides) -> LoadedModel:
    """Random-weight model from a real config and tokenizer folder (tests and benchmarks only).

    ``shrink`` makes it tiny (2 layers, hidden 64); pass ``shrink=False`` for real-size timing.
    ``emd``: a DeBERTa gets a random position table (initialised as transformers initialises
    embeddings) and runs its enhanced mask decoder. A ``legacy`` override picks DeBERTa's head
    layout (default: the family's).
    """
    folder = Path(folder)
    config = AutoConfig.from_pretrained(folder)
    tokenizer = tokenizer or AutoTokenizer.from_pretrained(folder)
    family = family_of(config)
    kind = kind or family.kind
    if shrink:
        sizes = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                     intermediate_size=128, embedding_size=32, n_layer=2, n_embd=64, n_head=2,
                     global_attn_every_n_layers=1)
        config.update({k: v for k, v in sizes.items() if hasattr(config, k)})
        if getattr(config, "layer_types", None):  # one entry per layer (ModernBERT): keep it consistent
            config.layer_types = config.layer_types[:config.num_hidden_layers]
    if family.legacy is not None:
        config.legacy = family.legacy
    config.update(dict(vocab_size=max(len(tokenizer), config.vocab_size), **config_overrides))
    torch.manual_seed(seed)
    auto_class = AutoModelForMaskedLM if kind == "masked" else AutoModelForCausalLM
    model = auto_class.from_config(config)
    if emd:
        reason = deberta.refusal(config) if kind == "masked" else "it is not a masked LM"
        if reason is not None:
            raise ValueError(f"This random model cannot run DeBERTa's enhanced mask decoder: {reason}.")
        deberta.attach(model, torch.randn(config.max_position_embeddings, config.hidden_size)
                       * config.initializer_range)
    lm = _wrap(f"random:{folder.name}", kind, model, tokenizer, config, family, local=True)
    model.to(torch.device("cpu"))
    return lm
