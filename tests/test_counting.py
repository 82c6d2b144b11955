"""The work each request did, as the page shows it: forward passes and the tokens they read,
counted by the engine as its passes run (demo.engine.counting).

Three counts of the same request must agree: the engine's, the work budget's formula for the
request before it runs (demo.app.budget), and a count taken apart from both at the model's input
embeddings (tests.conftest.tokens_read). Then the page shows the engine's numbers, for both models
of the lesson's steps: a generation (step 2), a fill (step 1) and a ranking (step 5).
"""

import dataclasses
import html
import re

import pytest

from demo.app.budget import generation_work, infill_work, ranking_work
from demo.engine.counting import Reads, count_pass, counting
from demo.engine.text import prompt_ids_of
from demo.settings import GenerationSettings, InfillSettings, ScoringSettings
from tests.conftest import needs_shared, tokens_read

FEW_SHOT = "Input: sane\nOutput: insane\n\nInput: direct\nOutput: indirect\n\nInput: unrestricted\nOutput:"


def lesson_step(number: int) -> dict:
    from demo.ui.lesson import steps
    return next(s for s in steps() if s["title"].startswith(f"{number}."))


def preset(tab: str, name: str) -> dict:
    from demo.ui.presets import read_presets
    return next(p for p in read_presets(tab) if p["name"] == name)


def step_2_settings(**changes) -> tuple[str, GenerationSettings]:
    """The prompt and decoding settings lesson step 2 loads into the Prompting tab."""
    from demo.ui.prompting import preset_values
    values = preset_values(preset("prompting", lesson_step(2)["preset"]))
    settings = GenerationSettings(strategy=values["strategy"], max_new_tokens=values["max_new_tokens"],
                                  stop_at_newline=values["stop_at_newline"], trace=True)
    return values["prompt"], dataclasses.replace(settings, **changes)


def shown(reads) -> str:
    """The counts as the page words them, written out here."""
    return (f"{reads.passes} forward pass{'es' if reads.passes != 1 else ''} · "
            f"{reads.tokens:,} token{'s' if reads.tokens != 1 else ''} read")


def budget_of(work) -> Reads:
    return Reads(work.passes, work.tokens)


# ---------------------------------------------------------------- the counter


def test_a_counter_counts_rows_and_unpadded_tokens_and_counters_nest():
    import torch

    ids = torch.ones(3, 5, dtype=torch.long)
    mask = torch.tensor([[1] * 5, [1] * 3 + [0] * 2, [1] * 4 + [0]])
    count_pass(ids)  # no counter open: nobody is charged
    with counting() as outer:
        count_pass(ids, mask)
        with counting() as inner:
            count_pass(ids[:1])
    count_pass(ids)
    assert (outer, inner) == (Reads(4, 17), Reads(1, 5))


def test_a_counter_charges_only_its_own_thread():
    import threading

    import torch

    with counting() as here:
        elsewhere = threading.Thread(target=count_pass, args=(torch.ones(2, 7),))
        elsewhere.start()
        elsewhere.join()
        count_pass(torch.ones(1, 3))
    assert here == Reads(1, 3)


# ---------------------------------------------------------------- generation: lesson step 2


def test_step_2_asks_about_the_number_of_tokens_its_preset_writes():
    prompt, settings = step_2_settings()
    assert settings.max_new_tokens == 10 and "10 tokens" in lesson_step(2)["question"]
    assert settings.strategy == "greedy"  # the same tokens, and so the same counts, on every run


@needs_shared
@pytest.mark.parametrize("model", ["standin_mlm", "smollm2"])
def test_a_step_2_generation_reads_what_the_budget_counts(model, request):
    """Every step runs (no early stop): the engine's count, the budget's and the embeddings' agree.
    The masked LM reads its whole window at every step; the causal LM the prompt at the first,
    then the one token written last."""
    from demo.engine.generation import generate

    lm = request.getfixturevalue(model)
    prompt, settings = step_2_settings()
    results = []
    embedded = tokens_read(lm, lambda: results.append(generate(lm, prompt, settings)))
    result = results[0]
    assert len(result.steps) == settings.max_new_tokens  # (else the budget counts steps never run)
    assert result.reads == budget_of(generation_work(lm, prompt, settings)) == Reads(*embedded)
    assert result.reads.passes == 10 and sum((s.reads for s in result.steps), Reads()) == result.reads
    if lm.kind == "masked":
        assert [s.reads for s in result.steps] == [Reads(1, len(s.window)) for s in result.steps]
        assert result.reads.tokens > 10 * result.prompt_tokens
    else:
        assert [s.reads.tokens for s in result.steps] == [result.prompt_tokens] + [1] * 9
        assert result.reads.tokens == result.prompt_tokens + 9


TYPED_MASKS = "[MASK] " * 480 + "\nThe capital of France is"  # (the stand-in reads 512 tokens)
ANY_ORDER = {  # the app's any-order defaults, LLaDA's masks ahead, one token a step, a shorter last block, sliding
    "blocks of 8, 2 a step": dict(window="block", order="confidence", tokens_per_step=2, block_length=8),
    "masks ahead": dict(window="block", masks_ahead=True, order="confidence", tokens_per_step=1, block_length=2),
    "a last block of 1": dict(window="block", order="random", tokens_per_step=2, block_length=3, max_new_tokens=4),
    "re-masking": dict(window="block", order="confidence", remask=True, tokens_per_step=1, block_length=4),
    "sliding": dict(window="slide", order="left_to_right", tokens_per_step=2),
}


@needs_shared
@pytest.mark.parametrize("writing", ANY_ORDER.values(), ids=ANY_ORDER.keys())
def test_masks_typed_into_a_prompt_are_read_and_the_budget_counts_the_steps(standin_mlm, writing):
    """480 masks typed into the prompt are text the model reads, as in the paper's decoder: any-order
    writing of 4 tokens takes its own few steps, not one per typed mask, and the engine's count, the
    budget's and the embeddings' agree."""
    from demo.engine.generation import generate

    settings = GenerationSettings(**{"max_new_tokens": 4, **writing})
    results = []
    embedded = tokens_read(standin_mlm, lambda: results.append(generate(standin_mlm, TYPED_MASKS, settings)))
    result, work = results[0], generation_work(standin_mlm, TYPED_MASKS, settings)
    assert prompt_ids_of(standin_mlm, TYPED_MASKS).count(standin_mlm.tokenizer.mask_token_id) == 480
    assert len(result.token_ids) == settings.max_new_tokens  # (else the budget counts steps never run)
    assert result.reads == budget_of(work) == Reads(*embedded)
    assert result.steps_run == work.passes <= settings.max_new_tokens
    paper = generate(standin_mlm, TYPED_MASKS, GenerationSettings(max_new_tokens=4))
    assert paper.reads.passes == 4


@needs_shared
@pytest.mark.parametrize("model", ["standin_mlm", "smollm2"])
def test_beams_read_as_the_budget_counts(model, request):
    """Every beam is a row of its own: the causal LM's prompt is read once per beam."""
    from demo.engine.generation import generate

    lm = request.getfixturevalue(model)
    prompt, settings = step_2_settings(strategy="beam", num_beams=3, max_new_tokens=4, trace=False)
    results = []
    embedded = tokens_read(lm, lambda: results.append(generate(lm, prompt, settings)))
    assert results[0].reads == budget_of(generation_work(lm, prompt, settings)) == Reads(*embedded)
    assert results[0].reads.passes == 3 * 4


@needs_shared
def test_fast_decoding_reads_less_and_says_so_per_step(standin_mlm):
    """The prefix cache reads the whole window at a refresh and only its tail between; parallel
    unmasking's guessed steps run no pass. Same count from the embeddings."""
    from demo.engine.generation import generate

    prompt, settings = step_2_settings()
    exact = generate(standin_mlm, prompt, settings)
    for changes in (dict(cache="prefix", cache_refresh=4), dict(cache="prefix", parallel_threshold=0.1)):
        results = []
        embedded = tokens_read(standin_mlm, lambda: results.append(generate(standin_mlm, prompt, settings, **changes)))
        fast = results[0]
        assert fast.reads == Reads(*embedded) and fast.reads.tokens < exact.reads.tokens / 2
        assert fast.reads.passes == 10 - (fast.guessed or 0)
        for step, same in zip(fast.steps, exact.steps):
            if step.refreshed:  # the whole window, as the exact method reads it
                assert step.reads == same.reads
            else:  # only the tail, or (a guessed step) nothing
                assert step.reads.tokens < same.reads.tokens and step.reads.passes == (step.read_from == 0)
        assert fast.steps[0].refreshed and fast.steps[0].reads == exact.steps[0].reads


# ---------------------------------------------------------------- fill: lesson step 1


@needs_shared
@pytest.mark.parametrize("model", ["standin_mlm", "smollm2"])
def test_a_step_1_fill_reads_what_the_budget_counts(model, request):
    """The masked LM: one pass over the whole text per masked token; the causal LM: the text before
    the blank, once (a one-token blank: one step). Also a text of two blanks, and a [blank:auto]
    whose tries are scored whole (masked LM: its tries' lengths known when filled)."""
    from demo.engine.infill import infill
    from demo.engine.infill_causal import causal_infill

    lm = request.getfixturevalue(model)
    fill = infill if lm.kind == "masked" else causal_infill
    settings = InfillSettings(trace=lm.kind == "masked")
    texts = [preset("infill", lesson_step(1)["preset"])["text"],
             preset("infill", "Two blanks: a month and a day fixed by 'Christmas'")["text"]]
    if lm.kind == "masked":
        texts.append("The [blank:auto] said that she would be late for dinner.")
    for text in texts:
        results = []
        embedded = tokens_read(lm, lambda: results.append(fill(lm, text, settings)))
        result = results[0]
        assert result.reads == budget_of(infill_work(lm, text, settings)) == Reads(*embedded), text
        if lm.kind == "masked" and not result.tries:
            assert [s.reads for s in result.steps] == [Reads(1, len(s.window)) for s in result.steps]


# ---------------------------------------------------------------- ranking: lesson step 5


@needs_shared
@pytest.mark.parametrize("model", ["standin_mlm", "smollm2"])
@pytest.mark.parametrize("scoring", [{}, dict(scope="full"), dict(unconditional_context="Answer:")],
                         ids=["candidate", "full text", "unconditional"])
def test_a_step_4_ranking_reads_what_the_budget_counts(model, scoring, request):
    """The masked LM: one masked copy per scored token, each the whole text (its specials read, not
    scored); the causal LM: one pass per text, with a start token only where its first token is
    scored. The copies are padded together: padding is not read."""
    from demo.engine.pll import score_candidates

    lm = request.getfixturevalue(model)
    chosen = preset("ranking", lesson_step(5)["preset"])
    settings = ScoringSettings(**scoring)
    with counting() as reads:
        embedded = tokens_read(lm, lambda: score_candidates(lm, chosen["context"], chosen["candidates"], settings))
    assert reads == budget_of(ranking_work(lm, chosen["context"], chosen["candidates"], settings)) == Reads(*embedded)


@needs_shared
@pytest.mark.parametrize("scoring", [dict(method="decoder"), dict(method="decoder", padding_masks=3, scope="full"),
                                     dict(method="decoder", unconditional_context="Answer:")],
                         ids=["decoder", "decoder p=3 full text", "decoder unconditional"])
def test_the_decoders_likelihood_reads_what_the_budget_counts(standin_mlm, scoring):
    """The decoder's likelihood: one generation window per scored token, each the text before it,
    [MASK], the padding masks and two specials."""
    from demo.engine.pll import score_candidates

    chosen = preset("ranking", lesson_step(5)["preset"])
    settings = ScoringSettings(**scoring)
    with counting() as reads:
        embedded = tokens_read(standin_mlm, lambda: score_candidates(standin_mlm, chosen["context"],
                                                                     chosen["candidates"], settings))
    work = ranking_work(standin_mlm, chosen["context"], chosen["candidates"], settings)
    assert reads == budget_of(work) == Reads(*embedded)
    assert "one window per scored token: the text before it" in work.what


# ---------------------------------------------------------------- the page shows them


@pytest.fixture(scope="module")
def names():
    from demo.ui.common import deployment
    catalog = deployment().catalog
    return catalog.default("masked").name, catalog.default("causal").name


def _generate(prompt, settings, model_name, kind, decoding="exact"):
    from demo.ui import prompting
    arguments = dict(prompt=prompt, model_name=model_name, strategy=settings.strategy,
                     max_new_tokens=settings.max_new_tokens, num_beams=2, temperature=1.0, top_k=0, top_p=1.0,
                     repetition_penalty=1.0, padding_masks="default", stop_at_newline=settings.stop_at_newline,
                     seed=0)
    if kind == "masked":
        return prompting.generate_masked(**arguments, decoding=decoding, cache_refresh=4)
    return prompting.generate_causal(**arguments)


def _frames(trace: str) -> list[str]:
    return [html.unescape(f) for f in re.findall(r'<div class="demo-step-work">(.*?)</div>', trace)]


@needs_shared
def test_the_prompting_tab_shows_the_work_of_every_decoding(standin_mlm, smollm2, names):
    """Step 2 on the page: each model's Work line holds the budget's numbers, and its playback
    each step's, adding up to them; fast and compare show the fast run's own count."""
    from demo.engine.generation import generate

    prompt, settings = step_2_settings()
    masked, causal = names
    for name, lm, kind in ((masked, standin_mlm, "masked"), (causal, smollm2, "causal")):
        page = _generate(prompt, settings, name, kind)
        expected = budget_of(generation_work(lm, prompt, settings))
        assert f"<b>Work:</b> {shown(expected)}" in page.stats, page.stats
        frames = _frames(page.trace)
        assert len(frames) == 10 and frames[-1].endswith(f"up to here: {shown(expected)}")
        n = len(prompt_ids_of(lm, prompt))
        first = n + lm.padding_masks + 3 if kind == "masked" else n  # [CLS] prompt [MASK] masks [SEP]
        assert frames[0] == f"this step: {shown(Reads(1, first))} · up to here: {shown(Reads(1, first))}"
        assert frames[1].startswith(f"this step: {shown(Reads(1, first + 1 if kind == 'masked' else 1))}")
    fast = generate(standin_mlm, prompt, settings, cache="prefix", cache_refresh=4)
    page = _generate(prompt, settings, masked, "masked", decoding="fast")
    assert f"<b>Work:</b> {shown(fast.reads)}" in page.stats and "refresh re-reads" in page.stats
    compared = _generate(prompt, settings, masked, "masked", decoding="compare")
    cards = re.findall(r'<div class="demo-work">(.*?)</div>', compared.compare)
    assert cards == [shown(budget_of(generation_work(standin_mlm, prompt, settings))), shown(fast.reads)]


@needs_shared
def test_the_infill_tab_shows_the_work_of_both_fills(standin_mlm, smollm2, names):
    from demo.ui import infill_tab

    text = preset("infill", lesson_step(1)["preset"])["text"]
    masked, causal = names
    settings = InfillSettings()
    page = infill_tab.infill_masked(text, masked, settings.order, settings.blank_tokens, settings.seed)
    work = budget_of(infill_work(standin_mlm, text, settings))
    assert f"<b>Work:</b> {shown(work)}" in page.stats and work.passes == 1, page.stats
    assert _frames(page.trace) == [f"this step: {shown(work)} · up to here: {shown(work)}"]
    page = infill_tab.infill_causal(text, causal, settings.order, settings.blank_tokens, settings.seed)
    assert f"<b>Work:</b> {shown(budget_of(infill_work(smollm2, text, settings)))}" in page.stats, page.stats


@needs_shared
def test_the_ranking_tab_shows_the_work_of_both_rankings(standin_mlm, smollm2, names):
    from demo.ui import ranking

    chosen = preset("ranking", lesson_step(5)["preset"])
    candidates = "\n".join(chosen["candidates"])
    masked, causal = names
    page = ranking.rank_masked(chosen["context"], candidates, masked, "right_masks", 2, False, "completion", "")
    work = ranking_work(standin_mlm, chosen["context"], chosen["candidates"],
                        ScoringSettings(method="right_masks", right_masks=2))
    assert re.search(rf"<b>Work:</b> {shown(budget_of(work))} in \d+\.\d\d s", page.summary), page.summary
    page = ranking.rank_causal(chosen["context"], candidates, causal, False, "completion", "")
    work = ranking_work(smollm2, chosen["context"], chosen["candidates"], ScoringSettings())
    assert re.search(rf"<b>Work:</b> {shown(budget_of(work))} in \d+\.\d\d s", page.summary), page.summary
