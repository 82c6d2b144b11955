"""The block cache (demo.engine.block_cache, ``cache="prefix"`` with ``window="block"``): Fast-dLLM's
prefix cache for writing block by block, against the exact any-order decoder."""

import dataclasses

import pytest
import torch

import tests.floats as floats
from demo.engine.block_cache import BlockCache
from demo.engine.counting import counting
from demo.engine.generation import generate
from demo.engine.reading import hidden_at
from demo.engine.text import prompt_ids_of
from demo.settings import GenerationSettings
from tests.conftest import needs_shared

PROMPT = "The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is"
BLOCKS = GenerationSettings(max_new_tokens=12, window="block", block_length=4, tokens_per_step=1,
                            order="confidence", cache="prefix")
FAMILIES = [("bert", {}), ("roberta", {}), ("albert", {}), ("modernbert", {}), ("deberta-v2", {}),
            ("deberta-v2", {"emd": True})]


@pytest.mark.floats
@pytest.mark.parametrize("family, options", FAMILIES, ids=[f"{f}{'-emd' if o else ''}" for f, o in FAMILIES])
def test_a_block_read_against_its_own_windows_cache_is_the_models_own_reading(tiny_model, family, options):
    """Nothing written since the refresh: the open block read against the kept keys and values
    gives the states the whole window gives (what the head reads, the enhanced mask decoder's
    with it on)."""
    lm = tiny_model(family, **options)
    mask = lm.tokenizer.mask_token_id
    ids = [lm.tokenizer.cls_token_id, *prompt_ids_of(lm, PROMPT), *[mask] * 8, lm.tokenizer.sep_token_id]
    open_from, read = len(ids) - 9, list(range(len(ids) - 9, len(ids) - 5))
    cache = BlockCache(lm.model, refresh_every=8)
    with torch.inference_mode():
        exact = hidden_at(lm.model, torch.tensor([ids]), None, [0] * len(read), read)
        refreshed = cache.hidden(ids, read, open_from)
        with counting() as tail:
            cached = cache.hidden(ids, read, open_from)
    torch.testing.assert_close(refreshed, exact, **floats.states(lm, exact))
    torch.testing.assert_close(cached, exact, **floats.states(lm, exact))
    assert cache.refreshes == 1 and tail.tokens == len(ids) - open_from  # the tail alone was read


@pytest.mark.floats
@pytest.mark.parametrize("family, options", FAMILIES, ids=[f"{f}{'-emd' if o else ''}" for f, o in FAMILIES])
def test_refreshing_every_step_is_the_exact_decoder(tiny_model, family, options):
    """cache_refresh=1: every step reads the whole window, so the output is the exact any-order
    decoder's, token for token, with the same likelihood; the default refresh reads fewer tokens."""
    lm = tiny_model(family, **options)
    exact = generate(lm, PROMPT, dataclasses.replace(BLOCKS, cache="exact"))
    every_step = generate(lm, PROMPT, dataclasses.replace(BLOCKS, cache_refresh=1))
    assert every_step.token_ids == exact.token_ids and every_step.reads == exact.reads
    assert every_step.log_likelihood == floats.total(exact.log_likelihood, len(exact.token_ids) + 1, lm)
    cached = generate(lm, PROMPT, BLOCKS)
    assert cached.reads.tokens < exact.reads.tokens and cached.reads.passes == cached.steps_run


@needs_shared
def test_on_the_standin_the_cache_mostly_keeps_the_exact_text(standin_mlm):
    """Real weights: blocks of 8 written two a step, cached; the text the exact decoder writes, or
    one that first differs late. Each block's first step reads the whole window, its 3 others the
    block and the end token only, counted here from the window's layout."""
    settings = dataclasses.replace(BLOCKS, max_new_tokens=16, block_length=8, tokens_per_step=2)
    exact = generate(standin_mlm, PROMPT, dataclasses.replace(settings, cache="exact"))
    cached = generate(standin_mlm, PROMPT, settings)
    same = sum(a == b for a, b in zip(exact.token_ids, cached.token_ids))
    assert same >= len(exact.token_ids) // 2 and cached.reads.tokens < exact.reads.tokens
    assert len(cached.token_ids) == 16  # no early end: every block is written whole
    n = len(prompt_ids_of(standin_mlm, PROMPT))
    windows = [1 + n + 8 * (block + 1) + 1 for block in range(2)]  # [CLS] prompt blocks [SEP]
    assert cached.reads.passes == 8 and cached.reads.tokens == sum(w + 3 * (8 + 1) for w in windows)


def test_the_block_cache_is_refused_where_it_cannot_run(tiny_model):
    with pytest.raises(ValueError, match="the prefix cache with a sliding window"):
        GenerationSettings(window="slide", order="confidence", cache="prefix")
    with pytest.raises(ValueError, match="The prefix cache supports the bert, roberta"):
        generate(tiny_model("distilbert"), PROMPT, BLOCKS)
