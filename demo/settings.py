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
- :class:`AppSettings`: what a deployment sets through ``DEMO_*`` environment variables; the
  only place they are read (``spaces_config/settings.env`` lists them, a test keeps both equal).
"""

import math
import os
import unicodedata
from dataclasses import dataclass, field, fields
from typing import Literal

# Where the app's files are: demo.paths owns them; the tabs and the needle probe read them here

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
MAX_NEW_TOKENS_CAP = 512  # every step of the exact MLM method re-encodes the whole window
MAX_PADDING_MASKS = 16
MAX_BEAMS = 16
SCORE_SPANS = ("answer", "suffix", "example")
UNMASKING_ORDERS = ("left_to_right", "confidence", "random")  # demo.engine.unmasking
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


def _shown(value) -> str:
    """A value as a refusal quotes it: text in quotes, its odd characters as code points (never a
    Python escape such as ``\\ud800``), anything else as Python writes it."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_shown, value)) + "]"
    return f"'{quoted(value)}'" if isinstance(value, str) else repr(value)


# ---------------------------------------------------------------- checks

def _help(text: str, **extra) -> dict:
    return {"help": text, **extra}


def _whole(value, name: str, low: int | None = None, high: int | None = None, optional=False):
    """Raise a readable ValueError unless ``value`` is a whole number within [low, high]."""
    if optional and value is None:
        return
    ok = isinstance(value, int) and not isinstance(value, bool)
    ok = ok and (low is None or value >= low) and (high is None or value <= high)
    if not ok:
        bounds = (f"from {low} to {high}" if high is not None else f">= {low}") if low is not None else ""
        raise ValueError(f"{name} must be a whole number {bounds}, not {_shown(value)}.".replace("  ", " "))


def _number(value, name: str, check, what: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not check(value):
        raise ValueError(f"{name} must be {what}, not {_shown(value)}.")


def _check_sampling(settings) -> None:
    """Temperature, top-k and top-p of settings that may sample (generation, infilling)."""
    if settings.strategy == "sample":
        _number(settings.temperature, "temperature", lambda v: v > 0,
                "> 0 for sampling (use strategy='greedy' for the deterministic limit)")
    else:  # not used, but still a number
        _number(settings.temperature, "temperature", lambda v: v >= 0, "a number >= 0")
    _whole(settings.top_k, "top_k", 0)
    _number(settings.top_p, "top_p", lambda v: 0 < v <= 1, "in (0, 1] (1 turns it off)")


def _check_padding_masks(value) -> None:
    """Masks after the predicted one: generation's, the decoder's likelihood's, the needle grid's."""
    _whole(value, "padding_masks", 0, MAX_PADDING_MASKS, optional=True)


def _flag(value, name: str):
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, not {_shown(value)}.")


def _choice(value, name: str, allowed, optional=False):
    if optional and value is None:
        return
    if value not in allowed:
        raise ValueError(f"Unknown {name} {_shown(value)}; use one of {', '.join(allowed)}.")


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
    model: str = field(metadata=_help(
        "Hugging Face Hub id, local model folder or .gguf file, a local model's short name, or a "
        "pair's name (mlm-icl models lists them)"))
    kind: Literal[KINDS] | None = field(default=None, metadata=_help(
        "load as a masked or causal LM (default: the family's natural kind)"))
    device: str = field(default="auto", metadata=_help("cpu, cuda, cuda:1, ... (auto: cuda if any)"))
    dtype: Literal[DTYPES] = field(default="float32", metadata=_help(
        "weights' precision. float32: exact. float16: scores moved by at most 0.09 nats, every "
        "ranking and greedy output kept, no faster on a CPU. bfloat16: 1.6-2.3x faster scoring on "
        "an AVX-512 CPU, scores moved by up to 0.5 nats, near-ties can flip, 2 of 12 greedy "
        "outputs changed. On an H100 float16 kept everything and scored 1.3-2.5x faster "
        "(benchmarks/bench_precision.py, docs/method.md section 3)"))
    trust_remote_code: bool = field(default=False, metadata=_help(
        "allow Hub code for the allowlisted models, at their pinned commits (demo.engine.models)"))
    revision: str | None = field(default=None, metadata=_help("Hub branch, tag or commit to load"))
    threads: int | None = field(default=None, metadata=_help(
        "torch CPU threads (1 is fastest on a crowded machine)"))
    emd: Literal[EMD_MODES] = field(default="auto", metadata=_help(
        "DeBERTa's head: 'on' reads the enhanced mask decoder (as Microsoft pretrained it, the "
        "BERTs paper's model), 'off' the last layer (transformers' DebertaForMaskedLM); 'auto' is "
        "on where the checkpoint holds the position table the decoder needs. Other families: "
        "ignored"))

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("No model given: a Hub id (e.g. 'bert-base-uncased'), a local model "
                             "folder or a .gguf file.")
        _choice(self.kind, "model kind", KINDS, optional=True)
        _choice(self.dtype, "dtype", DTYPES)
        _whole(self.threads, "threads", 1, optional=True)
        _choice(self.emd, "emd", EMD_MODES)


# ---------------------------------------------------------------- scoring


@dataclass(frozen=True)
class ScoringSettings:
    """How candidates are scored by ``demo.engine.pll`` (masked LMs by PLL or by their decoder's
    likelihood, causal LMs exactly)."""
    method: Literal[METHODS] | None = field(default=None, metadata=_help(
        "how a masked LM scores each token of a candidate: salazar hides only that token (1 mask); "
        "right_masks also hides the next few tokens (the BERTs paper's PLL, the default); "
        "within_word_l2r also hides the rest of its word; whole_word hides its whole word; decoder "
        "shows the model only the text before the token, then [MASK] and padding masks, as when it "
        "generates, so the score is the probability that its own left-to-right generation writes "
        "the candidate (the BERTs paper's 'exact log-likelihood'); elbo masks a random share of the "
        "candidate's tokens at a time, as masked diffusion LMs (LLaDA, dLLM) score an answer, and "
        "averages over elbo_samples patterns (a lower bound on the likelihood, with its standard "
        "error). A causal LM always uses its exact log-likelihood (causal)"))
    right_masks: int = field(default=2, metadata=_help(
        "right_masks: extra masks right of the scored token (the BERTs paper: 2)"))
    padding_masks: int | None = field(default=None, metadata=_help(
        "decoder: masks after the predicted one, as when generating (default: the family's)"))
    reduction: Literal[REDUCTIONS] = field(default="sum", metadata=_help(
        "rank by the sum of log-probs, or by their mean per scored token (NormPLL)"))
    scope: Literal[SCOPES] = field(default="completion", metadata=_help(
        "score the completion only (the context conditions), or every token"))
    unconditional_context: str | None = field(default=None, metadata=_help(
        "subtract score(candidate | this context), e.g. 'Answer:' (GPT-3's normalisation)"))
    word_level: bool = field(default=False, metadata=_help("also report per-word scores"))
    token_budget: int = field(default=8192, metadata=_help(
        "tokens per forward pass (copies x padded length): bounds memory"))
    stride: int = field(default=1, metadata=_help(
        "the PLL methods (not decoder): approximate PLL. 1 = exact (one copy per scored token); "
        "N > 1: one copy scores every N-th token, each with its own masks, so N copies score a "
        "text. Each token then also sees the others' masks: scores drop a little, rankings mostly "
        "stay (benchmarks/bench_pll_approx.py measures how often)"))
    rescore_band: float = field(default=0.0, metadata=_help(
        "with stride > 1, rankings (several candidates): the candidates whose approximate score is "
        "within this much of the best (nats; per token with reduction=mean) are scored again, "
        "exactly, so that near-ties are ranked as the exact PLL ranks them. 0 = none"))
    elbo_samples: int = field(default=64, metadata=_help(
        "elbo: masking patterns per text, each a masked copy (a text with no more patterns than this, "
        "2^L - 1 for L scored tokens, is scored exactly, every pattern once)"))
    elbo_seed: int = field(default=0, metadata=_help("elbo: seed of the masking patterns drawn"))
    fast: bool = field(default=False, metadata=_help(
        "the PLL methods: score a ranking with the approximate PLL setting (stride and band) measured "
        "to keep its rankings for candidates of its length (assets/scoring/fast_pll.csv, "
        "benchmarks/bench_pll_approx.py), exactly where none was: lengths outside every measured "
        "band, single candidates"))

    def __post_init__(self):
        _choice(self.method, "scoring method", METHODS, optional=True)
        _whole(self.right_masks, "right_masks", 0, MAX_RIGHT_MASKS)
        _check_padding_masks(self.padding_masks)
        _choice(self.reduction, "reduction", REDUCTIONS)
        _choice(self.scope, "scope", SCOPES)
        if self.unconditional_context is not None and (
                not isinstance(self.unconditional_context, str) or not self.unconditional_context.strip()):
            raise ValueError("unconditional_context must be some text (e.g. 'Answer:'), or unset.")
        _whole(self.token_budget, "token_budget", 1)
        _flag(self.word_level, "word_level")
        _whole(self.stride, "stride", 1, MAX_STRIDE)
        _number(self.rescore_band, "rescore_band", lambda v: v >= 0, "a number >= 0 (nats)")
        _flag(self.fast, "fast")
        if self.fast and (self.stride > 1 or self.rescore_band):
            raise ValueError("fast scoring picks its own stride and band per ranking: leave stride at 1 "
                             "and rescore_band at 0, or set them yourself without fast.")
        _whole(self.elbo_samples, "elbo_samples", 1, MAX_ELBO_SAMPLES)
        _whole(self.elbo_seed, "elbo_seed", 0, 2**63 - 1)
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
    window: Literal[WINDOWS] = field(default="slide", metadata=_help(
        "masked LMs: 'slide' keeps 1 + padding_masks masks after the text, one more appended for "
        "each token written (the BERTs paper's decoder); 'block' fills a block of block_length "
        "masks, then appends the next block (masked diffusion LMs' semi-autoregressive blocks)"))
    block_length: int = field(default=32, metadata=_help("masked LMs, window='block': masks per block"))
    tokens_per_step: int = field(default=1, metadata=_help(
        "masked LMs: tokens written per forward pass (several: fewer passes, each token guessed "
        "without the others written in the same step)"))
    confidence_threshold: float | None = field(default=None, metadata=_help(
        "masked LMs, order='confidence': each step writes every mask it reads (the open block's) "
        "whose guess has at least this probability, and at least tokens_per_step, the surest "
        "(Fast-dLLM's threshold writing: many tokens a pass where the model is sure, one where it "
        "is not). Unset = tokens_per_step a step"))
    order: Literal[UNMASKING_ORDERS] = field(default="left_to_right", metadata=_help(
        "masked LMs: which masks a step writes: the leftmost (the BERTs paper's), those the model is "
        "surest of (masked diffusion LMs, Mask-Predict), or random ones (seeded)"))
    remask: bool = field(default=False, metadata=_help(
        "masked LMs, order='confidence': earlier tokens not yet final compete with each step's "
        "new guesses at the probability they were written with, and a mask goes back where one "
        "loses (Mask-Predict's re-masking)"))
    masks_ahead: bool = field(default=False, metadata=_help(
        "masked LMs, window='block': all max_new_tokens masks follow the prompt from the first step "
        "and are filled one block at a time (the samplers of LLaDA and of dLLM's chat models: the "
        "model sees how much room is left); off, a block's masks come once the block before is full"))

    @property
    def any_order(self) -> bool:
        """Whether a masked LM writes other than the BERTs paper's way (one mask after the text
        written at a time, left to right): then ``demo.engine.unmasking`` decodes, not
        transformers' ``generate()``."""
        return (self.window, self.tokens_per_step, self.order, self.remask) != ("slide", 1, "left_to_right", False)

    def __post_init__(self):
        _choice(self.window, "window", WINDOWS)
        _whole(self.block_length, "block_length", 1, MAX_NEW_TOKENS_CAP)
        _whole(self.tokens_per_step, "tokens_per_step", 1, MAX_TOKENS_PER_STEP)
        _choice(self.order, "order", UNMASKING_ORDERS)
        _flag(self.remask, "remask")
        _flag(self.masks_ahead, "masks_ahead")
        if self.masks_ahead and self.window != "block":
            raise ValueError("masks_ahead lays out the masks of every block at once: it needs window='block'.")
        if self.window == "block" and self.tokens_per_step > self.block_length:
            raise ValueError(f"tokens_per_step ({self.tokens_per_step}) is more than a block holds (block_length "
                             f"{self.block_length}): a step writes in one block. Lower tokens_per_step to "
                             f"{self.block_length} or lengthen the blocks.")
        if self.confidence_threshold is not None:
            _number(self.confidence_threshold, "confidence_threshold", lambda v: 0 < v <= 1,
                    "a probability in (0, 1], or unset (tokens_per_step a step)")
            if self.order != "confidence" or self.remask:
                raise ValueError("confidence_threshold writes the masks the model is surest of: it needs "
                                 "order='confidence', without remask.")
        if self.remask and self.order != "confidence":
            raise ValueError("remask weighs earlier tokens against new guesses by their probability: it "
                             "needs order='confidence'.")


# ---------------------------------------------------------------- generation


@dataclass(frozen=True)
class GenerationSettings(WritingSettings):
    """How ``demo.engine.generation.generate`` continues a prompt."""
    max_new_tokens: int = field(default=32, metadata=_help(f"1..{MAX_NEW_TOKENS_CAP} new tokens"))
    strategy: Literal[STRATEGIES] = field(default="greedy", metadata=_help(
        "decoding strategy (the BERTs paper: beam search with 4 beams)"))
    num_beams: int = field(default=4, metadata=_help("beam search only"))
    temperature: float = field(default=1.0, metadata=_help("sampling only"))
    top_k: int = field(default=0, metadata=_help("sampling only; 0 = off"))
    top_p: float = field(default=1.0, metadata=_help("sampling only; 1 = off"))
    repetition_penalty: float = field(default=1.0, metadata=_help(
        "1 = off; > 1 penalises tokens already in the prompt or output"))
    padding_masks: int | None = field(default=None, metadata=_help(
        "masked LMs: masks after the predicted one (default: the family's)"))
    cache: Literal[CACHE_MODES] = field(default="exact", metadata=_help(
        "masked LMs: 'exact' re-encodes the whole window at every step (the paper's method); "
        "'prefix' reuses the prompt's keys and values between refreshes (window='block': the prompt's "
        "and the finished blocks', refreshed at each block, Fast-dLLM's prefix cache): faster, "
        "approximate, for the families that have it (another is refused with their list: "
        "demo.engine.families). Causal LMs always use their own exact cache"))
    cache_refresh: int = field(default=32, metadata=_help(
        "prefix cache: re-encode the whole window every N new tokens (window='block': every N steps "
        "of a block, and at each block; 1 = every step, exact; speed and agreement per N: "
        "benchmarks/bench_cache.py, docs/method.md sections 2 and 9)"))
    cache_margin: float = field(default=0.1, metadata=_help(
        "prefix cache: a step whose top two tokens are less than this many nats apart (scaled "
        "down for the 24 tokens after a refresh) is redone exactly (a refresh): near-ties are "
        "where the cache's small error flips a choice. 0 = never (what each margin keeps and "
        "costs: benchmarks/bench_cache.py --sweep)"))
    parallel_threshold: float | None = field(default=None, metadata=_help(
        "masked LMs: after each forward pass also write the next tokens guessed at the padding "
        "masks whose top probability is at least this (confidence-gated parallel unmasking: fewer "
        "passes, approximate; speed and agreement per threshold: benchmarks/bench_cache.py). "
        "Unset = off; a causal LM ignores it"))
    chat: bool = field(default=False, metadata=_help(
        "the prompt is one user turn of the tokenizer's chat template, its answer to follow (chat "
        "models); a masked LM's text then ends at its tokenizer's end-of-sequence token, or its "
        "padding token where it has none, as dLLM trains its chat models to end an answer"))
    stop_at_newline: bool = field(default=False, metadata=_help("stop at the first newline"))
    stop_strings: list[str] = field(default_factory=list, metadata=_help(
        "stop strings (removed from the output)", aliases=["--stop"]))
    digits: int | None = field(default=None, metadata=_help("answer with exactly this many digits"))
    choices: list[str] | None = field(default=None, metadata=_help(
        "allowed continuations: the output is one of them"))
    seed: int | None = field(default=0, metadata=_help("sampling seed"))
    trace: bool = field(default=False, metadata=_help("record the step-by-step trace"))
    trace_top_k: int = field(default=5, metadata=_help("top tokens per step in the trace"))
    # Not a setting (no annotation, so no field or option): the bound on max_new_tokens for
    # interactive use. lm-eval's requests lift it (demo.harness.model): its task configs ask for
    # up to 32k tokens, which only the model bounds.
    max_new_tokens_cap = MAX_NEW_TOKENS_CAP

    def __post_init__(self):
        # A single string where a list belongs is one stop string / one choice, not its letters.
        for name in ("stop_strings", "choices"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, [value])
            elif value is not None:
                object.__setattr__(self, name, list(value))
        _whole(self.max_new_tokens, "max_new_tokens", 1, self.max_new_tokens_cap)
        _choice(self.strategy, "strategy", STRATEGIES)
        _whole(self.num_beams, "num_beams", 1, MAX_BEAMS)
        _check_sampling(self)
        _number(self.repetition_penalty, "repetition_penalty", lambda v: v > 0, "> 0 (1 = off)")
        _whole(self.trace_top_k, "trace_top_k", 1)
        _flag(self.stop_at_newline, "stop_at_newline")
        _flag(self.trace, "trace")
        _flag(self.chat, "chat")
        _check_padding_masks(self.padding_masks)
        _choice(self.cache, "cache", CACHE_MODES)
        _whole(self.cache_refresh, "cache_refresh", 1, MAX_NEW_TOKENS_CAP)
        _number(self.cache_margin, "cache_margin", lambda v: v >= 0, "a number of nats >= 0 (0 = off)")
        if self.parallel_threshold is not None:
            _number(self.parallel_threshold, "parallel_threshold", lambda v: 0 < v <= 1,
                    "a probability in (0, 1], or unset (off)")
        _whole(self.seed, "seed", 0, 2**63 - 1, optional=True)
        WritingSettings.__post_init__(self)
        self._check_unmasking()
        if any(not isinstance(x, str) or x == "" for x in self.stop_strings):
            raise ValueError("Stop strings must be non-empty strings.")
        if self.digits is not None:
            _whole(self.digits, "digits", 1)
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
    order: Literal[UNMASKING_ORDERS] = field(default="left_to_right", metadata=_help(
        "which masked position is filled at each step: the leftmost (the BERTs paper's order), the "
        "one the model is surest of (masked diffusion LMs, Mask-Predict), or a random one (seeded)"))
    strategy: Literal[INFILL_STRATEGIES] = field(default="greedy", metadata=_help(
        "the token written at the chosen position: the likeliest, or a sample"))
    temperature: float = field(default=1.0, metadata=_help("sampling only"))
    top_k: int = field(default=0, metadata=_help("sampling only; 0 = off"))
    top_p: float = field(default=1.0, metadata=_help("sampling only; 1 = off"))
    seed: int | None = field(default=0, metadata=_help("seed of sampling and of the random order"))
    blank_tokens: int = field(default=1, metadata=_help("tokens of a [blank] or ____ without a count"))
    max_blank_tokens: int = field(default=4, metadata=_help(
        "[blank:auto]: lengths 1..N are tried and the fill whose whole text the model scores best "
        "is kept"))
    max_blanks: int = field(default=8, metadata=_help("blanks one text may have"))
    max_masked_tokens: int = field(default=64, metadata=_help(
        "masked tokens one text may have, all blanks together (each costs a forward pass)"))
    fim: Literal[FIM_MODES] = field(default="auto", metadata=_help(
        "causal LMs: fill in the middle (reading the text after the blank) with the tokenizer's "
        "<fim_prefix>/<fim_suffix>/<fim_middle> tokens: 'auto' where it has them, 'off' continues "
        "from the left of each blank only, 'on' refuses a model without them"))
    trace: bool = field(default=False, metadata=_help("record the step-by-step trace"))
    trace_top_k: int = field(default=5, metadata=_help("top tokens per step in the trace"))

    def __post_init__(self):
        _choice(self.order, "infilling order", UNMASKING_ORDERS)
        _choice(self.strategy, "infilling strategy", INFILL_STRATEGIES)
        _check_sampling(self)
        _whole(self.seed, "seed", 0, 2**63 - 1, optional=True)
        _whole(self.max_blanks, "max_blanks", 1)
        _whole(self.max_masked_tokens, "max_masked_tokens", 1)
        _whole(self.blank_tokens, "blank_tokens", 1, self.max_masked_tokens)
        _whole(self.max_blank_tokens, "max_blank_tokens", 1, self.max_masked_tokens)
        _choice(self.fim, "fim mode", FIM_MODES)
        _flag(self.trace, "trace")
        _whole(self.trace_top_k, "trace_top_k", 1)


# ---------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class RunSettings:
    """How ``demo.evaluation.evaluate`` runs a task (its scoring is a separate ScoringSettings)."""
    shots: int | None = field(default=None, metadata=_help("demonstrations (default: the paper's)"))
    limit: int | None = field(default=None, metadata=_help(
        "evaluate a fixed random sample of N items (the same for every model and seed)"))
    seed: int = field(default=0, metadata=_help("demonstration sampling seed"))
    repetitions: int = field(default=1, metadata=_help("demonstration draws to average"))
    score: Literal[SCORE_SPANS] | None = field(default=None, metadata=_help(
        "which span of a ranked example is scored (default: the task's)"))
    chunk_size: int = field(default=16, metadata=_help("examples scored in one batched call"))
    execute_limit: int = field(default=20, metadata=_help(
        "instruction induction: held-out inputs each induced instruction runs on"))
    max_new_tokens: int | None = field(default=None, metadata=_help(
        "generated tasks: token limit (default: the task's)"))
    data_root: str | None = field(default=None, metadata=_help(
        "folder with the datasets (default: $DEMO_DATA_ROOT, else ../shared/data)"))
    skip_too_long: bool = field(default=True, metadata=_help(
        "skip items longer than an absolute-position model reads (BERT: 512 tokens; with their "
        "demonstrations, in any repetition) and report how many; n and the metrics are then over "
        "the items kept. Off (--no-skip-too-long): such an item stops the run with an error"))
    cache: Literal[CACHE_MODES] = field(default="exact", metadata=_help(
        "masked LMs' decoding of generated items: 'exact' (the paper's method) or 'prefix' (the "
        "approximate prefix cache, see GenerationSettings; R and margin at its defaults). Ranked "
        "tasks (scored) and causal LMs are exact whatever this says; the summary's cache column "
        "records the mode a run used"))

    def shots_for(self, task) -> int:
        """The demonstrations per item for ``task``: these settings', else the paper's."""
        return task.shots if self.shots is None else self.shots

    def __post_init__(self):
        _whole(self.shots, "shots", 0, optional=True)
        _whole(self.limit, "limit", 1, optional=True)
        _whole(self.seed, "seed", 0)
        _whole(self.repetitions, "repetitions", 1)
        _choice(self.score, "scored span", SCORE_SPANS, optional=True)
        _whole(self.chunk_size, "chunk_size", 1)
        _whole(self.execute_limit, "execute_limit", 1)
        _whole(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS_CAP, optional=True)
        _flag(self.skip_too_long, "skip_too_long")
        _choice(self.cache, "cache", CACHE_MODES)


# ---------------------------------------------------------------- needle in a haystack


@dataclass(frozen=True)
class GridSettings:
    """The needle grid of ``demo.evaluation.haystack.run_grid``: lengths x depths x repetitions."""
    lengths: list[int] = field(default_factory=lambda: [256, 512, 1024], metadata=_help(
        "prompt lengths in tokens (every position the model needs to answer)"))
    depths: list[float] = field(default_factory=lambda: list(DEPTHS), metadata=_help(
        "needle depths, 0.0 (start) to 1.0 (end)"))
    repetitions: int = field(default=3, metadata=_help("needles per cell"))
    seed: int = field(default=0, metadata=_help("seed of the needles and filler positions"))
    padding_masks: int | None = field(default=None, metadata=_help(
        "masked LMs: padding masks (default: the family's)"))
    filler: str | None = field(default=None, metadata=_help(
        "UTF-8 text file used as the haystack (default: the bundled public-domain book)"))
    cache: Literal[CACHE_MODES] = field(default="exact", metadata=_help(
        "masked LMs' decoding of the answer: 'exact' (the paper's method) or 'prefix' (the "
        "approximate prefix cache, see GenerationSettings; R and margin at its defaults). A causal "
        "LM is exact whatever this says; the grid's rows record the mode used"))

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
        _whole(self.repetitions, "repetitions", 1)
        _whole(self.seed, "seed", 0)
        _check_padding_masks(self.padding_masks)
        _choice(self.cache, "cache", CACHE_MODES)

    @property
    def cells(self) -> int:
        return len(self.lengths) * len(self.depths) * self.repetitions


# ---------------------------------------------------------------- how many masks?


@dataclass(frozen=True)
class SweepSettings:
    """The mask sweep of ``demo.evaluation.mask_sweep``: one task evaluated at each number of masks."""
    sweep: Literal[SWEEPS] | None = field(default=None, metadata=_help(
        "mlm-icl probe: instead of the needle grid, sweep a masked LM's padding masks (generation, "
        "on a generated task) or right masks (the PLL, on a ranked task)"))
    values: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4], metadata=_help(
        "the numbers of masks evaluated"))
    task: str | None = field(default=None, metadata=_help(
        "the task evaluated at every value (default: ii_singular_to_plural for padding masks, "
        "copa for right masks)"))
    shots: int | None = field(default=None, metadata=_help("demonstrations (default: the task's)"))
    limit: int = field(default=20, metadata=_help(
        "items evaluated at every value (the evaluator's fixed random sample)"))
    max_new_tokens: int | None = field(default=None, metadata=_help(
        "generated tasks: token limit (default: the task's)"))
    demos_seed: int = field(default=0, metadata=_help("seed of the demonstrations drawn for each item"))
    data_root: str | None = field(default=None, metadata=_help(
        "folder with the datasets (default: $DEMO_DATA_ROOT, else ../shared/data)"))

    def __post_init__(self):
        _choice(self.sweep, "sweep", SWEEPS, optional=True)
        values = self.values
        if isinstance(values, str):  # a page's text box: "0, 1, 2"
            values = values.replace(",", " ").split()
            values = [int(v) if v.lstrip("-").isdigit() else v for v in values]
        elif not isinstance(values, (list, tuple)):
            values = [values]
        if not values:
            raise ValueError("Give at least one number of masks to evaluate.")
        high = MAX_RIGHT_MASKS if self.sweep == "right_masks" else MAX_PADDING_MASKS
        for v in values:
            _whole(v, "Each number of masks", 0, high)
        object.__setattr__(self, "values", sorted(set(values)))
        if self.task is not None and (not isinstance(self.task, str) or not self.task.strip()):
            raise ValueError(f"The task must be a task's name (mlm-icl evaluate --list), not {_shown(self.task)}.")
        _whole(self.shots, "shots", 0, optional=True)
        _whole(self.limit, "limit", 1)
        _whole(self.max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS_CAP, optional=True)
        _whole(self.demos_seed, "demos_seed", 0)


# ---------------------------------------------------------------- published and our results


@dataclass(frozen=True)
class ResultsFilter:
    """Which results ``demo.evaluation.results.filter_results`` keeps: rows matching every non-empty list."""
    papers: list[str] = field(default_factory=list, metadata=_help("papers (\"ours\" for our runs)"))
    groups: list[str] = field(default_factory=list, metadata=_help("task groups"))
    models: list[str] = field(default_factory=list, metadata=_help("models, as the tables name them"))
    shots: list[str] = field(default_factory=list, metadata=_help("shots, e.g. 0-shot few-shot"))
    tasks: list[str] = field(default_factory=list, metadata=_help("tasks, as the tables name them"))

    def __post_init__(self):
        for f in fields(self):
            wanted = getattr(self, f.name)
            if not (isinstance(wanted, list) and all(isinstance(w, str) for w in wanted)):
                raise ValueError(f"The {f.name} filter must be a list of its choices, not {_shown(wanted)}.")
            for value in wanted:
                check_readable(value, f"{f.name} filter")


# ---------------------------------------------------------------- the deployment


def _boolean(raw: str) -> bool:
    word = raw.strip().lower()
    if word not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ValueError(raw)
    return word in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class AppSettings:
    """What a deployment sets through environment variables (``DEMO_<FIELD>``, upper case).

    ``AppSettings.from_env()`` is the only reader of ``DEMO_*`` variables.
    """
    concurrency: int = field(default=1, metadata=_help("model runs at a time (1 on CPU)"))
    queue_size: int = field(default=64, metadata=_help(
        "requests waiting before new ones are refused (a class of 30, each with a request or two)"))
    max_models: int = field(default=3, metadata=_help("models kept loaded (least recently used dropped)"))
    max_model_gb: float = field(default=8.0, metadata=_help("their total parameter memory"))
    gpu_dtype: str = field(default="float16", metadata=_help(
        "weights' precision where the app runs on a GPU (float32 on a CPU). float16 kept every "
        "ranking and greedy output of float32 and scored 1.2-2.5x faster on an H100, scores moved by "
        "at most 0.07 nats (benchmarks/bench_precision.py --device cuda, docs/method.md section 3)"))
    max_prompt_chars: int = field(default=6000, metadata=_help("characters of a prompt or context"))
    max_candidate_chars: int = field(default=400, metadata=_help("characters per candidate"))
    max_new_tokens: int = field(default=128, metadata=_help("new tokens per generation"))
    max_grid_cells: int = field(default=24, metadata=_help("needle-grid runs per request"))
    max_grid_tokens: int = field(default=2048, metadata=_help("longest needle-grid length"))
    max_sweep_items: int = field(default=40, metadata=_help("mask sweep: items evaluated at each value"))
    max_request_tflop: float = field(default=4.0, metadata=_help(
        "work one request may do, in trillions of operations (demo.app.budget); refused beyond"))
    assumed_gflops: float = field(default=50.0, metadata=_help(
        "the machine's speed assumed when telling people how long a request would take"))
    max_request_seconds: float = field(default=120.0, metadata=_help(
        "a generation or needle grid stops after this long, keeping what it has"))
    local_models: str = field(default="", metadata=_help(
        "local model folders or .gguf files offered as 'local', separated by os.pathsep"))
    local_pairs: str = field(default="", metadata=_help(
        "JSON file of model pairs to offer: [{name, masked, causal, why}], local folders"))
    data_root: str = field(default="", metadata=_help("folder with the evaluation datasets"))
    mcp: bool = field(default=True, metadata=_help(
        "also serve the app's endpoints as MCP tools, for agents (/gradio_api/mcp/sse)"))
    public: bool = field(default=False, metadata=_help(
        "public mode: typed names must be Hub ids, Hub models are size-checked before download, "
        "and each visitor's model runs are rate-limited (on by itself where SPACE_ID is set)"))
    max_hub_gb: float = field(default=6.0, metadata=_help(
        "public mode: weight files a typed Hub model may download, from Hub metadata"))
    runs_per_minute: int = field(default=20, metadata=_help(
        "public mode: model runs per visitor per minute"))
    self_check: bool = field(default=False, metadata=_help(
        "check the default models at start-up (obvious words, a COPA slice; mlm-icl check-model) "
        "and show the result in the page (on by itself where SPACE_ID is set)"))

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
                values[f.name] = _boolean(raw) if f.type is bool else f.type(raw)
            except ValueError:
                raise ValueError(f"{cls.variable(f.name)}={_shown(raw)} is not a valid "
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
