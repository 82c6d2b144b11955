"""DeBERTa's enhanced mask decoder (demo.engine.families.deberta) against the original algorithm.

The reference is Microsoft's ``EnhancedMaskDecoder.emd_context_layer`` (microsoft/DeBERTa,
``DeBERTa/apps/models/masked_language_model.py``) with its ``DisentangledSelfAttention`` and
``BertLMPredictionHead``, written out below as plain tensor code from the model's weights: the
whole sequence as queries, Microsoft's relative positions (v2's log buckets; v1's span of
min(length, max_relative_positions) rows around the table's middle), the mask m_i * m_j, the
softmax that zeroes masked rows, gathers then transposes as Microsoft's code does. Only H, the
second-to-last layer's output, comes from transformers' encoder (not what is tested here).

Models: Microsoft's configs (microsoft/deberta-base for v1, microsoft/deberta-v2-xlarge for v2),
shrunk in size only, with random weights, saved as Microsoft's checkpoints are: transformers'
layout plus the position table as one more tensor, deberta.embeddings.position_embeddings.weight.
"""

import copy
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, DebertaConfig, DebertaForMaskedLM, DebertaV2Config, DebertaV2ForMaskedLM

import tests.floats as floats
from demo.engine.families import deberta
from demo.engine.generation import generate
from demo.engine.heads import mlm_head
from demo.engine.models import load_model, random_model
from demo.engine.pll import score_batch
from demo.engine.prefix_cache import Prefix, encoder_of
from demo.engine.reading import hidden_at
from demo.evaluation_settings import GridSettings
from demo.settings import ScoringSettings
from tests.conftest import TOKENIZERS, needs_shared, padded_batch
from tests.test_generation import PROMPT, naive_greedy
from tests.test_pll import ITEMS, METHODS, assert_matches_naive
from tests.test_pll_decoder import assert_matches_naive as assert_decoder_matches_naive

pytestmark = needs_shared

TABLE_KEY = "deberta.embeddings.position_embeddings.weight"  # Microsoft's name for it

# The architecture keys of Microsoft's config.json files (microsoft/deberta-base and
# microsoft/deberta-v2-xlarge); sizes are shrunk below, nothing else.
V1 = dict(hidden_act="gelu", layer_norm_eps=1e-7, max_position_embeddings=512, relative_attention=True,
          pos_att_type="c2p|p2c", max_relative_positions=-1, position_biased_input=False, type_vocab_size=0)
V2 = dict(hidden_act="gelu", layer_norm_eps=1e-7, max_position_embeddings=512, relative_attention=True,
          position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type="p2c|c2p",
          conv_kernel_size=3, conv_act="gelu", max_relative_positions=-1, position_biased_input=False,
          type_vocab_size=0)
SHRUNK = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=128,
              initializer_range=0.2)  # (larger than 0.02: attention far from uniform, every term counts)
VERSIONS = {"v1": (DebertaConfig, DebertaForMaskedLM, V1), "v2": (DebertaV2Config, DebertaV2ForMaskedLM, V2)}


@pytest.fixture(autouse=True, scope="module")
def the_shared_models_stay_cached():
    """The throwaway checkpoints loaded here must not push the session's shared models out of
    load_model's cache: other tests check that they get the very same object back."""
    from demo.engine import models
    kept = list(models.CACHE._models.items())
    yield
    models.CACHE.clear()
    models.CACHE._models.update(kept)


# ---------------------------------------------------------------- checkpoints as Microsoft's


@pytest.fixture(scope="session")
def tokenizer_folder(family_folder):
    """version -> a tokenizer folder: v2 SentencePiece (conftest), v1 GPT-2's byte-level BPE (as
    DeBERTa v1's own vocabulary is), here RoBERTa's files."""
    return {"v1": TOKENIZERS / "roberta-base", "v2": family_folder("deberta-v2")}


def perturb(model, seed: int = 1) -> None:
    """Noise on every weight: biases, layer norms, v1's q_bias and v_bias all non-trivial."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator, dtype=p.dtype))


# Microsoft's head weights (legacy=False) -> the same weights under transformers' default names
# (legacy=True): LegacyDebertaOnlyMLMHead's transform is the head's dense and layer norm, its bias
# the head's bias; its decoder is tied to the word embeddings, as Microsoft's head multiplies by them.
LEGACY_NAMES = {"lm_predictions.lm_head.dense.": "cls.predictions.transform.dense.",
                "lm_predictions.lm_head.LayerNorm.": "cls.predictions.transform.LayerNorm.",
                "lm_predictions.lm_head.bias": "cls.predictions.bias"}


def legacy_name(key: str) -> str:
    for old, new in LEGACY_NAMES.items():
        if key.startswith(old):
            return new + key[len(old):]
    return key


def to_legacy_layout(folder: Path) -> None:
    """Rename a saved checkpoint's head weights (every safetensors file, the index) to the legacy
    layout, and say legacy=True in its config, as transformers saves such a model."""
    for path in folder.glob("*.safetensors"):
        save_file({legacy_name(k): v for k, v in load_file(path).items()}, path, metadata={"format": "pt"})
    index_path = folder / "model.safetensors.index.json"
    if index_path.exists():
        index = json.loads(index_path.read_text())
        index["weight_map"] = {legacy_name(k): v for k, v in index["weight_map"].items()}
        index_path.write_text(json.dumps(index))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "legacy": True}))


def microsoft_checkpoint(folder: Path, tokenizer_folder: Path, version: str, layout: str = "safetensors",
                         table: bool = True, legacy: bool = False, **overrides) -> Path:
    """A random-weight DeBERTa saved as Microsoft's checkpoints are (legacy=False head names and
    the position table as an extra tensor), in ``layout``: safetensors, bin (PyTorch's zip format),
    legacy-bin (its older format, which cannot be memory-mapped), or sharded safetensors (an
    index and several files). ``legacy``: the same weights under transformers' default head names."""
    config_class, model_class, architecture = VERSIONS[version]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    config = config_class(**{**architecture, **SHRUNK, **overrides}, vocab_size=len(tokenizer),
                          pad_token_id=tokenizer.pad_token_id, legacy=False)
    torch.manual_seed(0)
    model = model_class(config)
    perturb(model)
    model.save_pretrained(folder, **({"max_shard_size": "100KB"} if layout == "sharded" else {}))
    tokenizer.save_pretrained(folder)
    if legacy:
        to_legacy_layout(folder)
    if not table:
        return folder
    width = getattr(config, "embedding_size", config.hidden_size)
    positions = torch.randn(config.max_position_embeddings, width, generator=torch.Generator().manual_seed(2))
    if layout == "sharded":
        index_path = folder / "model.safetensors.index.json"
        index = json.loads(index_path.read_text())
        shard = sorted(set(index["weight_map"].values()))[-1]
        state = load_file(folder / shard)
        state[TABLE_KEY] = positions
        save_file(state, folder / shard, metadata={"format": "pt"})
        index["weight_map"][TABLE_KEY] = shard
        index_path.write_text(json.dumps(index))
    else:
        state = load_file(folder / "model.safetensors")
        state[TABLE_KEY] = positions
        if layout in ("bin", "legacy-bin"):
            (folder / "model.safetensors").unlink()
            torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=layout == "bin")
        else:
            save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tokenizer_folder):
    """(version, layout, legacy) -> the folder of a Microsoft-style checkpoint (built once)."""
    cache = {}

    def get(version: str, layout: str = "safetensors", legacy: bool = False) -> Path:
        if (version, layout, legacy) not in cache:
            folder = tmp_path_factory.mktemp(f"{version}_{layout}{'_legacy' * legacy}")
            cache[version, layout, legacy] = microsoft_checkpoint(folder, tokenizer_folder[version], version,
                                                                  layout, legacy=legacy)
        return cache[version, layout, legacy]

    return get


def saved_table(folder: Path) -> torch.Tensor:
    """The table as written into the checkpoint (read back by hand, not by the engine)."""
    for path in sorted(folder.glob("*.safetensors")):
        state = load_file(path)
        if TABLE_KEY in state:
            return state[TABLE_KEY]
    return torch.load(folder / "pytorch_model.bin", weights_only=True)[TABLE_KEY]


# ---------------------------------------------------------------- the reference


def layer_norm(x, w, name, eps):
    return F.layer_norm(x, x.shape[-1:], w[name + ".weight"], w[name + ".bias"], eps)


def linear(x, w, name):
    bias = w.get(name + ".bias")
    return x @ w[name + ".weight"].T + (bias if bias is not None else 0)


def microsoft_relative_positions(length: int, buckets: int, max_position: int) -> torch.Tensor:
    """``build_relative_position`` of Microsoft's ``da_utils``: q - k, log-bucketed (v2) as
    ``make_log_bucket_position`` does in numpy."""
    ids = torch.arange(length, dtype=torch.float64)
    relative = ids[:, None] - ids[None, :]
    if buckets > 0 and max_position > 0:
        sign, mid = torch.sign(relative), buckets // 2
        absolute = torch.where((relative < mid) & (relative > -mid), torch.tensor(mid - 1.0), relative.abs())
        log_pos = torch.ceil(torch.log(absolute / mid) / math.log((max_position - 1) / mid) * (mid - 1)) + mid
        relative = torch.where(absolute <= mid, relative, log_pos * sign)
    return relative.long()


def microsoft_attention(w, prefix, config, hidden, query, mask):
    """Microsoft's ``DisentangledSelfAttention`` with ``query_states``: queries from ``query``, keys
    and values from ``hidden`` [B, L, hidden], c2p and p2c relative terms, XSoftmax."""
    rows, length = hidden.shape[:2]
    heads = config.num_attention_heads
    v1 = config.model_type == "deberta"
    types = config.pos_att_type
    base = "deberta."

    def split(x):
        return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)

    att = prefix + "attention.self."
    if v1:  # in_proj: per head [q; k; v] rows (Microsoft's v1 layout, as transformers keeps it)
        chunks = w[att + "in_proj.weight"].chunk(heads * 3, dim=0)
        wq, wk, wv = (torch.cat([chunks[i * 3 + k] for i in range(heads)]) for k in range(3))
        q = split(query @ wq.T) + split(w[att + "q_bias"][None, None])
        k = split(hidden @ wk.T)
        v = split(hidden @ wv.T) + split(w[att + "v_bias"][None, None])
    else:
        q, k, v = (split(linear(x, w, att + name)) for x, name in
                   ((query, "query_proj"), (hidden, "key_proj"), (hidden, "value_proj")))
    scale = math.sqrt(q.shape[-1] * (1 + len(types)))
    max_relative = config.max_position_embeddings if config.max_relative_positions < 1 else config.max_relative_positions
    table = w[base + "encoder.rel_embeddings.weight"]
    if v1:
        # v1: the query scaled first; a span of min(length, max_relative) rows around the middle
        q = q / scale
        scores = q @ k.transpose(-1, -2)
        relative = microsoft_relative_positions(length, -1, -1)
        span = min(length, max_relative)
        table = table[max_relative - span:max_relative + span]
        pos_key = split(table[None] @ w[att + "pos_proj.weight"].T)
        pos_query = split(linear(table[None], w, att + "pos_q_proj")) / scale
        c2p_scale = p2c_scale = 1.0
    else:
        # v2: layer-normed table, its first 2 x span rows, the content projections (shared keys)
        if "layer_norm" in config.norm_rel_ebd:
            table = layer_norm(table, w, base + "encoder.LayerNorm", config.layer_norm_eps)
        span = config.position_buckets if config.position_buckets > 0 else max_relative
        table = table[:2 * span]
        relative = microsoft_relative_positions(length, config.position_buckets, max_relative)
        pos_key = split(linear(table[None], w, att + "key_proj"))
        pos_query = split(linear(table[None], w, att + "query_proj"))
        scores = q @ k.transpose(-1, -2) / scale
        c2p_scale = p2c_scale = scale
    if "c2p" in types:
        c2p = q @ pos_key.transpose(-1, -2)
        index = torch.clamp(relative + span, 0, 2 * span - 1)
        scores = scores + torch.gather(c2p, -1, index.expand(rows, heads, length, length)) / c2p_scale
    if "p2c" in types:
        p2c = k @ pos_query.transpose(-1, -2)
        index = torch.clamp(-relative + span, 0, 2 * span - 1)
        scores = scores + torch.gather(p2c, -1, index.expand(rows, heads, length, length)).transpose(-1, -2) / p2c_scale
    pair = (mask[:, None, :, None] * mask[:, None, None, :]).bool()  # m_i * m_j
    probs = scores.masked_fill(~pair, torch.finfo(scores.dtype).min).softmax(-1).masked_fill(~pair, 0)
    return (probs @ v).transpose(1, 2).reshape(rows, length, -1)


def microsoft_layer(w, prefix, config, hidden, query, mask):
    """One pass of the last layer: the attention's output with the *query* as residual, then the
    feed-forward block."""
    eps = config.layer_norm_eps
    context = microsoft_attention(w, prefix, config, hidden, query, mask)
    attended = layer_norm(linear(context, w, prefix + "attention.output.dense") + query, w,
                          prefix + "attention.output.LayerNorm", eps)
    inner = F.gelu(linear(attended, w, prefix + "intermediate.dense"))
    return layer_norm(linear(inner, w, prefix + "output.dense") + attended, w, prefix + "output.LayerNorm", eps)


def microsoft_head(w, config, states):
    """``BertLMPredictionHead``: dense, activation, layer norm, tied word embeddings + bias; stored
    as lm_predictions.lm_head.* (legacy=False) or cls.predictions.* (legacy=True)."""
    if "lm_predictions.lm_head.dense.weight" in w:
        dense, norm, bias = "lm_predictions.lm_head.dense", "lm_predictions.lm_head.LayerNorm", "lm_predictions.lm_head.bias"
    else:
        dense, norm, bias = ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                             "cls.predictions.bias")
    x = layer_norm(F.gelu(linear(states, w, dense)), w, norm, config.layer_norm_eps)
    return x @ w["deberta.embeddings.word_embeddings.weight"].T + w[bias]


@torch.no_grad()
def reference_logits(model, table, input_ids, mask=None, *, positions=True, passes=2, keys_from=-2):
    """Microsoft's EMD logits [B, L, vocab] from the model's weights; the keyword arguments drop
    one ingredient each (no positions, one pass, keys and values from the last layer)."""
    mask = torch.ones_like(input_ids) if mask is None else mask
    config, w = model.config, model.state_dict()
    states = model.deberta(input_ids, attention_mask=mask, output_hidden_states=True).hidden_states
    hidden = states[keys_from]
    length = input_ids.shape[1]
    z = table[torch.arange(length).clamp(max=table.shape[0] - 1)].to(hidden.dtype)  # past the table: its last row
    query = hidden + (z[None] if positions else 0)
    prefix = f"deberta.encoder.layer.{config.num_hidden_layers - 1}."
    for _ in range(passes):
        query = microsoft_layer(w, prefix, config, hidden, query, mask)
    return microsoft_head(w, config, query)


@torch.no_grad()
def engine_logits(model, input_ids, mask=None):
    """The engine's logits at every non-padding position (rows, cols) of the batch."""
    mask = torch.ones_like(input_ids) if mask is None else mask
    rows, cols = mask.nonzero(as_tuple=True)
    return mlm_head(model)(hidden_at(model, input_ids, mask, rows, cols)), (rows, cols)


def float64(lm):
    """A float64 copy of a loaded model (the table, a buffer, comes along): the reference and the
    engine then agree far below 1e-5, on any CPU and thread count. (v2 to ~1e-14; v1 to ~1e-6,
    since transformers' v1 layer norm, ``DebertaLayerNorm``, normalises in float32 whatever the
    model's dtype, as Microsoft's v1-era ``BertLayerNorm`` did; the reference uses float64's.)"""
    return copy.deepcopy(lm.model).double()


def assert_matches_reference(model, table, lengths):
    ids, mask = padded_batch(model.config.vocab_size, lengths)
    expected = reference_logits(model, table.double(), ids, mask)
    got, (rows, cols) = engine_logits(model, ids, mask)
    torch.testing.assert_close(got, expected[rows, cols], rtol=0, atol=1e-5)
    for r, n in enumerate(lengths):  # each text alone, no padding
        alone, _ = engine_logits(model, ids[r:r + 1, :n])
        torch.testing.assert_close(alone, reference_logits(model, table.double(), ids[r:r + 1, :n])[0], rtol=0, atol=1e-5)
    return ids, mask, got, (rows, cols)


# ---------------------------------------------------------------- (a) the logits, against Microsoft's algorithm


@pytest.mark.parametrize("layout", ["safetensors", "bin", "legacy-bin", "sharded"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_microsoft_checkpoint_loads_with_its_table(checkpoint, version, layout):
    folder = checkpoint(version, layout)
    lm = load_model(str(folder), device="cpu")
    assert lm.emd and lm.emd_note is None
    table = deberta.table_of(lm.model)
    assert table.device == lm.device and table.dtype == lm.dtype
    torch.testing.assert_close(table, saved_table(folder), rtol=0, atol=0)
    assert "position_embeddings" not in str(list(lm.model.state_dict()))  # not a weight: save_pretrained leaves it out


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_emd_logits_equal_microsofts_algorithm_legacy_false(checkpoint, version):
    """lm_predictions.* head (what the checkpoints hold), alone and in a padded batch."""
    folder = checkpoint(version)
    model = float64(load_model(str(folder), device="cpu"))
    ids, mask, got, (rows, cols) = assert_matches_reference(model, saved_table(folder), [23, 9, 17, 1])
    # and it is not what transformers' head reads
    with torch.no_grad():
        plain = model(input_ids=ids, attention_mask=mask).logits[rows, cols]
    assert (plain - got).abs().max() > 1e-2


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_emd_logits_equal_microsofts_algorithm_legacy_true(checkpoint, version):
    """cls.predictions.* head (transformers' default layout)."""
    lm = random_model(checkpoint(version), shrink=False, legacy=True, emd=True)
    model = float64(lm)
    perturb(model)
    assert hasattr(model, "cls") and not hasattr(model, "lm_predictions")
    assert_matches_reference(model, deberta.table_of(model), [15, 6, 11])


@pytest.mark.floats
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_either_head_layout_runs_the_emd_alike(checkpoint, version):
    """The same weights and table saved under Microsoft's head names and under transformers'
    default ones load each with its trained head and the decoder on, and give the same logits."""
    model_class = VERSIONS[version][1]
    microsoft, legacy = checkpoint(version), checkpoint(version, legacy=True)
    reference = model_class.from_pretrained(microsoft)
    ids, mask = padded_batch(reference.config.vocab_size, [21, 8])
    with torch.no_grad():  # the renaming keeps the head, as transformers itself reads the two
        plain = reference(input_ids=ids, attention_mask=mask).logits
        plain_legacy = model_class.from_pretrained(legacy)(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(plain_legacy, plain, **floats.states(reference, plain))
    ours, theirs = (load_model(str(folder), device="cpu", emd="on") for folder in (microsoft, legacy))
    assert hasattr(ours.model, "lm_predictions") and hasattr(theirs.model, "cls")
    torch.testing.assert_close(deberta.table_of(theirs.model), deberta.table_of(ours.model), rtol=0, atol=0)
    expected, _ = engine_logits(ours.model, ids, mask)
    got, _ = engine_logits(theirs.model, ids, mask)
    # (layers counted with the decoder's second pass)
    torch.testing.assert_close(got, expected, **floats.states(Reference(ours.model), expected))
    assert (got - plain[mask.bool()]).abs().max() > 1e-2  # the decoder's logits, not the last layer's


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_positions_past_the_table_read_its_last_row(checkpoint, version):
    """520 tokens, a table of 512: v2's log buckets and v1's clamped span are both reached."""
    folder = checkpoint(version)
    model = float64(load_model(str(folder), device="cpu"))
    assert_matches_reference(model, saved_table(folder), [520])


# ---------------------------------------------------------------- (b) each ingredient matters


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("ablation", [dict(positions=False), dict(passes=1), dict(keys_from=-1)],
                         ids=["no positions", "one pass", "keys from the last layer"])
def test_a_reference_without_one_ingredient_fails(checkpoint, version, ablation):
    folder = checkpoint(version)
    model = float64(load_model(str(folder), device="cpu"))
    ids, mask = padded_batch(model.config.vocab_size, [19, 8])
    got, (rows, cols) = engine_logits(model, ids, mask)
    table = saved_table(folder).double()
    assert (got - reference_logits(model, table, ids, mask)[rows, cols]).abs().max() < 1e-5
    assert (got - reference_logits(model, table, ids, mask, **ablation)[rows, cols]).abs().max() > 1e-3


# ---------------------------------------------------------------- (c) every reader, with the EMD on


@pytest.fixture(scope="session")
def v1_folder(tmp_path_factory):
    """DeBERTa v1's config (microsoft/deberta-base's architecture) beside a GPT-2 BPE tokenizer."""
    folder = tmp_path_factory.mktemp("deberta_v1")
    AutoTokenizer.from_pretrained(TOKENIZERS / "roberta-base").save_pretrained(folder)
    DebertaConfig(**V1, legacy=False).save_pretrained(folder)
    return folder


class Reference:
    """Stands in for a model in the tests' naive loops: its logits are the reference's, one
    forward pass per call. Its layer count, for the float bounds, counts the decoder's second
    pass of the last layer (N - 1 layers, two passes, the head)."""

    def __init__(self, model):
        self.model, self.table = model, deberta.table_of(model)
        self.config = SimpleNamespace(num_hidden_layers=model.config.num_hidden_layers + 1)

    def __call__(self, input_ids):
        return SimpleNamespace(logits=reference_logits(self.model, self.table, input_ids))


def naive(lm):
    return SimpleNamespace(model=Reference(lm.model), tokenizer=lm.tokenizer, newline_survives=lm.newline_survives)


@pytest.fixture(scope="module")
def v1_model(v1_folder):
    return random_model(v1_folder, emd=True)


@pytest.fixture(params=["v1", "v2"])
def small_emd(request, v1_model, tiny_model):
    return v1_model if request.param == "v1" else tiny_model("deberta-v2", emd=True)


@pytest.mark.floats
@pytest.mark.parametrize("method", METHODS)
def test_pll_equals_a_naive_loop_with_the_emd(small_emd, method):
    assert small_emd.emd
    assert_matches_naive(small_emd, method, ITEMS, reference=naive(small_emd))


@pytest.mark.floats
def test_decoder_likelihood_equals_a_naive_loop_with_the_emd(small_emd):
    """The decoder's likelihood reads each window through the EMD, as generation does."""
    lm = small_emd
    assert lm.emd
    assert_decoder_matches_naive(lm, ITEMS, lm.padding_masks, reference=naive(lm))


def test_greedy_equals_a_naive_loop_with_the_emd(small_emd):
    lm = small_emd
    result = generate(lm, PROMPT, max_new_tokens=8)
    assert result.token_ids == naive_greedy(naive(lm), PROMPT, 8, lm.padding_masks)


@pytest.mark.floats
def test_beam_scores_are_the_emds_log_probs(small_emd):
    """Beam search's scores of its hypotheses equal the naive sums of the reference's log-probs."""
    lm, reference = small_emd, naive(small_emd)
    result = generate(lm, PROMPT, max_new_tokens=4, strategy="beam", num_beams=3, trace=True)
    tok = lm.tokenizer
    ids = tok(PROMPT, add_special_tokens=False)["input_ids"]
    banned = [i for i in tok.all_special_ids if i != tok.sep_token_id]
    prefix = result.token_ids[:-1]
    score = dict(result.steps[-1].beams)["".join(result.tokens[:-1])]
    total = 0.0
    for i, t in enumerate(prefix):
        window = [tok.cls_token_id] + ids + prefix[:i] + [tok.mask_token_id] * (1 + lm.padding_masks) + [tok.sep_token_id]
        logprobs = reference.model(torch.tensor([window])).logits[0, len(ids) + i + 1].log_softmax(-1)
        logprobs[banned] = float("-inf")
        total += float(logprobs[t])
    assert score == floats.total(total, len(prefix), reference)


LONG = ("Q: What is the capital of Italy?\nA: Rome.\n\nQ: What is the capital of Spain?\nA: Madrid."
        "\n\nQ: What is the capital of Japan?\nA: Tokyo.\n\nQ: What is the capital of Peru?\nA:")


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_prefix_cache_refreshing_every_token_equals_exact_with_the_emd(tiny_model, strategy):
    for lm in (tiny_model("deberta-v2", emd=True), tiny_model("deberta-v2", emd=True, conv_kernel_size=3, conv_act="gelu")):
        exact = generate(lm, LONG, max_new_tokens=8, strategy=strategy, num_beams=3)
        fast = generate(lm, LONG, max_new_tokens=8, strategy=strategy, num_beams=3, cache="prefix", cache_refresh=1)
        assert fast.token_ids == exact.token_ids and fast.text == exact.text


@pytest.mark.floats
def test_a_tail_on_its_own_refresh_reads_the_emd(tiny_model):
    """The prefix cache's block encoder returns the decoder's states: at every row of a refresh,
    of a tail against its own refresh, and at the one row a step reads."""
    lm = tiny_model("deberta-v2", emd=True)
    ids = torch.tensor([lm.tokenizer(LONG, add_special_tokens=False)["input_ids"]])
    windows = torch.cat([torch.tensor([[lm.tokenizer.cls_token_id]]), ids,
                         torch.tensor([[lm.tokenizer.mask_token_id] * 3 + [lm.tokenizer.sep_token_id]])], 1)
    length, start = windows.shape[1], ids.shape[1] - 10
    encode, room = encoder_of(lm.model), length - start
    with torch.no_grad():
        full = hidden_at(lm.model, windows, None, [0] * length, list(range(length)))
        refreshed, layers, shared = encode(lm.model, windows, 0, None, start, room)
        cached = Prefix(windows[:, 1:start], start, layers, shared, query_base=start)
        tail, _, _ = encode(lm.model, windows, start, cached, start + 1, room)
        at = length - 4
        read, _, _ = encode(lm.model, windows, start, cached, start + 1, room, at)
    close = floats.states(lm, full)
    torch.testing.assert_close(refreshed[0], full, **close)
    torch.testing.assert_close(tail[0], full[start:], **close)
    torch.testing.assert_close(read[0, 0], full[at], **close)


def test_the_decoder_queries_only_the_rows_read(tiny_model):
    """The last layer's query projection sees one row per scored token (PLL) and one per step
    (generation), in each of the two passes; its ordinary full-length pass is skipped."""
    lm = tiny_model("deberta-v2", emd=True)
    seen = []

    def record(module, args, output):
        if args[0].dim() == 3:  # (not the relative-position table, projected once per call)
            seen.append(tuple(args[0].shape[:2]))

    handle = lm.model.deberta.encoder.layer[-1].attention.self.query_proj.register_forward_hook(record)
    try:
        scored = score_batch(lm, [("", "The cat sat on the mat.")], ScoringSettings(method="salazar"))[0]
        assert seen == [(len(scored.tokens), 1)] * 2  # one sub-batch: every copy, one row each
        seen.clear()
        generate(lm, PROMPT, max_new_tokens=2)
        assert set(seen) == {(1, 1)} and len(seen) in (2, 4)  # two passes per step
    finally:
        handle.remove()


def test_the_needle_probe_runs_past_the_table_with_the_emd(family_folder):
    from demo.evaluation.haystack import run_grid

    tokenizer = AutoTokenizer.from_pretrained(family_folder("deberta-v2"))
    tokenizer.add_tokens(list("0123456789\\"))  # the test vocabulary's books have no digits
    lm = random_model(family_folder("deberta-v2"), tokenizer=tokenizer, emd=True)
    table = run_grid(lm, GridSettings(lengths=[1024, 2048], depths=[0.5], repetitions=1))
    assert table["status"].tolist() == ["ok", "ok"]
    assert table["answer"].str.fullmatch(r"\d{6}").all()


# ---------------------------------------------------------------- (d) when it cannot be on


@pytest.mark.floats
@pytest.mark.parametrize("legacy", [False, True], ids=["lm_predictions", "cls.predictions"])
def test_a_checkpoint_without_the_table_runs_without_the_emd_and_says_so(tmp_path, tokenizer_folder, legacy):
    """Either head layout (a fine-tuned checkpoint saved by transformers has no table): its trained
    head reads the last layer, as transformers' own class reads it."""
    folder = microsoft_checkpoint(tmp_path / "no_table", tokenizer_folder["v2"], "v2", table=False, legacy=legacy)
    lm = load_model(str(folder), device="cpu")
    assert not lm.emd and deberta.table_of(lm.model) is None
    assert "no absolute position table" in lm.emd_note and "last layer" in lm.emd_note
    with pytest.raises(ValueError, match="cannot run DeBERTa's enhanced mask decoder: its checkpoint has no absolute position table"):
        load_model(str(folder), device="cpu", emd="on")
    off = load_model(str(folder), device="cpu", emd="off")
    assert not off.emd and off.emd_note is None
    ids, mask = padded_batch(lm.model.config.vocab_size, [12, 7])
    with torch.no_grad():
        expected = DebertaV2ForMaskedLM.from_pretrained(folder)(input_ids=ids, attention_mask=mask).logits[mask.bool()]
    for loaded in (lm, off):
        assert hasattr(loaded.model, "cls") == legacy
        got, _ = engine_logits(loaded.model, ids, mask)
        torch.testing.assert_close(got, expected, **floats.states(loaded, expected))


def test_embedding_size_unlike_hidden_size_is_refused(tmp_path, tokenizer_folder, family_folder):
    folder = microsoft_checkpoint(tmp_path / "narrow", tokenizer_folder["v2"], "v2", embedding_size=32)
    with pytest.raises(ValueError, match=r"embedding size \(32\) differs from its hidden size \(64\)"):
        load_model(str(folder), device="cpu", emd="on")
    lm = load_model(str(folder), device="cpu")
    assert not lm.emd and "embedding size (32)" in lm.emd_note
    with pytest.raises(ValueError, match="embedding size"):
        random_model(family_folder("deberta-v2"), emd=True, embedding_size=32)


def test_off_reads_the_last_layer_and_other_families_ignore_the_setting(checkpoint, tiny_model):
    lm = load_model(str(checkpoint("v2")), device="cpu", emd="off")
    assert not lm.emd and lm.emd_note is None and deberta.table_of(lm.model) is None
    ids, mask = padded_batch(lm.model.config.vocab_size, [12, 7])
    got, (rows, cols) = engine_logits(lm.model, ids, mask)
    with torch.no_grad():
        plain = lm.model(input_ids=ids, attention_mask=mask).logits[rows, cols]
    torch.testing.assert_close(got, plain, **floats.states(lm, plain))
    assert load_model(str(checkpoint("v2")), device="cpu", emd="on").emd
    with pytest.raises(ValueError, match="Unknown DeBERTa head .yes.; use one of auto, on, off"):
        load_model(str(checkpoint("v2")), device="cpu", emd="yes")
    bert = tiny_model("bert")
    assert not bert.emd and bert.emd_note is None


def test_the_table_is_found_in_the_hub_cache(tmp_path, checkpoint, monkeypatch):
    """A Hub model's files are read from the local Hugging Face cache (where from_pretrained puts
    them): a cache laid out as huggingface_hub lays it out."""
    import huggingface_hub.constants

    snapshot = tmp_path / "models--microsoft--deberta-test" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (tmp_path / "models--microsoft--deberta-test" / "refs").mkdir()
    (tmp_path / "models--microsoft--deberta-test" / "refs" / "main").write_text("0" * 40)
    for path in checkpoint("v2", "sharded").glob("model*"):
        (snapshot / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    files = deberta.weight_files("microsoft/deberta-test", local=False)
    assert len(files) == 1 and files[0].parent == snapshot  # the one shard that holds the table
    torch.testing.assert_close(deberta.read_table(files), saved_table(checkpoint("v2", "sharded")))


# ---------------------------------------------------------------- the setting, in the app and the command line


def test_the_app_and_the_command_line_switch_the_decoder(checkpoint, monkeypatch, tmp_path, capsys):
    """The Ranking tab's "DeBERTa head" radio and ``--emd`` reach the loaded model: the summary
    says which head read, the scores differ, and the Reproduce block carries the choice."""
    import html

    from demo.cli import main
    from demo.ui import common
    from demo.ui.ranking import rank_masked

    folder = checkpoint("v2")
    monkeypatch.setenv("DEMO_LOCAL_MODELS", str(folder))
    common.use(None)
    ranking = dict(context="the cat sat on the", candidates="mat\nmoon", model_name=folder.name,
                   method="salazar", right_masks=2, normalize=False, scope="completion", unconditional="")
    on, off = rank_masked(**ranking, emd="auto"), rank_masked(**ranking, emd="off")
    assert "head: enhanced mask decoder" in on.summary and "head: enhanced mask decoder" not in off.summary
    assert [s.score for s in on.scores] != [s.score for s in off.scores]
    assert "emd='off'" in off.python and "--emd off" in off.shell and "emd" not in on.python + on.shell
    refused = rank_masked(**ranking, emd="maybe")
    assert "Unknown DeBERTa head 'maybe'; use one of auto, off." in html.unescape(refused.summary)
    assert refused.scores is None

    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"context": "the cat sat on the", "candidates": ["mat", "moon"]}) + "\n")
    for emd in ("auto", "off"):
        assert main(["score", "--model", str(folder), "--emd", emd, "--input", str(items),
                     "--output", str(tmp_path / f"{emd}.json"), "--method", "salazar", "--no-progress"]) == 0
    scores = {emd: json.loads((tmp_path / f"{emd}.json").read_text())["results"] for emd in ("auto", "off")}
    assert scores["auto"] != scores["off"]
    with pytest.raises(SystemExit):  # argparse: a Literal field's choices
        main(["score", "--model", str(folder), "--emd", "sometimes", "--input", str(items)])
    assert "--emd: invalid choice" in capsys.readouterr().err
