"""ModernBERT's layers with a key/value cache, for the prefix cache (the block encoder's contract:
``demo.engine.families.blocks``)."""

import torch
import torch.nn.functional as F
from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

from .blocks import extended, read_rows


def encode_block(mlm, windows, start, cached, keep, room, wanted=None):
    """ModernBERT's layers (``ModernBertEncoderLayer``, ``ModernBertAttention``) written out
    with a key/value cache: pre-norm attention with rotary positions, then the GLU MLP.

    A local layer's query sees the keys within ``sliding_window`` positions either side (as
    ``masking_utils.sliding_window_bidirectional_overlay``, in window positions), so a refresh
    keeps only the last ``sliding_window`` cached positions of those layers: no tail query
    reaches further back.
    """
    base = mlm.base_model
    window = base.config.sliding_window
    hidden = base.embeddings(input_ids=windows[:, start:])
    rows, length = hidden.shape[:2]
    queries_at = torch.arange(start, windows.shape[1], device=windows.device)
    rotary = {kind: base.rotary_emb(hidden, queries_at[None], kind) for kind in set(base.config.layer_types)}
    kept = []
    for i, layer in enumerate(base.layers):
        attention, local = layer.attn, layer.attention_type == "sliding_attention"
        qkv = attention.Wqkv(layer.attn_norm(hidden)).view(rows, length, 3, -1, attention.head_dim)
        queries, keys, values = (x.transpose(1, 2) for x in qkv.unbind(dim=2))
        queries, keys = apply_rotary_pos_emb(queries, keys, *rotary[layer.attention_type])
        cached_keys, cached_values = cached.layers[i] if cached is not None else (None, None)
        mask = None
        if local:  # local layers cache only a window's worth: a small concatenation
            if cached is not None:
                keys, values = torch.cat([cached_keys, keys], 2), torch.cat([cached_values, values], 2)
            first_key = windows.shape[1] - keys.shape[2]
            first = max(keep - window, 0) - first_key
            kept.append((keys[:, :, first:keep - first_key], values[:, :, first:keep - first_key]))
            keys_at = torch.arange(first_key, windows.shape[1], device=windows.device)
            mask = (queries_at[:, None] - keys_at[None, :]).abs() <= window
        else:
            keys, values = extended(cached_keys, start, keys), extended(cached_values, start, values)
            kept.append((keys, values))
            keys, values = keys.narrow(2, 0, windows.shape[1]), values.narrow(2, 0, windows.shape[1])
        read = read_rows(i, len(base.layers), wanted, start)
        queries, hidden = queries[:, :, read], hidden[:, read]
        out = F.scaled_dot_product_attention(queries, keys, values,
                                             attn_mask=None if mask is None else mask[read],
                                             scale=attention.head_dim ** -0.5)
        out = out.transpose(1, 2).reshape(*hidden.shape)
        hidden = hidden + attention.out_drop(attention.Wo(out))
        hidden = hidden + layer.mlp(layer.mlp_norm(hidden))
    return base.final_norm(hidden), kept, []
