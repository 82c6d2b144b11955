"""lm-eval's words as our settings: ``--model_args`` (each key a field of one settings dataclass,
which validates it) and a request's generation kwargs (read as HFLM reads them), refused in words
where they do not fit the model."""

from dataclasses import asdict, dataclass, fields, replace

from ..evaluation_settings import HarnessSettings
from ..settings import GenerationSettings, ModelSettings, SamplingSettings, ScoringSettings, WritingSettings

# Each key of --model_args is a field of one settings dataclass, which validates it ("pretrained"
# is ModelSettings.model). padding_masks is scoring's and generation's: method=decoder scores with
# the windows generate_until writes with. lm-eval passes batch_size and max_batch_size to every
# model; scoring's sub-batches are sized by token_budget, so max_batch_size is not used.
# Scoring settings that have no meaning behind lm-eval's requests, and why.
NOT_HERE = dict(
    scope="lm-eval asks for the continuation's log-likelihood (scope=completion), or a whole text's",
    unconditional_context="lm-eval normalises by an unconditional score itself (metric acc_mutual_info)",
    word_level="lm-eval's answers have no per-word scores",
    stride="lm-eval asks for each answer's log-likelihood on its own; the approximate PLL was measured to keep "
           "rankings (benchmarks/bench_pll_approx.py), not log-likelihoods",
    rescore_band="it re-scores near-ties of a ranking, and lm-eval asks for no ranking",
    fast="it picks the approximate PLL per ranking, and lm-eval asks for no ranking")
MODEL_KEYS = ("pretrained", *(f.name for f in fields(ModelSettings) if f.name != "model"))
SCORING_KEYS = tuple(f.name for f in fields(ScoringSettings) if f.name not in NOT_HERE)
WRITING_KEYS = tuple(f.name for f in fields(WritingSettings))  # any-order writing
HARNESS_KEYS = tuple(f.name for f in fields(HarnessSettings))
VALID_KEYS = (*MODEL_KEYS, *SCORING_KEYS, *WRITING_KEYS, *HARNESS_KEYS, "max_batch_size")
MASKED_ONLY = ("right_masks", "padding_masks", *WRITING_KEYS)
CAUSAL_ONLY = ("add_bos_token",)


@dataclass(frozen=True)
class EvalSettings:
    """What ``--model_args`` says, each part validated by its own dataclass."""
    model: ModelSettings
    scoring: ScoringSettings
    writing: WritingSettings  # masked LMs' any-order writing, for generate_until
    harness: HarnessSettings
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

    def given(keys):
        return {k: args[k] for k in keys if k in args}

    scoring = ScoringSettings(**given(SCORING_KEYS))
    if args.get("parallelize") is True and args.get("device_map") not in (None, "auto"):
        raise ValueError("parallelize=true means device_map=auto; give one of the two.")
    if "right_masks" in args and scoring.method not in (None, "right_masks"):
        raise ValueError(f"right_masks only applies to method=right_masks, not method={scoring.method}.")
    harness = HarnessSettings(**given(HARNESS_KEYS))
    model = ModelSettings(model=args["pretrained"], **dict(given(MODEL_KEYS[1:]), **(
        {"device_map": "auto"} if harness.parallelize else {})))
    return EvalSettings(model, scoring, WritingSettings(**given(WRITING_KEYS)), harness, tuple(args))


def check_kind(lm, s: EvalSettings) -> ScoringSettings:
    """The scoring settings for this model (method resolved), or a ValueError naming the mismatch."""
    method = s.scoring.method_for(lm)  # method=causal on a masked LM, a PLL method on a causal LM
    for keys, other, why in ((MASKED_ONLY, "causal", "only apply to masked LMs (leave them out)"),
                             (CAUSAL_ONLY, "masked", "only applies to causal LMs (a masked LM's text is "
                                                     "framed by its own special tokens)")):
        if lm.kind == other and any(k in s.given for k in keys):
            raise ValueError(f"{lm.label} is a {other} LM; {', '.join(k for k in keys if k in s.given)} {why}.")
    return replace(s.scoring, method=method)


# lm-eval's generation kwargs: its own words, then SamplingSettings' fields under their names (a
# draw's flags, which greedy requests drop, and the penalty); the strategy is do_sample's and the
# seed lm-eval's own (--seed)
DRAW_FLAGS = tuple(f.name for f in fields(SamplingSettings) if f.name not in ("strategy", "seed", "repetition_penalty"))
GEN_KWARGS = ("until", "max_gen_toks", "do_sample", "num_beams", "repetition_penalty", *DRAW_FLAGS)
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's HFLM default


def generation_settings(gen_kwargs: dict, padding_masks: int | None = None,
                        writing: WritingSettings = WritingSettings()) -> GenerationSettings:
    """lm-eval's generation kwargs (and the model's any-order ``writing``) as our settings, read as
    HFLM reads them: greedy unless do_sample (temperature 0 means greedy); ``until`` strings are
    stop strings. Sampling draws from torch's generator, which lm-eval seeds (``--seed``)."""
    unknown = sorted(set(gen_kwargs) - set(GEN_KWARGS))
    if unknown:
        raise ValueError(f"Unsupported generation kwargs {', '.join(unknown)} (in {gen_kwargs}); the "
                         f"mlm model reads {', '.join(GEN_KWARGS)}.")
    g = dict(gen_kwargs)
    until = g.pop("until", None) or []
    sample = bool(g.pop("do_sample", False))
    strategy = "sample" if sample else "beam" if g.get("num_beams", 1) != 1 else "greedy"
    if not sample:  # HFLM drops the sampling flags of greedy requests (temperature: 0.0)
        for key in DRAW_FLAGS:
            g.pop(key, None)
    try:
        return GenerationSettings(
            max_new_tokens=g.pop("max_gen_toks", DEFAULT_MAX_GEN_TOKS), strategy=strategy,
            stop_strings=[until] if isinstance(until, str) else list(until),
            padding_masks=padding_masks, seed=None if sample else 0, **g, **asdict(writing))
    except ValueError as err:
        raise ValueError(f"Generation kwargs {gen_kwargs}: {err}") from err
