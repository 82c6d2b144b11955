"""DeBERTa's enhanced mask decoder (EMD), for DeBERTa v1 (``deberta``) and v2 (``deberta-v2``).

Microsoft pretrained DeBERTa with a masked-LM head that does not read the last encoder layer's
output. Its ``EnhancedMaskDecoder`` (``DeBERTa/apps/models/masked_language_model.py`` in
microsoft/DeBERTa) reads this instead:

    H  = the second-to-last layer's output (the last layer's input)
    z  = the absolute position embeddings of the positions read (a raw table lookup: no layer
         norm, no mask, no projection)
    q0 = z + H
    q1 = last_layer(query = q0, keys and values from H)
    q2 = last_layer(query = q1, keys and values from H)      # the same layer, the same weights
    logits = head(q2)

Each pass is the last layer's own computation (disentangled attention with the usual relative
positions, then the self-output with the *query* as residual, then the feed-forward block), with
only the queries replaced. The keys, values and position-to-content scores are those the last
layer computes from H anyway, so the decoder needs queries only at the positions the head reads:
this module computes it there and nowhere else, and skips the last layer's ordinary pass (its
output is never read when the EMD is on).

transformers keeps none of this: ``DebertaForMaskedLM`` / ``DebertaV2ForMaskedLM`` apply the head
to the last layer, do not build the position table when ``position_biased_input`` is false
(``DebertaEmbeddings.position_embeddings = None``) and drop the checkpoint's table on load
(``_keys_to_ignore_on_load_unexpected = ["position_embeddings"]``). So the table is read here from
the checkpoint's own weight files and kept on the model (a buffer of its embeddings module, on its
device and dtype), and the attention is written out from the layer's weights (v1's
``DisentangledSelfAttention`` fails when given ``query_states``: it calls ``.t()`` on a 3-D
tensor).

Positions past the table (512 rows in Microsoft's checkpoints) read its last row: a choice
(Microsoft's code fails there; the BERTs paper's conversion clamps too), see docs/method.md.

The head comes in two layouts, and the checkpoint's weight names say which (``legacy_of``):
Microsoft's ``lm_predictions.lm_head.*`` (transformers' ``legacy=False``) and transformers' default
``cls.predictions.*`` (``legacy=True``, how fine-tuned checkpoints are saved). Both compute
dense, activation, layer norm, then the tied word embeddings plus a bias, so the decoder feeds
either.
"""

import json
import math
from pathlib import Path

import torch
from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

from . import FAMILIES
from .queries import device_of, query_positions, rows_at

PASSES = 2  # the last layer runs twice (Microsoft: ``layers = [encoder.layer[-1] for _ in range(2)]``)
# How Microsoft's checkpoints name the table: deberta.embeddings.position_embeddings.weight
TABLE_SUFFIX = "embeddings.position_embeddings.weight"
# Where the table is kept: a non-persistent buffer of the model's embeddings module, so that
# ``model.to(...)`` moves and casts it with the weights and ``save_pretrained`` leaves it out.
BUFFER = "emd_position_table"


# ---------------------------------------------------------------- which models, which table, which head


def refusal(config) -> str | None:
    """Why a model cannot run the EMD, in words; None when its architecture can."""
    family = FAMILIES.get(getattr(config, "model_type", ""))
    if family is None or not family.emd:
        return f"the enhanced mask decoder is DeBERTa's, and this is a {config.model_type} model"
    if getattr(config, "position_biased_input", True):
        return ("this DeBERTa adds absolute positions to its input (position_biased_input), and "
                "Microsoft's code runs the enhanced mask decoder only for models that do not: "
                "its head reads the last layer")
    hidden, embedding = config.hidden_size, getattr(config, "embedding_size", config.hidden_size)
    if embedding != hidden:
        return (f"its embedding size ({embedding}) differs from its hidden size ({hidden}); the "
                f"decoder adds the position embeddings to the hidden states, which needs them "
                f"equal (Microsoft's code fails there too)")
    return None


def table_refusal(config, table: torch.Tensor) -> str | None:
    """Why a table read from a checkpoint cannot serve this model; None when it can."""
    if table.dim() != 2 or table.shape[1] != config.hidden_size:
        return (f"its position table has shape {tuple(table.shape)}, not (positions, "
                f"{config.hidden_size}) as the hidden size needs")
    return None


# The checkpoint's weight files, in the order transformers prefers them (each may be sharded:
# then an index names the shards)
SINGLE_FILES = ("model.safetensors", "pytorch_model.bin")


def _finder(location: str, local: bool, revision: str | None):
    """``find(name)``: the path of one of the checkpoint's files if it is on disk, else None. A
    Hub model's files are looked up in the local Hugging Face cache (``from_pretrained`` puts
    them there)."""
    if local:
        def find(name: str) -> Path | None:
            path = Path(location) / name
            return path if path.is_file() else None
    else:
        from huggingface_hub import try_to_load_from_cache

        def find(name: str) -> Path | None:
            found = try_to_load_from_cache(location, name, revision=revision)
            return Path(found) if isinstance(found, str) else None
    return find


def weight_files(location: str, local: bool, revision: str | None = None) -> list[Path]:
    """The checkpoint's weight files that may hold the table, as far as they are on disk:
    safetensors first (what transformers loads), then PyTorch .bin; of sharded ones, through their
    index, only the shard that holds the table's key."""
    find = _finder(location, local, revision)
    files = []
    for single in SINGLE_FILES:
        index = find(single + ".index.json")
        if index is not None:
            weight_map = json.loads(index.read_text()).get("weight_map", {})
            shards = {shard for key, shard in weight_map.items() if key.endswith(TABLE_SUFFIX)}
            files += [path for path in map(find, sorted(shards)) if path is not None]
        path = find(single)
        if path is not None:
            files.append(path)
    return files


def _table_key(keys) -> str | None:
    """The table's key among a checkpoint's keys: Microsoft's name if present, else the shortest
    key ending like it."""
    matches = [k for k in keys if k.endswith(TABLE_SUFFIX)]
    return min(matches, key=lambda k: (k != "deberta." + TABLE_SUFFIX, len(k)), default=None)


def weight_names(location: str, local: bool, revision: str | None = None) -> list[str]:
    """The tensor names of the checkpoint's weights, as far as they are on disk: of the first
    format found (safetensors, then PyTorch .bin), its index's names when sharded (no shard is
    opened), else its single file's. Empty when none is on disk (a Hub model not downloaded yet)."""
    find = _finder(location, local, revision)
    for single in SINGLE_FILES:
        index = find(single + ".index.json")
        if index is not None:
            return list(json.loads(index.read_text()).get("weight_map", {}))
        path = find(single)
        if path is None:
            continue
        if path.name.endswith(".safetensors"):
            from safetensors import safe_open
            with safe_open(str(path), framework="pt") as f:
                return list(f.keys())
        return list(_load_bin(path))
    return []


# Each head layout's weight names, with the ``legacy`` flag that builds its head class
# (``DebertaForMaskedLM`` / ``DebertaV2ForMaskedLM``: ``self.cls`` or ``self.lm_predictions``)
HEAD_PREFIXES = {"lm_predictions.lm_head.": False, "cls.predictions.": True}


def legacy_of(names) -> bool | None:
    """transformers' ``legacy`` flag whose head fits these weight names; None when they hold
    neither layout's head, or both (the caller's default then decides)."""
    found = {legacy for name in names for prefix, legacy in HEAD_PREFIXES.items() if name.startswith(prefix)}
    return found.pop() if len(found) == 1 else None


def _load_bin(path: Path) -> dict:
    """A PyTorch .bin state dict, memory-mapped where the format allows (zip files): only the
    tensors used are then read from disk."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # the legacy (pre-zip) format cannot be mapped
        return torch.load(path, map_location="cpu", weights_only=True)


def read_table(files: list[Path]) -> torch.Tensor | None:
    """The position table from the first of ``files`` that holds it; None if none does."""
    for path in files:
        if path.name.endswith(".safetensors"):
            from safetensors import safe_open
            with safe_open(str(path), framework="pt") as f:
                key = _table_key(f.keys())
                if key is not None:
                    return f.get_tensor(key)
        else:
            state = _load_bin(path)
            key = _table_key(state.keys())
            if key is not None:
                return state[key].clone()
    return None


def attach(model, table: torch.Tensor) -> None:
    """Keep the table on the model (its embeddings module), on the weights' device and dtype."""
    embeddings = model.base_model.embeddings
    weight = embeddings.word_embeddings.weight
    embeddings.register_buffer(BUFFER, table.detach().to(weight.device, weight.dtype), persistent=False)


def table_of(model) -> torch.Tensor | None:
    """The position table when the model runs the EMD; None when its head reads the last layer."""
    return getattr(getattr(model.base_model, "embeddings", None), BUFFER, None)


def position_rows(table: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
    """z: the table's rows at positions ``at``; positions past the table read its last row."""
    return table[at.clamp(max=table.shape[0] - 1)]


# ---------------------------------------------------------------- the decoder


def decode(layer, query: torch.Tensor, attend, passes: int = PASSES) -> torch.Tensor:
    """The EMD's passes through the last layer ``layer``: ``query`` is z + H at the positions read,
    ``attend(query)`` the attention's context for those queries against the keys and values of H.
    Each pass finishes as the layer does (``attention.output``: dense, then layer norm with the
    query as residual; ``intermediate`` and ``output``: the feed-forward block). One pass with
    ``query`` = H is the last layer's own output at those positions."""
    for _ in range(passes):
        context = attend(query)
        attended = layer.attention.output(context, query)
        query = layer.output(layer.intermediate(attended), attended)
    return query


def states_at(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, rows, cols) -> torch.Tensor:
    """What the head reads at positions (rows[i], cols[i]) of a right-padded batch: the EMD's
    output where its table is on the model, else the last layer's; [len(rows), hidden]. Layers
    1 .. N-1 run over the whole batch; the last layer's keys and values come from their output H
    at every position, its queries only at the positions read (H there, or z + H for the EMD)."""
    table = table_of(model)
    encoder = model.base_model.encoder
    if table is None and len(encoder.layer) == 1 and getattr(encoder, "conv", None) is not None:
        # (the convolution after the first layer, here the last, reads every row's output)
        return model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[rows, cols]
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    hidden = states_before_last_layer(model, input_ids, attention_mask)
    layer = encoder.layer[-1]
    device = device_of(layer)
    hidden, attention_mask = hidden.to(device), attention_mask.to(device)
    query_at, reads = query_positions(rows, cols, input_ids.shape[0], device)
    first = rows_at(hidden, query_at)
    if table is not None:
        first = position_rows(table.to(device), query_at).to(hidden.dtype) + first
    attend = _attention(layer.attention.self, encoder, hidden, attention_mask.bool(), query_at)
    return decode(layer, first, attend, PASSES if table is not None else 1)[reads]


def states_before_last_layer(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """H: the output of layer N-1 (transformers' ``hidden_states[-2]``), by the encoder's own loop
    (``DebertaEncoder.forward`` / ``DebertaV2Encoder.forward``: the embeddings with the padding mask,
    the [B, 1, L, L] attention mask, relative positions, the convolution after the first layer)
    without its last layer, whose ordinary output the EMD never reads."""
    base = model.base_model
    encoder = base.encoder
    embedded = base.embeddings(input_ids=input_ids, mask=attention_mask)
    mask = encoder.get_attention_mask(attention_mask)
    relative = encoder.get_rel_pos(embedded)
    table = encoder.get_rel_embedding()
    hidden = embedded
    for i, layer in enumerate(encoder.layer[:-1]):
        output = layer(hidden, mask, relative_pos=relative, rel_embeddings=table)[0]
        if i == 0 and getattr(encoder, "conv", None) is not None:
            output = encoder.conv(embedded, output, attention_mask)
        hidden = output
    return hidden


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(rows, tokens, heads * d) -> (rows, heads, tokens, d)."""
    return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def relative_position(attention, distance: torch.Tensor) -> torch.Tensor:
    """The relative position the attention uses for a distance (query position - key position):
    v2's log buckets (``build_relative_position``) where configured, else the distance itself."""
    if getattr(attention, "position_buckets", -1) > 0 and attention.max_relative_positions > 0:
        distance = make_log_bucket_position(distance, attention.position_buckets,
                                            attention.max_relative_positions)
    return distance.long()


def _span(attention) -> int:
    """Half the rows of the relative-position table the attention reads: v2's ``pos_ebd_size``;
    v1 reads its whole table of 2 x ``max_relative_positions`` rows (its ``att_span`` slice is
    the whole table once positions reach the span, and clamping never bites below it)."""
    return getattr(attention, "pos_ebd_size", attention.max_relative_positions)


def _queries(attention, query: torch.Tensor) -> torch.Tensor:
    """The attention's queries for ``query`` states: v2's ``query_proj``; v1's share of its single
    ``in_proj`` (per head [q; k; v] rows, no bias) plus its separate ``q_bias``."""
    heads = attention.num_attention_heads
    if hasattr(attention, "in_proj"):
        return _heads(query @ _in_proj_part(attention, 0).T, heads) + _heads(attention.q_bias[None, None], heads)
    return _heads(attention.query_proj(query), heads)


def _keys_values(attention, hidden: torch.Tensor):
    """The attention's keys and values of ``hidden`` (v1: ``in_proj``'s shares, ``v_bias``)."""
    heads = attention.num_attention_heads
    if hasattr(attention, "in_proj"):
        return (_heads(hidden @ _in_proj_part(attention, 1).T, heads),
                _heads(hidden @ _in_proj_part(attention, 2).T, heads) + _heads(attention.v_bias[None, None], heads))
    return _heads(attention.key_proj(hidden), heads), _heads(attention.value_proj(hidden), heads)


def _in_proj_part(attention, part: int) -> torch.Tensor:
    """v1's query (0), key (1) or value (2) weights: ``in_proj.weight`` holds, head after head,
    that head's query, key and value rows (``DisentangledSelfAttention.transpose_for_scores``
    then ``chunk(3)``)."""
    weight = attention.in_proj.weight
    heads = attention.num_attention_heads
    return weight.view(heads, 3, -1, weight.shape[-1])[:, part].reshape(-1, weight.shape[-1])


def _position_projections(attention, encoder):
    """(pos_key, pos_query), each (heads, 2 span, d) or None: the relative-position table
    projected for content-to-position (c2p) and position-to-content (p2c) scores."""
    table = attention.pos_dropout(encoder.get_rel_embedding())[:2 * _span(attention)]
    types, heads = attention.pos_att_type, attention.num_attention_heads

    def split(x):
        return x.view(x.shape[0], heads, -1).transpose(0, 1)

    if hasattr(attention, "in_proj"):  # v1: pos_proj (no bias) and pos_q_proj
        return (split(attention.pos_proj(table)) if "c2p" in types else None,
                split(attention.pos_q_proj(table)) if "p2c" in types else None)
    shared = attention.share_att_key  # v2: the content projections, or their own
    return (split(attention.key_proj(table) if shared else attention.pos_key_proj(table))
            if "c2p" in types else None,
            split(attention.query_proj(table) if shared else attention.pos_query_proj(table))
            if "p2c" in types else None)


def _attention(attention, encoder, hidden: torch.Tensor, key_mask: torch.Tensor, query_at: torch.Tensor):
    """``attend(query)`` for queries [B, M, hidden] at positions ``query_at`` [B, M] against the
    keys and values of ``hidden`` [B, L, hidden] (padding keys masked out), as the layer's
    ``DisentangledSelfAttention`` scores them: content-to-content, c2p(q, k) = query_q .
    pos_key[rel(q - k)] and p2c(q, k) = key_k . pos_query[-rel(k - q)], each over sqrt(d x the
    number of terms), v1's talking heads where configured, softmax, values. Everything that
    depends on the keys only (keys, values, p2c) is computed once for both passes."""
    rows, length = hidden.shape[:2]
    v1 = hasattr(attention, "in_proj")
    types = attention.pos_att_type
    # v1 counts every listed type (len), v2 the two it knows; they agree on real configs
    factor = 1 + (len(types) if v1 else ("c2p" in types) + ("p2c" in types))
    keys, values = _keys_values(attention, hidden)
    scale = math.sqrt(keys.shape[-1] * factor)
    heads = keys.shape[1]
    pos_keys = p2c = c2p_index = None
    if attention.relative_attention:
        span = _span(attention)
        pos_keys, pos_queries = _position_projections(attention, encoder)
        key_at = torch.arange(length, device=hidden.device)
        c2p_index = (relative_position(attention, query_at[:, :, None] - key_at) + span).clamp(0, 2 * span - 1)
        if pos_queries is not None:  # (B, heads, L, 2 span) gathered to (B, heads, M, L)
            p2c_index = (span - relative_position(attention, key_at[:, None] - query_at[:, None, :])
                         ).clamp(0, 2 * span - 1)
            own = keys @ (pos_queries / scale).transpose(-1, -2)
            p2c = own.gather(-1, p2c_index[:, None].expand(-1, heads, -1, -1)).transpose(-1, -2)

    def attend(query: torch.Tensor) -> torch.Tensor:
        queries = _queries(attention, query) / scale
        scores = queries @ keys.transpose(-1, -2)
        if pos_keys is not None:
            c2p = queries @ pos_keys.transpose(-1, -2)
            scores = scores + c2p.gather(-1, c2p_index[:, None].expand(-1, heads, -1, -1))
        if p2c is not None:
            scores = scores + p2c
        if getattr(attention, "head_logits_proj", None) is not None:  # v1's talking heads
            scores = attention.head_logits_proj(scores.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        scores = scores.masked_fill(~key_mask[:, None, None, :], torch.finfo(scores.dtype).min)
        probs = attention.dropout(scores.softmax(-1))
        if getattr(attention, "head_weights_proj", None) is not None:
            probs = attention.head_weights_proj(probs.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return (probs @ values).transpose(1, 2).reshape(rows, query.shape[1], -1)

    return attend
