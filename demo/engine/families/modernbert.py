"""ModernBERT's layers written out: with a key/value cache for the prefix cache (the block
encoder's contract: ``demo.engine.families.blocks``), and with the last layer at the rows read
only (``demo.engine.reading``). Both run the layer through :func:`projections`, :func:`local_mask`
and :func:`layer_at`."""

import torch
from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask
from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

from ..batch_invariance import sdpa
from .blocks import extended, read_rows
from .queries import device_of, own_queries, query_positions, rows_at


def projections(layer, hidden: torch.Tensor, rotary) -> tuple[torch.Tensor, ...]:
    """The layer's queries, keys and values of its input ``hidden`` (pre-norm, rotary positions
    ``rotary`` = (cos, sin) of its attention type), (rows, heads, tokens, d) each."""
    attention = layer.attn
    qkv = attention.Wqkv(layer.attn_norm(hidden)).view(*hidden.shape[:2], 3, -1, attention.head_dim)
    queries, keys, values = (x.transpose(1, 2) for x in qkv.unbind(dim=2))
    queries, keys = apply_rotary_pos_emb(queries, keys, *rotary)
    return queries, keys, values


def local_mask(base, queries_at: torch.Tensor, keys_at: torch.Tensor) -> torch.Tensor:
    """Which keys a local layer's queries see: those within ``sliding_window`` positions either
    side (as ``masking_utils.sliding_window_bidirectional_overlay``); [..., queries, keys]."""
    return (queries_at[..., :, None] - keys_at[..., None, :]).abs() <= base.config.sliding_window


def layer_at(layer, hidden: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
             mask: torch.Tensor | None = None, own_queries: list[int] | None = None) -> torch.Tensor:
    """``ModernBertEncoderLayer`` (pre-norm attention, then the GLU MLP, each added to the
    residual) at the rows whose input is ``hidden`` and whose ``queries`` attend to ``keys`` and
    ``values`` where ``mask`` (True: attend) allows."""
    attention = layer.attn
    out = sdpa(queries, keys, values, mask, attention.head_dim ** -0.5, own_queries)
    hidden = hidden + attention.out_drop(attention.Wo(out.transpose(1, 2).reshape(*hidden.shape)))
    return hidden + layer.mlp(layer.mlp_norm(hidden))


def encode_block(mlm, windows, start, cached, keep, room, wanted=None):
    """The layers with a key/value cache (the block encoder's contract).

    A local layer's query sees the keys within ``sliding_window`` positions either side, so a
    refresh keeps only the last ``sliding_window`` cached positions of those layers: no tail
    query reaches further back.
    """
    base = mlm.base_model
    window = base.config.sliding_window
    hidden = base.embeddings(input_ids=windows[:, start:])
    queries_at = torch.arange(start, windows.shape[1], device=windows.device)
    rotary = {kind: base.rotary_emb(hidden, queries_at[None], kind) for kind in set(base.config.layer_types)}
    kept = []
    for i, layer in enumerate(base.layers):
        queries, keys, values = projections(layer, hidden, rotary[layer.attention_type])
        cached_keys, cached_values = cached.layers[i] if cached is not None else (None, None)
        mask = None
        if layer.attention_type == "sliding_attention":  # local layers cache only a window's worth
            if cached is not None:
                keys, values = torch.cat([cached_keys, keys], 2), torch.cat([cached_values, values], 2)
            first_key = windows.shape[1] - keys.shape[2]
            first = max(keep - window, 0) - first_key
            kept.append((keys[:, :, first:keep - first_key], values[:, :, first:keep - first_key]))
            mask = local_mask(base, queries_at, torch.arange(first_key, windows.shape[1], device=windows.device))
        else:
            keys, values = extended(cached_keys, start, keys), extended(cached_values, start, values)
            kept.append((keys, values))
            keys, values = keys.narrow(2, 0, windows.shape[1]), values.narrow(2, 0, windows.shape[1])
        read = read_rows(i, len(base.layers), wanted, start)
        hidden = layer_at(layer, hidden[:, read], queries[:, :, read], keys, values,
                          None if mask is None else mask[read])
    return base.final_norm(hidden), kept, []


def states_at(mlm, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, rows, cols) -> torch.Tensor:
    """The model's output (the last layer, then its final norm) at positions (rows[i], cols[i])
    of a right-padded batch: [len(rows), hidden]. The embeddings and every layer but the last
    run as ``ModernBertModel.forward`` runs them (its own modules, masks and rotary angles); the
    last layer's keys and values come from every position, its queries, attention and MLP only
    at the positions read."""
    base = mlm.base_model
    hidden = base.embeddings(input_ids=input_ids)
    masks = dict(config=base.config, inputs_embeds=hidden, attention_mask=attention_mask)
    masks = {"full_attention": create_bidirectional_mask(**masks),
             "sliding_attention": create_bidirectional_sliding_window_mask(**masks)}
    positions = torch.arange(input_ids.shape[1], device=hidden.device)
    rotary = {kind: base.rotary_emb(hidden, positions[None], kind) for kind in set(base.config.layer_types)}
    *before, last = base.layers
    for layer in before:
        hidden = layer(hidden, attention_mask=masks[layer.attention_type],
                       position_embeddings=rotary[layer.attention_type])
    device = device_of(last)
    hidden, positions = hidden.to(device), positions.to(device)
    query_at, reads = query_positions(rows, cols, input_ids.shape[0], device)
    queries, keys, values = projections(last, hidden, tuple(x.to(device) for x in rotary[last.attention_type]))
    mask = None if attention_mask is None else attention_mask.to(device).bool()[:, None, None, :]
    if last.attention_type == "sliding_attention":
        local = local_mask(base, query_at, positions)[:, None]
        mask = local if mask is None else mask & local
    out = layer_at(last, rows_at(hidden, query_at), rows_at(queries.transpose(1, 2), query_at).transpose(1, 2),
                   keys, values, mask, own_queries(reads, input_ids.shape[0]))
    return base.final_norm(out)[reads]
