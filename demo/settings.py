"""Every setting of the project, as pydantic dataclasses: one field per setting (its default, bounds
and help), one validation.

The engines take these objects; the command line (``demo.cli``) builds its options from their
fields (each field's description is the option's help); the app builds the same objects from its
widgets; the tests build them directly. Torch-free, so ``demo --help`` and the app's page load
never wait for torch.

- :class:`ModelSettings`: which model, on which device (``demo.engine.models.load_model``).
- :class:`ScoringSettings`: how candidates are scored (``demo.engine.pll``).
- :class:`WritingSettings`: how a masked LM writes by unmasking (``demo.engine.unmasking``).
- :class:`SamplingSettings`: how the token written at a position is drawn (``demo.engine.sampling``).
- :class:`TraceSettings`: whether a run records its steps for the playback (``demo.engine.trace``).
- :class:`GenerationSettings`: how text is generated (``demo.engine.generation``): writing,
  sampling and trace included.
- :class:`InfillSettings`: how blanks in a text are filled (``demo.engine.infill``): sampling and
  trace included.
Evaluation's, the probes' and the results' settings are ``demo.evaluation_settings``' (declared
the same way, with the types shared here); a deployment's own are ``demo.app_settings``'.
"""

import functools
from dataclasses import fields
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import ArgsKwargs, PydanticCustomError

from .declared import field_info, schema
from .refusals import refusal, rule
from .user_text import LARGEST

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
MAX_BLANK_TOKENS = 64  # InfillSettings: tokens of one blank
INFILL_STRATEGIES = ("greedy", "sample")
FIM_MODES = ("auto", "on", "off")  # a causal LM's fill-in-the-middle tokens: demo.engine.infill
KINDS = ("masked", "causal")
DTYPES = ("float32", "bfloat16", "float16")
DEPTHS = tuple(round(0.1 * i, 1) for i in range(11))
# What the mask sweep varies: generation's padding masks (on a generated task) or the PLL's
# right masks (on a ranked task); demo.evaluation.mask_sweep
SWEEPS = ("padding_masks", "right_masks")


# ---------------------------------------------------------------- declarations

# pydantic checks every value (strict: 3.0 is no whole number, "3" no number, true no count; a
# misspelt setting is refused, not dropped); a field's words are read by ``demo.declared``;
# refusals are said in the page's words (``demo.refusals``), never as pydantic's report.
STRICT = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")

# A concept that several classes take is declared once, as a type: its bounds, choices, help and
# the page's words; a class adds its default (and, where it acts otherwise there, its own words).
PaddingMasks = Annotated[int | None, Field(ge=0, le=MAX_PADDING_MASKS, description=
    "extra [MASK] tokens after the predicted one, so the end-of-text token does not sit right after "
    "it (the paper: 2 for DeBERTa; default: the family's)", json_schema_extra=dict(
        applies="masked LMs", off="default", label="Padding masks (masked LM)"))]
CacheMode = Annotated[Literal[CACHE_MODES], Field(json_schema_extra=dict(applies="masked LMs"))]
TaskTokenLimit = Annotated[int | None, Field(ge=1, le=MAX_NEW_TOKENS_CAP, description=
    "token limit (default: the task's)", json_schema_extra=dict(applies="generated tasks"))]
Seed = Annotated[int, Field(ge=0, le=LARGEST)]  # any whole number from 0: which random draws a run makes
DataRoot = Annotated[str | None, Field(description=
    "folder with the datasets (default: $DEMO_DATA_ROOT, else ../shared/data)")]


def settings(cls):
    """Class decorator: ``cls`` as a frozen pydantic dataclass whose refusals are ValueErrors in
    words (``dataclasses.replace`` and ``fields`` work on it as on any dataclass)."""
    made = pydantic_dataclass(frozen=True, config=STRICT)(cls)

    @functools.wraps(made.__init__)
    def __init__(self, *args, **kwargs):
        _validate(self, ArgsKwargs(args, kwargs), context=None)

    made.__init__ = __init__
    return made


def within(deployment, cls, **values):
    """``cls(**values)`` checked against a deployment's caps (``deployment``: an AppSettings) too:
    a field whose words name a ``cap`` is at most that AppSettings field (:func:`capped`)."""
    made = cls.__new__(cls)
    _validate(made, ArgsKwargs((), values), context={"deployment": deployment})
    return made


def _validate(made, arguments: ArgsKwargs, context) -> None:
    # pydantic's own dataclass __init__, with a validation context
    try:
        type(made).__pydantic_validator__.validate_python(arguments, self_instance=made, context=context)
    except ValidationError as err:
        raise ValueError(refusal(type(made), err)) from None


def field_value(cls, name: str, value):
    """``value`` checked as the field ``cls.name`` alone (an endpoint's argument beside another
    class's settings: a ranking's DeBERTa head), refused in the words ``cls`` refuses it in."""
    try:
        return _field_adapter(cls, name).validate_python(value)
    except ValidationError as err:
        raise ValueError(refusal(cls, err, setting=name)) from None


@functools.cache
def _field_adapter(cls, name: str) -> TypeAdapter:
    declared = field_info(cls, name)
    return TypeAdapter(Annotated[declared.annotation, declared], config=STRICT)


def capped(cls, value, info: ValidationInfo):
    """A field validator: the deployment's cap on the field (its words' ``cap``), where the
    validation context has a deployment (:func:`within`)."""
    deployment = (info.context or {}).get("deployment")
    cap = schema(cls, info.field_name)["cap"]
    if deployment is not None and value is not None and value > getattr(deployment, cap):
        raise PydanticCustomError("deployment_cap", "at most {cap} per request here", {
            "cap": getattr(deployment, cap), "why": field_info(deployment, cap).description})
    return value


def cache_used(cache: str, kind: str) -> str:
    """The decoding that a generation asking for ``cache`` (one of CACHE_MODES) really uses on a
    ``kind`` ("masked"/"causal") LM: the prefix cache is a masked LM's; a causal LM decodes with
    its own exact KV cache whatever it asks (``demo.engine.generation``). Results record this mode, so
    exact and fast runs never mix."""
    return cache if kind == "masked" else "exact"


def listed_numbers(values) -> list:
    """A list of numbers as every door may send it, read by one rule: the page's text box ("0, 1, 2",
    "[0, 1]", spaces too), one number, or a list whose items are numbers or read as the box's
    items are (["0", "1"] is [0, 1]); what is not a number stays as sent, for its item's check to
    refuse in words."""
    if isinstance(values, str):
        values = values.replace(",", " ").replace("[", " ").replace("]", " ").split()
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    return [_number(v.strip()) if isinstance(v, str) else v for v in values]


def _number(word: str):
    for kind in (int, float):
        try:
            return kind(word)
        except ValueError:
            pass
    return word


def _one_or_more(value):
    """A single string where a list belongs is one item (one stop string, one choice), not its
    letters; a tuple is a list."""
    return [value] if isinstance(value, str) else list(value) if isinstance(value, tuple) else value


# ---------------------------------------------------------------- the model


@settings
class ModelSettings:
    """Which model to load and where (the command line's model options)."""
    model: str = Field(description=
        "Hugging Face Hub id, local model folder or .gguf file, a local model's short name, or a "
        "pair's name (mlm-icl models lists them)")
    kind: Literal[KINDS] | None = Field(None, description=
        "load as a masked or causal LM (default: the family's natural kind)", json_schema_extra=dict(what="model kind"))
    device: str = Field("auto", description="cpu, cuda, cuda:1, ... (auto: cuda if any)")
    dtype: Literal[DTYPES + ("auto",)] = Field("float32", description="the weights' precision (float32: exact)",
                                              json_schema_extra=dict(more=
        "auto: decided once per process (demo.engine.precision): bfloat16 on a CPU with AMX, float32 on "
        "one without bfloat16 units, and elsewhere bfloat16 where a probe repeated until stable "
        "measures it at least 2x faster than float32. On the CPU, half precision runs each row of a "
        "batch as it runs alone (demo.engine.batch_invariance). "
        "float16: scores moved by at most 0.09 nats, every ranking and greedy output kept, no "
        "faster on a CPU. bfloat16: 1.6-2.3x faster scoring on an AVX-512 CPU, scores moved by up "
        "to 0.5 nats, near-ties can flip, 2 of 12 greedy outputs changed. On an H100 float16 kept "
        "everything and scored 1.3-2.5x faster (benchmarks/bench_precision.py, docs/method.md section 3)"))
    trust_remote_code: bool = Field(False, description=
        "allow Hub code for the allowlisted models, at their pinned commits (demo.engine.models)")
    revision: str | None = Field(None, description="Hub branch, tag or commit to load")
    threads: int | None = Field(None, ge=1, le=LARGEST, description=
        "torch CPU threads (1 is fastest on a crowded machine)")
    device_map: str | None = Field(None, description=
        "one model across several GPUs: auto, or a transformers device map (accelerate; inputs go to its "
        "first layer's device)")
    emd: Literal[EMD_MODES] = Field("auto", description=
        "DeBERTa was pretrained with its head reading an enhanced mask decoder, which transformers "
        "leaves out; the paper's numbers come with it. Other models ignore this", json_schema_extra=dict(more=
        "'on' reads the enhanced mask decoder (as Microsoft pretrained it, the BERTs paper's model), "
        "'off' the last layer (transformers' DebertaForMaskedLM); 'auto' is on where the checkpoint "
        "holds the position table the decoder needs.",
        label="DeBERTa head", what="DeBERTa head",
        shown={"auto": "enhanced mask decoder (the paper)", "off": "last layer (transformers)"}))

    def load_options(self) -> dict:
        """The fields that say how ``demo.engine.models.load_model`` loads the model (its keywords)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("model", "threads")}

    @field_validator("model", mode="before")
    @classmethod
    def _named(cls, model):
        if not isinstance(model, str) or not model.strip():
            raise rule("No model given: a Hub id (e.g. 'bert-base-uncased'), a local model "
                       "folder or a .gguf file.")
        return model


# ---------------------------------------------------------------- scoring


@settings
class ScoringSettings:
    """How candidates are scored by ``demo.engine.pll`` (masked LMs by PLL or by their decoder's
    likelihood, causal LMs exactly)."""
    method: Literal[METHODS] | None = Field(None, description=
        "how a masked LM scores a token: 1 mask hides it alone, + right masks also the next tokens (the "
        "paper), within-word left-to-right the rest of its word, whole word masked its whole word, the "
        "decoder's own likelihood reads it as the decoder writes it, the masked diffusion ELBO averages "
        "random maskings", json_schema_extra=dict(more=
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
               "elbo": "masked diffusion ELBO (random shares masked, averaged: LLaDA, dLLM)"}))
    right_masks: int = Field(2, ge=0, le=MAX_RIGHT_MASKS, description=
        "how many tokens to the right are masked too (the paper: 2; its Table 5 on ReCoRD: 0 right masks "
        "80.9, +1 86.0, +2 87.1, +3 86.9 EM)", json_schema_extra=dict(applies="the right-masks variant",
                                                                     label="Right masks"))
    padding_masks: PaddingMasks = Field(None, description=
        "masks after the predicted one, as when generating (default: the family's)",
        json_schema_extra=dict(applies="method decoder"))
    reduction: Literal[REDUCTIONS] = Field("sum", description=
        "rank by the sum of log-probs, or by their mean per scored token (NormPLL)")
    scope: Literal[SCOPES] = Field("completion", description=
        "score only the candidate's tokens (the context just conditions), or every token of context + "
        "candidate (the ALBERT paper's full scoring)", json_schema_extra=dict(
            label="Score", shown={"completion": "the candidate only", "full": "full text"}))
    unconditional_context: str | None = Field(None, description=
        "if set (e.g. 'Answer:'), subtract each candidate's score after this neutral text, as GPT-3 "
        "did for ARC and OpenBookQA", json_schema_extra=dict(label="Unconditional context (optional)"))
    word_level: bool = Field(False, description="also report per-word scores")
    token_budget: int = Field(8192, ge=1, le=LARGEST, description=
        "tokens per forward pass (copies x padded length): bounds memory")
    stride: int = Field(1, ge=1, le=MAX_STRIDE, description=
        "approximate PLL: one copy scores every N-th token (1 = exact)", json_schema_extra=dict(
            applies="the PLL methods", more=
            "N > 1: one copy scores every N-th token, each with its own masks, so N copies score a "
            "text. Each token then also sees the others' masks: scores drop a little, rankings mostly stay "
            "(benchmarks/bench_pll_approx.py measures how often)"))
    rescore_band: float = Field(0.0, ge=0.0, description=
        "with stride > 1: candidates within this many nats of the best are scored again, exactly "
        "(0 = none)", json_schema_extra=dict(more="In rankings (several candidates), per token with reduction=mean, "
                                             "so that near-ties are ranked as the exact PLL ranks them."))
    elbo_samples: int = Field(64, ge=1, le=MAX_ELBO_SAMPLES, json_schema_extra=dict(
        applies="masked diffusion ELBO", label="ELBO: masking patterns",
        more="A text with no more patterns than this (2^L - 1 for L scored tokens) is scored exactly, every pattern "
             "once."), description="how many masking patterns a candidate's score averages, each a masked copy the "
                                   "model reads; a few give a rough score that changes with the seed")
    elbo_seed: Seed = Field(0, description=
        "which masking patterns are drawn (another seed draws others; a candidate scored through every "
        "one of its patterns scores the same)", json_schema_extra=dict(applies="masked diffusion ELBO",
                                                                       label="ELBO: seed"))
    fast: bool = Field(False, description=
        "score with the approximate PLL where it was measured to keep rankings (by the candidates' "
        "length), exactly elsewhere", json_schema_extra=dict(
            applies="the PLL methods", label="Fast scoring (approximate PLL)", more=
            "The stride and band per candidate length: assets/scoring/fast_pll.csv, measured by "
            "benchmarks/bench_pll_approx.py. Exact where none was measured: lengths outside every "
            "band, single candidates."))

    @model_validator(mode="after")
    def _combined(self):
        if self.unconditional_context is not None and not self.unconditional_context.strip():
            raise rule("unconditional_context must be some text (e.g. 'Answer:'), or unset.")
        if self.fast and (self.stride > 1 or self.rescore_band):
            raise rule("fast scoring picks its own stride and band per ranking: leave stride at 1 "
                       "and rescore_band at 0, or set them yourself without fast.")
        if self.method in ("decoder", "elbo") and (self.stride > 1 or self.rescore_band):
            raise rule(f"stride and rescore_band are the approximate PLL's (the PLL methods'); "
                       f"method={self.method} reads its own copies: leave them at 1 and 0, or pick a "
                       f"PLL method.")
        return self

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


@settings
class WritingSettings:
    """How a masked LM writes by unmasking (``demo.engine.unmasking``): where its masks stand, which
    of them a step writes and how many. The defaults are the BERTs paper's decoder; generation
    (``GenerationSettings``), the evaluator and the lm-eval plugin take these same fields."""
    window: Literal[WINDOWS] = Field("slide", description=
        "'slide' keeps 1 + padding_masks masks after the text (the BERTs paper's decoder); 'block' fills "
        "a block of block_length masks, then the next (masked diffusion LMs)", json_schema_extra=dict(
            applies="masked LMs", more="With 'slide' one more mask is appended for each token written; the "
            "blocks are masked diffusion LMs' semi-autoregressive blocks."))
    block_length: int = Field(32, ge=1, le=MAX_NEW_TOKENS_CAP, description=
        "masks per block; the next block comes when one is full", json_schema_extra=dict(
            applies="any order", label="Any order: block length"))
    tokens_per_step: int = Field(1, ge=1, le=MAX_TOKENS_PER_STEP, description=
        "several: fewer forward passes; each token guessed without the others written in the same step",
        json_schema_extra=dict(applies="any order", label="Any order: tokens per step"))
    confidence_threshold: float | None = Field(None, gt=0.0, le=1.0, description=
        "each step also writes every mask of the block whose guess is at least this likely (Fast-dLLM's "
        "threshold; 0 = off, tokens per step only)", json_schema_extra=dict(
            applies="most confident first only", step=0.05, off=0, label="Any order: write all this sure", more=
            "It reads the open block's masks and writes at least tokens_per_step, the surest: many tokens a "
            "pass where the model is sure, one where it is not."))
    order: Literal[UNMASKING_ORDERS] = Field("left_to_right", description=
        "the masks a step writes: the leftmost (the BERTs paper's), those the model is surest of "
        "(masked diffusion LMs, Mask-Predict), or random ones (seeded)", json_schema_extra=dict(
            applies="any order", label="Any order: which masks", shown=ORDERS_SHOWN))
    remask: bool = Field(False, description=
        "earlier tokens of the block may be masked again when new guesses are surer (Mask-Predict's "
        "re-masking)", json_schema_extra=dict(applies="most confident first only", label="Any order: re-mask"))
    masks_ahead: bool = Field(False, description=
        "every block's masks follow the prompt from the first step, so the model sees how much room is "
        "left (LLaDA's and dLLM's samplers)", json_schema_extra=dict(
            applies="any order, in blocks", label="Any order: all masks ahead",
            more="Off, a block's masks come once the block before is full."))

    @property
    def any_order(self) -> bool:
        """Whether a masked LM writes other than the BERTs paper's way (one mask after the text
        written at a time, left to right): then ``demo.engine.unmasking`` decodes, not
        transformers' ``generate()``."""
        return (self.window, self.tokens_per_step, self.order, self.remask) != ("slide", 1, "left_to_right", False)

    @model_validator(mode="after")
    def _writing(self):
        """What writing's fields do not combine with, each other."""
        if self.masks_ahead and self.window != "block":
            raise rule("All masks ahead lays out the masks of every block at once: it needs writing in blocks.")
        if self.window == "block" and self.tokens_per_step > self.block_length:
            raise rule(f"{self.tokens_per_step} tokens per step is more than a block holds ({self.block_length}): "
                       f"a step writes in one block. Lower the tokens per step to {self.block_length} or "
                       f"lengthen the blocks.")
        if self.confidence_threshold is not None and (self.order != "confidence" or self.remask):
            raise rule("Write all this sure writes the masks the model is surest of: it needs the masks "
                       "written most confident first, without re-masking.")
        if self.remask and self.order != "confidence":
            raise rule("Re-mask weighs earlier tokens against new guesses by their probability: it needs "
                       "the masks written most confident first.")
        return self


# ---------------------------------------------------------------- sampling


@settings
class SamplingSettings:
    """How the token written at a position is drawn (generation and infilling alike): the likeliest,
    or a draw after transformers' repetition penalty, temperature, top-k and top-p, as
    ``generate()`` means them (``demo.engine.sampling``)."""
    strategy: Literal[STRATEGIES] = Field("greedy", description=
        "greedy: always the likeliest token; beam search keeps several candidate texts (the paper: 4 "
        "beams); sampling draws at random", json_schema_extra=dict(
            label="Strategy", shown={"greedy": "greedy", "beam": "beam search", "sample": "sampling"}))
    temperature: float = Field(1.0, gt=0.0, le=MAX_TEMPERATURE, description=
        "below 1 sharpens the distribution (greedy is the limit at 0)",
                               json_schema_extra=dict(applies="sampling only", step=0.05, label="Temperature"))
    top_k: int = Field(0, ge=0, le=LARGEST, description="draw from the k likeliest tokens (0 = all)",
                       json_schema_extra=dict(applies="sampling only", label="Top-k"))
    top_p: float = Field(1.0, gt=0.0, le=1.0, description=
        "draw from the smallest set holding this probability mass (1 = all)",
        json_schema_extra=dict(applies="sampling only", step=0.01, label="Top-p"))
    min_p: float = Field(0.0, ge=0.0, le=1.0, description=
        "draw only from tokens at least this share as likely as the likeliest (0 = all)",
        json_schema_extra=dict(applies="sampling only", step=0.01, label="Min-p"))
    typical_p: float = Field(1.0, gt=0.0, le=1.0, description=
        "draw from the tokens as surprising as the text is expected to be, the smallest set holding this "
        "probability mass (locally typical sampling; 1 = all)",
        json_schema_extra=dict(applies="sampling only", step=0.01, label="Typical-p"))
    repetition_penalty: float = Field(1.0, gt=0.0, le=MAX_REPETITION_PENALTY, description=
        "above 1 discourages repeating tokens already seen (1 = off)",
        json_schema_extra=dict(step=0.05, label="Repetition penalty"))
    seed: Seed | None = Field(0, description=
        "seed of sampling and of a random order, for repeatable runs (empty: one is drawn, and said)",
        json_schema_extra=dict(typed=True, label="Seed", applies="sampling or a random order"))


@settings
class TraceSettings:
    """Whether a run records its steps for the playback (``demo.engine.trace``)."""
    trace: bool = Field(False, description="record the step-by-step trace")
    trace_top_k: int = Field(5, ge=1, le=LARGEST, description="top tokens per step in the trace")


# ---------------------------------------------------------------- generation


@settings
class GenerationSettings(TraceSettings, SamplingSettings, WritingSettings):
    """How ``demo.engine.generation.generate`` continues a prompt: its writing, its sampling and these."""
    max_new_tokens: int = Field(32, ge=1, le=LARGEST, description=
        "upper bound on the continuation's length in tokens", json_schema_extra=dict(
            cap="max_new_tokens", label="Max new tokens", more=
            "Only the model bounds it (an absolute-position model's window, prompt included: "
            "demo.engine.generation.check_prompt); the app's deployment caps it per request (DEMO_MAX_NEW_TOKENS)."))
    num_beams: int = Field(4, ge=1, le=MAX_BEAMS, description="how many hypotheses are kept",
                           json_schema_extra=dict(applies="beam search only", label="Beams"))
    padding_masks: PaddingMasks = Field(None, json_schema_extra=dict(applies="a sliding window"))
    cache: CacheMode = Field("exact", description=
        "'exact' re-reads the whole window at every step (the paper's method); 'prefix' reuses the "
        "prompt's keys and values between refreshes (faster, approximate)", json_schema_extra=dict(more=
            "With window='block': the prompt's and the finished blocks', refreshed at each block "
            "(Fast-dLLM's prefix cache), for the families that have it (another is refused with their "
            "list: demo.engine.families). Causal LMs always use their own exact cache."))
    cache_refresh: int = Field(32, ge=1, le=MAX_NEW_TOKENS_CAP, description=
        "re-read the whole prompt every N new tokens (1 = every token: the exact method's output, no "
        "faster)", json_schema_extra=dict(
            applies="prefix cache", label="Refresh every (prefix cache)", more=
            "window='block': every N steps of a block, and at each block. Speed and agreement per N: "
            "benchmarks/bench_cache.py, docs/method.md sections 2 and 9."))
    cache_margin: float = Field(0.1, ge=0.0, description=
        "a step whose top two tokens are less than this many nats apart is redone exactly (0 = never)",
        json_schema_extra=dict(applies="prefix cache", more=
            "Scaled down for the 24 tokens after a refresh: near-ties are where the cache's small error "
            "flips a choice. What each margin keeps and costs: benchmarks/bench_cache.py --sweep."))
    parallel_threshold: float | None = Field(None, gt=0.0, le=1.0, description=
        "after each pass also write the tokens guessed at the padding masks whose probability is at "
        "least this, without a pass of their own (0 = off)", json_schema_extra=dict(
            applies="prefix cache", step=0.05, off=0, label="Parallel unmasking (prefix cache)", more=
            "Confidence-gated parallel unmasking: fewer passes, approximate (the guesses were made with "
            "masks where the tokens before them now stand); speed and agreement per threshold: "
            "benchmarks/bench_cache.py. A causal LM ignores it."))
    chat: bool = Field(False, description=
        "the prompt is a question in the model's chat template, and the model answers it (chat models)",
        json_schema_extra=dict(applies="masked LMs", label="Chat turn (masked LM)", more=
            "A masked LM's text then ends at its tokenizer's end-of-sequence token, or its padding token "
            "where it has none, as dLLM trains its chat models to end an answer."))
    stop_at_newline: bool = Field(False, description="end the continuation at the first line break",
                                  json_schema_extra=dict(label="Stop at newline"))
    stop_strings: list[str] = Field(default_factory=list, description="stop strings (removed from the output)",
                                    json_schema_extra=dict(aliases=["--stop"], each="Each stop string"))
    digits: int | None = Field(None, ge=1, le=LARGEST, description="answer with exactly this many digits")
    choices: list[str] | None = Field(None, description="allowed continuations: the output is one of them",
                                      json_schema_extra=dict(each="Each choice"))

    _listed = field_validator("stop_strings", "choices", mode="before")(_one_or_more)
    _capped = field_validator("max_new_tokens")(capped)

    @model_validator(mode="after")
    def _generation(self):
        if any(x == "" for x in self.stop_strings):
            raise rule("Stop strings must be non-empty strings.")
        if self.digits is not None:
            if self.digits > self.max_new_tokens:
                raise rule(f"{self.digits} digits may need {self.digits} tokens, but "
                           f"max_new_tokens is {self.max_new_tokens}; raise max_new_tokens.")
            if self.choices is not None:
                raise rule("Use either digits or choices, not both.")
        if self.choices is not None and (not self.choices or any(not c.strip() for c in self.choices)):
            raise rule("choices must be a non-empty list of non-empty strings.")
        return self._unmasking()

    def _unmasking(self):
        """What writing in any order does not combine with."""
        if not self.any_order:
            return self
        refused = [(self.strategy == "beam", "beam search (it keeps whole texts growing left to right)",
                    "pick greedy or sampling"),
                   (self.cache == "prefix" and self.window != "block",
                    "the prefix cache with a sliding window (it reuses a prompt that slides left to right; "
                    "in blocks it keeps what precedes the open block)", "write in blocks"),
                   (self.parallel_threshold is not None,
                    "parallel unmasking (it guesses the next tokens left to right)", "turn it off"),
                   (self.digits is not None or self.choices is not None,
                    "digits or choices (they constrain each next token, left to right)", "leave them out")]
        how = (f"{'in blocks' if self.window == 'block' else 'in a sliding window'}, {ORDERS_SHOWN[self.order]}, "
               f"{self.tokens_per_step} token{'s' if self.tokens_per_step > 1 else ''} a step")
        for used, what, remedy in refused:
            if used:
                raise rule(f"Writing in any order ({how}) does not combine with {what}: {remedy}, or write "
                           f"the paper's way (left to right, one token a step).")
        return self


# ---------------------------------------------------------------- infilling


@settings
class InfillSettings(TraceSettings, SamplingSettings):
    """How ``demo.engine.infill`` fills the blanks of a text (``[blank]``, ``[blank:3]``,
    ``[blank:auto]``, ``____``: the parser, ``demo.engine.infill.parse_blanks``, says the rules).
    Sampling means what it means for ``GenerationSettings``."""
    strategy: Literal[INFILL_STRATEGIES] = Field("greedy", description=
        "the token written at the chosen position: the likeliest, or a sample",
        json_schema_extra=dict(what="infilling strategy"))
    order: Literal[UNMASKING_ORDERS] = Field("left_to_right", description=
        "which masked position is filled at each step: the leftmost (the BERTs paper's order), the one "
        "the model is surest of (masked diffusion LMs, Mask-Predict), or a random one (seeded)",
        json_schema_extra=dict(label="Order", what="infilling order", shown=ORDERS_SHOWN, applies="masked LMs", more=
            "A causal LM fills each blank left to right."))
    blank_tokens: int = Field(1, ge=1, le=MAX_BLANK_TOKENS, description="tokens of a [blank] or ____ without a count",
                              json_schema_extra=dict(label="Tokens per [blank]"))
    max_blank_tokens: int = Field(4, ge=1, le=MAX_BLANK_TOKENS, description=
        "[blank:auto]: lengths 1..N are tried and the fill whose whole text the model scores best is kept")
    max_blanks: int = Field(8, ge=1, le=LARGEST, description="blanks one text may have")
    max_masked_tokens: int = Field(64, ge=1, le=LARGEST, description=
        "masked tokens one text may have, all blanks together (each costs a forward pass)")
    fim: Literal[FIM_MODES] = Field("auto", description=
        "fill in the middle (reading the text after the blank) with the tokenizer's "
        "<fim_prefix>/<fim_suffix>/<fim_middle> tokens", json_schema_extra=dict(
            applies="causal LMs", what="fim mode", more=
            "'auto' where it has them, 'off' continues from the left of each blank only, 'on' refuses a "
            "model without them."))

    @model_validator(mode="after")
    def _blanks(self):
        for name in ("blank_tokens", "max_blank_tokens"):
            if getattr(self, name) > self.max_masked_tokens:
                raise rule(f"{name} must be a whole number from 1 to {self.max_masked_tokens} "
                           f"(max_masked_tokens), not {getattr(self, name)}.")
        return self
