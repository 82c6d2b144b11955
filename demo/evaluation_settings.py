"""The settings of evaluation, probes and results, as pydantic dataclasses declared as
``demo.settings`` declares the engines' (same decorator, same shared types):

- :class:`RunSettings`: how a task is evaluated (``demo.evaluation.evaluate``).
- :class:`HarnessSettings`: lm-eval's model_args beside the others (``demo.harness``).
- :class:`GridSettings`: the needle-in-a-haystack grid (``demo.evaluation.haystack``).
- :class:`SweepSettings`: how many masks? one task at each number of masks (``demo.evaluation.mask_sweep``).
- :class:`ResultsFilter`: which published and our results a view shows (``demo.evaluation.results``).
"""

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .refusals import rule
from .settings import (
    AUTO_BATCH,
    DEPTHS,
    MAX_PADDING_MASKS,
    MAX_RIGHT_MASKS,
    MAX_SHOTS,
    SCORE_SPANS,
    SWEEPS,
    CacheMode,
    DataRoot,
    PaddingMasks,
    Seed,
    TaskTokenLimit,
    capped,
    listed_numbers,
    settings,
)
from .user_text import LARGEST, as_said, check_readable

# ---------------------------------------------------------------- evaluation


@settings
class RunSettings:
    """How ``demo.evaluation.evaluate`` runs a task (its scoring is a separate ScoringSettings)."""
    shots: int | None = Field(None, ge=0, le=LARGEST, description="demonstrations (default: the paper's)")
    limit: int | None = Field(None, ge=1, le=LARGEST, description=
        "evaluate a fixed random sample of N items (the same for every model and seed)")
    seed: Seed = Field(0, description="demonstration sampling seed")
    repetitions: int = Field(1, ge=1, le=LARGEST, description="demonstration draws to average")
    score: Literal[SCORE_SPANS] | None = Field(None, description=
        "which span of a ranked example is scored (default: the task's)", json_schema_extra=dict(what="scored span"))
    chunk_size: int = Field(16, ge=1, le=LARGEST, description="examples scored in one batched call")
    execute_limit: int = Field(20, ge=1, le=LARGEST, description="held-out inputs each induced instruction runs on",
                               json_schema_extra=dict(applies="instruction induction"))
    max_new_tokens: TaskTokenLimit = None
    data_root: DataRoot = None
    skip_too_long: bool = Field(True, description=
        "skip items longer than an absolute-position model reads and report how many", json_schema_extra=dict(more=
            "BERT: 512 tokens, with their demonstrations, in any repetition; n and the metrics are then over "
            "the items kept. Off (--no-skip-too-long): such an item stops the run with an error."))
    cache: CacheMode = Field("exact", description=
        "decoding of generated items: 'exact' (the paper's method) or 'prefix' (the approximate prefix "
        "cache)", json_schema_extra=dict(more=
            "The prefix cache as in GenerationSettings, R and margin at its defaults. Ranked tasks (scored) "
            "and causal LMs are exact whatever this says; the summary's cache column records the mode a run used."))

    def shots_for(self, task) -> int:
        """The demonstrations per item for ``task``: these settings', else the paper's."""
        return task.shots if self.shots is None else self.shots


# ---------------------------------------------------------------- lm-eval's model


@settings
class HarnessSettings:
    """What lm-eval's ``--model_args`` sets for ``demo.harness`` beside the model, scoring and writing
    settings (its keys are these fields' names)."""
    add_bos_token: bool | None = Field(None, description=
        "a start token before every text (true) or before none (false); unset: as the tokenizer does "
        "(HFLM's key)", json_schema_extra=dict(applies="causal LMs"))
    parallelize: bool = Field(False, description="one model across this machine's GPUs (device_map=auto)")
    batch_size: int = Field(1, ge=1, le=LARGEST, description=
        "generate_until: prompts with the same settings written together (a masked LM writing in any "
        f"order; auto: {AUTO_BATCH})")

    @field_validator("batch_size", mode="before")
    @classmethod
    def _auto(cls, size):
        """lm-eval's "auto" and "auto:N" (AUTO_BATCH), and a count written as text."""
        if isinstance(size, str) and size.strip().lower().startswith("auto"):
            return AUTO_BATCH
        if isinstance(size, str) and size.strip().isdigit():
            return int(size)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise rule(f"batch_size must be a whole number >= 1 or 'auto', not {as_said(size)}.")
        return size


# ---------------------------------------------------------------- needle in a haystack


MIN_GRID_LENGTH = 16  # tokens: room for the needle, its question and a little filler


@settings
class GridSettings:
    """The needle grid of ``demo.evaluation.haystack.run_grid``: lengths x depths x repetitions."""
    lengths: list[Annotated[int, Field(ge=MIN_GRID_LENGTH, le=LARGEST)]] = Field(
        default_factory=lambda: [256, 512, 1024], min_length=1, description=
        "total prompt lengths in tokens, separated by commas", json_schema_extra=dict(
            label="Lengths (tokens)", each="Each length (in tokens)", more="Every position the model needs to answer."))
    depths: list[Annotated[float, Field(ge=0.0, le=1.0)]] = Field(
        default_factory=lambda: list(DEPTHS), min_length=1, description=
        "where the needle sits, 0 (start) to 1 (end), separated by commas",
        json_schema_extra=dict(label="Needle depths", each="Each depth"))
    repetitions: int = Field(3, ge=1, le=LARGEST, description="runs per cell, each with another needle and filler",
                             json_schema_extra=dict(label="Repetitions"))
    seed: Seed = Field(0, description="seed for the needles and the filler's starting point",
                       json_schema_extra=dict(typed=True, label="Seed"))
    padding_masks: PaddingMasks = None
    filler: str | None = Field(None, description=
        "UTF-8 text file used as the haystack (default: the bundled public-domain book)")
    cache: CacheMode = Field("exact", description=
        "exact: the paper's method, re-reads the whole prompt for every answer token; prefix: reuses the "
        "prompt's internal states (the prefix cache; faster, approximate)", json_schema_extra=dict(
            label="Masked LM decoding", shown={"exact": "exact", "prefix": "prefix cache"},
            more="R and margin at the prefix cache's defaults. A causal LM is exact whatever this says; the "
            "grid's rows record the mode used."))

    @field_validator("lengths", "depths", mode="before")
    @classmethod
    def _listed(cls, values, info):
        """A list of numbers (:func:`listed_numbers`); a whole length written as 256.0 is 256; none is
        refused in words."""
        values = listed_numbers(values)
        if not values:
            raise rule("Give at least one length and one depth.")
        if info.field_name == "lengths":
            return [int(n) if isinstance(n, float) and n.is_integer() else n for n in values]
        return [float(d) if isinstance(d, int) and not isinstance(d, bool) else d for d in values]

    @field_validator("lengths", "depths", mode="after")
    @classmethod
    def _sorted(cls, values, info):
        return sorted(set(values)) if info.field_name == "lengths" else sorted({round(d, 6) for d in values})

    @property
    def cells(self) -> int:
        return len(self.lengths) * len(self.depths) * self.repetitions


# ---------------------------------------------------------------- how many masks?


@settings
class SweepSettings:
    """The mask sweep of ``demo.evaluation.mask_sweep``: one task evaluated at each number of masks."""
    sweep: Literal[SWEEPS] | None = Field(None, description=
        "padding masks change how the model writes; right masks how it scores candidates", json_schema_extra=dict(
            label="What to sweep", more=
            "mlm-icl probe: instead of the needle grid, sweep a masked LM's padding masks (generation, on a "
            "generated task) or right masks (the PLL, on a ranked task).",
            shown={"padding_masks": "padding masks: generation (a generated task)",
                   "right_masks": "right masks: ranking (a ranked task)"}))
    values: list[Annotated[int, Field(ge=0, le=max(MAX_PADDING_MASKS, MAX_RIGHT_MASKS))]] = Field(
        default_factory=lambda: [0, 1, 2, 3, 4], description=
        f"the numbers of masks evaluated, separated by commas, each from 0 to {MAX_PADDING_MASKS}",
        json_schema_extra=dict(label="Numbers of masks", each="Each number of masks"))
    task: str | None = Field(None, description="the task evaluated at every value (its data must be on the server)",
                             json_schema_extra=dict(label="Task", more=
                                 "Default: ii_singular_to_plural for padding masks, copa for right masks."))
    shots: int | None = Field(None, ge=0, le=MAX_SHOTS, description=
        "demonstrations before each item (the same at every number of masks)", json_schema_extra=dict(label="Shots"))
    limit: int = Field(20, ge=1, le=LARGEST, description=
        "items evaluated at each number of masks (a fixed sample of the task)",
        json_schema_extra=dict(cap="max_sweep_items", label="Items"))
    max_new_tokens: TaskTokenLimit = None
    demos_seed: Seed = Field(0, description="seed of the demonstrations drawn for each item")
    data_root: DataRoot = None

    _capped = field_validator("limit")(capped)

    @field_validator("values", mode="before")
    @classmethod
    def _read(cls, values):
        """A list of numbers (:func:`listed_numbers`)."""
        values = listed_numbers(values)
        if not values:
            raise rule("Give at least one number of masks to evaluate.")
        return values

    @field_validator("values", mode="after")
    @classmethod
    def _sorted(cls, values):
        return sorted(set(values))

    @model_validator(mode="after")
    def _swept(self):
        high = MAX_RIGHT_MASKS if self.sweep == "right_masks" else MAX_PADDING_MASKS
        beyond = [v for v in self.values if v > high]
        if beyond:
            raise rule(f"Each number of masks must be a whole number from 0 to {high}, not {beyond[0]}.")
        if self.task is not None and not self.task.strip():
            raise rule(f"The task must be a task's name (mlm-icl evaluate --list), not {as_said(self.task)}.")
        return self


# ---------------------------------------------------------------- published and our results


def _readable_filter(wanted: list[str], info) -> list[str]:
    for value in wanted:
        check_readable(value, f"{info.field_name} filter")
    return wanted


def _filter(name: str, label: str, help: str):
    """A results filter's field: the values a row must match (empty: all), named in messages as the
    ``name`` filter."""
    return Field(default_factory=list, description=f"{help}; empty = all", json_schema_extra=dict(
        label=label, what=f"The {name} filter", each=f"Each {name} filter value"))


@settings
class ResultsFilter:
    """Which results ``demo.evaluation.results.filter_results`` keeps: rows matching every non-empty list."""
    papers: list[str] = _filter("papers", "Paper",
                                "which source: a paper's published tables, or 'ours' (runs of mlm-icl evaluate)")
    groups: list[str] = _filter("groups", "Task group",
                                "task groups: SuperGLUE, language modeling, translation, closed-book QA, ...")
    models: list[str] = _filter("models", "Model", "models to keep (masked and causal), as the tables name them")
    shots: list[str] = _filter("shots", "Shots",
                               "numbers of in-context examples, e.g. 0-shot (few-shot = the paper's k per task)")
    tasks: list[str] = _filter("tasks", "Task", "single tasks to keep, as the tables name them")

    _readable = field_validator("papers", "groups", "models", "shots", "tasks")(_readable_filter)
