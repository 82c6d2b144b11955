"""The benchmarks' inputs are the evaluator's: the ranked items bench_pll_approx and
bench_precision score, and the prompts bench_decoding and bench_precision generate from, built
by the evaluator's own loading (a benchmark that cannot build them measures nothing)."""

from demo.engine.pll import Choice
from demo.evaluation.evaluate import plan
from demo.settings import RunSettings, ScoringSettings
from demo.tasks import get_task
from tests.conftest import SHARED, needs_shared


@needs_shared
def test_the_ranked_items_are_the_evaluators_zero_shot_items(standin_mlm):
    from benchmarks.bench_pll_approx import TASKS, task_items

    for name in TASKS:
        sets, scoring = task_items(standin_mlm, name, 2)
        run = plan(standin_mlm, get_task(name), RunSettings(shots=0, limit=2), ScoringSettings())
        assert scoring == run.scoring and len(sets) == len(run.examples) == 2
        for ranking, example in zip(sets, run.examples):
            assert all(isinstance(c, Choice) for c in ranking)
            assert [c.candidate for c in ranking] == list(example.candidates)


@needs_shared
def test_the_generated_prompts_end_with_the_evaluated_input():
    from benchmarks.bench_decoding import prompts
    from demo.evaluation.evaluate import fixed_sample
    from demo.tasks import load_examples
    from demo.tasks.fewshot import render_parts

    task, items = prompts("ii_sentence_similarity", 3, None, SHARED / "data")
    examples = fixed_sample(load_examples(task, "data", SHARED / "data"), 3)
    assert task.kind == "generate" and len(items) == 3
    for (prompt, answers), example in zip(items, examples):
        head = render_parts(task, example, "")[0].rstrip(" ")
        assert prompt.endswith(head) and len(prompt) > len(head) and answers == list(example.answers or [example.target])
