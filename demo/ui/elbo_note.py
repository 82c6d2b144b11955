"""The masked diffusion ELBO's note under a ranking: which scores are exact, what an estimate's ±
is, which estimates come from too few masking patterns to trust, and whether the ranking may
change with the seed that drew the patterns."""

import math

from ..engine.elbo import enumerated
from ..settings import MAX_ELBO_SAMPLES, ScoringSettings
from ..user_text import quoted
from .common import message, score_text

# Below this many patterns the ± is a rough guess itself: it is worked out from the spread of the
# same few patterns' values (the usual rule of thumb for a standard error is 30 values or more)
FEW_FOR_AN_ERROR = 30
# Two estimates closer than this many standard errors of their gap may swap places with another
# seed (a normal spread puts about 1 draw in 20 farther out than two of its standard errors)
CLOSE = 2.0


def counted(n: int, word: str) -> str:
    """'1 pattern', '8 patterns'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def too_few(score, samples: int) -> str | None:
    """Why a candidate's estimate, drawn from ``samples`` patterns, cannot be trusted; None where
    it can (or where every one of its patterns was scored: no estimate at all)."""
    tokens = len(score.tokens)
    if enumerated(tokens, samples):
        return None
    if samples == 1:
        return "1 pattern: a single draw, no ± to go with it"
    if samples < tokens:
        return (f"{samples} patterns for {tokens} tokens: a pattern masks 1 to {tokens} of them, and some of "
                f"those counts were never drawn")
    if samples < FEW_FOR_AN_ERROR:
        return f"{samples} patterns: too few for the ± to be trusted either"
    return None


def error(score, settings: ScoringSettings) -> float:
    """A candidate's standard error in the units of its score (per token where the ranking is by
    the mean per token)."""
    return score.stderr or 0.0


def close_pairs(scores, settings: ScoringSettings) -> list[tuple]:
    """(higher, lower, their gap, the standard error of that gap) for each two neighbours in the
    ranking whose gap is within CLOSE standard errors of it: another seed may swap them."""
    ranked = sorted(scores, key=lambda s: s.score, reverse=True)
    pairs = []
    for higher, lower in zip(ranked, ranked[1:]):
        gap_error = math.hypot(error(higher, settings), error(lower, settings))
        if gap_error and higher.score - lower.score <= CLOSE * gap_error:
            pairs.append((higher, lower, higher.score - lower.score, gap_error))
    return pairs


def elbo_note(scores, settings: ScoringSettings, judged: bool = False) -> str:
    """The note (HTML) under an ELBO ranking; ``judged``: the page said whether the model is right,
    which changes with the ranking."""
    samples, seed = settings.elbo_samples, settings.elbo_seed
    exact_up_to = (samples + 1).bit_length() - 1  # 2^L - 1 patterns fit in elbo_samples
    said = (f"ELBO: a candidate of at most {counted(exact_up_to, 'scored token')} is scored exactly, through "
            f"every one of its masking patterns (2^L - 1 for L tokens), so its score has no ±.")
    if all(enumerated(len(s.tokens), samples) for s in scores):
        return message(said + " Every candidate here was.", "note")
    if samples == 1:
        said += (f" A longer one is scored through 1 pattern drawn at random (seed {seed}): its score is that "
                 f"one pattern's value, with no ± (a single value has no spread to work one out from), and it "
                 f"may be far from the score every pattern would give.")
    else:
        said += (f" A longer one is scored through {samples} patterns drawn at random (seed {seed}): its score "
                 f"is an estimate, ± one standard error, worked out from how much those patterns' values "
                 f"differ, so with few patterns the ± is a rough guess too. More patterns make it smaller.")
    rough: dict[str, list[str]] = {}  # why an estimate cannot be trusted: the candidates it holds for
    for s in scores:
        if why := too_few(s, samples):
            rough.setdefault(why, []).append(f"“{quoted(s.candidate, 40)}”")
    if rough:
        said += " Too few patterns to trust: " + "; ".join(f"{', '.join(names)} ({why})"
                                                             for why, names in rough.items()) + "."
    return message(said + seed_caveat(scores, settings, bool(rough), judged), "note")


def seed_caveat(scores, settings: ScoringSettings, rough: bool, judged: bool) -> str:
    """' The ranking may change with another seed: why, and how many patterns make it exact.', or
    '' where the estimates are many enough and far enough apart."""
    pairs = close_pairs(scores, settings)
    if not rough and not pairs:
        return ""
    if pairs:
        higher, lower, gap, gap_error = pairs[0]
        why = (f"“{quoted(higher.candidate, 40)}” and “{quoted(lower.candidate, 40)}” are {score_text(gap)} "
               f"apart, less than {CLOSE:g} standard errors of that gap ({CLOSE:g} × {score_text(gap_error)})"
               + (f", and {counted(len(pairs) - 1, 'more pair')} of neighbours too" if len(pairs) > 1 else ""))
    else:
        why = "some scores are estimates from too few patterns"
    exact = 2 ** max(len(s.tokens) for s in scores) - 1
    fix = (f"{exact} patterns score every candidate here exactly" if exact <= MAX_ELBO_SAMPLES
           else "more patterns make it surer")
    return (f" The ranking{', and whether the model is right,' if judged else ''} may change with another seed: "
            f"{why}; {fix}.")
