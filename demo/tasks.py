"""The few-shot task registry: every task is one ``Task`` entry in ``TASKS`` (data, not code).

An entry names where its data comes from (a local file under the data root, and the Hugging
Face Hub id for users with internet), which converter turns the raw records into ``Example``s
(fields + answer candidates or target), the prompt template of one example (the BERTs paper's
appendix A; "{answer}" marks the candidate or the target), the paper's number of shots, how a
masked or causal LM answers it (ranking candidates, or generating) and its metrics.

Adding a task is adding an entry; a new data format also needs a converter (a function from the
list of raw records to a list of ``Example``), registered in ``CONVERTERS``.

Data root: ``--data-root``, else ``$DEMO_DATA_ROOT``, else ``../shared/data`` beside the repo.
Local files win; without one the task loads from the Hub (parquet conversion of the dataset,
read with pandas, which needs ``pyarrow``); with neither, a ValueError says what is missing.

What "score" means for a ranked task (which part of the evaluated example is scored, the rest
of the prompt is conditioning only):
- "answer": the candidate and whatever follows it in the template (GPT-3 style);
- "suffix": only the words after the candidate (Winograd partial scoring: the candidate is
  substituted into the sentence, and the rest of the sentence is scored);
- "example": the whole evaluated example, as the BERTs paper's code does for COPA, HellaSwag,
  PIQA, ARC and OpenBookQA (its scored span covers the question/premise too; for a causal LM the
  extra tokens score the same for every candidate, so the ranking equals "answer").
"""

import contextvars
import json
import os
import random
import re
import string
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

DEFAULT_DATA_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"
SCORE_SPANS = ("answer", "suffix", "example")
KINDS = ("choice", "generate", "induce")
# The data root of the load in progress (the instruction-induction annotations live under it).
_CURRENT_ROOT: contextvars.ContextVar = contextvars.ContextVar("data_root", default=DEFAULT_DATA_ROOT)


@dataclass(frozen=True)
class Source:
    """One split of a dataset: a local file (relative to the data root) and/or a Hub location."""
    local: str | None = None
    format: str = "jsonl"  # "jsonl" | "json_examples" ({"examples": {"1": {...}}}) | "json"
    hub_id: str | None = None
    hub_config: str | None = None
    hub_split: str | None = None

    def describe(self) -> str:
        parts = []
        if self.local:
            parts.append(f"local file '{self.local}'")
        if self.hub_id:
            parts.append(f"Hub dataset '{self.hub_id}'"
                         + (f" config '{self.hub_config}'" if self.hub_config else "")
                         + f" split '{self.hub_split}'")
        return " or ".join(parts) or "no source"


@dataclass(frozen=True)
class Task:
    name: str
    group: str  # "SuperGLUE", "language modeling", "commonsense QA", "closed-book QA", ...
    title: str  # the name the published tables use
    data: Source  # the evaluated split
    demos: Source | None  # demonstration pool; None = the evaluated split minus the evaluated item
    convert: str  # key of CONVERTERS
    template: str  # one example; "{answer}" is the candidate (ranked) or the target (generated)
    kind: str  # "choice" (rank candidates), "generate", "induce" (instruction induction)
    shots: int  # the paper's few-shot k (BERTs paper table 6; 5 for instruction induction)
    metrics: tuple[str, ...]  # names in demo.metrics.METRICS
    score: str = "answer"  # choice tasks: which span is scored, see the module docstring
    normalize: bool = False  # rank by mean log-prob per scored token (NormPLL)
    unconditional: str | None = None  # subtract score(candidate | this context) (ARC, OpenBookQA)
    method: str | None = None  # default MLM scoring method for this task (None: right_masks)
    prefix: str = ""  # text before the demonstrations (SuperGLUE WSC's exam header)
    separator: str = "\n\n"  # between demonstrations and before the evaluated example
    max_shots: int | None = None  # hard cap (instruction execution prompts are zero-shot)
    executes: str | None = None  # "induce" tasks: the task whose inputs the instruction runs on
    generation: dict = field(default_factory=dict)  # GenerationSettings overrides
    paper: str = "Samuel 2024, appendix A"
    license: str = ""
    notes: str = ""


@dataclass
class Example:
    index: int  # position in the converted split
    id: str
    fields: dict  # template values other than "answer"
    candidates: list[str] = field(default_factory=list)  # ranked tasks: values of {answer}
    label: int | None = None  # index of the correct candidate
    answers: list[str] = field(default_factory=list)  # acceptable outputs (generated tasks)
    group: str | None = None  # MultiRC: the question (exact match is per question)
    pair: str | None = None  # twins (Winograd pairs) never serve as each other's demonstration

    @property
    def target(self) -> str:
        """What fills {answer} when this example is a demonstration."""
        if self.label is not None:
            return self.candidates[self.label]
        return self.answers[0]


# ================================================================ converters
# Each takes the list of raw records of one split and returns Examples. A missing field raises
# KeyError, which load_examples turns into a message naming the fields the records do have.


def _copa(records):
    out = []
    for i, r in enumerate(records):
        # Paper: premise without its full stop, "because"/"therefore", lower-cased alternative.
        choices = [_lower_first(r["choice1"]), _lower_first(r["choice2"])]
        out.append(Example(i, str(r.get("idx", r.get("id", i))), {
            "premise": r["premise"].strip().rstrip("."),
            "connector": "because" if r["question"] == "cause" else "therefore"},
            candidates=choices, label=int(r["label"])))
    return out


def _boolq(records):
    out = []
    for i, r in enumerate(records):
        label = r["label"] if "label" in r else r["answer"]
        out.append(Example(i, str(r.get("idx", i)), {
            "passage": r["passage"].strip(), "question": r["question"].strip().rstrip("?")},
            candidates=["no", "yes"], label=int(bool(label))))
    return out


_NLI_LABELS = {"entailment": 0, "contradiction": 1, "neutral": 2, "not_entailment": 1}


def _cb(records):
    return [Example(i, str(r.get("idx", i)), {
        "premise": r["premise"].strip(), "hypothesis": r["hypothesis"].strip().rstrip(".")},
        candidates=["true", "false", "neither"], label=_nli_label(r["label"]))
        for i, r in enumerate(records)]


def _rte(records):
    return [Example(i, str(r.get("idx", i)), {
        "premise": r["premise"].strip(), "hypothesis": r["hypothesis"].strip()},
        candidates=["True", "False"], label=_nli_label(r["label"]))
        for i, r in enumerate(records)]


def _wic(records):
    return [Example(i, str(r.get("idx", i)), {
        "sentence1": r["sentence1"].strip(), "sentence2": r["sentence2"].strip(), "word": r["word"]},
        candidates=["no", "yes"], label=int(bool(r["label"])))
        for i, r in enumerate(records)]


def _wsc_superglue(records):
    """SuperGLUE WSC as ranking of the noun phrases the dataset offers for each pronoun.

    The paper ranks spaCy noun chunks; without a parser we use the span1 candidates that the
    dataset itself pairs with the same pronoun (rows sharing text and pronoun position), and keep
    the pronouns with exactly one correct candidate among at least two (validation: 36 of 53).
    """
    groups: dict = {}
    for r in records:
        t = r.get("target", r)  # official jsonl nests the spans; the Hub flattens them
        key = (r["text"], int(t["span2_index"]))
        g = groups.setdefault(key, {"pronoun": t["span2_text"], "cands": [], "labels": [],
                                    "idx": r.get("idx")})
        if t["span1_text"] not in g["cands"]:
            g["cands"].append(t["span1_text"])
            g["labels"].append(bool(r["label"]))
    out = []
    for (text, span2_index), g in groups.items():
        if len(g["cands"]) < 2 or sum(g["labels"]) != 1:
            continue
        words = text.split()
        words[span2_index] = f"*{words[span2_index]}*"
        out.append(Example(len(out), str(g["idx"]), {
            "text": _detokenize(" ".join(words)), "pronoun": g["pronoun"]},
            candidates=g["cands"], label=g["labels"].index(True)))
    return out


def _multirc(records):
    """One Example per (question, answer option); the question is the exact-match group."""
    out = []
    for r in records:
        if "passage" in r and isinstance(r["passage"], dict):  # official nested jsonl
            for q in r["passage"]["questions"]:
                for a in q["answers"]:
                    out.append(Example(len(out), f"{r['idx']}-{q['idx']}-{a['idx']}", {
                        "paragraph": _clean_html(r["passage"]["text"]), "question": q["question"],
                        "option": a["text"]}, candidates=["[False]", "[True]"],
                        label=int(a["label"]), group=f"{r['idx']}-{q['idx']}"))
        else:  # Hub rows: one answer option each
            ids = r["idx"]
            out.append(Example(len(out), f"{ids['paragraph']}-{ids['question']}-{ids['answer']}", {
                "paragraph": _clean_html(r["paragraph"]), "question": r["question"],
                "option": r["answer"]}, candidates=["[False]", "[True]"], label=int(r["label"]),
                group=f"{ids['paragraph']}-{ids['question']}"))
    return out


def _record(records):
    out = []
    for i, r in enumerate(records):
        passage = r["passage"].replace("@highlight\n", "- ")
        head, _, tail = r["query"].partition("@placeholder")
        entities = list(dict.fromkeys(r["entities"]))
        answers = list(r["answers"])
        label = next((j for j, e in enumerate(entities) if e in answers), None)
        if label is None:
            continue
        out.append(Example(len(out), str(r.get("idx", i)), {
            "passage": passage, "query_prefix": head, "query_suffix": tail},
            candidates=entities, label=label, answers=answers))
    return out


def _wsc273(records):
    """Winograd (WSC273): the pronoun is replaced by each candidate (partial-scoring form)."""
    out = []
    for i, r in enumerate(records):
        if "txt1" in r:  # parsed WSCollection.xml
            before, pronoun, after = r["txt1"], r["pron"], r["txt2"]
        else:  # Hub winograd_wsc: text + pronoun location
            text, loc = r["text"], int(r["pronoun_loc"])
            before, pronoun, after = text[:loc], r["pronoun"], text[loc + len(r["pronoun"]):]
        before, after = before.strip(), after.strip()
        cands = [_match_case(o.strip(), pronoun) for o in r["options"]]
        out.append(Example(i, str(r.get("idx", i)), {
            "context_prefix": before + " " if before else "",
            "context_suffix": (" " if after[:1] not in ("", *_CLOSING) else "") + after},
            candidates=cands, label=int(r["label"]), pair=_options_key(r["options"])))
    return _pair_consecutive(out)


def _blank_sentences(marker):
    """Winogrande ("_") and Winogradversarial ("<mask>"): substitute each option for the blank."""
    def convert(records):
        out = []
        for i, r in enumerate(records):
            if r["sentence"].count(marker) != 1:
                raise ValueError(f"Sentence {i} must hold exactly one '{marker}': {r['sentence']!r}")
            before, _, after = r["sentence"].partition(marker)
            out.append(Example(i, str(r.get("idx", r.get("qID", i))), {
                "context_prefix": before, "context_suffix": after},
                candidates=[r["option1"].strip(), r["option2"].strip()],
                label=int(r["answer"]) - 1, pair=_options_key([r["option1"], r["option2"]])))
        return out
    return convert


def _hellaswag(records):
    out = []
    for i, r in enumerate(records):
        ctx_b = r["ctx_b"].strip()
        context = r["ctx_a"].strip() + (" " + ctx_b[:1].upper() + ctx_b[1:] if ctx_b else "")
        # Paper: a space before each ending; none before one that starts with punctuation.
        endings = [(" " if e.strip()[:1] not in _CLOSING else "") + e.strip() for e in r["endings"]]
        out.append(Example(i, str(r.get("ind", i)), {
            "activity_label": r["activity_label"].strip(), "context": context},
            candidates=endings, label=int(r["label"])))
    return out


def _story_cloze(records):
    out = []
    for i, r in enumerate(records):
        fields = {f"sentence_{k}": r[f"input_sentence_{k}"].strip() for k in range(1, 5)}
        out.append(Example(i, str(r.get("story_id", i)), fields,
                           candidates=[r["sentence_quiz1"].strip(), r["sentence_quiz2"].strip()],
                           label=int(r["answer_right_ending"]) - 1))
    return out


def _piqa(records):
    return [Example(i, str(r.get("id", i)), {"goal": r["goal"].strip()},
                    candidates=[r["sol1"].strip(), r["sol2"].strip()], label=int(r["label"]))
            for i, r in enumerate(records)]


def _multiple_choice(question_keys, full_stop=False):
    """ARC / OpenBookQA in either schema: Hub ({question, choices{text,label}, answerKey}) or
    llm-foundry ({query, choices, gold}, query prefixed "Question: ")."""
    def convert(records):
        out = []
        for i, r in enumerate(records):
            if "query" in r:
                question = re.sub(r"^Question:\s*", "", r["query"].strip())
                choices, label = list(r["choices"]), int(r["gold"])
            else:
                question = next(r[k] for k in question_keys if k in r).strip()
                choices = list(r["choices"]["text"])
                label = list(r["choices"]["label"]).index(r["answerKey"])
            if full_stop:  # the paper's OpenBookQA code ends every option with "."
                choices = [c.strip() if c.strip().endswith(".") else c.strip() + "." for c in choices]
            out.append(Example(i, str(r.get("id", i)), {"question": question},
                               candidates=[c.strip() for c in choices], label=label))
        return out
    return convert


def _closed_book_qa(records):
    out = []
    for i, r in enumerate(records):
        if "answer" in r and isinstance(r["answer"], dict):  # TriviaQA
            answers = list(r["answer"]["aliases"]) or [r["answer"]["value"]]
        else:  # NQ-open, WebQuestions
            answers = list(r.get("answer", r.get("answers")))
        out.append(Example(i, str(r.get("question_id", i)), {"question": r["question"].strip()},
                           answers=[a for a in answers if a]))
    return out


def _translation(source, target):
    names = {"en": "English", "de": "German", "fr": "French", "ro": "Romanian"}

    def convert(records):
        return [Example(i, str(i), {"source_language": names[source], "target_language": names[target],
                                    "source_text": r["translation"][source].strip()},
                        answers=[r["translation"][target].strip()])
                for i, r in enumerate(records)]
    return convert


# ---------------------------------------------------------------- instruction induction

# Honovich et al. 2022, appendix A and their evaluate.py / prepare_for_execution.py
II_TASKS = {  # name: (title in their table 4, metric, field holding all acceptable outputs)
    "active_to_passive": ("Passivization", "ii_exact_match", None),
    "antonyms": ("Antonyms", "ii_exact_match", None),
    "cause_and_effect": ("Cause Selection", "ii_exact_match", None),
    "common_concept": ("Common Concept", "ii_f1", "all_common_concepts"),
    "diff": ("Diff", "ii_exact_match", None),
    "first_word_letter": ("First Letter", "ii_exact_match", None),
    "informal_to_formal": ("Formality", "ii_f1", None),
    "larger_animal": ("Larger Animal", "ii_exact_match", None),
    "letters_list": ("List Letters", "ii_exact_match", None),
    "negation": ("Negation", "ii_exact_match", None),
    "num_to_verbal": ("Number To Word", "ii_exact_match", None),
    "orthography_starts_with": ("Starting With", "ii_exact_set", None),
    "rhymes": ("Rhymes", "ii_exact_match", "other_rhymes"),
    "second_word_letter": ("Second Letter", "ii_exact_match", None),
    "sentence_similarity": ("Sentence Similarity", "ii_exact_match", None),
    "sentiment": ("Sentiment", "ii_exact_match", None),
    "singular_to_plural": ("Pluralization", "ii_exact_match", None),
    "sum": ("Sum", "ii_exact_match", None),
    "synonyms": ("Synonyms", "ii_contains", None),
    "taxonomy_animal": ("Membership", "ii_exact_set", None),
    "translation_en-de": ("Translation en-de", "ii_exact_match", "possible_translations"),
    "translation_en-es": ("Translation en-es", "ii_exact_match", "possible_translations"),
    "translation_en-fr": ("Translation en-fr", "ii_exact_match", "possible_translations"),
    "word_in_context": ("Word in Context", "ii_exact_match", "possible_outputs"),
}
II_LONG_OUTPUTS = {"active_to_passive", "negation", "informal_to_formal", "letters_list",
                   "cause_and_effect", "taxonomy_animal", "orthography_starts_with", "common_concept"}


def _instruction_pairs(task, split):
    """Input/output pairs of one instruction-induction task (their execute / induce splits)."""
    answers_field = II_TASKS[task][2]

    def convert(records):
        out = []
        for i, r in enumerate(records):
            if task == "cause_and_effect":
                # Execute set: both orders of every pair (their prepare_for_execution.py);
                # induce set: the cause's position drawn at random, here seeded by the index.
                orders = [True, False] if split == "execute" else [random.Random(i).random() < 0.5]
                for cause_first in orders:
                    a, b = (r["cause"], r["effect"]) if cause_first else (r["effect"], r["cause"])
                    out.append(Example(len(out), f"{i}-{int(cause_first)}",
                                       {"input": f"Sentence 1: {a} Sentence 2: {b}"},
                                       answers=[r["cause"]], pair=str(i)))
                continue
            if task == "common_concept":
                x, answers = ", ".join(r["items"]), [r["concept"]] + [
                    c for c in r["all_common_concepts"] if c != r["concept"]]
            elif task == "sentence_similarity":
                # "5 - perfectly" also accepts "5" and "perfectly" (appendix A)
                number, _, words = r["output"].partition(" - ")
                x, answers = r["input"], [r["output"], number, words]
            else:
                x = r["input"]
                answers = [r["output"]] + [a for a in (r.get(answers_field) or []) if a != r["output"]]
            out.append(Example(len(out), str(i + 1), {"input": x}, answers=answers))
        return out
    return convert


def _instruction_gold(task):
    """Execution accuracy with the human-written (gold) instructions: input i gets annotation
    i mod n, so every annotation is used."""
    pairs = _instruction_pairs(task, "execute")

    def convert(records):
        annotations = _read_json_file(_II_ANNOTATIONS.format(task=task))["annotations"]
        examples = pairs(records)
        for e in examples:
            e.fields["instruction"] = annotations[e.index % len(annotations)].strip()
        return examples
    return convert


def _instruction_induce(records):
    return [Example(i, str(i + 1), {"prompt": r["input"]},
                    answers=[r["metadata"]["examples_seen"]])
            for i, r in enumerate(records)]


_II_DATA = "instruction_induction/data"
_II_ANNOTATIONS = _II_DATA + "/annotations/{task}.json"


CONVERTERS = {
    "copa": _copa, "boolq": _boolq, "cb": _cb, "rte": _rte, "wic": _wic,
    "wsc_superglue": _wsc_superglue, "multirc": _multirc, "record": _record,
    "wsc273": _wsc273, "winogrande": _blank_sentences("_"),
    "winogradversarial": _blank_sentences("<mask>"), "hellaswag": _hellaswag,
    "story_cloze": _story_cloze, "piqa": _piqa,
    "arc": _multiple_choice(("question",)), "openbookqa": _multiple_choice(("question_stem",), True),
    "closed_book_qa": _closed_book_qa, "ii_induce": _instruction_induce,
    **{f"wmt_{s}_{t}": _translation(s, t) for s, t in
       [("de", "en"), ("en", "de"), ("fr", "en"), ("en", "fr"), ("ro", "en"), ("en", "ro")]},
    **{f"ii_{t}_{split}": _instruction_pairs(t, split) for t in II_TASKS for split in ("execute", "induce")},
    **{f"ii_{t}_gold": _instruction_gold(t) for t in II_TASKS},
}


# ================================================================ the registry

_SG = "aps/super_glue"  # the Hub's SuperGLUE (formerly "super_glue")
_SG_LICENSE = "SuperGLUE terms per task (BoolQ CC-BY-SA-3.0; CB, COPA, MultiRC, RTE, WiC, WSC: see super.gluebenchmark.com)"
_BEAM = {"strategy": "beam", "num_beams": 4, "stop_at_newline": True, "max_new_tokens": 32}

TASKS_LIST: list[Task] = [
    # ---- SuperGLUE (appendix A.2: GPT-3's templates)
    Task("boolq", "SuperGLUE", "BoolQ",
         data=Source("superglue/BoolQ/val.jsonl", hub_id=_SG, hub_config="boolq", hub_split="validation"),
         demos=None, convert="boolq",
         template="{passage}\nquestion: {question}?\nanswer: {answer}",
         kind="choice", shots=4, metrics=("accuracy",), license=_SG_LICENSE,
         notes="The local copy has no BoolQ train split, so demonstrations come from the "
               "validation split minus the evaluated item (the paper used train)."),
    Task("cb", "SuperGLUE", "CB",
         data=Source("superglue/CB/val.jsonl", hub_id=_SG, hub_config="cb", hub_split="validation"),
         demos=Source("superglue/CB/train.jsonl", hub_id=_SG, hub_config="cb", hub_split="train"),
         convert="cb", template="{premise}\nquestion: {hypothesis}; true, false, or neither?\nanswer: {answer}",
         kind="choice", shots=4, metrics=("accuracy", "f1_macro"), license=_SG_LICENSE),
    Task("copa", "SuperGLUE", "COPA",
         data=Source("superglue/COPA/val.jsonl", hub_id=_SG, hub_config="copa", hub_split="validation"),
         demos=Source("superglue/COPA/train.jsonl", hub_id=_SG, hub_config="copa", hub_split="train"),
         convert="copa", template="{premise} {connector} {answer}",
         kind="choice", shots=64, metrics=("accuracy",), score="example",
         license="COPA: BSD-2-Clause (Roemmele et al. 2011)"),
    Task("multirc", "SuperGLUE", "MultiRC",
         data=Source("superglue/MultiRC/val.jsonl", hub_id=_SG, hub_config="multirc", hub_split="validation"),
         demos=Source("superglue/MultiRC/train.jsonl", hub_id=_SG, hub_config="multirc", hub_split="train"),
         convert="multirc",
         template="READING COMPREHENSION ANSWER KEY\n\n{paragraph}\n\n{question}\n- {answer} {option}",
         kind="choice", shots=4, metrics=("multirc_em", "multirc_f1a"), license=_SG_LICENSE,
         notes="One evaluated example per answer option; exact match is per question."),
    Task("record", "SuperGLUE", "ReCoRD",
         data=Source(None, hub_id=_SG, hub_config="record", hub_split="validation"),
         demos=Source(None, hub_id=_SG, hub_config="record", hub_split="train"),
         convert="record", template="{passage}\n- {query_prefix}{answer}{query_suffix}",
         kind="choice", shots=4, metrics=("exact_match", "token_f1"), license=_SG_LICENSE,
         notes="No local copy (the shared snapshot holds only a git-LFS pointer)."),
    Task("rte", "SuperGLUE", "RTE",
         data=Source("superglue/RTE/val.jsonl", hub_id=_SG, hub_config="rte", hub_split="validation"),
         demos=Source("superglue/RTE/train.jsonl", hub_id=_SG, hub_config="rte", hub_split="train"),
         convert="rte", template="{premise}\nquestion: {hypothesis} True or False?\nanswer: {answer}",
         kind="choice", shots=8, metrics=("accuracy",), license=_SG_LICENSE),
    Task("wic", "SuperGLUE", "WiC",
         data=Source("superglue/WiC/val.jsonl", hub_id=_SG, hub_config="wic", hub_split="validation"),
         demos=Source("superglue/WiC/train.jsonl", hub_id=_SG, hub_config="wic", hub_split="train"),
         convert="wic",
         template="{sentence1}\n{sentence2}\nquestion: Is the word '{word}' used in the same way "
                  "in the two sentences above?\nanswer: {answer}",
         kind="choice", shots=16, metrics=("accuracy",), license=_SG_LICENSE),
    Task("wsc", "SuperGLUE", "WSC",
         data=Source("superglue/WSC/val.jsonl", hub_id=_SG, hub_config="wsc.fixed", hub_split="validation"),
         demos=Source("superglue/WSC/train.jsonl", hub_id=_SG, hub_config="wsc.fixed", hub_split="train"),
         convert="wsc_superglue",
         prefix="Final Exam with Answer Key\nInstructions: Please carefully read the following "
                "passages. For each passage, you must identify which noun the pronoun marked in "
                "*bold* refers to.\n=====",
         template="Passage: {text}\nQuestion: In the passage above, what does the pronoun "
                  "'*{pronoun}*' refer to?\nanswer: {answer}",
         kind="choice", shots=16, metrics=("accuracy",), license=_SG_LICENSE,
         notes="Candidates are the noun phrases the dataset pairs with each pronoun (the paper "
               "used spaCy noun chunks); pronouns without exactly one correct candidate are left out."),
    # ---- language modeling, Winograd-style and completion (appendix A.3)
    Task("hellaswag", "language modeling", "HellaSwag",
         data=Source("hellaswag/hellaswag_val.jsonl", hub_id="Rowan/hellaswag", hub_split="validation"),
         demos=None, convert="hellaswag", template="{activity_label}: {context}{answer}",
         kind="choice", shots=16, metrics=("accuracy",), score="example", license="MIT",
         notes="The local copy has no train split: demonstrations come from the validation split "
               "minus the evaluated item (the paper used train)."),
    Task("storycloze", "language modeling", "StoryCloze",
         data=Source(None, hub_id="LSDSem/story_cloze", hub_config="2016", hub_split="test"),
         demos=Source(None, hub_id="LSDSem/story_cloze", hub_config="2016", hub_split="validation"),
         convert="story_cloze",
         template="{sentence_1} {sentence_2} {sentence_3} {sentence_4} {answer}",
         kind="choice", shots=32, metrics=("accuracy",),
         license="StoryCloze: access by request (cs.rochester.edu/nlp/rocstories)",
         notes="No local copy; the Hub dataset needs the files requested from the authors."),
    Task("winograd", "language modeling", "Winograd",
         data=Source("wsc273/wsc273.jsonl", hub_id="ErnestSDavis/winograd_wsc", hub_config="wsc273", hub_split="test"),
         demos=None, convert="wsc273", template="{context_prefix}{answer}{context_suffix}",
         kind="choice", shots=32, metrics=("accuracy",), score="suffix", license="CC BY 4.0",
         notes="Partial scoring (GPT-3): the words after the substituted candidate are scored; "
               "--score example scores the whole sentence, as the BERTs paper's code does. "
               "Demonstrations: the same split minus the item and its twin sentences."),
    Task("winogrande", "language modeling", "Winogrande",
         data=Source("winogrande/winogrande_dev.jsonl", hub_id="allenai/winogrande",
                     hub_config="winogrande_xl", hub_split="validation"),
         demos=None, convert="winogrande", template="{context_prefix}{answer}{context_suffix}",
         kind="choice", shots=32, metrics=("accuracy",), score="suffix", license="CC-BY",
         notes="Partial scoring as Winograd. The local copy has no train split: demonstrations "
               "come from the dev split minus the evaluated item (the paper used train_xl)."),
    Task("winogradversarial", "language modeling", "Winogradversarial",
         data=Source("winogradversarial/winogradversarial.jsonl"), demos=None,
         convert="winogradversarial", template="{context_prefix}{answer}{context_suffix}",
         kind="choice", shots=0, metrics=("accuracy",), score="example", normalize=True,
         method="salazar", paper="ALBERT zero-shot NormPLL paper, appendix A.2",
         license="transcribed from the paper's appendix; no licence stated",
         notes="20 sentences; the ALBERT paper scores the full sentence by NormPLL, zero-shot."),
    # ---- commonsense QA (appendix A.5)
    Task("piqa", "commonsense QA", "PIQA",
         data=Source("piqa/piqa_valid_hf.jsonl", hub_id="ybisk/piqa", hub_split="validation"),
         demos=None, convert="piqa", template="{goal} {answer}",
         kind="choice", shots=32, metrics=("accuracy",), score="example", license="AFL-3.0",
         notes="The local copy has no train split: demonstrations come from the validation split "
               "minus the evaluated item (the paper used train)."),
    Task("arc_easy", "commonsense QA", "ARC (easy)",
         data=Source("arc/arc_easy_test_llmfoundry.jsonl", hub_id="allenai/ai2_arc",
                     hub_config="ARC-Easy", hub_split="test"),
         demos=Source("arc/arc_easy_validation_hf.jsonl", hub_id="allenai/ai2_arc",
                      hub_config="ARC-Easy", hub_split="validation"),
         convert="arc", template="Question: {question}\nAnswer: {answer}",
         kind="choice", shots=32, metrics=("accuracy",), score="example", unconditional="Answer:",
         license="CC-BY-SA-4.0",
         notes="Demonstrations from the validation split (the local copy has no train split)."),
    Task("arc_challenge", "commonsense QA", "ARC (challenge)",
         data=Source("arc/arc_challenge_test_llmfoundry.jsonl", hub_id="allenai/ai2_arc",
                     hub_config="ARC-Challenge", hub_split="test"),
         demos=Source("arc/arc_challenge_validation_hf.jsonl", hub_id="allenai/ai2_arc",
                      hub_config="ARC-Challenge", hub_split="validation"),
         convert="arc", template="Question: {question}\nAnswer: {answer}",
         kind="choice", shots=32, metrics=("accuracy",), score="example", unconditional="Answer:",
         license="CC-BY-SA-4.0",
         notes="Demonstrations from the validation split (the local copy has no train split)."),
    Task("openbookqa", "commonsense QA", "OpenBookQA",
         data=Source("openbookqa/openbook_qa_test_llmfoundry.jsonl", hub_id="allenai/openbookqa",
                     hub_config="main", hub_split="test"),
         demos=Source("openbookqa/openbookqa_validation_hf.jsonl", hub_id="allenai/openbookqa",
                      hub_config="main", hub_split="validation"),
         convert="openbookqa", template="{question} {answer}",
         kind="choice", shots=96, metrics=("accuracy",), score="example", unconditional="Answer:",
         license="Apache-2.0",
         notes="Demonstrations from the validation split (the local copy has no train split)."),
    # ---- closed-book QA (appendix A.5), generated with beam search
    *[Task(name, "closed-book QA", title, data=Source(None, hub_id=hub, hub_config=cfg, hub_split=split),
           demos=Source(None, hub_id=hub, hub_config=cfg, hub_split="train"),
           convert="closed_book_qa", template="Q: {question}\nA: {answer}", kind="generate",
           shots=shots, metrics=("exact_match",), generation=_BEAM, license=lic,
           notes="No local copy: Hub only.")
      for name, title, hub, cfg, split, shots, lic in [
          ("nq_open", "Natural Questions", "google-research-datasets/nq_open", None, "validation", 16, "CC-BY-SA-3.0"),
          ("triviaqa", "TriviaQA (wiki)", "mandarjoshi/trivia_qa", "rc.wikipedia.nocontext", "validation", 16, "Apache-2.0"),
          ("webqs", "Web Questions", "stanfordnlp/web_questions", None, "test", 32, "CC-BY-4.0")]],
    # ---- translation (appendix A.4: Garcia et al.'s template, beam search, stop at newline)
    *[Task(f"wmt_{s}_{t}", "translation", f"{s.upper()}-{t.upper()}",
           data=Source(None, hub_id=f"wmt/{wmt}", hub_config=pair, hub_split="test"),
           demos=Source(None, hub_id=f"wmt/{wmt}", hub_config=pair, hub_split="validation"),
           convert=f"wmt_{s}_{t}", template="{source_language}: {source_text}\n{target_language}: {answer}",
           kind="generate", shots=16, metrics=("bleu",), generation=_BEAM,
           license="WMT: research use", notes="No local copy: Hub only. Demonstrations from the "
                                              "validation split (the paper sampled train).")
      for s, t, wmt, pair in [("de", "en", "wmt16", "de-en"), ("en", "de", "wmt16", "de-en"),
                              ("fr", "en", "wmt14", "fr-en"), ("en", "fr", "wmt14", "fr-en"),
                              ("ro", "en", "wmt16", "ro-en"), ("en", "ro", "wmt16", "ro-en")]],
    # ---- instruction induction (Honovich et al. 2022): three ways to run each of the 24 tasks
    *[Task(f"ii_{t}", "instruction induction", title,
           data=Source(f"{_II_DATA}/raw/execute/{t}.json", format="json_examples"),
           demos=Source(f"{_II_DATA}/raw/induce/{t}.json", format="json_examples"),
           convert=f"ii_{t}_execute", template="Input: {input}\nOutput: {answer}", kind="generate",
           shots=5, metrics=(metric,), paper="Honovich et al. 2022 (in-context check, section 3.3)",
           generation={"strategy": "greedy", "stop_at_newline": True,
                       "max_new_tokens": 40 if t in II_LONG_OUTPUTS else 16},
           license="Apache-2.0",
           notes="In-context execution: k Input/Output demonstrations from the induce split, "
                 "then the held-out input; greedy decoding.")
      for t, (title, metric, _) in II_TASKS.items()],
    *[Task(f"ii_{t}_gold", "instruction induction", f"{title} (gold instruction)",
           data=Source(f"{_II_DATA}/raw/execute/{t}.json", format="json_examples"), demos=None,
           convert=f"ii_{t}_gold", template="Instruction: {instruction}\nInput: {input}\nOutput: {answer}",
           kind="generate", shots=0, max_shots=0, metrics=(metric,),
           paper="Honovich et al. 2022 (execution accuracy, section 4.2)",
           generation={"strategy": "greedy", "stop_at_newline": True,
                       "max_new_tokens": 40 if t in II_LONG_OUTPUTS else 16},
           license="Apache-2.0",
           notes="Execution accuracy of the human-written gold instructions (the paper's ceiling).")
      for t, (title, metric, _) in II_TASKS.items()],
    *[Task(f"ii_{t}_induce", "instruction induction", f"{title} (induced instruction)",
           data=Source(f"{_II_DATA}/induction_input/{t}.json", format="json_examples"), demos=None,
           convert="ii_induce", template="{prompt} {answer}", kind="induce", shots=0, max_shots=0,
           metrics=("execution_accuracy",), executes=f"ii_{t}",
           paper="Honovich et al. 2022 (instruction induction + execution accuracy)",
           generation={"strategy": "greedy", "stop_at_newline": True, "max_new_tokens": 32},
           license="Apache-2.0",
           notes="The model writes an instruction from the paper's induction prompt (5 "
                 "demonstrations inside); the instruction is then executed on held-out inputs.")
      for t, (title, metric, _) in II_TASKS.items()],
]

TASKS: dict[str, Task] = {t.name: t for t in TASKS_LIST}
assert len(TASKS) == len(TASKS_LIST), "duplicate task names"


# ================================================================ lookup and loading


def get_task(name: str) -> Task:
    if name not in TASKS:
        close = [n for n in TASKS if name.lower().replace("-", "_") in n]
        hint = f" Did you mean: {', '.join(close[:8])}?" if close else ""
        raise ValueError(f"Unknown task {name!r}.{hint} Known tasks: {', '.join(TASKS)}.")
    return TASKS[name]


def data_root(path: str | Path | None = None) -> Path:
    """--data-root, else $DEMO_DATA_ROOT, else ../shared/data beside the repository."""
    return Path(path or os.environ.get("DEMO_DATA_ROOT") or DEFAULT_DATA_ROOT).expanduser()


def load_examples(task: Task | str, which: str = "data", root: str | Path | None = None) -> list[Example]:
    """Converted examples of the evaluated split (which="data") or the demonstration pool
    (which="demos"; the evaluated split itself when the task has no separate pool)."""
    task = get_task(task) if isinstance(task, str) else task
    source = task.data if which == "data" else (task.demos or task.data)
    return list(_load_cached(task.name, source, str(data_root(root))))


@lru_cache(maxsize=32)
def _load_cached(task_name: str, source: Source, root: str) -> tuple[Example, ...]:
    task = TASKS[task_name]
    records, where = _read_records(task, source, Path(root))
    token = _CURRENT_ROOT.set(Path(root))  # instruction annotations live under the same root
    try:
        examples = CONVERTERS[task.convert](records)
    except KeyError as err:
        keys = sorted(records[0]) if records else []
        raise ValueError(
            f"Task {task.name!r}: the records in {where} have no field {err}; their fields are "
            f"{keys}. They do not match this task's converter ({task.convert!r}) and template "
            f"{task.template!r}.") from err
    finally:
        _CURRENT_ROOT.reset(token)
    if not examples:
        raise ValueError(f"Task {task.name!r}: {where} holds no usable examples.")
    check_template(task, examples[0])
    return tuple(examples)


PRESETS = Path(__file__).resolve().parents[1] / "assets" / "presets" / "task_examples.json"


def preset_examples(task: Task | str) -> list[Example]:
    """The few examples shipped in assets/presets (COPA, Winograd), usable without any data root."""
    task = get_task(task) if isinstance(task, str) else task
    presets = json.loads(PRESETS.read_text(encoding="utf-8"))
    if task.name not in presets:
        shipped = [k for k in presets if k != "about"]
        raise ValueError(f"No preset examples for {task.name!r}; the app ships some for: {', '.join(shipped)}.")
    examples = CONVERTERS[task.convert](presets[task.name])
    check_template(task, examples[0])
    return examples


def check_template(task: Task, example: Example) -> None:
    """The template's placeholders must be exactly the example's fields plus {answer}."""
    names = {n for _, n, _, _ in string.Formatter().parse(task.template) if n}
    missing = names - set(example.fields) - {"answer"}
    if missing or "answer" not in names:
        raise ValueError(
            f"Task {task.name!r}: the data does not match the template {task.template!r}: "
            + (f"it needs {sorted(missing)}, the examples have {sorted(example.fields)}."
               if missing else "the template has no {answer} slot."))


def _read_records(task: Task, source: Source, root: Path) -> tuple[list[dict], str]:
    if source.local:
        path = root / source.local
        if path.is_file():
            return _read_local(path, source.format), f"'{path}'"
    if source.hub_id:
        return _read_hub(task, source, root), f"Hub dataset '{source.hub_id}'"
    raise ValueError(
        f"Task {task.name!r} needs the local file '{root / source.local}', which does not exist, "
        f"and has no Hub copy. Pass --data-root (or set DEMO_DATA_ROOT) to the folder holding "
        f"'{source.local}'.")


def _read_local(path: Path, fmt: str) -> list[dict]:
    if fmt == "jsonl":
        with path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    data = json.loads(path.read_text(encoding="utf-8"))
    if fmt == "json_examples":
        return [data["examples"][k] for k in sorted(data["examples"], key=int)]
    return data


def _read_hub(task: Task, source: Source, root: Path) -> list[dict]:
    """Rows of a Hub dataset split from its parquet conversion (refs/convert/parquet)."""
    where = (f"'{source.hub_id}'" + (f" config '{source.hub_config}'" if source.hub_config else "")
             + f" split '{source.hub_split}'")
    local_hint = (f" There is no local copy at '{root / source.local}'." if source.local
                  else " This task has no local copy here.")
    from huggingface_hub import constants
    if constants.HF_HUB_OFFLINE:
        raise ValueError(f"Task {task.name!r}: {where} is on the Hugging Face Hub, and Hub access "
                         f"is switched off (HF_HUB_OFFLINE=1).{local_hint}")
    try:
        import pandas as pd
        from huggingface_hub import HfApi, hf_hub_download
        config = source.hub_config or "default"
        files = HfApi().list_repo_files(source.hub_id, repo_type="dataset", revision="refs/convert/parquet")
        wanted = sorted(f for f in files if f.startswith(config + "/") and f.endswith(".parquet")
                        and (f"/{source.hub_split}/" in f or f.endswith(f"-{source.hub_split}.parquet")))
        if not wanted:
            raise ValueError(f"no parquet files for that config and split (files: {files[:10]})")
        frames = [pd.read_parquet(hf_hub_download(source.hub_id, f, repo_type="dataset",
                                                  revision="refs/convert/parquet")) for f in wanted]
    except ImportError as err:
        raise ValueError(f"Task {task.name!r}: reading {where} from the Hub needs {err.name} "
                         f"(pip install pyarrow).{local_hint}") from err
    except Exception as err:  # offline, unknown id, gated dataset, ...
        raise ValueError(
            f"Task {task.name!r}: could not load {where} from the Hugging Face Hub "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}).{local_hint} "
            f"Connect to the internet, or put the data under the data root (--data-root).") from err
    return [_plain(row) for frame in frames for row in frame.to_dict("records")]


def _plain(value):
    """numpy arrays and scalars from parquet -> lists and Python scalars (what converters expect)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _read_json_file(relative: str) -> dict:
    path = _CURRENT_ROOT.get() / relative
    if not path.is_file():
        raise ValueError(f"Missing file '{path}' (instruction-induction gold annotations).")
    return json.loads(path.read_text(encoding="utf-8"))


# ================================================================ rendering


def render_parts(task: Task, example: Example, answer: str | None = None) -> tuple[str, str, str]:
    """(text before {answer}, the answer, text after it) of one example."""
    head, sep, tail = task.template.partition("{answer}")
    if not sep:
        raise ValueError(f"Task {task.name!r}: template {task.template!r} has no {{answer}} slot.")
    answer = example.target if answer is None else answer
    return head.format(**example.fields), answer, tail.format(**example.fields)


def render(task: Task, example: Example, answer: str | None = None) -> str:
    """One example as text, with its gold answer (a demonstration) or the given candidate."""
    return "".join(render_parts(task, example, answer))


def render_query(task: Task, example: Example) -> str:
    """The evaluated example up to (not including) the answer, trailing spaces trimmed."""
    return render_parts(task, example, "")[0].rstrip(" ")


# ---------------------------------------------------------------- small text helpers

_CLOSING = tuple(",.;:!?')]}\"")


def _lower_first(text: str) -> str:
    """Lower-case the first letter, except in "I" and "I'm"-style words (COPA: "because I ...")."""
    text = text.strip()
    if re.match(r"^I(\b|')", text):
        return text
    return text[:1].lower() + text[1:]


def _match_case(candidate: str, pronoun: str) -> str:
    """Capitalise a candidate that replaces a sentence-initial pronoun; otherwise lower-case a
    leading determiner ("The city councilmen" -> "the city councilmen")."""
    if pronoun[:1].isupper():
        return candidate[:1].upper() + candidate[1:]
    if re.match(r"^(The|A|An) ", candidate):
        return candidate[:1].lower() + candidate[1:]
    return candidate


def _options_key(options) -> str:
    return "|".join(o.strip().lower() for o in options)


def _pair_consecutive(examples: list[Example]) -> list[Example]:
    """Winograd twins sit next to each other with the same candidates: one pair id per run."""
    run, previous = 0, None
    for e in examples:
        if e.pair != previous:
            run, previous = run + 1, e.pair
        e.pair = f"run{run}"
    return examples


def _nli_label(label) -> int:
    if isinstance(label, str):
        if label not in _NLI_LABELS:
            raise ValueError(f"Unknown entailment label {label!r}; expected one of {list(_NLI_LABELS)}.")
        return _NLI_LABELS[label]
    return int(label)


def _detokenize(text: str) -> str:
    """Undo WSC's tokenised spacing (" n't", " ,", "( x )")."""
    text = text.replace(" n't", "n't").replace(" )", ")").replace("( ", "(")
    text = text.replace('" ', '"').replace(' "', '"')
    return re.sub(r" (['.,])", r"\1", text)


def _clean_html(text: str) -> str:
    """MultiRC paragraphs mark sentences with <b>Sent n: </b> and <br>."""
    text = re.sub(r"<b>Sent \d+: </b>", "", text)
    return re.sub(r"\s*<br>\s*", " ", text).strip()
