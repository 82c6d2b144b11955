"""Few-shot prompts: sample k demonstrations, format them, join them with blank lines.

BERTs paper, appendix A: "For each evaluated sample, the example demonstrations are randomly
selected (without replacement) from the training set of each task; if the training set is not
available, we sample from the only available dataset split, making sure not to select the same
sample as the evaluated one. We format these examples using the respective prompt templates and
concatenate them together, joined by two newline characters."

Sampling is a pure function of (seed, repetition, evaluated item): an interrupted evaluation
that resumes draws exactly the demonstrations it would have drawn, whatever ran before.
"""

import random
import statistics

from . import Example, Task, render, render_parts


def sample_demonstrations(pool: list[Example], k: int, *, seed: int, repetition: int = 0,
                          item: Example | None = None, same_split: bool = False) -> list[Example]:
    """k distinct demonstrations from ``pool``, reproducible from (seed, repetition, item).

    With ``same_split`` the pool is the evaluated split itself: the evaluated item, its twins
    (same ``pair``) and the other options of the same question (same ``group``) are left out.
    """
    if k < 0:
        raise ValueError(f"The number of shots must be 0 or more, not {k}.")
    if k == 0:
        return []
    candidates = pool
    if same_split and item is not None:
        candidates = [e for e in pool if not _related(e, item)]
    if k > len(candidates):
        where = "the evaluated split minus the evaluated item" if same_split else "the demonstration pool"
        raise ValueError(f"Asked for {k} shots, but {where} holds only {len(candidates)} examples. "
                         f"Use --shots {len(candidates)} or fewer.")
    # A string seed is hashed deterministically (sha512), unlike hash() of a tuple across runs.
    key = f"{seed}/{repetition}/{item.index if item is not None else '-'}"
    return random.Random(key).sample(candidates, k)


def _related(candidate: Example, item: Example) -> bool:
    return (candidate.index == item.index
            or (item.pair is not None and candidate.pair == item.pair)
            or (item.group is not None and candidate.group == item.group))


def demonstrations_text(task: Task, demos: list[Example]) -> str:
    """Task prefix, then the formatted demonstrations, each followed by the separator."""
    parts = [task.prefix] if task.prefix else []
    parts += [render(task, d) for d in demos]
    return "".join(p + task.separator for p in parts)


def choice_items(task: Task, item: Example, demos: list[Example], score: str | None = None
                 ) -> list[tuple[str, str]]:
    """Raw (context, completion) per candidate; ``demo.engine.pll.Choice`` adds the candidate itself.

    ``score`` picks the scored span (task default if None): "answer" = the candidate and what
    follows it, "suffix" = only what follows the candidate (Winograd partial scoring),
    "example" = the whole evaluated example. The scoring engine applies the text conventions.
    """
    score = score or task.score
    prompt = demonstrations_text(task, demos)
    items = []
    for candidate in item.candidates:
        head, answer, tail = render_parts(task, item, candidate)
        if score == "answer":
            context, completion = prompt + head, answer + tail
        elif score == "suffix":
            if not tail.strip():
                raise ValueError(f"Task {task.name!r}: nothing follows the candidate in "
                                 f"{task.template!r}, so there is no suffix to score.")
            context, completion = prompt + head + answer, tail
        elif score == "example":
            context, completion = prompt, head + answer + tail
        else:
            raise ValueError(f"score must be one of answer, suffix, example; not {score!r}.")
        items.append((context, completion))
    return items


def generation_prompt(task: Task, item: Example, demos: list[Example]) -> str:
    """Demonstrations, then the evaluated example up to its answer (trailing spaces trimmed)."""
    head = render_parts(task, item, "")[0].rstrip(" ")
    return demonstrations_text(task, demos) + head


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation over repetitions (0 for a single repetition)."""
    if not values:
        raise ValueError("No repetitions to summarise.")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)
