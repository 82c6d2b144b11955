"""The benchmarks' inputs are the evaluator's: the ranked items bench_pll_approx and
bench_precision score, and the prompts bench_decoding and bench_precision generate from, built
by the evaluator's own loading (a benchmark that cannot build them measures nothing)."""

from demo.engine.pll import Choice
from demo.evaluation.evaluate import plan
from demo.evaluation_settings import RunSettings
from demo.settings import ScoringSettings
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


def _record(span, half, exact, approximate, exact_seconds=10.0, approximate_seconds=2.0):
    """One item as bench_pll_approx records it: exact scores (stride 1) and stride 4's."""
    return dict(task="t", position=0, half=half, span=span, scores={1: exact, 4: approximate},
                seconds={1: exact_seconds, 4: approximate_seconds}, tokens={1: 100.0, 4: 25.0},
                exact_per_token=exact_seconds / 100, candidate_tokens=[50, 50])


def test_fast_scoring_pooled_by_hand():
    """Two long items in the chosen band, two short ones outside it: the short ones count as exact
    (agreeing, at exact cost); of the long ones, the item whose exact winner lies within its
    half's band is re-scored and agrees, the other is judged as approximated."""
    from benchmarks.bench_pll_approx import fast_pooled, fast_table_rows
    records = [_record(100, 0, [-1.0, -2.0], [-1.5, -1.2]),  # winner 0.3 below: within half 0's band 0.5
               _record(100, 1, [-1.0, -2.0], [-3.0, -1.0]),  # 2 nats below: outside half 1's band 0.5
               _record(5, 0, [-1.0, -2.0], [-9.0, -1.0]),  # outside the band: exact, whatever stride 4 says
               _record(5, 1, [-1.0, -2.0], [-9.0, -1.0])]
    chosen = dict(stride=4, bands={0: 0.5, 1: 0.25}, n=2, agreement=0.5, interval=(0.1, 0.9), speedup=3.0)
    pooled = fast_pooled(records, [(64, 10**9, chosen)])
    assert pooled["agreement"] == 3 / 4
    # seconds: item 1 its 2 s plus both candidates' 50 exact tokens at 0.1 s; item 2 its 2 s; 10 + 10 exact
    assert pooled["speedup"] == 40 / (2 + 100 * 0.1 + 2 + 10 + 10)
    row, = fast_table_rows([(64, 10**9, chosen)])
    assert (row["span_min"], row["stride"], row["rescore_band"], row["rankings"]) == (64, 4, 0.5, 2)
