"""Every setting of the project, as dataclasses: one default per field, one validation.

The engines take these objects; the command line (``demo.cli``) builds its options from their
fields (each field's ``help`` is the option's help); the app builds the same objects from its
widgets; the tests build them directly. Torch-free, so ``demo --help`` and the app's page load
never wait for torch.

- :class:`ModelSettings`: which model, on which device (``demo.engine.models.load_model``).
- :class:`ScoringSettings`: how candidates are scored (``demo.engine.pll``).
- :class:`WritingSettings`: how a masked LM writes by unmasking (``demo.engine.unmasking``).
- :class:`GenerationSettings`: how text is generated (``demo.engine.generation``), its writing included.
- :class:`InfillSettings`: how blanks in a text are filled (``demo.engine.infill``).
- :class:`RunSettings`: how a task is evaluated (``demo.evaluation.evaluate``).
- :class:`GridSettings`: the needle-in-a-haystack grid (``demo.evaluation.haystack``).
- :class:`SweepSettings`: how many masks? one task at each number of masks (``demo.evaluation.mask_sweep``).
- :class:`HarnessSettings`: lm-eval's model_args beside the others (``demo.harness``).
- :class:`AppSettings`: what a deployment sets through ``DEMO_*`` environment variables; the
  only place they are read (``spaces_config/settings.env`` lists them, a test keeps both equal).
"""

import dataclasses
import functools
import math
import os
import types
import typing
import unicodedata
from dataclasses import dataclass, field, fields
from typing import Literal

# A masked LM's scoring methods: the PLLs (a masked copy of the whole text per scored token), the
# decoder's own likelihood (a generation window per scored token: demo.engine.pll_decoder) and the
# masked diffusion ELBO (a masked copy per masking pattern: demo.engine.elbo)
PLL_METHODS = ("salazar", "right_masks", "within_word_l2r", "whole_word")
MASKED_METHODS = PLL_METHODS + ("decoder", "elbo")
DEFAULT_MASKED_METHOD = "right_masks"  # the BERTs paper's; what method=None means for a masked LM
METHODS = MASKED_METHODS + ("causal",)
SCOPES = ("completion", "full")
REDUCTIONS = ("sum", "mean")
MAX_RIGHT_MASKS = 16
MAX_STRIDE = 64  # ScoringSettings.stride: copies per text of the approximate PLL
MAX_ELBO_SAMPLES = 4096  # ScoringSettings.elbo_samples: masked copies per text
STRATEGIES = ("greedy", "beam", "sample")
EMD_MODES = ("auto", "on", "off")  # DeBERTa's enhanced mask decoder: demo.engine.families.deberta
CACHE_MODES = ("exact", "prefix")  # masked-LM generation: demo.engine.prefix_cache
MAX_NEW_TOKENS_CAP = 512  # a deployment's most new tokens per request, and the longest block and refresh
MAX_PADDING_MASKS = 16
MAX_BEAMS = 16
AUTO_BATCH = 8  # lm-eval's batch_size=auto: prompts a masked LM writes together
MAX_SHOTS = 64  # demonstrations a sweep may put before each item
MAX_TEMPERATURE = 5.0
MAX_REPETITION_PENALTY = 2.0  # 1 is off; beyond 2 every repeat is all but barred
SCORE_SPANS = ("answer", "suffix", "example")
UNMASKING_ORDERS = ("left_to_right", "confidence", "random")  # demo.engine.unmasking
ORDERS_SHOWN = {"confidence": "most confident first", "left_to_right": "left to right", "random": "random"}
WINDOWS = ("slide", "block")  # how a masked LM's masks follow the text (demo.engine.unmasking)
MAX_TOKENS_PER_STEP = 64
INFILL_STRATEGIES = ("greedy", "sample")
FIM_MODES = ("auto", "on", "off")  # a causal LM's fill-in-the-middle tokens: demo.engine.infill
KINDS = ("masked", "causal")
DTYPES = ("float32", "bfloat16", "float16")
DEPTHS = tuple(round(0.1 * i, 1) for i in range(11))
# What the mask sweep varies: generation's padding masks (on a generated task) or the PLL's
# right masks (on a ranked task); demo.evaluation.mask_sweep
SWEEPS = ("padding_masks", "right_masks")


# ---------------------------------------------------------------- user text in messages

# Unicode categories drawn as nothing: controls, format characters (zero-width space and joiner,
# the byte-order mark), surrogates, private use, unassigned
UNSEEN = ("Cc", "Cf", "Cs", "Co", "Cn")


def check_readable(text: str, what: str) -> str:
    """``text``, if a tokenizer can read it; else ValueError in words naming the ``what`` (the
    page's word: "prompt", "candidate", ...)."""
    broken = next((c for c in text if unicodedata.category(c) == "Cs"), None)
    if broken is not None:
        raise ValueError(f"The {what} holds a broken character (U+{ord(broken):04X}, half of an emoji or "
                         f"other symbol that a program split in two): delete it, or type that symbol again.")
    # (whitespace alone is text a tokenizer reads: a newline is a token of its own for many)
    if text and not text.isspace() and all(c.isspace() or unicodedata.category(c) in UNSEEN for c in text):
        raise ValueError(f"The {what} is only invisible characters (such as zero-width spaces): type "
                         f"some words.")
    return text


def quoted(text: str, width: int = 80) -> str:
    """User text as a message quotes it: on one line, characters drawn as nothing written as their
    code point (⟨U+200B⟩), whole up to ``width`` characters, else its start."""
    def seen(char: str) -> str:
        if char in "\n\r\t":
            return " "
        return f"⟨U+{ord(char):04X}⟩" if unicodedata.category(char) in UNSEEN else char
    text = "".join(seen(c) for c in text)
    return text if len(text) <= width else text[:width - 3] + "..."


LARGEST = 2 ** 63 - 1  # the largest whole number a setting could take (int64)


def as_said(value, quote: str = "'") -> str:
    """A value as a refusal quotes it, in the terms of the person who sent it (JSON's, as the API
    takes them) and short: text in quotes, at most its start, odd characters as code points (never
    a Python escape such as ``\\ud800``); null, true, false, lists and objects as JSON writes them;
    a number past any bound, NaN and the infinities in words, never a 300-digit number. Text
    inside a list or object is in JSON's double quotes (``quote``)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, str):
        return f"{quote}{quoted(value)}{quote}"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "NaN (not a number)"
        if isinstance(value, float) and math.isinf(value):
            return "infinity" if value > 0 else "minus infinity"
        if abs(value) > LARGEST:
            return f"a number far above {LARGEST}" if value > 0 else f"a number far below -{LARGEST}"
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(as_said(v, '"') for v in value[:4]) + (", ..." if len(value) > 4 else "") + "]"
    if isinstance(value, dict):
        items = [as_said(str(k), '"') + ": " + as_said(v, '"') for k, v in list(value.items())[:4]]
        return "{" + ", ".join(items) + (", ..." if len(value) > 4 else "") + "}"
    return "an unexpected value"


# ---------------------------------------------------------------- declarations

# What a setting's declaration may say, beside its default (``setting``'s keywords). One
# declaration feeds the page's widget, the API's argument line (and so the MCP tool's schema), the
# command line's option and the validation, so none of them can drift from another.
DECLARED = {
    "help": "one line: the widget's info, the API's argument line, the option's first line",
    "more": "what only the command line's help adds after that line",
    "applies": "the models or modes it acts in ('masked LMs', 'sampling only'), said before the help",
    "low": "the least value (inclusive)",
    "above": "true: the value must be above ``low``, not equal to it (a probability in (0, 1])",
    "high": "the largest value (inclusive); a field's name: that field's value",
    "step": "a slider's step (a number setting's resolution on the page)",
    "typed": "true: the page asks for it in a number box, not on a slider (a seed: any whole number)",
    "label": "the widget's label, for a setting the page shows",
    "shown": "{value: the page's words for it}, for a choice",
    "off": "the widget's value that leaves an optional setting unset (the core's default)",
    "cap": "the AppSettings field that bounds it further on a deployment (check_caps)",
    "what": "its name in messages (default: the field's name)",
    "aliases": "more command-line names",
}


def setting(default=dataclasses.MISSING, help: str = "", *, factory=None, **declared):
    """A settings dataclass field and its declaration (``DECLARED`` says what it may hold)."""
    unknown = set(declared) - set(DECLARED)
    if unknown or not help:
        raise TypeError(f"A setting needs a help line and only the keys of DECLARED, not {sorted(unknown)}.")
    metadata = {"help": help, **declared}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def help_line(f: dataclasses.Field) -> str:
    """A setting's one line: where it applies, then what it does."""
    applies = f.metadata.get("applies")
    line = f"{applies}: {f.metadata['help']}" if applies else f.metadata["help"]
    return line[0].upper() + line[1:]


@functools.cache
def _declared(cls) -> tuple[dict, dict, list]:
    """(fields by name, type hints, fields in the order they are checked: a field bounding another
    first) of a settings dataclass, read once per class: settings objects are built in loops."""
    bounding = {f.metadata.get("high") for f in fields(cls)}
    return ({f.name: f for f in fields(cls)}, typing.get_type_hints(cls),
            sorted(fields(cls), key=lambda f: f.name not in bounding))


def declaration(settings, name: str) -> dataclasses.Field:
    """The field ``name`` of a settings dataclass (or of an instance's class)."""
    found = _declared(settings if isinstance(settings, type) else type(settings))[0].get(name)
    if found is None:
        raise KeyError(f"{getattr(settings, '__name__', type(settings).__name__)} declares no setting {name!r}")
    return found


def bounds(settings, name: str) -> tuple:
    """(low, high) of a declared setting, a high that names a field read from ``settings`` (an
    instance, or the class for that field's default)."""
    f = declaration(settings, name)
    low, high = f.metadata.get("low"), f.metadata.get("high")
    if isinstance(high, str):
        high = declaration(settings, high).default if isinstance(settings, type) else getattr(settings, high)
    return low, high


def choices_of(cls, name: str) -> tuple:
    """A choice setting's values, from its ``Literal`` type."""
    return typing.get_args(kind_of(typing.get_type_hints(cls)[name])[0])


def kind_of(hint) -> tuple:
    """(the type a field holds, whether None is allowed)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return (args[0] if len(args) == 1 else hint), len(args) < len(typing.get_args(hint))
    return hint, False


def check_declared(settings) -> None:
    """Every field of ``settings`` against its declaration: a choice among its type's values, a
    flag true or false, a number of its kind within its bounds; None only where the type allows."""
    _, hints, ordered = _declared(type(settings))
    for f in ordered:
        value, (kind, optional) = getattr(settings, f.name), kind_of(hints[f.name])
        name = f.metadata.get("what", f.name)
        if optional and value is None:
            continue
        if typing.get_origin(kind) is typing.Literal:
            _choice(value, name, typing.get_args(kind))
        elif kind is bool:
            _flag(value, name)
        elif kind in (int, float) and "low" in f.metadata:
            low, high = bounds(settings, f.name)
            above = f.metadata.get("above", False)
            if kind is int:
                _whole(value, name, low, high)
            else:
                within = (f"a number {'above' if above else 'from'} {low:g}"
                          + (f" {'up ' if above else ''}to {high:g}" if high is not None else " or more"))
                _number(value, name, lambda v: (v > low if above else v >= low) and (high is None or v <= high),
                        within)


def check_caps(cls, values: dict, app) -> None:
    """The bounds a deployment (an AppSettings) sets on top of the declarations' (``cap``), on
    the values a request gives ``cls`` (by field name), before anything else is checked."""
    for f in fields(cls):
        cap, value = f.metadata.get("cap"), values.get(f.name)
        if cap is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value > getattr(app, cap):
            limit = {f.name: f for f in fields(app)}[cap]
            raise ValueError(f"{f.metadata.get('what', f.name)} may be at most {getattr(app, cap)} per request "
                             f"here ({limit.metadata['help']}); you asked for {as_said(value)}.")


# ---------------------------------------------------------------- checks


def _whole(value, name: str, low: int | None = None, high: int | None = None, optional=False):
    """Raise a readable ValueError unless ``value`` is a whole number within [low, high]."""
    if optional and value is None:
        return
    ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) <= LARGEST
    ok = ok and (low is None or value >= low) and (high is None or value <= high)
    if not ok:
        bounds = (f"from {low} to {high}" if high is not None else f">= {low}") if low is not None else ""
        raise ValueError(f"{name} must be a whole number {bounds}, not {as_said(value)}.".replace("  ", " "))


def _number(value, name: str, check, what: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not check(value):
        raise ValueError(f"{name} must be {what}, not {as_said(value)}.")


def _check_sampling(settings) -> None:
    """The temperature of settings that sample (generation, infilling): above 0."""
    if settings.strategy == "sample":
        _number(settings.temperature, "temperature", lambda v: v > 0,
                "> 0 for sampling (use strategy='greedy' for the deterministic limit)")


def _flag(value, name: str):
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, not {as_said(value)}.")


def _choice(value, name: str, allowed, optional=False):
    if optional and value is None:
        return
    if value not in allowed:
        raise ValueError(f"Unknown {name} {as_said(value)}; use one of {', '.join(allowed)}.")


def cache_used(cache: str, kind: str) -> str:
    """The decoding that a generation asking for ``cache`` (one of CACHE_MODES) really uses on a
    ``kind`` ("masked"/"causal") LM: the prefix cache is a masked LM's; a causal LM decodes with
    its own exact KV cache whatever it asks (``demo.engine.generation``). Results record this mode, so
    exact and fast runs never mix."""
    return cache if kind == "masked" else "exact"


# ---------------------------------------------------------------- the model


@dataclass(frozen=True)
class ModelSettings:
    """Which model to load and where (the command line's model options)."""
    model: str = setting(help=
        "Hugging Face Hub id, local model folder or .gguf file, a local model's short name, or a "
        "pair's name (mlm-icl models lists them)")
    kind: Literal[KINDS] | None = setting(None, "load as a masked or causal LM (default: the family's natural kind)",
                                          what="model kind")
    device: str = setting("auto", "cpu, cuda, cuda:1, ... (auto: cuda if any)")
    dtype: Literal[DTYPES] = setting("float32", "the weights' precision (float32: exact)", more=
        "float16: scores moved by at most 0.09 nats, every ranking and greedy output kept, no "
        "faster on a CPU. bfloat16: 1.6-2.3x faster scoring on an AVX-512 CPU, scores moved by up "
        "to 0.5 nats, near-ties can flip, 2 of 12 greedy outputs changed. On an H100 float16 kept "
        "everything and scored 1.3-2.5x faster (benchmarks/bench_precision.py, docs/method.md section 3)")
    trust_remote_code: bool = setting(False,
        "allow Hub code for the allowlisted models, at their pinned commits (demo.engine.models)")
    revision: str | None = setting(None, "Hub branch, tag or commit to load")
    threads: int | None = setting(None, "torch CPU threads (1 is fastest on a crowded machine)", low=1)
    device_map: str | None = setting(None, "one model across several GPUs: auto, or a transformers device map "
                                     "(accelerate; inputs go to its first layer's device)")
    emd: Literal[EMD_MODES] = setting("auto",
        "DeBERTa was pretrained with its head reading an enhanced mask decoder, which transformers "
        "leaves out; the paper's numbers come with it. Other models ignore this", more=
        "'on' reads the enhanced mask decoder (as Microsoft pretrained it, the BERTs paper's model), "
        "'off' the last layer (transformers' DebertaForMaskedLM); 'auto' is on where the checkpoint "
        "holds the position table the decoder needs.",
        label="DeBERTa head", shown={"auto": "enhanced mask decoder (the paper)", "off": "last layer (transformers)"})

    def load_options(self) -> dict:
        """The fields that say how ``demo.engine.models.load_model`` loads the model (its keywords)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("model", "threads")}

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("No model given: a Hub id (e.g. 'bert-base-uncased'), a local model "
                             "folder or a .gguf file.")
        check_declared(self)


# ---------------------------------------------------------------- scoring


@dataclass(frozen=True)
class ScoringSettings:
    """How candidates are scored by ``demo.engine.pll`` (masked LMs by PLL or by their decoder's
    likelihood, causal LMs exactly)."""
    method: Literal[METHODS] | None = setting(None,
        "how a masked LM scores a token: salazar masks it alone, right_masks also tokens to its right (the "
        "paper), within_word_l2r the rest of its word, whole_word its whole word, decoder reads it as the "
        "decoder writes it, elbo averages random maskings", more=
        "salazar hides only that token (1 mask); right_masks also hides the next few tokens (the "
        "BERTs paper's PLL, the default); within_word_l2r also hides the rest of its word; whole_word "
        "hides its whole word; decoder shows the model only the text before the token, then [MASK] and "
        "padding masks, as when it generates, so the score is the probability that its own "
        "left-to-right generation writes the candidate (the BERTs paper's 'exact log-likelihood'); elbo "
        "masks a random share of the candidate's tokens at a time, as masked diffusion LMs (LLaDA, "
        "dLLM) score an answer, and averages over elbo_samples patterns (a lower bound on the "
        "likelihood, with its standard error). A causal LM always uses its exact log-likelihood (causal)",
        label="PLL variant", what="scoring method",
        shown={"salazar": "1 mask (Salazar et al. 2020)",
               "right_masks": "+ right masks (Samuel 2024, the BERTs paper)",
               "within_word_l2r": "within-word left-to-right (Kauf & Ivanova 2023)",
               "whole_word": "whole word masked",
               "decoder": "the decoder's own likelihood (left to right, as it writes)",
               "elbo": "masked diffusion ELBO (random shares masked, averaged: LLaDA, dLLM)"})
    right_masks: int = setting(2,
        "how many tokens to the right are masked too (the paper: 2; its Table 5 on ReCoRD: 0 right masks "
        "80.9, +1 86.0, +2 87.1, +3 86.9 EM)", applies="the right-masks variant", low=0, high=MAX_RIGHT_MASKS,
        label="Right masks")
    padding_masks: int | None = setting(None, "masks after the predicted one, as when generating (default: "
                                        "the family's)", applies="method decoder", low=0, high=MAX_PADDING_MASKS)
    reduction: Literal[REDUCTIONS] = setting("sum",
        "rank by the sum of log-probs, or by their mean per scored token (NormPLL)")
    scope: Literal[SCOPES] = setting("completion",
        "score only the candidate's tokens (the context just conditions), or every token of context + "
        "candidate (the ALBERT paper's full scoring)", label="Score",
        shown={"completion": "the candidate only", "full": "full text"})
    unconditional_context: str | None = setting(None,
        "if set (e.g. 'Answer:'), subtract each candidate's score after this neutral text, as GPT-3 "
        "did for ARC and OpenBookQA", label="Unconditional context (optional)")
    word_level: bool = setting(False, "also report per-word scores")
    token_budget: int = setting(8192, "tokens per forward pass (copies x padded length): bounds memory", low=1)
    stride: int = setting(1, "approximate PLL: one copy scores every N-th token (1 = exact)", applies="the PLL methods",
        more="N > 1: one copy scores every N-th token, each with its own masks, so N copies score a "
        "text. Each token then also sees the others' masks: scores drop a little, rankings mostly stay "
        "(benchmarks/bench_pll_approx.py measures how often)", low=1, high=MAX_STRIDE)
    rescore_band: float = setting(0.0,
        "with stride > 1: candidates within this many nats of the best are scored again, exactly "
        "(0 = none)", more="In rankings (several candidates), per token with reduction=mean, so that "
        "near-ties are ranked as the exact PLL ranks them.", low=0.0)
    elbo_samples: int = setting(64, "masking patterns per text, each a masked copy", applies="method elbo",
        more="A text with no more patterns than this (2^L - 1 for L scored tokens) is scored exactly, every "
        "pattern once.", low=1, high=MAX_ELBO_SAMPLES, label="ELBO: masking patterns")
    elbo_seed: int = setting(0, "seed of the masking patterns drawn", applies="method elbo", low=0, high=2**63 - 1,
                             label="ELBO: seed")
    fast: bool = setting(False,
        "score with the approximate PLL where it was measured to keep rankings (by the candidates' "
        "length), exactly elsewhere", applies="the PLL methods", more=
        "The stride and band per candidate length: assets/scoring/fast_pll.csv, measured by "
        "benchmarks/bench_pll_approx.py. Exact where none was measured: lengths outside every "
        "band, single candidates.", label="Fast scoring (approximate PLL)")

    def __post_init__(self):
        check_declared(self)
        if self.unconditional_context is not None and (
                not isinstance(self.unconditional_context, str) or not self.unconditional_context.strip()):
            raise ValueError("unconditional_context must be some text (e.g. 'Answer:'), or unset.")
        if self.fast and (self.stride > 1 or self.rescore_band):
            raise ValueError("fast scoring picks its own stride and band per ranking: leave stride at 1 "
                             "and rescore_band at 0, or set them yourself without fast.")
        if self.method in ("decoder", "elbo") and (self.stride > 1 or self.rescore_band):
            raise ValueError(f"stride and rescore_band are the approximate PLL's (the PLL methods'); "
                             f"method={self.method} reads its own copies: leave them at 1 and 0, or pick a "
                             f"PLL method.")

    def method_for(self, lm) -> str:
        """The method used for ``lm``: its natural one when unset, checked against its kind."""
        method = self.method or ("causal" if lm.kind == "causal" else DEFAULT_MASKED_METHOD)
        if lm.kind == "causal" and method != "causal":
            raise ValueError(f"{lm.label} is a causal LM: it is scored by exact log-likelihood "
                             f"(method='causal'); {method!r} is a masked-LM method.")
        if lm.kind == "masked" and method == "causal":
            raise ValueError(f"{lm.label} is a masked LM; method='causal' needs a causal LM. Use one "
                             f"of {', '.join(MASKED_METHODS)}.")
        return method


# ---------------------------------------------------------------- writing by unmasking


@dataclass(frozen=True)
class WritingSettings:
    """How a masked LM writes by unmasking (``demo.engine.unmasking``): where its masks stand, which
    of them a step writes and how many. The defaults are the BERTs paper's decoder; generation
    (``GenerationSettings``), the evaluator and the lm-eval plugin take these same fields."""
    window: Literal[WINDOWS] = setting("slide",
        "'slide' keeps 1 + padding_masks masks after the text (the BERTs paper's decoder); 'block' fills "
        "a block of block_length masks, then the next (masked diffusion LMs)", applies="masked LMs", more=
        "With 'slide' one more mask is appended for each token written; the blocks are masked "
        "diffusion LMs' semi-autoregressive blocks.")
    block_length: int = setting(32, "masks per block; the next block comes when one is full",
                                applies="any order", low=1, high=MAX_NEW_TOKENS_CAP,
                                label="Any order: block length")
    tokens_per_step: int = setting(1,
        "several: fewer forward passes; each token guessed without the others written in the same step",
        applies="any order", low=1, high=MAX_TOKENS_PER_STEP, label="Any order: tokens per step")
    confidence_threshold: float | None = setting(None,
        "each step also writes every mask of the block whose guess is at least this likely (Fast-dLLM's "
        "threshold; 0 = off, tokens per step only)", applies="most confident first only", more=
        "It reads the open block's masks and writes at least tokens_per_step, the surest: many tokens a "
        "pass where the model is sure, one where it is not.", low=0.0, above=True, high=1.0, step=0.05,
        off=0, label="Any order: write all this sure")
    order: Literal[UNMASKING_ORDERS] = setting("left_to_right",
        "the masks a step writes: the leftmost (the BERTs paper's), those the model is surest of "
        "(masked diffusion LMs, Mask-Predict), or random ones (seeded)", applies="any order",
        label="Any order: which masks", shown=ORDERS_SHOWN)
    remask: bool = setting(False,
        "earlier tokens of the block may be masked again when new guesses are surer (Mask-Predict's "
        "re-masking)", applies="most confident first only", label="Any order: re-mask")
    masks_ahead: bool = setting(False,
        "every block's masks follow the prompt from the first step, so the model sees how much room is "
        "left (LLaDA's and dLLM's samplers)", applies="any order, in blocks", label="Any order: all masks ahead",
        more="Off, a block's masks come once the block before is full.")

    @property
    def any_order(self) -> bool:
        """Whether a masked LM writes other than the BERTs paper's way (one mask after the text
        written at a time, left to right): then ``demo.engine.unmasking`` decodes, not
        transformers' ``generate()``."""
        return (self.window, self.tokens_per_step, self.order, self.remask) != ("slide", 1, "left_to_right", False)

    def __post_init__(self):
        check_declared(self)
        self._check_writing()

    def _check_writing(self) -> None:
        """What writing's fields do not combine with, each other."""
        if self.masks_ahead and self.window != "block":
            raise ValueError("masks_ahead lays out the masks of every block at once: it needs window='block'.")
        if self.window == "block" and self.tokens_per_step > self.block_length:
            raise ValueError(f"tokens_per_step ({self.tokens_per_step}) is more than a block holds (block_length "
                             f"{self.block_length}): a step writes in one block. Lower tokens_per_step to "
                             f"{self.block_length} or lengthen the blocks.")
        if self.confidence_threshold is not None and (self.order != "confidence" or self.remask):
                raise ValueError("confidence_threshold writes the masks the model is surest of: it needs "
                                 "order='confidence', without remask.")
        if self.remask and self.order != "confidence":
            raise ValueError("remask weighs earlier tokens against new guesses by their probability: it "
                             "needs order='confidence'.")


# ---------------------------------------------------------------- generation


@dataclass(frozen=True)
class GenerationSettings(WritingSettings):
    """How ``demo.engine.generation.generate`` continues a prompt."""
    max_new_tokens: int = setting(32, "upper bound on the continuation's length in tokens", low=1,
                                  cap="max_new_tokens", label="Max new tokens", more=
        "Only the model bounds it (an absolute-position model's window, prompt included: "
        "demo.engine.generation.check_prompt); the app's deployment caps it per request (DEMO_MAX_NEW_TOKENS).")
    strategy: Literal[STRATEGIES] = setting("greedy",
        "greedy: always the likeliest token; beam search keeps several candidate texts (the paper: 4 "
        "beams); sampling draws at random", label="Strategy",
        shown={"greedy": "greedy", "beam": "beam search", "sample": "sampling"})
    num_beams: int = setting(4, "how many hypotheses are kept", applies="beam search only", low=1,
                             high=MAX_BEAMS, label="Beams")
    temperature: float = setting(1.0, "below 1 sharpens the distribution", applies="sampling only",
                                 low=0.0, high=MAX_TEMPERATURE, step=0.05, label="Temperature")
    top_k: int = setting(0, "draw from the k likeliest tokens (0 = all)", applies="sampling only", low=0,
                         label="Top-k")
    top_p: float = setting(1.0, "draw from the smallest set holding this probability mass (1 = all)",
                           applies="sampling only", low=0.0, above=True, high=1.0, step=0.01, label="Top-p")
    repetition_penalty: float = setting(1.0, "above 1 discourages repeating tokens already seen (1 = off)",
                                        low=0.0, above=True, high=MAX_REPETITION_PENALTY, step=0.05,
                                        label="Repetition penalty")
    padding_masks: int | None = setting(None,
        "extra [MASK] tokens after the predicted one, so the end-of-text token does not sit right after "
        "it (the paper: 2 for DeBERTa; default: the family's)", applies="masked LMs", low=0, high=MAX_PADDING_MASKS,
        off="default", label="Padding masks (masked LM)")
    cache: Literal[CACHE_MODES] = setting("exact",
        "'exact' re-reads the whole window at every step (the paper's method); 'prefix' reuses the "
        "prompt's keys and values between refreshes (faster, approximate)", applies="masked LMs", more=
        "With window='block': the prompt's and the finished blocks', refreshed at each block "
        "(Fast-dLLM's prefix cache), for the families that have it (another is refused with their "
        "list: demo.engine.families). Causal LMs always use their own exact cache.")
    cache_refresh: int = setting(32,
        "re-read the whole prompt every N new tokens (1 = every token: the exact method's output, no "
        "faster)", applies="prefix cache", more="window='block': every N steps of a block, and at each "
        "block. Speed and agreement per N: benchmarks/bench_cache.py, docs/method.md sections 2 and 9.",
        low=1, high=MAX_NEW_TOKENS_CAP, label="Refresh every (prefix cache)")
    cache_margin: float = setting(0.1,
        "a step whose top two tokens are less than this many nats apart is redone exactly (0 = never)",
        applies="prefix cache", more="Scaled down for the 24 tokens after a refresh: near-ties are where "
        "the cache's small error flips a choice. What each margin keeps and costs: "
        "benchmarks/bench_cache.py --sweep.", low=0.0)
    parallel_threshold: float | None = setting(None,
        "after each pass also write the tokens guessed at the padding masks whose probability is at "
        "least this, without a pass of their own (0 = off)", applies="prefix cache", more=
        "Confidence-gated parallel unmasking: fewer passes, approximate (the guesses were made with "
        "masks where the tokens before them now stand); speed and agreement per threshold: "
        "benchmarks/bench_cache.py. A causal LM ignores it.", low=0.0, above=True, high=1.0, step=0.05, off=0,
        label="Parallel unmasking (prefix cache)")
    chat: bool = setting(False,
        "the prompt is a question in the model's chat template, and the model answers it (chat models)",
        applies="masked LMs", more="A masked LM's text then ends at its tokenizer's end-of-sequence "
        "token, or its padding token where it has none, as dLLM trains its chat models to end an answer.",
        label="Chat turn (masked LM)")
    stop_at_newline: bool = setting(False, "end the continuation at the first line break", label="Stop at newline")
    stop_strings: list[str] = setting(factory=list, help="stop strings (removed from the output)",
                                      aliases=["--stop"])
    digits: int | None = setting(None, "answer with exactly this many digits", low=1)
    choices: list[str] | None = setting(None, "allowed continuations: the output is one of them")
    seed: int | None = setting(0, "sampling seed, for repeatable samples", low=0, high=2**63 - 1, typed=True,
                               label="Seed")
    trace: bool = setting(False, "record the step-by-step trace")
    trace_top_k: int = setting(5, "top tokens per step in the trace", low=1)

    def __post_init__(self):
        # A single string where a list belongs is one stop string / one choice, not its letters.
        for name in ("stop_strings", "choices"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, [value])
            elif value is not None:
                object.__setattr__(self, name, list(value))
        check_declared(self)
        _check_sampling(self)
        self._check_writing()
        self._check_unmasking()
        if any(not isinstance(x, str) or x == "" for x in self.stop_strings):
            raise ValueError("Stop strings must be non-empty strings.")
        if self.digits is not None:
            if self.digits > self.max_new_tokens:
                raise ValueError(f"{self.digits} digits may need {self.digits} tokens, but "
                                 f"max_new_tokens is {self.max_new_tokens}; raise max_new_tokens.")
            if self.choices is not None:
                raise ValueError("Use either digits or choices, not both.")
        if self.choices is not None and (
                not self.choices or any(not isinstance(c, str) or not c.strip() for c in self.choices)):
            raise ValueError("choices must be a non-empty list of non-empty strings.")

    def _check_unmasking(self) -> None:
        """What writing in any order does not combine with (its own fields: WritingSettings)."""
        if not self.any_order:
            return
        refused = [(self.strategy == "beam", "beam search (it keeps whole texts growing left to right)"),
                   (self.cache == "prefix" and self.window != "block",
                    "the prefix cache with a sliding window (it reuses a prompt that slides left to right; "
                    "with window='block' it keeps what precedes the open block)"),
                   (self.parallel_threshold is not None,
                    "parallel unmasking (it guesses the next tokens left to right)"),
                   (self.digits is not None or self.choices is not None,
                    "digits or choices (they constrain each next token, left to right)")]
        for used, what in refused:
            if used:
                raise ValueError(f"Writing in any order (window={self.window!r}, order={self.order!r}, "
                                 f"tokens_per_step={self.tokens_per_step}) does not combine with {what}; "
                                 f"write the paper's way (window='slide', order='left_to_right', one token "
                                 f"a step) for it.")


# ---------------------------------------------------------------- infilling


@dataclass(frozen=True)
class InfillSettings:
    """How ``demo.engine.infill`` fills the blanks of a text (``[blank]``, ``[blank:3]``,
    ``[blank:auto]``, ``____``: the parser, ``demo.engine.infill.parse_blanks``, says the rules).
    Sampling means what it means for ``GenerationSettings``."""
    order: Literal[UNMASKING_ORDERS] = setting("left_to_right",
        "which masked position is filled at each step: the leftmost (the BERTs paper's order), the one "
        "the model is surest of (masked diffusion LMs, Mask-Predict), or a random one (seeded)",
        label="Order", what="infilling order", shown=ORDERS_SHOWN)
    strategy: Literal[INFILL_STRATEGIES] = setting("greedy",
        "the token written at the chosen position: the likeliest, or a sample", what="infilling strategy")
    temperature: float = setting(1.0, "below 1 sharpens the distribution", applies="sampling only",
                                 low=0.0, high=MAX_TEMPERATURE)
    top_k: int = setting(0, "draw from the k likeliest tokens (0 = all)", applies="sampling only", low=0)
    top_p: float = setting(1.0, "draw from the smallest set holding this probability mass (1 = all)",
                           applies="sampling only", low=0.0, above=True, high=1.0)
    seed: int | None = setting(0, "seed of sampling and of the random order", low=0, high=2**63 - 1,
                               typed=True, label="Seed")
    blank_tokens: int = setting(1, "tokens of a [blank] or ____ without a count", low=1,
                                high="max_masked_tokens", label="Tokens per [blank]")
    max_blank_tokens: int = setting(4,
        "[blank:auto]: lengths 1..N are tried and the fill whose whole text the model scores best is kept",
        low=1, high="max_masked_tokens")
    max_blanks: int = setting(8, "blanks one text may have", low=1)
    max_masked_tokens: int = setting(64,
        "masked tokens one text may have, all blanks together (each costs a forward pass)", low=1)
    fim: Literal[FIM_MODES] = setting("auto",
        "fill in the middle (reading the text after the blank) with the tokenizer's "
        "<fim_prefix>/<fim_suffix>/<fim_middle> tokens", applies="causal LMs", what="fim mode", more=
        "'auto' where it has them, 'off' continues from the left of each blank only, 'on' refuses a "
        "model without them.")
    trace: bool = setting(False, "record the step-by-step trace")
    trace_top_k: int = setting(5, "top tokens per step in the trace", low=1)

    def __post_init__(self):
        check_declared(self)
        _check_sampling(self)


# ---------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class RunSettings:
    """How ``demo.evaluation.evaluate`` runs a task (its scoring is a separate ScoringSettings)."""
    shots: int | None = setting(None, "demonstrations (default: the paper's)", low=0)
    limit: int | None = setting(None, "evaluate a fixed random sample of N items (the same for every model and seed)",
                                low=1)
    seed: int = setting(0, "demonstration sampling seed", low=0)
    repetitions: int = setting(1, "demonstration draws to average", low=1)
    score: Literal[SCORE_SPANS] | None = setting(None, "which span of a ranked example is scored (default: the task's)",
                                                 what="scored span")
    chunk_size: int = setting(16, "examples scored in one batched call", low=1)
    execute_limit: int = setting(20, "held-out inputs each induced instruction runs on",
                                 applies="instruction induction", low=1)
    max_new_tokens: int | None = setting(None, "token limit (default: the task's)", applies="generated tasks",
                                         low=1, high=MAX_NEW_TOKENS_CAP)
    data_root: str | None = setting(None, "folder with the datasets (default: $DEMO_DATA_ROOT, else ../shared/data)")
    skip_too_long: bool = setting(True,
        "skip items longer than an absolute-position model reads and report how many", more=
        "BERT: 512 tokens, with their demonstrations, in any repetition; n and the metrics are then over "
        "the items kept. Off (--no-skip-too-long): such an item stops the run with an error.")
    cache: Literal[CACHE_MODES] = setting("exact",
        "decoding of generated items: 'exact' (the paper's method) or 'prefix' (the approximate prefix "
        "cache)", applies="masked LMs", more=
        "The prefix cache as in GenerationSettings, R and margin at its defaults. Ranked tasks (scored) "
        "and causal LMs are exact whatever this says; the summary's cache column records the mode a run used.")

    def shots_for(self, task) -> int:
        """The demonstrations per item for ``task``: these settings', else the paper's."""
        return task.shots if self.shots is None else self.shots

    def __post_init__(self):
        check_declared(self)


# ---------------------------------------------------------------- lm-eval's model


@dataclass(frozen=True)
class HarnessSettings:
    """What lm-eval's ``--model_args`` sets for ``demo.harness`` beside the model, scoring and writing
    settings (its keys are these fields' names)."""
    add_bos_token: bool | None = setting(None,
        "a start token before every text (true) or before none (false); unset: as the tokenizer does "
        "(HFLM's key)", applies="causal LMs")
    parallelize: bool = setting(False, "one model across this machine's GPUs (device_map=auto)")
    batch_size: int | str = setting(1,
        "generate_until: prompts with the same settings written together (a masked LM writing in any "
        f"order; auto: {AUTO_BATCH})")

    def __post_init__(self):
        check_declared(self)
        size = self.batch_size
        if isinstance(size, str) and size.strip().lower().startswith("auto"):  # lm-eval's "auto", "auto:N"
            size = AUTO_BATCH
        elif isinstance(size, str) and size.strip().isdigit():
            size = int(size)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"batch_size must be a whole number >= 1 or 'auto', not {as_said(self.batch_size)}.")
        object.__setattr__(self, "batch_size", size)


# ---------------------------------------------------------------- needle in a haystack


@dataclass(frozen=True)
class GridSettings:
    """The needle grid of ``demo.evaluation.haystack.run_grid``: lengths x depths x repetitions."""
    lengths: list[int] = setting(factory=lambda: [256, 512, 1024],
        help="total prompt lengths in tokens, separated by commas", label="Lengths (tokens)",
        more="Every position the model needs to answer.")
    depths: list[float] = setting(factory=lambda: list(DEPTHS),
        help="where the needle sits, 0 (start) to 1 (end), separated by commas", label="Needle depths")
    repetitions: int = setting(3, "runs per cell, each with another needle and filler", low=1,
                               label="Repetitions")
    seed: int = setting(0, "seed for the needles and the filler's starting point", low=0, high=2**63 - 1,
                        typed=True, label="Seed")
    padding_masks: int | None = setting(None, "padding masks (default: the family's)", applies="masked LMs",
                                        low=0, high=MAX_PADDING_MASKS)
    filler: str | None = setting(None,
        "UTF-8 text file used as the haystack (default: the bundled public-domain book)")
    cache: Literal[CACHE_MODES] = setting("exact",
        "exact: the paper's method, re-reads the whole prompt for every answer token; prefix: reuses the "
        "prompt's internal states (the prefix cache; faster, approximate)", applies="masked LMs", more=
        "R and margin at the prefix cache's defaults. A causal LM is exact whatever this says; the "
        "grid's rows record the mode used.", label="Masked LM decoding",
        shown={"exact": "exact", "prefix": "prefix cache"})

    def __post_init__(self):
        lengths = list(self.lengths) if isinstance(self.lengths, (list, tuple)) else [self.lengths]
        depths = list(self.depths) if isinstance(self.depths, (list, tuple)) else [self.depths]
        if not lengths or not depths:
            raise ValueError("Give at least one length and one depth.")
        for n in lengths:
            if isinstance(n, float) and n.is_integer():
                n = int(n)
            _whole(n, "Each length (in tokens)", 1)
        for d in depths:
            _number(d, "Each depth", lambda v: 0 <= v <= 1, "between 0.0 (start) and 1.0 (end)")
        object.__setattr__(self, "lengths", sorted({int(n) for n in lengths}))
        object.__setattr__(self, "depths", sorted({round(float(d), 6) for d in depths}))
        check_declared(self)

    @property
    def cells(self) -> int:
        return len(self.lengths) * len(self.depths) * self.repetitions


# ---------------------------------------------------------------- how many masks?


@dataclass(frozen=True)
class SweepSettings:
    """The mask sweep of ``demo.evaluation.mask_sweep``: one task evaluated at each number of masks."""
    sweep: Literal[SWEEPS] | None = setting(None,
        "padding masks change how the model writes; right masks how it scores candidates",
        more="mlm-icl probe: instead of the needle grid, sweep a masked LM's padding masks (generation, on a "
        "generated task) or right masks (the PLL, on a ranked task).", label="What to sweep",
        shown={"padding_masks": "padding masks: generation (a generated task)",
               "right_masks": "right masks: ranking (a ranked task)"})
    values: list[int] = setting(factory=lambda: [0, 1, 2, 3, 4], help=
        f"the numbers of masks evaluated, separated by commas, each from 0 to {MAX_PADDING_MASKS}",
                                label="Numbers of masks")
    task: str | None = setting(None, "the task evaluated at every value (its data must be on the server)", more=
        "Default: ii_singular_to_plural for padding masks, copa for right masks.", label="Task")
    shots: int | None = setting(None, "demonstrations before each item (the same at every number of masks)",
                                low=0, high=MAX_SHOTS, label="Shots")
    limit: int = setting(20, "items evaluated at each number of masks (a fixed sample of the task)", low=1,
                         cap="max_sweep_items", label="Items")
    max_new_tokens: int | None = setting(None, "token limit (default: the task's)", applies="generated tasks",
                                         low=1, high=MAX_NEW_TOKENS_CAP)
    demos_seed: int = setting(0, "seed of the demonstrations drawn for each item", low=0)
    data_root: str | None = setting(None, "folder with the datasets (default: $DEMO_DATA_ROOT, else ../shared/data)")

    def __post_init__(self):
        check_declared(self)
        values = self.values
        if isinstance(values, str):  # a page's text box: "0, 1, 2" (or a list written out: "[0, 1]")
            words = values.replace(",", " ").replace("[", " ").replace("]", " ").split()
            values = [int(w) if w.lstrip("-").isdigit() else w for w in words]
        elif not isinstance(values, (list, tuple)):
            values = [values]
        if not values:
            raise ValueError("Give at least one number of masks to evaluate.")
        high = MAX_RIGHT_MASKS if self.sweep == "right_masks" else MAX_PADDING_MASKS
        for v in values:
            _whole(v, "Each number of masks", 0, high)
        object.__setattr__(self, "values", sorted(set(values)))
        if self.task is not None and (not isinstance(self.task, str) or not self.task.strip()):
            raise ValueError(f"The task must be a task's name (mlm-icl evaluate --list), not {as_said(self.task)}.")


# ---------------------------------------------------------------- published and our results


@dataclass(frozen=True)
class ResultsFilter:
    """Which results ``demo.evaluation.results.filter_results`` keeps: rows matching every non-empty list."""
    papers: list[str] = setting(factory=list, help=
        "which source: a paper's published tables, or 'ours' (runs of mlm-icl evaluate); empty = all", label="Paper")
    groups: list[str] = setting(factory=list, help=
        "task groups: SuperGLUE, language modeling, translation, closed-book QA, ...; empty = all",
        label="Task group")
    models: list[str] = setting(factory=list, help=
        "models to keep (masked and causal), as the tables name them; empty = all", label="Model")
    shots: list[str] = setting(factory=list, help=
        "numbers of in-context examples, e.g. 0-shot (few-shot = the paper's k per task); empty = all",
        label="Shots")
    tasks: list[str] = setting(factory=list, help="single tasks to keep, as the tables name them; empty = all",
                               label="Task")

    def __post_init__(self):
        for f in fields(self):
            wanted = getattr(self, f.name)
            if not (isinstance(wanted, list) and all(isinstance(w, str) for w in wanted)):
                raise ValueError(f"The {f.name} filter must be a list of its choices, not {as_said(wanted)}.")
            for value in wanted:
                check_readable(value, f"{f.name} filter")


# ---------------------------------------------------------------- the deployment


TRUE_WORDS, FALSE_WORDS = ("yes", "true", "t", "y", "on", "1"), ("no", "false", "f", "n", "off", "0")


def parse_boolean(text: str) -> bool:
    """A yes/no value typed as text (a ``DEMO_*`` variable, a command-line option), in any case."""
    word = text.strip().lower()
    if word in TRUE_WORDS + FALSE_WORDS:
        return word in TRUE_WORDS
    raise ValueError(f"Expected yes or no ({'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}), not {as_said(text)}.")


@dataclass(frozen=True)
class AppSettings:
    """What a deployment sets through environment variables (``DEMO_<FIELD>``, upper case).

    ``AppSettings.from_env()`` is the only reader of ``DEMO_*`` variables.
    """
    concurrency: int = setting(1, "model runs at a time of each kind: generating, scoring, probing (1 on CPU)")
    answers_at_once: int = setting(8,
        "requests of a kind the queue lets in at once: shared answers and refusals go out while "
        "`concurrency` of them run a model")
    batch_requests: int = setting(8,
        "distinct rankings with the same model and settings that wait for a turn together run as one "
        "batch of at most this many, each answer what it gets alone (1: one at a time; never on ZeroGPU)")
    queue_size: int = setting(256,
        "requests waiting before new ones are refused (a class of 30 pressing buttons that each start "
        "two to four requests, twice over)")
    share_results: bool = setting(True,
        "compute identical requests once and share the answer (greedy, beams, seeded sampling: "
        "a class on one lesson step waits for one run)")
    shared_results: int = setting(256, "answers of identical requests kept to share (least recently used dropped)")
    warm_lesson: bool = setting(True,
        "at start-up, load the default pair and compute every lesson step in the background, so "
        "a class's first press of each step is answered at once")
    max_models: int = setting(3, "models kept loaded (least recently used dropped)")
    max_model_gb: float = setting(8.0, "their total parameter memory")
    gpu_dtype: str = setting("float16",
        "weights' precision where the app runs on a GPU (float32 on a CPU). float16 kept every "
        "ranking and greedy output of float32 and scored 1.2-2.5x faster on an H100, scores moved by "
        "at most 0.07 nats (benchmarks/bench_precision.py --device cuda, docs/method.md section 3)")
    max_prompt_chars: int = setting(6000, "characters of a prompt or context")
    max_candidate_chars: int = setting(400, "characters per candidate")
    max_new_tokens: int = setting(128, "new tokens per generation")
    max_grid_cells: int = setting(24, "needle-grid runs per request")
    max_grid_tokens: int = setting(2048, "longest needle-grid length")
    max_sweep_items: int = setting(40, "mask sweep: items evaluated at each value")
    max_request_tflop: float = setting(4.0,
        "work one request may do, in trillions of operations (demo.app.budget); refused beyond")
    assumed_gflops: float = setting(50.0,
        "the machine's speed assumed when telling people how long a request would take")
    max_request_seconds: float = setting(120.0,
        "a generation or needle grid stops after this long, keeping what it has")
    local_models: str = setting("",
        "local model folders or .gguf files offered as 'local', separated by os.pathsep")
    local_pairs: str = setting("",
        "JSON file of model pairs to offer: [{name, masked, causal, why}], local folders")
    data_root: str = setting("", "folder with the evaluation datasets")
    mcp: bool = setting(True,
        "also serve the app's endpoints as MCP tools, for agents (/gradio_api/mcp/sse)")
    public: bool = setting(False,
        "public mode: typed names must be Hub ids, Hub models are size-checked before download, "
        "and each visitor's model runs are rate-limited (on by itself where SPACE_ID is set)")
    max_hub_gb: float = setting(6.0,
        "public mode: weight files a typed Hub model may download, from Hub metadata")
    runs_per_minute: int = setting(20,
        "public mode: model runs per visitor per minute")
    self_check: bool = setting(False,
        "check the default models at start-up (obvious words, a COPA slice; mlm-icl check-model) "
        "and show the result in the page (on by itself where SPACE_ID is set)")

    @staticmethod
    def variable(name: str) -> str:
        """The environment variable of a field: ``local_models`` -> ``DEMO_LOCAL_MODELS``."""
        return f"DEMO_{name.upper()}"

    @classmethod
    def from_env(cls, environ=os.environ) -> "AppSettings":
        # A Hugging Face Space sets SPACE_ID: public mode and the start-up check, unless the
        # DEMO_PUBLIC and DEMO_SELF_CHECK variables say otherwise.
        values = {"public": True, "self_check": True} if environ.get("SPACE_ID") else {}
        for f in fields(cls):
            raw = environ.get(cls.variable(f.name))
            if raw is None or (raw.strip() == "" and f.type is not str):
                continue
            try:
                values[f.name] = parse_boolean(raw) if f.type is bool else f.type(raw)
            except ValueError:
                raise ValueError(f"{cls.variable(f.name)}={as_said(raw)} is not a valid "
                                 f"{f.type.__name__}.") from None
        return cls(**values)

    def __post_init__(self):
        _choice(self.gpu_dtype, self.variable("gpu_dtype"), DTYPES)
        for f in fields(self):
            if f.type is int:
                high = MAX_NEW_TOKENS_CAP if f.name == "max_new_tokens" else None
                _whole(getattr(self, f.name), self.variable(f.name), 1, high)
        for f in fields(self):
            if f.type is float:
                _number(getattr(self, f.name), self.variable(f.name), lambda v: v > 0, "> 0")
