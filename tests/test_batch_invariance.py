"""The same bits batched or alone, in bfloat16 (``demo.engine.batch_invariance``): every batched path
(rankings, the paper's decoder, causal generation, any-order writing, infilling) gives each request
exactly what it gets alone, wherever it sits in its batch and however large the batch, and a fresh
process gives the same bits. The reference is the request run alone through the same engine;
comparisons are ``==`` on floats and token ids, never a tolerance."""

import copy
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from demo.engine.batch_invariance import make_batch_invariant
from demo.engine.generation import generate, generate_together
from demo.engine.infill import infill, infill_together
from demo.engine.models import load_model, random_model
from demo.engine.pll import choices_for, score_choices
from demo.settings import GenerationSettings, InfillSettings, ScoringSettings
from tests.conftest import STANDIN_MLM

CONTEXTS = ["My body cast a shadow over the grass because", "Ada wrote: the sky was",
            "A very long sentence about the weather, the sea, the hills and the town where we lived was",
            "Hi", "Q: What is 1 plus 2?\nA:"]
CANDIDATES = ["the sun was rising.", "the grass was cut.", "the moon was out tonight."]
PROMPTS = ["Q: What is 1 plus 2?\nA:", "The capital of France is Paris. The capital of Italy is", "Once upon a time",
           "Cats and dogs are", "Hi"]


def _in_bfloat16(lm):
    """``lm`` in bfloat16, as ``load_model(dtype="bfloat16")`` gives it (a copy: the float32 one
    stays as the session's fixture has it)."""
    return replace(lm, model=make_batch_invariant(copy.deepcopy(lm.model).to(torch.bfloat16)))


@pytest.fixture(scope="module")
def standin16():
    if not STANDIN_MLM.is_dir():
        pytest.skip("../shared/models/minilm-l6-mlm-standin is not beside this clone")
    return load_model(str(STANDIN_MLM), device="cpu", dtype="bfloat16")


@pytest.fixture(scope="module")
def smollm16(smollm2):
    return _in_bfloat16(smollm2)


@pytest.fixture(scope="module")
def modernbert16(family_folder):
    """A ModernBERT (Ettin's encoder shape: local and global attention layers), random weights."""
    return _in_bfloat16(random_model(family_folder("modernbert"), local_attention=4,
                                     layer_types=["sliding_attention", "full_attention"]))


def _rankings_alike(lm, settings: ScoringSettings):
    """Each ranking scored alone equals it scored in batches of every size, at every place."""
    sets = [choices_for(context, CANDIDATES) for context in CONTEXTS]
    alone = [score_choices(lm, [choices], settings)[0] for choices in sets]
    for batch in (sets, sets[:0:-1], [sets[3], sets[0]]):
        for choices, scores in zip(batch, score_choices(lm, batch, settings)):
            reference = alone[sets.index(choices)]
            assert [s.score for s in scores] == [s.score for s in reference]
            assert [[t.logprob for t in s.tokens] for s in scores] == [[t.logprob for t in s.tokens] for s in reference]


@pytest.mark.parametrize("method", ["right_masks", "decoder"])
def test_a_masked_ranking_is_the_same_bits_in_any_batch(standin16, method):
    _rankings_alike(standin16, ScoringSettings(method=method))


def test_a_modernbert_ranking_is_the_same_bits_in_any_batch(modernbert16):
    _rankings_alike(modernbert16, ScoringSettings(method="right_masks"))


@pytest.mark.parametrize("family", ["roberta", "albert", "deberta-v2"])
def test_the_other_families_rankings_are_the_same_bits_in_any_batch(tiny_model, family):
    _rankings_alike(_in_bfloat16(tiny_model(family)), ScoringSettings(method="right_masks"))


def test_a_causal_ranking_is_the_same_bits_in_any_batch(smollm16):
    _rankings_alike(smollm16, ScoringSettings())


def _generations_alike(lm, settings: GenerationSettings, prompts=PROMPTS):
    alone = {prompt: generate(lm, prompt, settings) for prompt in prompts}
    for batch in (prompts, [prompts[4], prompts[1]]):
        for prompt, result in zip(batch, generate_together(lm, batch, settings)):
            assert (result.token_ids, result.text, result.log_likelihood) == \
                   (alone[prompt].token_ids, alone[prompt].text, alone[prompt].log_likelihood), prompt


@pytest.mark.parametrize("extra", [dict(), dict(strategy="sample", seed=3, top_k=20)], ids=["greedy", "sampled"])
def test_the_papers_decoder_writes_the_same_bits_in_any_batch(standin16, extra):
    _generations_alike(standin16, GenerationSettings(max_new_tokens=6, **extra))


@pytest.mark.parametrize("extra", [dict(window="block", order="confidence", block_length=4),
                                   dict(window="block", order="random", block_length=4, seed=1)],
                         ids=["confidence", "random"])
def test_any_order_writing_is_the_same_bits_in_any_batch(standin16, extra):
    _generations_alike(standin16, GenerationSettings(max_new_tokens=4, **extra))


def test_causal_generation_is_the_same_bits_in_any_batch(smollm16):
    """Left-padded rows with the cache: each row's attention reads its own tokens only."""
    _generations_alike(smollm16, GenerationSettings(max_new_tokens=4, strategy="sample", seed=3, top_k=20))


def test_infilling_is_the_same_bits_in_any_batch(standin16):
    texts = ["The [blank] was rising over the hills.", "She drank a cup of [blank] and left.", "[blank] is the capital of France."]
    settings = InfillSettings(max_blank_tokens=2)
    alone = {text: infill(standin16, text, settings) for text in texts}
    for batch in (texts, texts[::-1]):
        for text, result in zip(batch, infill_together(standin16, batch, settings)):
            assert (result.fills, result.token_ids, result.order) == (alone[text].fills, alone[text].token_ids, alone[text].order)


def test_a_fresh_process_gives_the_same_bits(standin16):
    """The kernels are chosen by shape and thread count alone: a new process, same answer."""
    code = ("from demo.engine.models import load_model; from demo.engine.pll import choices_for, score_choices;"
            "import torch; torch.set_num_threads(%d);"
            "lm = load_model(%r, device='cpu', dtype='bfloat16');"
            "print([s.score for s in score_choices(lm, [choices_for(%r, %r)])[0]])"
            % (torch.get_num_threads(), str(STANDIN_MLM), CONTEXTS[0], CANDIDATES))
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    here = [s.score for s in score_choices(standin16, [choices_for(CONTEXTS[0], CANDIDATES)])[0]]
    assert printed.strip().splitlines()[-1] == repr(here)


def test_float32_models_are_left_as_they_are(standin_mlm):
    """float32's kernels are left alone (they cost nothing extra), half precision gets the tiles."""
    assert standin_mlm.model.config._attn_implementation != "sdpa_per_row"
