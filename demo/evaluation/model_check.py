"""Is this model read right? A few checks with known answers, run on real weights.

Random-weight tests prove the code equals its references; they cannot notice a checkpoint whose
head loads wrong (a DeBERTa head left random by ``legacy=True``, a missing enhanced mask
decoder, a tokenizer that does not match the weights). A model read wrong still returns numbers,
only bad ones, so these checks ask questions with obvious answers and compare a task's accuracy
with the papers':

- **Word probes.** The word an obvious sentence ends with ("The capital of France is Paris.")
  should be among the model's first ten guesses where it is hidden: masked (a masked LM reads
  the whole sentence with that word masked, as PLL scores it) or next (a causal LM reads the
  words before it). Any trained head does this; a random or misread head does not.
- **A task slice.** COPA one-shot on a fixed sample, scored as the evaluator scores it, against
  the BERTs paper's figure for the same model (Samuel 2024, table 6), or, for a model the paper
  did not run, against chance (50%). The margin is two binomial standard errors of the sample;
  within it of chance, the check is "unclear".

Each check says what it expected, what it measured, and why it expected that.
"""

import math
import tempfile
from dataclasses import dataclass

from ..engine.pll import score_candidates
from ..evaluation_settings import RunSettings
from ..settings import ScoringSettings
from .evaluate import evaluate
from .results import load_published

# (context, answer, why): answers that are one token in the usual vocabularies
WORD_PROBES = [
    ("The capital of France is", "Paris.", "one of the most repeated facts in any pretraining text"),
    ("The sun rises in the", "east.", "a fixed phrase"),
    ("One, two, three, four,", "five.", "counting"),
    ("He drank a glass of cold", "water.", "the most frequent continuation by far"),
    ("The opposite of hot is", "cold.", "the most common antonym pair"),
]
TOP = 10  # an answer passes among this many first guesses (by chance: 10 in a 30k vocabulary, 0.03%)
PROBES_TO_PASS = 4  # of the five: one miss is a weak model, more is a misread one

CHECK_TASK, CHECK_SHOTS = "copa", 1  # the paper reports one-shot COPA for every DeBERTa size
PAPER = "Samuel 2024, BERTs are Generative In-Context Learners"
# Hub checkpoints the paper ran, by the name its tables give them
PAPER_MODELS = {
    "microsoft/deberta-base": "DeBERTa 0.1B", "ltg/deberta-base-fixed": "DeBERTa 0.1B",
    "microsoft/deberta-large": "DeBERTa 0.4B", "ltg/deberta-large-fixed": "DeBERTa 0.4B",
    "microsoft/deberta-v2-xlarge": "DeBERTa 0.9B", "ltg/deberta-xlarge-fixed": "DeBERTa 0.9B",
    "microsoft/deberta-v2-xxlarge": "DeBERTa 1.4B", "ltg/deberta-xxlarge-fixed": "DeBERTa 1.4B",
}
CHANCE = 50.0  # COPA: two alternatives


@dataclass(frozen=True)
class Check:
    what: str
    expected: str
    measured: str
    status: str  # "pass", "fail", "unclear" (consistent with both a working and a broken model), "not run"
    why: str


def word_probe(lm, context: str, answer: str, why: str) -> Check:
    """The answer's first token, hidden: its rank among the model's guesses."""
    scored = score_candidates(lm, context, [answer], ScoringSettings(method="salazar")
                              if lm.kind == "masked" else None)[0]
    first = next(t for t in scored.tokens if t.token.strip())
    word = answer.rstrip(".")
    status = "pass" if first.rank <= TOP else "fail"
    return Check(f'"{context} ___" -> "{word}"', f"in the first {TOP} guesses",
                 f"guess {first.rank:,} (p = {math.exp(first.logprob):.2f})", status, why)


def paper_figure(name: str) -> tuple[float, str] | None:
    """(accuracy, label) of the paper's one-shot COPA for this checkpoint, if the paper ran it."""
    label = PAPER_MODELS.get(name)
    if label is None:
        return None
    published = load_published()
    row = published[(published.paper == PAPER) & (published.table == "Table 6") & (published.task == CHECK_TASK)
                    & (published.model == label) & (published.shots == CHECK_SHOTS)]
    return (float(row.value.iloc[0]), label) if len(row) else None


def task_check(lm, name: str, items: int, data_root: str | None = None) -> Check:
    """COPA one-shot on ``items`` items (a fixed sample), against the paper's figure or chance."""
    try:
        with tempfile.TemporaryDirectory() as folder:
            rows = evaluate(lm, CHECK_TASK, folder, RunSettings(shots=CHECK_SHOTS, limit=items, data_root=data_root))
    except ValueError as err:  # the task's data cannot be read here (offline, no local copy): said, not fatal
        return Check(f"COPA {CHECK_SHOTS}-shot", "a task slice", "not run", "not run", str(err))
    accuracy = next(r for r in rows if r["metric"] == "accuracy")
    measured, n = float(accuracy["value"]), int(accuracy["n"])
    paper = paper_figure(name)
    expected = paper[0] if paper else CHANCE
    margin = 2 * 100 * math.sqrt(expected / 100 * (1 - expected / 100) / n)
    what = f"COPA {CHECK_SHOTS}-shot, {n} items"
    if paper:
        status = "pass" if measured >= expected - margin else "fail"
        return Check(what, f"{expected:.1f}% (at least {expected - margin:.1f}% on {n} items)",
                     f"{measured:.1f}%", status, f"the paper's {paper[1]} ({PAPER}, table 6)")
    # below chance by more than the margin: the model reads the answers backwards, or not at all
    status = "pass" if measured > expected + margin else ("fail" if measured < expected - margin else "unclear")
    return Check(what, f"above chance: more than {expected + margin:.1f}% on {n} items", f"{measured:.1f}%",
                 status, "the paper did not run this model; a model that reads the task does better "
                         "than picking one of two answers at random")


def check_model(lm, name: str, items: int = 50, data_root: str | None = None) -> list[Check]:
    """Every check for a loaded model (``name``: the Hub id or path it was loaded by; ``data_root``
    as for ``RunSettings``)."""
    probes = [word_probe(lm, *probe) for probe in WORD_PROBES]
    passed = sum(c.status == "pass" for c in probes)
    summary = Check("word probes", f"at least {PROBES_TO_PASS} of {len(probes)}", f"{passed} of {len(probes)}",
                    "pass" if passed >= PROBES_TO_PASS else "fail",
                    "a trained head that is read right knows obvious words; a random or misread "
                    "head (wrong layout, missing decoder, mismatched tokenizer) misses most")
    return [*probes, summary, task_check(lm, name, items, data_root)]
