"""Task metrics: accuracy, macro-F1, MultiRC, ReCoRD, SacreBLEU, QA and instruction induction.

Every function returns a fraction in [0, 1] (BLEU too: SacreBLEU's 0..100 divided by 100); the
evaluator reports percentages, as the papers' tables do. Library code where one fits
(scikit-learn for F1, sacrebleu for BLEU). Hand-written, because no installed
library does them: SQuAD-style answer normalisation (ReCoRD, closed-book QA; the `evaluate`
package is not a dependency) and the instruction-induction metrics, which follow the paper's
own normalisation (orhonovich/instruction-induction, evaluate.py): first line, first sentence,
lower case, ' and ' and "Sentence 1/2:" dropped, hyphens to spaces, punctuation removed.

``METRICS`` maps a metric name (what a task lists) to how it is computed:
- "example" metrics score one prediction against its acceptable answers; the task value is the
  mean and the standard error is the sample standard deviation over sqrt(n).
- "corpus" metrics need all predictions at once (macro-F1, MultiRC, BLEU); their standard
  error comes from a seeded bootstrap over examples.
"""

import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np
import sacrebleu
from sklearn.metrics import f1_score

# ---------------------------------------------------------------- classification


def f1_macro(predictions: list, references: list, labels: list | None = None) -> float:
    """Unweighted mean of per-class F1 (CommitmentBank; classes that never occur count as 0).

    ``labels`` fixes the class set (CB: all three); by default the classes seen in either list.
    """
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
    _same_length(predictions, references)
    return float(f1_score(references, predictions, pos_label=1, average="binary", zero_division=0))


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


@dataclass(frozen=True)
class Metric:
    name: str
    label: str  # how tables name it
    level: str  # "example" (mean of per-example scores) or "corpus"
    # example level: fn(prediction_text, answers) -> float
    # corpus level: fn(records) -> float, records being dicts with pred/label/group/text/answers
    fn: Callable


def _corpus_f1_macro(records):
    return f1_macro([r["pred"] for r in records], [r["label"] for r in records],
                    labels=sorted({r["label"] for r in records} | {r["pred"] for r in records}))


METRICS = {m.name: m for m in [
    Metric("accuracy", "acc.", "example", lambda r: float(r["pred"] == r["label"])),
    Metric("f1_macro", "F1", "corpus", _corpus_f1_macro),
    Metric("multirc_em", "EM acc.", "corpus", lambda rs: multirc_exact_match(
        [r["pred"] for r in rs], [r["label"] for r in rs], [r["group"] for r in rs])),
    Metric("multirc_f1a", "F1a", "corpus", lambda rs: multirc_f1a(
        [r["pred"] for r in rs], [r["label"] for r in rs])),
    Metric("exact_match", "EM acc.", "example", lambda r: exact_match(r["text"], r["answers"])),
    Metric("token_f1", "F1", "example", lambda r: token_f1(r["text"], r["answers"])),
    Metric("bleu", "BLEU", "corpus", lambda rs: bleu(
        [r["text"] for r in rs], [r["answers"][0] for r in rs])),
    Metric("ii_exact_match", "exact match", "example", lambda r: ii_exact_match(r["text"], r["answers"])),
    Metric("ii_exact_set", "exact set match", "example", lambda r: ii_exact_set(r["text"], r["answers"])),
    Metric("ii_contains", "contains", "example", lambda r: ii_contains(r["text"], r["answers"])),
    Metric("ii_f1", "unigram F1", "example", lambda r: ii_f1(r["text"], r["answers"])),
    # an induced instruction's mean score over the held-out inputs it was executed on
    Metric("execution_accuracy", "execution accuracy", "example", lambda r: r["execution"]),
]}


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
