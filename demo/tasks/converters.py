"""Converters: raw records of one split -> ``Example``s, registered by name with ``@converter``.

A task file names its converter (``convert: copa``) and the converter's keyword arguments
(``convert_args: {marker: "_"}``). Every converter is called as ``fn(records, root, **args)``:
``records`` is the list of raw records (dicts), ``root`` the task's data folder (for files a
converter reads besides the split, e.g. the instruction-induction annotations). A missing field
raises KeyError, which ``demo.tasks.registry`` turns into a message naming the fields the records
do have.

Your own task usually needs no converter: ``convert: fields`` (:func:`_fields`) maps the record's
fields to the template and names the fields that hold the candidates, the label(s) or the answers.
Every converter here can be named from your own task file too (``convert: blank_sentence`` with
``convert_args: {marker: "_"}``); :func:`check_arguments` checks the arguments when the file is
read. A new data format needs a new converter: a function here with ``@converter("name")``.
"""

import inspect
import json
import random
import re
import types
import typing
from dataclasses import replace
from pathlib import Path

from .schema import Example

CONVERTERS: dict = {}


def converter(name: str):
    """Register ``fn(records, root, **args) -> list[Example]`` under ``name``."""
    def register(fn):
        if name in CONVERTERS:
            raise ValueError(f"Two converters are named {name!r}.")
        CONVERTERS[name] = fn
        return fn
    return register


def check_arguments(name: str, args: dict) -> None:
    """The converter ``name`` takes exactly ``args``: none unknown, none missing, each of the type
    its signature names (a string where a field name belongs)."""
    parameters = list(inspect.signature(CONVERTERS[name]).parameters.values())[2:]  # after records, root
    known = {p.name: p for p in parameters}
    unknown = sorted(set(args) - set(known))
    if unknown:
        takes = f"takes {', '.join(known)}" if known else "takes no arguments"
        raise ValueError(f"convert_args: converter {name!r} {takes}; {', '.join(unknown)} "
                         f"{'is' if len(unknown) == 1 else 'are'} not among them.")
    missing = [p.name for p in parameters if p.default is p.empty and p.name not in args]
    if missing:
        raise ValueError(f"convert_args: converter {name!r} needs {', '.join(missing)}.")
    for key, value in args.items():
        expected = known[key].annotation
        if not _has_type(value, expected):
            raise ValueError(f"convert_args: {key} of converter {name!r} must be "
                             f"{_type_words(expected)}, not {value!r}.")


def _has_type(value, annotation) -> bool:
    if annotation is inspect.Parameter.empty:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_has_type(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if typing.get_origin(annotation) is list:
        item = typing.get_args(annotation)[0]
        return isinstance(value, list) and all(_has_type(v, item) for v in value)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


def _type_words(annotation) -> str:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(_type_words(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is list:
        return f"a list of {_type_words(typing.get_args(annotation)[0]).split(' ', 1)[1]}s"
    return {str: "a string", bool: "true or false", int: "a whole number",
            type(None): "left out"}.get(annotation, str(annotation))


# ---------------------------------------------------------------- your own tasks


@converter("fields")
def _fields(records, root, candidates: str | None = None, label: str | None = None,
            answers: str | None = None, id: str | None = None):
    """Generic records: every field is a template value, except the ones named here.

    ``candidates``: the field holding the list of candidates (ranked tasks); ``label``: the
    field holding the correct one, as its index or as its text, or a list of them where several
    are correct (TimeDial: two of four; ``metrics: [k_best]``); ``answers``: the field holding
    the acceptable output (a string or a list; generated tasks); ``id``: the record's id field.
    """
    if (candidates is None) == (answers is None):
        raise ValueError("convert_args of 'fields' must name either 'candidates' (with 'label') "
                         "for a ranked task or 'answers' for a generated one.")
    if candidates is not None and label is None:
        raise ValueError("convert_args of 'fields' name 'candidates' but not 'label' (the field "
                         "holding the correct candidate).")
    named = {candidates, label, answers, id} - {None}
    out = []
    for i, r in enumerate(records):
        values = {k: v for k, v in r.items() if k not in named}
        if candidates is not None:
            options = [str(c) for c in r[candidates]]
            golds = r[label] if isinstance(r[label], list) else [r[label]]
            correct = list(dict.fromkeys(_label_index(g, options, i) for g in golds))
            if not correct:
                raise ValueError(f"Record {i}: its label field {label!r} is an empty list; name at "
                                 f"least one correct candidate.")
            out.append(Example(i, str(r.get(id, i)) if id else str(i), values, candidates=options,
                               label=correct[0], labels=correct))
        else:
            gold = r[answers]
            out.append(Example(i, str(r.get(id, i)) if id else str(i), values,
                               answers=[gold] if isinstance(gold, str) else [str(a) for a in gold]))
    return out


def _label_index(gold, options: list[str], record: int) -> int:
    """A label given as one of the candidates' text (a string), or as its index (a number)."""
    if isinstance(gold, str):
        if gold not in options:
            raise ValueError(f"Record {record}: the label {gold!r} is not one of its candidates {options}.")
        return options.index(gold)
    if isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < len(options):
        return gold
    raise ValueError(f"Record {record}: the label {gold!r} is neither one of its candidates nor an "
                     f"index of its {len(options)} candidates.")


# ---------------------------------------------------------------- the papers' tasks


@converter("copa")
def _copa(records, root):
    out = []
    for i, r in enumerate(records):
        # Paper: premise without its full stop, "because"/"therefore", lower-cased alternative.
        choices = [_lower_first(r["choice1"]), _lower_first(r["choice2"])]
        out.append(Example(i, str(r.get("idx", r.get("id", i))), {
            "premise": r["premise"].strip().rstrip("."),
            "connector": "because" if r["question"] == "cause" else "therefore"},
            candidates=choices, label=int(r["label"])))
    return out


@converter("boolq")
def _boolq(records, root):
    out = []
    for i, r in enumerate(records):
        label = r["label"] if "label" in r else r["answer"]
        out.append(Example(i, str(r.get("idx", i)), {
            "passage": r["passage"].strip(), "question": r["question"].strip().rstrip("?")},
            candidates=["no", "yes"], label=int(bool(label))))
    return out


_NLI_LABELS = {"entailment": 0, "contradiction": 1, "neutral": 2, "not_entailment": 1}


@converter("cb")
def _cb(records, root):
    return [Example(i, str(r.get("idx", i)), {
        "premise": r["premise"].strip(), "hypothesis": r["hypothesis"].strip().rstrip(".")},
        candidates=["true", "false", "neither"], label=_nli_label(r["label"]))
        for i, r in enumerate(records)]


@converter("rte")
def _rte(records, root):
    return [Example(i, str(r.get("idx", i)), {
        "premise": r["premise"].strip(), "hypothesis": r["hypothesis"].strip()},
        candidates=["True", "False"], label=_nli_label(r["label"]))
        for i, r in enumerate(records)]


@converter("wic")
def _wic(records, root):
    return [Example(i, str(r.get("idx", i)), {
        "sentence1": r["sentence1"].strip(), "sentence2": r["sentence2"].strip(), "word": r["word"]},
        candidates=["no", "yes"], label=int(bool(r["label"])))
        for i, r in enumerate(records)]


@converter("wsc_superglue")
def _wsc_superglue(records, root):
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


@converter("multirc")
def _multirc(records, root):
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


@converter("record")
def _record(records, root):
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


@converter("wsc273")
def _wsc273(records, root):
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


@converter("blank_sentence")
def _blank_sentence(records, root, marker: str):
    """Winogrande ("_") and Winogradversarial ("<mask>"): substitute each option for the blank."""
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


@converter("hellaswag")
def _hellaswag(records, root):
    out = []
    for i, r in enumerate(records):
        ctx_b = r["ctx_b"].strip()
        # (lm-eval capitalises ctx_b with str.capitalize(), which would also lower-case the
        # rest of it; HellaSwag's ctx_b has no other capitals, so the texts are the same)
        context = _wikihow_text(r["ctx_a"] + " " + ctx_b[:1].upper() + ctx_b[1:])
        # Paper: a space before each ending; none before one that starts with punctuation.
        endings = [_wikihow_text(e) for e in r["endings"]]
        endings = [(" " if e[:1] not in _CLOSING else "") + e for e in endings]
        out.append(Example(i, str(r.get("ind", i)), {
            "activity_label": _wikihow_text(r["activity_label"]), "context": context},
            candidates=endings, label=int(r["label"])))
    return out


def _wikihow_text(text: str) -> str:
    """HellaSwag's WikiHow items carry scraping markers ([header], [title], [step], [substeps])
    that no model should read as text. Removed by lm-evaluation-harness's rule (lm-eval 0.4,
    lm_eval/tasks/hellaswag/utils.py, preprocess()): a title marker becomes a sentence end, the
    other markers go, a double space closes up. Stripped again, because a marker at the start
    leaves a space where our template joins the fields."""
    text = text.strip().replace(" [title]", ". ")
    return re.sub(r"\[.*?\]", "", text).replace("  ", " ").strip()


@converter("story_cloze")
def _story_cloze(records, root):
    out = []
    for i, r in enumerate(records):
        fields = {f"sentence_{k}": r[f"input_sentence_{k}"].strip() for k in range(1, 5)}
        out.append(Example(i, str(r.get("story_id", i)), fields,
                           candidates=[r["sentence_quiz1"].strip(), r["sentence_quiz2"].strip()],
                           label=int(r["answer_right_ending"]) - 1))
    return out


@converter("piqa")
def _piqa(records, root):
    return [Example(i, str(r.get("id", i)), {"goal": r["goal"].strip()},
                    candidates=[r["sol1"].strip(), r["sol2"].strip()], label=int(r["label"]))
            for i, r in enumerate(records)]


@converter("multiple_choice")
def _multiple_choice(records, root, question_keys: list[str], full_stop: bool = False):
    """ARC / OpenBookQA in either schema: Hub ({question, choices{text,label}, answerKey}) or
    llm-foundry ({query, choices, gold}, query prefixed "Question: ")."""
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


@converter("closed_book_qa")
def _closed_book_qa(records, root):
    out = []
    for i, r in enumerate(records):
        if "answer" in r and isinstance(r["answer"], dict):  # TriviaQA
            answers = list(r["answer"]["aliases"]) or [r["answer"]["value"]]
        else:  # NQ-open, WebQuestions
            answers = list(r.get("answer", r.get("answers")))
        out.append(Example(i, str(r.get("question_id", i)), {"question": r["question"].strip()},
                           answers=[a for a in answers if a]))
    return out


_LANGUAGES = {"en": "English", "de": "German", "fr": "French", "ro": "Romanian"}


@converter("translation")
def _translation(records, root, source: str, target: str):
    return [Example(i, str(i), {"source_language": _LANGUAGES[source],
                                "target_language": _LANGUAGES[target],
                                "source_text": r["translation"][source].strip()},
                    answers=[r["translation"][target].strip()])
            for i, r in enumerate(records)]


# ---------------------------------------------------------------- instruction induction

# Honovich et al. 2022, appendix A and their evaluate.py / prepare_for_execution.py
@converter("instruction_pairs")
def _instruction_pairs(records, root, task: str, split: str, answers_field: str | None = None):
    """Input/output pairs of one instruction-induction task (their execute / induce splits);
    ``answers_field`` holds the other acceptable outputs (Honovich et al., appendix A)."""
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


@converter("instruction_gold")
def _instruction_gold(records, root, task: str, answers_field: str | None = None):
    """Execution accuracy with the human-written (gold) instructions: input i gets annotation
    i mod n, so every annotation is used. The annotations live under the data root."""
    path = Path(root) / _II_ANNOTATIONS.format(task=task)
    if not path.is_file():
        raise ValueError(f"Missing file '{path}' (instruction-induction gold annotations).")
    annotations = json.loads(path.read_text(encoding="utf-8"))["annotations"]
    return [replace(e, fields=dict(e.fields, instruction=annotations[e.index % len(annotations)].strip()))
            for e in _instruction_pairs(records, root, task, "execute", answers_field)]


@converter("instruction_induce")
def _instruction_induce(records, root):
    return [Example(i, str(i + 1), {"prompt": r["input"]},
                    answers=[r["metadata"]["examples_seen"]])
            for i, r in enumerate(records)]


_II_ANNOTATIONS = "instruction_induction/data/annotations/{task}.json"


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
    run, previous, paired = 0, None, []
    for e in examples:
        if e.pair != previous:
            run, previous = run + 1, e.pair
        paired.append(replace(e, pair=f"run{run}"))
    return paired


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
