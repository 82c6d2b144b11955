"""What a task is: ``Source`` (where a split's records come from), ``Task`` (one entry of a
``specs/*.yaml`` file), ``Example`` (one converted record) and how an example becomes text.

What "score" means for a ranked task (which part of the evaluated example is scored; the rest of
the prompt is conditioning only):
- "answer": the candidate and whatever follows it in the template (GPT-3 style);
- "suffix": only the words after the candidate (Winograd partial scoring: the candidate is
  substituted into the sentence, and the rest of the sentence is scored);
- "example": the whole evaluated example, as the BERTs paper's code does for COPA, HellaSwag,
  PIQA, ARC and OpenBookQA (its scored span covers the question/premise too; for a causal LM the
  extra tokens score the same for every candidate, so the ranking equals "answer").
"""

import string
from dataclasses import MISSING, dataclass, field, fields

from ..settings import SCORE_SPANS, GenerationSettings, ScoringSettings
from ..user_text import nearest
from . import metrics as metric_registry

KINDS = ("choice", "generate", "induce")
FORMATS = ("jsonl", "json", "json_examples", "csv")


@dataclass(frozen=True)
class Source:
    """One split of a dataset: a local file and/or a Hub location.

    ``local`` is relative to the data root (the package's tasks) or to the folder of the YAML file
    that defines the task (your own tasks, ``--tasks-dir``), or absolute.
    """
    local: str | None = None
    format: str = "jsonl"  # jsonl | json (a list of records) | json_examples ({"examples": {...}}) | csv
    hub_id: str | None = None
    hub_config: str | None = None
    hub_split: str | None = None


@dataclass(frozen=True)
class Task:
    name: str
    group: str  # "SuperGLUE", "language modeling", "commonsense QA", "closed-book QA", ...
    title: str  # the name the published tables use
    data: Source  # the evaluated split
    demos: Source | None  # demonstration pool; None = the evaluated split minus the evaluated item
    convert: str  # a converter's name (demo.tasks.converters)
    template: str  # one example; "{answer}" is the candidate (ranked) or the target (generated)
    kind: str  # "choice" (rank candidates), "generate", "induce" (instruction induction)
    shots: int  # the paper's few-shot k (BERTs paper table 6; 5 for instruction induction)
    metrics: tuple[str, ...]  # names in demo.tasks.metrics.METRICS (``@metric``)
    convert_args: dict = field(default_factory=dict)  # keyword arguments of the converter
    score: str = "answer"  # choice tasks: which span is scored, see the module docstring
    scoring: dict = field(default_factory=dict)  # ScoringSettings fields the task fixes (NormPLL, ...)
    prefix: str = ""  # text before the demonstrations (SuperGLUE WSC's exam header)
    separator: str = "\n\n"  # between demonstrations and before the evaluated example
    max_shots: int | None = None  # hard cap (instruction execution prompts are zero-shot)
    executes: str | None = None  # "induce" tasks: the task whose inputs the instruction runs on
    generation: dict = field(default_factory=dict)  # GenerationSettings fields for generated tasks
    # generated tasks: the output is one of the item's candidates (GenerationSettings.choices,
    # per item), and accuracy compares it with the correct one (COPA generated, not ranked)
    constrain_to_candidates: bool = False
    paper: str = "Samuel 2024, appendix A"
    license: str = ""
    notes: str = ""
    base: str | None = None  # folder that relative local paths start from; None = the data root

    def __post_init__(self):
        """Check a task definition when it is read, naming the task and the field."""
        where = f"Task {self.name!r}"
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}, not {self.kind!r}.")
        if self.score not in SCORE_SPANS:
            raise ValueError(f"{where}: score must be one of {', '.join(SCORE_SPANS)}, not {self.score!r}.")
        for source in (self.data, self.demos):
            if source is not None and source.format not in FORMATS:
                raise ValueError(f"{where}: format must be one of {', '.join(FORMATS)}, "
                                 f"not {source.format!r}.")
            if source is not None and not (source.local or source.hub_id):
                raise ValueError(f"{where}: a data source needs 'local' (a file) or 'hub_id'.")
        if "{answer}" not in self.template:
            raise ValueError(f"{where}: the template {self.template!r} has no {{answer}} slot.")
        if not isinstance(self.shots, int) or self.shots < 0:
            raise ValueError(f"{where}: shots must be a whole number >= 0, not {self.shots!r}.")
        if not self.metrics:
            raise ValueError(f"{where}: list at least one metric.")
        known = metric_registry.METRICS  # looked up now: metrics of your own register when imported
        for name in self.metrics:
            if not isinstance(name, str) or name not in known:
                hint = _did_you_mean(name, known) if isinstance(name, str) else ""
                raise ValueError(f"{where}: metrics: {name!r} is not a metric{hint}; known metrics: "
                                 f"{', '.join(sorted(known))}.")
            if known[name].reads not in self.record_holds():
                raise ValueError(f"{where}: metrics: {name} reads {metric_registry.READS[known[name].reads]}; "
                                 f"this task is kind: {self.kind}"
                                 f"{', constrain_to_candidates: true' if self.constrain_to_candidates else ''}.")
        if not isinstance(self.constrain_to_candidates, bool):
            raise ValueError(f"{where}: constrain_to_candidates must be true or false, not "
                             f"{self.constrain_to_candidates!r}.")
        if self.constrain_to_candidates and self.kind != "generate":
            raise ValueError(f"{where}: constrain_to_candidates is for generated tasks (kind: "
                             f"generate); a {self.kind!r} task does not generate its answer.")
        try:  # the task's own settings must be valid settings
            ScoringSettings(**self.scoring)
            GenerationSettings(**self.generation)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from None

    def record_holds(self) -> set[str]:
        """What the evaluator's record of one item holds (demo.evaluation.evaluate; keys of metrics.READS)."""
        if self.kind == "choice":
            return {"choice", "scores", "text"}
        if self.kind == "generate":
            return {"choice", "text"} if self.constrain_to_candidates else {"text"}
        return {"execution"}

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    @classmethod
    def required_fields(cls) -> set[str]:
        return {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}


@dataclass(frozen=True)
class Example:
    index: int  # position in the converted split
    id: str
    fields: dict  # template values other than "answer"
    candidates: tuple[str, ...] = ()  # ranked tasks: values of {answer}
    label: int | None = None  # index of the correct candidate (the first, where several are)
    # every correct candidate's index (TimeDial: two of four); (label,) when left empty
    labels: tuple[int, ...] = ()
    answers: tuple[str, ...] = ()  # acceptable outputs (generated tasks)
    group: str | None = None  # MultiRC: the question (exact match is per question)
    pair: str | None = None  # twins (Winograd pairs) never serve as each other's demonstration

    def __post_init__(self):
        object.__setattr__(self, "candidates", tuple(self.candidates))
        object.__setattr__(self, "answers", tuple(self.answers))
        labels = tuple(self.labels) or (() if self.label is None else (self.label,))
        object.__setattr__(self, "labels", labels)
        if labels and labels[0] != self.label:
            raise ValueError(f"Example {self.id!r}: label {self.label!r} must be the first of its "
                             f"correct candidates {list(labels)}.")

    @property
    def target(self) -> str:
        """What fills {answer} when this example is a demonstration."""
        if self.label is not None:
            return self.candidates[self.label]
        return self.answers[0]


# ---------------------------------------------------------------- rendering


def check_template(task: Task, examples: list[Example]) -> None:
    """Every placeholder of the template but {answer} must be a field of every example."""
    names = {n for _, n, _, _ in string.Formatter().parse(task.template) if n} - {"answer"}
    for example in examples:
        missing = sorted(names - set(example.fields))
        if missing:
            have = sorted(example.fields)
            hints = "".join(_did_you_mean(n, have) for n in missing[:1])
            raise ValueError(
                f"Task {task.name!r}: template: {', '.join('{' + n + '}' for n in missing)} "
                f"{'is not a field' if len(missing) == 1 else 'are not fields'} of its converted "
                f"examples{hints}; example {example.index} (id {example.id!r}) has "
                f"{', '.join('{' + n + '}' for n in have) or 'no fields'} (and {{answer}}, the candidate "
                f"or target).")


def _did_you_mean(name: str, known) -> str:
    close = nearest(name, known)
    return f" (did you mean {close!r}?)" if close else ""


def render_parts(task: Task, example: Example, answer: str | None = None) -> tuple[str, str, str]:
    """(text before {answer}, the answer, text after it) of one example."""
    head, _, tail = task.template.partition("{answer}")
    answer = example.target if answer is None else answer
    return head.format(**example.fields), answer, tail.format(**example.fields)


def render(task: Task, example: Example, answer: str | None = None) -> str:
    """One example as text, with its gold answer (a demonstration) or the given candidate."""
    return "".join(render_parts(task, example, answer))


def render_query(task: Task, example: Example) -> str:
    """The evaluated example up to (not including) the answer, trailing spaces trimmed."""
    return render_parts(task, example, "")[0].rstrip(" ")
