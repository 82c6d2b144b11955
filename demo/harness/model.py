"""Our engines as an lm-evaluation-harness model: ``--model mlm`` (lm-eval 0.4.13).

    python -m demo.harness --model mlm --model_args pretrained=microsoft/deberta-v2-xxlarge --tasks copa
    accelerate launch -m demo.harness --model mlm --model_args pretrained=... --tasks ...  # per GPU

Importing this module registers the model with lm-eval (``demo.harness`` is lm-eval's own command
line with this import done first); ``lm_eval.simple_evaluate(model=MaskedLMEval(pretrained=...))``
works from Python. Masked and causal LMs alike (``demo.engine.models.load_model``):

- ``loglikelihood``: ``demo.engine.pll.score_batch`` of (context, continuation): a masked LM's PLL with
  the method, right masks and reduction of ``--model_args`` (default: the BERTs paper's, +2 right
  masks, sum) or, with ``method=decoder``, its decoder's own likelihood (the windows generation
  reads, with the same ``padding_masks``), or with ``method=elbo`` the masked diffusion ELBO
  (``elbo_samples``, ``elbo_seed``), a causal LM's exact log-likelihood. All requests go to
  the engine in one call, so its token-budget sub-batches are what batches them (lm-eval's
  ``batch_size`` is generate_until's).
- ``loglikelihood_rolling``: the same engine over the whole text, in windows (:func:`rolling_pairs`).
- ``generate_until``: ``demo.engine.generation.generate`` with lm-eval's ``until``, ``max_gen_toks``,
  ``do_sample``, ``temperature`` (:func:`generation_settings`); a masked LM writing in any order
  writes ``batch_size`` prompts of the same settings together (``generate_together``).

The text conventions (newline marker, junction space, a causal LM's start token) are the engines'
(``demo.engine.text``, ``demo.engine.pll``): requests go to them as lm-eval wrote them, and a causal LM reads
them as lm-eval's HFLM does (a start token only before an empty context; ``add_bos_token``).

Inputs longer than an absolute-position model reads (BERT, RoBERTa, GPT-2), which the engines
refuse, never end a run here: like HFLM, a request is cut from the left at a token start until
the engine accepts it (a generation prompt keeps room for ``max_gen_toks``), and what could not be
cut to fit is skipped; each call warns with the counts (:func:`fit_generation`, :func:`fit_pair`).

Data parallel: launched by ``accelerate launch`` or ``torchrun`` (more than one process), each
process takes its own device (``demo.evaluation.data_parallel.start``, as ``mlm-icl score`` and
``probe`` do) and lm-eval gives it every world_size-th document; rank 0 gathers and reports
(lm-eval's evaluator does that through ``all_gather``/``gather_object`` below).
"""

import logging
from collections import Counter
from dataclasses import dataclass, fields, replace

import lm_eval.models  # noqa: F401  lm-eval's own models: registering ours first would hide them
import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from tqdm.auto import tqdm

from ..engine.generation import check_prompt, generate_together
from ..engine.mask_window import padding_masks_of
from ..engine.models import InputTooLong
from ..engine.pll import Choice, check_choices, input_length, score_batch
from ..evaluation.data_parallel import launched_processes, start
from ..settings import GenerationSettings, ModelSettings, ScoringSettings, WritingSettings

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------- model_args

# Each key of --model_args belongs to one settings dataclass, which validates it.
MODEL_KEYS = {"pretrained": "model", **{f.name: f.name for f in fields(ModelSettings) if f.name != "model"}}
SCORING_KEYS = ("method", "right_masks", "reduction", "token_budget", "elbo_samples", "elbo_seed")
WRITING_KEYS = tuple(f.name for f in fields(WritingSettings))  # any-order writing
GENERATION_KEYS = ("padding_masks", *WRITING_KEYS)
TOKENIZER_KEYS = ("add_bos_token",)  # HFLM's key, same meaning (causal LMs)
PARALLEL_KEYS = ("parallelize", "device_map")
# lm-eval's command line passes these to every model. Scoring's sub-batches are sized by
# token_budget; batch_size is how many generate_until prompts a masked LM writing in any order
# writes together ("auto": AUTO_BATCH); max_batch_size is not used.
BATCH_KEYS = ("batch_size",)
AUTO_BATCH = 8
IGNORED_KEYS = ("max_batch_size",)
VALID_KEYS = (*MODEL_KEYS, *SCORING_KEYS, *GENERATION_KEYS, *TOKENIZER_KEYS, *PARALLEL_KEYS, *BATCH_KEYS,
              *IGNORED_KEYS)
# Scoring settings that have no meaning behind lm-eval's requests, and why.
NOT_HERE = {
    "scope": "lm-eval asks for the continuation's log-likelihood (scope=completion); its "
             "loglikelihood_rolling requests score whole texts",
    "unconditional_context": "lm-eval normalises by an unconditional score itself (metric "
                             "acc_mutual_info)",
    "word_level": "lm-eval's answers have no per-word scores",
}
MASKED_ONLY = ("right_masks", "padding_masks", *WRITING_KEYS)
CAUSAL_ONLY = ("add_bos_token",)


@dataclass(frozen=True)
class EvalSettings:
    """What ``--model_args`` says, each part validated by its own dataclass."""
    model: ModelSettings
    scoring: ScoringSettings
    padding_masks: int | None = None  # masked LMs' generation and method=decoder (None: the family's)
    writing: tuple[tuple[str, object], ...] = ()  # masked LMs' any-order writing (WritingSettings fields)
    add_bos_token: bool | None = None  # causal LMs: BOS before every text, or none (None: the tokenizer's)
    device_map: str | None = None  # model parallel: "auto" (parallelize=True) or a transformers map
    batch_size: int = 1  # generate_until: prompts with the same settings written together (any order)
    given: tuple[str, ...] = ()  # the keys the user set (to refuse masked-only ones on causal LMs)


def parse_model_args(args: dict) -> EvalSettings:
    """``--model_args`` (already split by lm-eval into a dict) into our settings; ValueError if bad."""
    unknown = sorted(set(args) - set(VALID_KEYS))
    for key in unknown:
        if key in NOT_HERE:
            raise ValueError(f"model_args {key}= is not used by the lm-eval model: {NOT_HERE[key]}.")
    if unknown:
        raise ValueError(f"Unknown model_args {', '.join(unknown)}; valid keys: {', '.join(VALID_KEYS)}.")
    args = {k: v for k, v in args.items() if v is not None}  # key=None: left at its default
    if args.get("pretrained") in (None, ""):
        raise ValueError("model_args needs pretrained=<Hugging Face Hub id, local model folder or "
                         ".gguf file>.")
    model = ModelSettings(**{MODEL_KEYS[k]: v for k, v in args.items() if k in MODEL_KEYS})
    padding_masks = GenerationSettings(padding_masks=args.get("padding_masks")).padding_masks
    writing = tuple((k, args[k]) for k in WRITING_KEYS if k in args)
    WritingSettings(**dict(writing))  # checked once here, in words
    # one decoder: method=decoder scores with the windows generate_until writes with
    scoring = ScoringSettings(**{k: v for k, v in args.items() if k in SCORING_KEYS},
                              padding_masks=padding_masks)
    parallelize, device_map = args.get("parallelize", False), args.get("device_map")
    if not isinstance(parallelize, bool):
        raise ValueError(f"parallelize must be true or false, not {parallelize!r}.")
    add_bos_token = args.get("add_bos_token")
    if add_bos_token is not None and not isinstance(add_bos_token, bool):
        raise ValueError(f"add_bos_token must be true or false, not {add_bos_token!r}.")
    if parallelize and device_map not in (None, "auto"):
        raise ValueError("parallelize=true means device_map=auto; give one of the two.")
    if "right_masks" in args and scoring.method not in (None, "right_masks"):
        raise ValueError(f"right_masks only applies to method=right_masks, not method={scoring.method}.")
    return EvalSettings(model=model, scoring=scoring, padding_masks=padding_masks, writing=writing,
                        add_bos_token=add_bos_token, device_map="auto" if parallelize else device_map,
                        batch_size=_batch_size(args.get("batch_size", 1)), given=tuple(args))


def _batch_size(value) -> int:
    """lm-eval's ``batch_size``: a whole number, or "auto" (``AUTO_BATCH``; "auto:N" too)."""
    if isinstance(value, str) and value.strip().lower().startswith("auto"):
        return AUTO_BATCH
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or isinstance(value, bool):
        raise ValueError(f"batch_size must be a whole number >= 1 or 'auto', not {value!r}.")
    return number


def check_kind(lm, s: EvalSettings) -> ScoringSettings:
    """The scoring settings for this model (method resolved), or a ValueError naming the mismatch."""
    method = s.scoring.method_for(lm)  # method=causal on a masked LM, a PLL method on a causal LM
    wrong = [k for k in MASKED_ONLY if k in s.given] if lm.kind == "causal" else []
    if wrong:
        raise ValueError(f"{lm.label} is a causal LM; {', '.join(wrong)} only apply to masked LMs "
                         f"(leave them out).")
    wrong = [k for k in CAUSAL_ONLY if k in s.given] if lm.kind == "masked" else []
    if wrong:
        raise ValueError(f"{lm.label} is a masked LM; {', '.join(wrong)} only applies to causal LMs "
                         f"(a masked LM's text is framed by its own special tokens).")
    return replace(s.scoring, method=method)


def with_bos_rule(lm, s: EvalSettings):
    """``lm`` reading texts as HFLM does with ``add_bos_token``: None, as its tokenizer starts them;
    true or false, with the tokenizer HFLM would read them with, loaded again from the same files
    with ``from_pretrained(add_bos_token=...)`` (the loaded model's tokenizer is shared through
    ``load_model``'s cache and stays as it is). The tokenizer decides what the option does (the
    GGUF tokenizer of SmolLM2 ignores it, a GPT-2 tokenizer obeys), so lm-eval and we read the
    same tokens; a warning says when it changes nothing. The scoring engine then adds its start
    token only where a text's first token is scored and the tokenizer put none there
    (``demo.engine.pll``), as HFLM's prefix token."""
    if s.add_bos_token is None:
        return lm
    from ..engine.models import load_tokenizer
    tokenizer = load_tokenizer(lm.name, s.model.revision, s.model.trust_remote_code,
                               add_bos_token=s.add_bos_token)
    if tokenizer.pad_token_id is None:  # as load_model sets it; padding is masked out
        tokenizer.pad_token = lm.tokenizer.pad_token
    ids = tokenizer("a", verbose=False)["input_ids"]
    if tokenizer.bos_token_id is None or (ids[:1] == [tokenizer.bos_token_id]) != s.add_bos_token:
        logger.warning("add_bos_token=%s changes nothing for %s's tokenizer (%s): its texts start "
                       "as without it, under lm-eval's HFLM too.", s.add_bos_token, lm.label,
                       type(tokenizer).__name__)
    return replace(lm, tokenizer=tokenizer)


# ---------------------------------------------------------------- devices and processes


def single_device(requested: str) -> str:
    """The device of a one-process run. lm-eval's command line passes --device, default cuda:0,
    to every model; like HFLM, a machine without CUDA then runs on the CPU (with a warning)."""
    if requested.startswith("cuda") and not torch.cuda.is_available():
        logger.warning("No CUDA device here: running on the CPU instead of %s (lm-eval's --device, "
                       "cuda:0 unless given).", requested)
        return "cpu"
    return requested


def load(s: EvalSettings, device: str):
    """The model ``pretrained`` names, through the deployment's door as for ``mlm-icl`` (a local
    model's short name, a folder, a .gguf file or a Hub id); ``device_map``: one model across GPUs."""
    from ..app.deployment import Deployment
    m = s.model
    lm = Deployment.current().load(m.model, kind=m.kind, paths=True, device=device, dtype=m.dtype,
                                   trust_remote_code=m.trust_remote_code, revision=m.revision,
                                   device_map=s.device_map, emd=m.emd)
    if lm.emd_note:
        logger.warning(lm.emd_note)
    return lm


# ---------------------------------------------------------------- loglikelihood_rolling


def rolling_window(lm) -> int | None:
    """Tokens one scored window may hold: the model's hard limit (absolute positions), else the
    length it was trained on (relative positions read further, but PLL costs length squared and
    the model never learnt to use more), else None (no limit)."""
    return lm.max_length or lm.pretrained_length


def rolling_pairs(lm, text: str, scoring: ScoringSettings | None = None) -> list[tuple[str, str]]:
    """(context, chunk) pairs whose chunks tile ``text``, so every token is scored exactly once.
    Lengths are the longest input ``scoring``'s method reads (``demo.engine.pll.input_length``:
    the decoder's last window is longer than its text).

    The rule: a text that fits the window is one pair, ("", text), every token scored with all
    the others in view. A longer text is cut at token starts into chunks of at most half a window;
    each chunk is scored after as much of the text before it as fits in the window with it (so
    every token but the first half-window's sees at least half a window of context to its left;
    for a masked LM, nothing to the right of its chunk). lm-eval's HFLM rolls causal models over
    disjoint full-length windows, where the first tokens of each window see almost no context;
    half-window chunks cost up to twice the passes and give every token at least half a window.
    """
    window = rolling_window(lm)
    if window is None or input_length(lm, text, scoring) <= window:
        return [("", text)]
    offsets = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                           verbose=False)["offset_mapping"]
    cuts = sorted({0, len(text), *(start for start, _ in offsets[1:])})

    def fits(a: int, b: int, room: int) -> bool:
        return input_length(lm, text[cuts[a]:cuts[b]], scoring) <= room

    pairs, a = [], 0
    while a < len(cuts) - 1:
        b = _last_true(lambda j: fits(a, j, window // 2), a + 1, len(cuts) - 1)
        c = _first_true(lambda i: fits(i, b, window), 0, a)
        pairs.append((text[cuts[c]:cuts[a]], text[cuts[a]:cuts[b]]))
        a = b
    return pairs


def _last_true(ok, low: int, high: int) -> int:
    """The largest j in [low, high] with ok(j) (ok true then false as j grows); low if none."""
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if ok(mid) else (low, mid - 1)
    return low


def _first_true(ok, low: int, high: int) -> int:
    """The smallest i in [low, high] with ok(i) (ok false then true as i grows); high if none."""
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid + 1, high)
    return high


# ---------------------------------------------------------------- generate_until

GEN_KWARGS = ("until", "max_gen_toks", "do_sample", "temperature", "top_p", "top_k", "num_beams",
              "repetition_penalty")
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's HFLM default


@dataclass(frozen=True)
class HarnessGenerationSettings(GenerationSettings):
    """GenerationSettings for lm-eval's requests: ``max_new_tokens`` bounded only by the model (lm-eval
    ships task configs with max_gen_toks of 1024 to 32768; :func:`fit_generation` fits them to an
    absolute-position model's window), not by the app's interactive cap."""
    max_new_tokens_cap = None


def generation_settings(gen_kwargs: dict, padding_masks: int | None = None, writing=()) -> GenerationSettings:
    """lm-eval's generation kwargs as our settings, read as HFLM reads them: greedy unless
    do_sample (temperature 0 means greedy); ``until`` strings are stop strings. Sampling draws from
    torch's generator, which lm-eval seeds (``--seed``), so repeats of a request differ.
    ``writing``: the model's any-order writing settings (``EvalSettings.writing``)."""
    unknown = sorted(set(gen_kwargs) - set(GEN_KWARGS))
    if unknown:
        raise ValueError(f"Unsupported generation kwargs {', '.join(unknown)} (in {gen_kwargs}); the "
                         f"mlm model reads {', '.join(GEN_KWARGS)}.")
    g = dict(gen_kwargs)
    until = g.pop("until", None) or []
    sample = bool(g.pop("do_sample", False))
    beams = g.get("num_beams", 1)
    strategy = "sample" if sample else "beam" if beams != 1 else "greedy"
    if not sample:  # HFLM drops the sampling flags of greedy requests (temperature: 0.0)
        for key in ("temperature", "top_p", "top_k"):
            g.pop(key, None)
    try:
        return HarnessGenerationSettings(
            max_new_tokens=g.pop("max_gen_toks", DEFAULT_MAX_GEN_TOKS), strategy=strategy,
            stop_strings=[until] if isinstance(until, str) else list(until),
            padding_masks=padding_masks, seed=None if sample else 0, **g, **dict(writing))
    except ValueError as err:
        raise ValueError(f"Generation kwargs {gen_kwargs}: {err}") from err


# ---------------------------------------------------------------- inputs longer than the model reads

CUT, LOWERED, SKIPPED = "cut from the left", "max_gen_toks lowered", "skipped"


def cut_from_left(lm, text: str, fits, *, may_empty: bool) -> str | None:
    """The longest end of ``text`` that starts at a token start and that ``fits`` accepts (the whole
    text counts; the empty end too when ``may_empty``), or None when none does. ``fits`` is the
    engine's own check, so the rule of what fits is never re-done here; a shorter end never needs
    more positions, so the first accepted cut is found by bisection."""
    offsets = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                           verbose=False)["offset_mapping"]
    cuts = sorted({0, *(start for start, _ in offsets)} | ({len(text)} if may_empty else set()))
    cuts = [c for c in cuts if c < len(text) or may_empty]
    if not cuts:
        return None
    k = _first_true(lambda i: fits(text[cuts[i]:]), 0, len(cuts) - 1)
    return text[cuts[k]:] if fits(text[cuts[k]:]) else None


def _engine_accepts(check) -> bool:
    try:
        check()
    except InputTooLong:
        return False
    return True


def fit_generation(lm, prompt: str, settings: GenerationSettings) -> tuple[str, GenerationSettings, tuple[str, ...]]:
    """(prompt, settings, what was changed) for a generation request the engine accepts.

    Only an absolute-position model's window (``lm.max_length``) bounds a request; a relative-
    position model reads every prompt whole and writes up to ``max_gen_toks``. In a window:

    - HFLM's rule: ``max_gen_toks`` keeps its room and the prompt is cut from the left to what
      fits before it (HFLM cuts token ids; we cut the text at a token start, so a tokenizer's BOS
      stays first).
    - ``max_gen_toks`` larger than the window holds after any prompt (HFLM refuses such a request;
      lm-eval's configs ask for up to 32768): the prompt keeps at most half the window, cut from
      the left if longer, and generation gets the rest, up to the model's own limit.
    - Nothing fits (a window too small for even that): skipped (the caller answers "").
    """
    def fits(text: str, s: GenerationSettings = settings) -> bool:
        return bool(text.strip()) and _engine_accepts(lambda: check_prompt(lm, text, s))

    if lm.max_length is None or fits(prompt):
        return prompt, settings, ()
    cut = cut_from_left(lm, prompt, fits, may_empty=False)
    if cut is not None:
        return cut, settings, (CUT,)
    half = replace(settings, max_new_tokens=lm.max_length - lm.max_length // 2)
    cut = cut_from_left(lm, prompt, lambda text: fits(text, half), may_empty=False)
    if cut is None:
        return prompt, settings, (SKIPPED,)
    most = _last_true(lambda n: fits(cut, replace(settings, max_new_tokens=n)),
                      half.max_new_tokens, settings.max_new_tokens)
    return cut, replace(settings, max_new_tokens=most), (LOWERED,) + ((CUT,) if cut != prompt else ())


def fit_pair(lm, context: str, continuation: str, scoring: ScoringSettings) -> tuple[str, tuple[str, ...]]:
    """(context, what was changed) for a loglikelihood request the engine accepts: as HFLM does for
    causal LMs, a context too long for an absolute-position model's window is cut from the left
    (to nothing if need be); a continuation that does not fit even alone is skipped."""
    def fits(text: str) -> bool:
        return _engine_accepts(lambda: check_choices(lm, [Choice(text, continuation, continuation)], scoring))

    if lm.max_length is None or fits(context):
        return context, ()
    cut = cut_from_left(lm, context, fits, may_empty=True)
    return (context, (SKIPPED,)) if cut is None else (cut, (CUT,))


def too_long_note(request_type: str, changes: list[tuple[str, ...]], lm) -> str | None:
    """The warning that says how many of a call's requests were changed to fit the model, and how
    (``changes``: per request, what :func:`fit_generation` / :func:`fit_pair` changed); None if none."""
    counts = Counter(what for change in changes for what in change)
    if not counts:
        return None
    n_changed = sum(1 for change in changes if change)
    return (f"{request_type}: {n_changed} of {len(changes)} request(s) longer than {lm.label} reads "
            f"({lm.max_length} positions): {', '.join(f'{n} {what}' for what, n in counts.items())} "
            f"(as lm-eval's HFLM, inputs are cut from the left; a skipped request is answered "
            f"{'an empty string' if request_type == 'generate_until' else '-inf'}).")


# ---------------------------------------------------------------- the model


@register_model("mlm")
class MaskedLMEval(LM):
    """A masked or causal LM behind lm-eval's three request types, on this project's engines.

    ``--model_args`` keys (validated by ``demo.settings``): ``pretrained`` (Hub id, local folder or
    .gguf file), ``kind``, ``device``, ``dtype``, ``trust_remote_code``, ``revision``,
    ``threads``; ``method`` (salazar, right_masks, within_word_l2r, whole_word, decoder, elbo; causal
    for causal LMs), ``right_masks``, ``reduction`` (sum or mean), ``token_budget`` (tokens per
    forward pass), ``elbo_samples`` and ``elbo_seed`` (method=elbo); ``padding_masks`` (masked
    LMs: generation's, and method=decoder's windows: the same decoder); ``add_bos_token`` (causal LMs, HFLM's:
    true puts the BOS token before every text, false before none, unset as the tokenizer does);
    ``parallelize`` / ``device_map``; any-order writing's fields (``WritingSettings``: ``window``,
    ``tokens_per_step``, ``confidence_threshold``, ``masks_ahead``, ...) for ``generate_until``.

    ``is_greedy`` of a loglikelihood answer: every scored token is the model's top prediction at
    its position (rank 1; a tie with another token counts as top). For a masked LM that is the
    prediction at its mask with the method's masking (with right masks, the next tokens masked
    too), the PLL counterpart of "greedy decoding would have written it"; with method=decoder it is
    exactly that (rank 1 among the tokens the decoder writes, in its window), as it is for a causal
    LM, lm-eval's greedy check.
    """

    def __init__(self, **model_args):
        super().__init__()
        self.settings = parse_model_args(model_args)
        if self.settings.model.threads:
            torch.set_num_threads(self.settings.model.threads)
        self.accelerator = None
        device = self.settings.model.device
        if launched_processes() > 1:
            if self.settings.device_map is not None:
                raise ValueError("parallelize / device_map (one model across GPUs) and a multi-process "
                                 "launch (a model per process) do not mix here; pick one.")
            processes = start(device)  # the same processes as `mlm-icl score` and `probe` start
            self.accelerator = processes.accelerator
            self._rank, self._world_size = processes.rank, processes.count  # global: across nodes too
            device = processes.device
        elif self.settings.device_map is None:
            device = single_device(device)
        self.lm = load(self.settings, device)
        self.scoring = check_kind(self.lm, self.settings)  # refuse mismatches before any request
        self.lm = with_bos_rule(self.lm, self.settings)
        self._device = self.lm.device
        self.too_long = Counter()  # what fit_generation / fit_pair changed, over the whole run

    # -- what lm-eval reads besides the three request types

    @property
    def tokenizer(self):
        return self.lm.tokenizer

    @property
    def max_length(self) -> int | None:
        return self.lm.max_length

    def get_model_info(self) -> dict:
        """Recorded in lm-eval's results ("config"), so a results file says how it was scored, and
        how many requests were changed to fit the model (this process's, in a multi-process run)."""
        s = self.scoring
        return dict(model_label=self.lm.label, model_kind=self.lm.kind,
                    model_num_parameters=self.lm.n_parameters, model_dtype=str(self.lm.dtype),
                    model_device=str(self.lm.device),
                    pll_method=s.method, right_masks=s.right_masks if s.method == "right_masks" else None,
                    padding_masks=padding_masks_of(self.lm, s.padding_masks) if self.lm.kind == "masked" else None,
                    reduction=s.reduction, add_bos_token=self.settings.add_bos_token,
                    max_length=self.lm.max_length, too_long=dict(self.too_long))

    def _record(self, request_type: str, changes: list[tuple[str, ...]]) -> None:
        note = too_long_note(request_type, changes, self.lm)
        if note:
            logger.warning(note)
            self.too_long.update(f"{request_type}: {what}" for change in changes for what in change)

    def _progress(self, disable_tqdm: bool) -> bool:
        return not disable_tqdm and self.rank == 0

    # -- the three request types

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """(score, is_greedy) of each (context, continuation), all in one engine call; a context too
        long for the model cut from the left (:func:`fit_pair`), a skipped request (-inf, False)."""
        pairs = [tuple(req.args) for req in requests]
        fitted = [fit_pair(self.lm, context, continuation, self.scoring) for context, continuation in pairs]
        self._record("loglikelihood", [change for _, change in fitted])
        scored = [(context, continuation) for (context, change), (_, continuation) in zip(fitted, pairs)
                  if SKIPPED not in change]
        scores = iter(score_batch(self.lm, scored, self.scoring, progress=self._progress(disable_tqdm)))
        answers = []
        for pair, (_, change) in zip(pairs, fitted):
            s = None if SKIPPED in change else next(scores)
            answer = (float("-inf"), False) if s is None else (s.score, all(t.rank == 1 for t in s.tokens))
            self.cache_hook.add_partial("loglikelihood", pair, answer)
            answers.append(answer)
        return answers

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Total log-likelihood (PLL for a masked LM) of each text, windows by :func:`rolling_pairs`.

        Always the sum over tokens, whatever ``reduction`` says: perplexity-style metrics divide
        the total by words or bytes themselves."""
        texts = [req.args[0] for req in requests]
        windows = [rolling_pairs(self.lm, text, self.scoring) for text in texts]
        flat = [pair for pairs in windows for pair in pairs]
        scores = iter(score_batch(self.lm, flat, self.scoring, progress=self._progress(disable_tqdm)))
        totals = []
        for text, pairs in zip(texts, windows):
            total = sum(next(scores).total for _ in pairs)
            self.cache_hook.add_partial("loglikelihood_rolling", (text,), total)
            totals.append(total)
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """``generate()`` per request, each fitted to the model first (:func:`fit_generation`); a
        skipped request is answered "". Requests with the same settings go ``batch_size`` at a
        time to ``generate_together``: a masked LM writing in any order reads them in one forward
        pass a step, each output the one it gets alone (one at a time otherwise)."""
        fitted = [fit_generation(self.lm, req.args[0], generation_settings(
            req.args[1], self.settings.padding_masks, self.settings.writing)) for req in requests]
        outputs = [""] * len(requests)
        groups: dict[str, list[int]] = {}
        for i, (_, settings, change) in enumerate(fitted):
            if SKIPPED not in change:
                groups.setdefault(repr(settings), []).append(i)
        size = self.settings.batch_size
        batches = [group[at:at + size] for group in groups.values() for at in range(0, len(group), size)]
        with tqdm(total=len(requests), desc="generate_until", disable=not self._progress(disable_tqdm)) as bar:
            for batch in batches:
                results = generate_together(self.lm, [fitted[i][0] for i in batch], fitted[batch[0]][1])
                for i, result in zip(batch, results):
                    outputs[i] = result.text
                    self.cache_hook.add_partial("generate_until", requests[i].args, result.text)
                bar.update(len(batch))
            bar.update(len(requests) - bar.n)  # the skipped ones
        self._record("generate_until", [change for _, _, change in fitted])
        return outputs

    # -- data parallel (what lm-eval's evaluator calls when world_size > 1), as HFLM does it

    def all_gather(self, tensor):
        return tensor if self.world_size <= 1 else self.accelerator.gather(tensor)

    def gather_object(self, obj, dst=0):
        if self.world_size <= 1:
            return [obj]
        gathered = [None] * self.world_size if self.rank == dst else None
        torch.distributed.gather_object(obj=obj, object_gather_list=gathered, dst=dst)
        return gathered

    def barrier(self) -> None:
        if self.world_size > 1:
            self.accelerator.wait_for_everyone()
