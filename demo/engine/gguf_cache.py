"""A GGUF checkpoint converted once: transformers reads a ``.gguf`` file by parsing and
dequantizing every tensor, and by rebuilding the tokenizer from its vocabulary, at every load
(seconds each time, for config, tokenizer and weights alike). The first load here saves what it
built, the weights dequantized to float32 with their config and tokenizer, as a plain model folder
(safetensors) in a cache; every later load, in this process or another, reads that folder.

The folder is keyed by the file (its real path, size and modification time) and by the version of
transformers that converted it, and written under a temporary name, then renamed: two processes
converting at once each finish, and one folder stays. The weights are the GGUF load's, bit for bit
(``tests/test_gguf_cache.py``). No library keeps such a conversion: transformers' GGUF loader
converts in memory only, and its model refuses ``save_pretrained`` while it carries the GGUF
quantizer, which the dequantized weights no longer need.
"""

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

log = logging.getLogger(__name__)
DONE = "model.safetensors"  # written last: a folder holding it is whole


def cache_root() -> Path:
    """Where converted checkpoints are kept: ``$MLM_ICL_CACHE/gguf`` (default
    ``$XDG_CACHE_HOME/mlm-icl``, else ``~/.cache/mlm-icl``)."""
    base = os.environ.get("MLM_ICL_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "mlm-icl"
    return Path(base).expanduser() / "gguf"


def readable(location: str, extra: dict) -> tuple[str, str | None]:
    """(where ``from_pretrained`` reads a model, the GGUF file it came from, or None): for a GGUF
    source (``extra``'s ``gguf_file``, taken out of it) its converted folder, else ``location``.
    Where no folder can be written (a read-only disk), the file itself, read as transformers reads
    it (``extra`` keeps ``gguf_file``)."""
    gguf_file = extra.pop("gguf_file", None)
    if gguf_file is None:
        return location, None
    try:
        return str(converted(location, gguf_file)), gguf_file
    except OSError as err:
        log.warning("%s cannot be kept converted (%s): it is read from the GGUF file at every load", gguf_file, err)
        extra["gguf_file"] = gguf_file
        return location, gguf_file


def converted(folder: str, gguf_file: str) -> Path:
    """The plain model folder of the GGUF file ``gguf_file`` in ``folder``: converted now if it is
    not in the cache yet (the bar and the log say so), else as kept."""
    source = (Path(folder) / gguf_file).resolve()
    stat = source.stat()
    key = hashlib.sha256(f"{source}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}".encode())
    target = cache_root() / f"{source.stem}-{key.hexdigest()[:16]}"
    if (target / DONE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _convert(str(source.parent), source.name, building)
        try:
            building.rename(target)
        except OSError:  # another process finished first: its folder is the same conversion
            if not (target / DONE).is_file():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    log.info("%s: converted once from GGUF to %s; later loads read that folder", source.name, target)
    return target


def came_from(model, folder: str, shown: str, dtype: str) -> None:
    """A model read from its kept folder named by where its GGUF file is (``name_or_path``, which
    lm-eval's HFLM reads a model's tokenizer from, with the file's name), and its precision said."""
    model.name_or_path = model.config._name_or_path = folder
    log.info("%s: its GGUF weights are dequantized to %s; every matmul runs in %s", shown, dtype, dtype)


def _convert(folder: str, gguf_file: str, into: Path) -> None:
    """Load the GGUF checkpoint as transformers does (dequantized to float32) and save it plain."""
    import transformers.modeling_gguf_pytorch_utils as gguf
    from transformers.utils import logging as transformers_logging
    gguf.tqdm = transformers_logging.tqdm  # its de-quantisation bar follows transformers' switch (--no-progress)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    config = AutoConfig.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, config=config, dtype=torch.float32)
    model.hf_quantizer = None  # the weights are plain tensors now: nothing is left quantized
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tokenizer.save_pretrained(into)
    model.save_pretrained(into)
