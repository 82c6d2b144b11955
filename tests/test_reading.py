"""What the head reads (demo.engine.reading.hidden_at) against the model's own forward pass: the
last layer computed at the rows read only gives the full pass's last hidden states there, in
padded batches with several rows read per sequence, for every family that PLL and exact
generation run (those whose last layer is written out, and those that keep the full pass)."""

import pytest
import torch
import transformers

import tests.floats as floats
from demo.engine.families import bert, family_of
from demo.engine.families.queries import query_positions, rows_at
from demo.engine.generation import generate
from demo.engine.pll import score_batch
from demo.engine.reading import hidden_at
from demo.settings import ScoringSettings
from tests.conftest import FAMILY_VARIANTS, padded_batch

# The families' variants (FAMILY_VARIANTS), and ModernBERT whose last layer is a local one (its first
# a global one), with a window shorter than the batch (a global last layer: below)
TINY = {**FAMILY_VARIANTS, "modernbert-local-last": ("modernbert", {"local_attention": 8})}
SMALL = dict(vocab_size=300, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=128)
# Families of the table without a tiny_model folder: random weights from a config alone
CONFIGS = {
    "xlm-roberta": transformers.XLMRobertaConfig(**SMALL),
    "camembert": transformers.CamembertConfig(**SMALL),
    "electra-narrow-embeddings": transformers.ElectraConfig(**SMALL, embedding_size=32),
    "modernbert-global-last": transformers.ModernBertConfig(**SMALL, global_attn_every_n_layers=2, local_attention=8,
                                               pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                               cls_token_id=1, sep_token_id=2),
    "deberta-v1": transformers.DebertaConfig(**SMALL, relative_attention=True, pos_att_type=["c2p", "p2c"],
                                position_biased_input=False),
}
LENGTHS = [24, 17, 9]  # right-padded to the longest
# (row, column) pairs read: several per sequence, out of order, first and last positions
READS = [(0, 3), (0, 23), (1, 12), (2, 0), (1, 5), (0, 10), (2, 8), (1, 16)]


def assert_reads_the_full_pass(model):
    ids, mask = padded_batch(min(model.config.vocab_size, 300), LENGTHS)
    rows, cols = zip(*READS)
    with torch.no_grad():
        full = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
        ours = hidden_at(model, ids, mask, list(rows), list(cols))
        alone = hidden_at(model, ids[:1], None, [0, 0], [23, 3])  # no padding, no mask given
    torch.testing.assert_close(ours, full[rows, cols], **floats.states(model, full))
    torch.testing.assert_close(alone, full[0, [23, 3]], **floats.states(model, full))


@pytest.mark.floats
@pytest.mark.parametrize("variant", list(TINY))
def test_rows_read_equal_the_full_forward_pass(tiny_model, variant):
    family, overrides = TINY[variant]
    assert_reads_the_full_pass(tiny_model(family, **overrides).model)


@pytest.mark.floats
@pytest.mark.parametrize("variant", list(CONFIGS))
def test_rows_read_equal_the_full_forward_pass_of_other_families(variant):
    torch.manual_seed(0)
    model = transformers.AutoModelForMaskedLM.from_config(CONFIGS[variant]).eval()
    assert family_of(model.config).last_layer is not None  # (the written-out path is what is tested)
    if variant == "modernbert-global-last":
        assert model.config.layer_types == ["full_attention", "sliding_attention", "full_attention"]
    assert_reads_the_full_pass(model)


@pytest.mark.floats
def test_rows_read_equal_the_full_forward_pass_standin(standin_mlm):
    assert_reads_the_full_pass(standin_mlm.model)


@pytest.mark.floats
def test_the_bound_tells_a_skipped_or_blind_last_layer_apart(standin_mlm):
    """Two wrong last layers lie far outside the bound the tests above hold: none at all (the
    layer before's output), and one whose rows read attend only to each other (the other
    positions' keys and values left out)."""
    model = standin_mlm.model
    ids, mask = padded_batch(model.config.vocab_size, LENGTHS)
    rows, cols = zip(*READS)
    with torch.no_grad():
        states = model.base_model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        query_at, reads = query_positions(rows, cols, ids.shape[0], ids.device)
        read = rows_at(states[-2], query_at)
        blind = bert.layer_at(model.base_model.encoder.layer[-1], read,
                              *bert.keys_values(model.base_model.encoder.layer[-1], read))[reads]
    close = floats.states(model, states[-1])
    for wrong in (states[-2][rows, cols], blind):
        with pytest.raises(AssertionError):
            torch.testing.assert_close(wrong, states[-1][rows, cols], **close)


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert", "deberta-v2"])
def test_the_last_feed_forward_runs_at_the_rows_read_only(tiny_model, family):
    """One row per scored token (PLL: one per masked copy) and one per step (generation) reach
    the last layer's feed-forward block; every position reaches the layers before it."""
    lm = tiny_model(family)
    layers = lm.model.base_model.layers if family == "modernbert" else lm.model.base_model.encoder.layer
    feed_forward = (lambda layer: layer.mlp) if family == "modernbert" else (lambda layer: layer.intermediate)
    seen = {"first": [], "last": []}
    hooks = [feed_forward(layer).register_forward_hook(
        lambda module, args, output, key=key: seen[key].append(args[0].numel() // args[0].shape[-1]))
        for key, layer in (("first", layers[0]), ("last", layers[-1]))]
    try:
        text = "The cat sat on the mat."
        scored = score_batch(lm, [("", text)], ScoringSettings(method="salazar"))[0]
        length = len(lm.tokenizer(text)["input_ids"])
        assert seen == {"first": [len(scored.tokens) * length], "last": [len(scored.tokens)]}
        seen["first"].clear()
        seen["last"].clear()
        generate(lm, "Hello world, this is a test", max_new_tokens=2)
        assert seen["last"] == [1, 1] and min(seen["first"]) > 1
    finally:
        for hook in hooks:
            hook.remove()
