"""Task metrics: accuracy, k-best accuracy, macro-F1, MultiRC, ReCoRD, SacreBLEU, QA and
instruction induction, registered by name with ``@metric`` (what a task file lists).

Every function returns a fraction in [0, 1] (BLEU too: SacreBLEU's 0..100 divided by 100); the
evaluator reports percentages, as the papers' tables do. Library code where one fits
(scikit-learn for F1, sacrebleu for BLEU; both imported where they are used, so that checking a
task file's metric names costs no second). Hand-written, because no installed
library does them: SQuAD-style answer normalisation (ReCoRD, closed-book QA; the `evaluate`
package is not a dependency), k-best accuracy (see :func:`k_best_correct`) and the
instruction-induction metrics, which follow the paper's
own normalisation (orhonovich/instruction-induction, evaluate.py): first line, first sentence,
lower case, ' and ' and "Sentence 1/2:" dropped, hyphens to spaces, punctuation removed.

``METRICS`` maps a metric name to how it is computed (:class:`Metric`):
- "example" metrics score one evaluated record; the task value is the mean and the standard
  error is the sample standard deviation over sqrt(n).
- "corpus" metrics need all records at once (macro-F1, MultiRC, BLEU); their standard
  error comes from a seeded bootstrap over examples.
A metric of your own is a function here (or in your code, imported before the task loads)
registered with ``@metric("name", ...)``; a task file then lists it by name.
"""

import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np

# ---------------------------------------------------------------- classification


def f1_macro(predictions: list, references: list, labels: list | None = None) -> float:
    """Unweighted mean of per-class F1 (CommitmentBank; classes that never occur count as 0).

    ``labels`` fixes the class set (CB: all three); by default the classes seen in either list.
    """
    from sklearn.metrics import f1_score
    _same_length(predictions, references)
    return float(f1_score(references, predictions, labels=labels, average="macro", zero_division=0))


def multirc_exact_match(predictions: list[int], references: list[int], groups: list) -> float:
    """Share of questions whose answer options are ALL labelled correctly (MultiRC EM)."""
    _same_length(predictions, references, groups)
    if not groups:
        raise ValueError("MultiRC exact match needs at least one question.")
    all_right: dict = {}
    for p, r, g in zip(predictions, references, groups):
        all_right[g] = all_right.get(g, True) and p == r
    return sum(all_right.values()) / len(all_right)


def multirc_f1a(predictions: list[int], references: list[int]) -> float:
    """Binary F1 of the "true" class over all answer options, flattened (MultiRC F1a)."""
    from sklearn.metrics import f1_score
    _same_length(predictions, references)
    return float(f1_score(references, predictions, pos_label=1, average="binary", zero_division=0))


def k_best_correct(scores: list[float], correct: list[int]) -> bool:
    """Whether every correct candidate scores above the best incorrect one (a tie is not above).

    TimeDial's "2-best accuracy" (Qin et al. 2021): its two correct options both above its two
    incorrect ones. Written here because no installed library decides it per item: lm-eval's
    multiple-target accuracy asks only for some correct candidate on top, and scikit-learn's
    label-ranking metrics (label_ranking_loss, coverage_error) measure how far a ranking is from
    this, averaged, rather than whether it holds.
    """
    if not correct:
        raise ValueError("k-best accuracy needs at least one correct candidate.")
    if any(not 0 <= i < len(scores) for i in correct):
        raise ValueError(f"Correct candidates {list(correct)} are not indices of {len(scores)} scores.")
    incorrect = [s for i, s in enumerate(scores) if i not in correct]
    return not incorrect or min(scores[i] for i in correct) > max(incorrect)


# ---------------------------------------------------------------- extractive / closed-book QA


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: list[str]) -> float:
    """1 if the normalised prediction equals any normalised answer (ReCoRD EM, NQ/TriviaQA/WebQs)."""
    _need_answers(answers)
    return float(any(normalize_answer(prediction) == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: list[str]) -> float:
    """Best bag-of-tokens F1 against any answer, after SQuAD normalisation (ReCoRD F1)."""
    _need_answers(answers)
    return max(_bag_f1(normalize_answer(prediction).split(), normalize_answer(a).split())
               for a in answers)


def _bag_f1(predicted: list[str], gold: list[str]) -> float:
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------- translation


def bleu(predictions: list[str], references: list[str]) -> float:
    """Corpus SacreBLEU with its defaults (13a tokenisation, exp smoothing), one reference each.

    The BERTs paper's signature says tok.intl; pass tokenize="intl" through :func:`bleu_score`
    to match it exactly.
    """
    return bleu_score(predictions, references)


def bleu_score(predictions: list[str], references: list[str], tokenize: str = "13a") -> float:
    import sacrebleu
    _same_length(predictions, references)
    if not predictions:
        raise ValueError("BLEU needs at least one translation.")
    return sacrebleu.corpus_bleu(predictions, [references], tokenize=tokenize).score / 100


# ---------------------------------------------------------------- instruction induction


def normalize_instruction_output(text: str, lowercase: bool = True) -> str:
    """The instruction-induction paper's normalisation of a generated output (appendix A)."""
    text = text.replace(" and ", " ")
    text = text.replace("Sentence 1:", " ").replace("Sentence 2:", " ")
    text = text.strip()
    text = text.split("\n")[0]
    text = text.split(".")[0]  # first sentence only
    if lowercase:
        text = text.lower()
    text = text.replace("-", " ")
    return text.translate(str.maketrans("", "", string.punctuation))


def ii_exact_match(prediction: str, answers: list[str]) -> float:
    """Normalised prediction equals any normalised answer."""
    _need_answers(answers)
    p = normalize_instruction_output(prediction)
    return float(any(p == normalize_instruction_output(a) for a in answers))


def ii_exact_set(prediction: str, answers: list[str]) -> float:
    """Same set of words as any answer, order and repeats ignored (Starting With, Membership)."""
    _need_answers(answers)
    p = set(normalize_instruction_output(prediction).split())
    return float(any(p == set(normalize_instruction_output(a).split()) for a in answers))


def ii_contains(prediction: str, answers: list[str]) -> float:
    """Some answer appears in the prediction as whole words (Synonyms: the output may be a list)."""
    _need_answers(answers)
    p = normalize_instruction_output(prediction)
    for answer in answers:
        a = normalize_instruction_output(answer)
        if a and re.search(r"\b" + re.escape(a) + r"\b", p):
            return 1.0
    return 0.0


def ii_f1(prediction: str, answers: list[str]) -> float:
    """Best unigram-overlap F1 against any answer (Common Concept, Formality)."""
    _need_answers(answers)
    p = normalize_instruction_output(prediction).split()
    return max(_bag_f1(p, normalize_instruction_output(a).split()) for a in answers)


# ---------------------------------------------------------------- registry

LEVELS = ("example", "corpus")
# What a metric reads from the evaluator's record of an item (demo.evaluation.evaluate), and which tasks'
# records hold it: a task file that lists a metric its records lack is refused when it is read.
READS = {
    "choice": "the chosen candidate and the correct one(s), which a ranked task (kind: choice) "
              "or one written among its candidates (constrain_to_candidates: true) has",
    "scores": "every candidate's score, which only a ranked task (kind: choice) has",
    "text": "an output text and its acceptable answers, which ranked and generated tasks have",
    "execution": "an induced instruction's execution score, which only an instruction-induction "
                 "task (kind: induce) has",
}


@dataclass(frozen=True)
class Metric:
    name: str
    label: str  # how tables name it
    level: str  # "example" (mean of per-example scores) or "corpus"
    reads: str  # a key of READS
    # example level: fn(record) -> float; corpus level: fn(records) -> float; a record is a dict
    # with pred, label, labels, scores, group, text, answers (as its task's kind has them)
    fn: Callable


METRICS: dict[str, Metric] = {}


def metric(name: str, label: str, level: str, reads: str):
    """Register ``fn`` under ``name``: ``fn(record)`` for an "example"-level metric,
    ``fn(records)`` for a "corpus"-level one; ``reads`` says which tasks have what it reads."""
    if level not in LEVELS:
        raise ValueError(f"Metric {name!r}: level must be one of {', '.join(LEVELS)}, not {level!r}.")
    if reads not in READS:
        raise ValueError(f"Metric {name!r}: reads must be one of {', '.join(READS)}, not {reads!r}.")

    def register(fn):
        if name in METRICS:
            raise ValueError(f"Two metrics are named {name!r}.")
        METRICS[name] = Metric(name, label, level, reads, fn)
        return fn
    return register


def correct_candidates(record: dict) -> list[int]:
    """Every correct candidate's index; a record that names only ``label`` has that one."""
    return list(record.get("labels") or [record["label"]])


@metric("accuracy", "acc.", "example", reads="choice")
def _accuracy(record):
    return float(record["pred"] in correct_candidates(record))


@metric("k_best", "k-best acc.", "example", reads="scores")
def _k_best(record):
    return float(k_best_correct(record["scores"], correct_candidates(record)))


@metric("f1_macro", "F1", "corpus", reads="choice")
def _corpus_f1_macro(records):
    return f1_macro([r["pred"] for r in records], [r["label"] for r in records],
                    labels=sorted({r["label"] for r in records} | {r["pred"] for r in records}))


@metric("multirc_em", "EM acc.", "corpus", reads="choice")
def _multirc_em(records):
    return multirc_exact_match([r["pred"] for r in records], [r["label"] for r in records],
                               [r["group"] for r in records])


@metric("multirc_f1a", "F1a", "corpus", reads="choice")
def _multirc_f1a(records):
    return multirc_f1a([r["pred"] for r in records], [r["label"] for r in records])


# The example-level metrics of a generated text against its gold answers
for _name, _label, _score in (
        ("exact_match", "EM acc.", exact_match),
        ("token_f1", "F1", token_f1),
        ("ii_exact_match", "exact match", ii_exact_match),
        ("ii_exact_set", "exact set match", ii_exact_set),
        ("ii_contains", "contains", ii_contains),
        ("ii_f1", "unigram F1", ii_f1)):
    metric(_name, _label, "example", reads="text")(
        lambda record, score=_score: score(record["text"], record["answers"]))


@metric("bleu", "BLEU", "corpus", reads="text")
def _bleu(records):
    return bleu([r["text"] for r in records], [r["answers"][0] for r in records])


@metric("execution_accuracy", "execution accuracy", "example", reads="execution")
def _execution_accuracy(record):
    """An induced instruction's mean score over the held-out inputs it was executed on."""
    return record["execution"]


def example_score(metric: str, record: dict) -> float:
    """Per-example score of an "example"-level metric (record: pred, label, text, answers)."""
    m = _get(metric)
    if m.level != "example":
        raise ValueError(f"{metric} is a corpus-level metric; it has no per-example score.")
    return m.fn(record)


def compute(metric: str, records: list[dict], bootstrap: int = 200, seed: int = 0) -> tuple[float, float]:
    """(value, standard error) of a metric over evaluated records, as fractions."""
    m = _get(metric)
    if not records:
        raise ValueError("No evaluated examples to compute a metric on.")
    if m.level == "example":
        scores = np.array([m.fn(r) for r in records], dtype=float)
        stderr = float(scores.std(ddof=1) / np.sqrt(len(scores))) if len(scores) > 1 else float("nan")
        return float(scores.mean()), stderr
    value = float(m.fn(records))
    if len(records) < 2 or bootstrap <= 0:
        return value, float("nan")
    # Corpus metrics have no per-example score to average: resample examples (seeded) instead.
    rng = np.random.default_rng(seed)
    samples = [m.fn([records[i] for i in rng.integers(0, len(records), len(records))])
               for _ in range(bootstrap)]
    return value, float(np.std(samples, ddof=1))


def _get(metric: str) -> Metric:
    if metric not in METRICS:
        raise ValueError(f"Unknown metric {metric!r}; known metrics: {', '.join(sorted(METRICS))}.")
    return METRICS[metric]


def _same_length(*lists):
    if len({len(x) for x in lists}) > 1:
        raise ValueError(f"Predictions and references differ in length: {[len(x) for x in lists]}.")


def _need_answers(answers):
    if isinstance(answers, str) or not answers:
        raise ValueError("Give the acceptable answers as a non-empty list of strings.")
