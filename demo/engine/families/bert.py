"""BERT's and RoBERTa's layers with a key/value cache, for the prefix cache (the block encoder's
contract: ``demo.engine.families.blocks``)."""

import torch
import torch.nn.functional as F

from .blocks import extended, read_rows


def _positions(base, windows: torch.Tensor) -> torch.Tensor:
    """Position ids of the full window as the model numbers them (RoBERTa: after padding_idx)."""
    embeddings = base.embeddings
    if hasattr(embeddings, "create_position_ids_from_input_ids"):
        return embeddings.create_position_ids_from_input_ids(windows, embeddings.padding_idx)
    return torch.arange(windows.shape[1], device=windows.device).expand(windows.shape[0], -1)


def encode_block(mlm, windows, start, cached, keep, room, wanted=None):
    """BERT's and RoBERTa's layers (``BertLayer``: self-attention, then the feed-forward, each
    followed by its residual LayerNorm) written out with a key/value cache; the model's own
    modules compute everything but the attention."""
    base = mlm.base_model
    hidden = base.embeddings(input_ids=windows[:, start:],
                             position_ids=_positions(base, windows)[:, start:])
    rows, length = hidden.shape[:2]
    end, kept = start + length, []
    for i, layer in enumerate(base.encoder.layer):
        attention = layer.attention.self

        def split(x):  # (rows, tokens, heads * d) -> (rows, heads, tokens, d)
            return x.view(rows, x.shape[1], -1, attention.attention_head_size).transpose(1, 2)

        cached_keys, cached_values = cached.layers[i] if cached is not None else (None, None)
        keys = extended(cached_keys, start, split(attention.key(hidden)))
        values = extended(cached_values, start, split(attention.value(hidden)))
        kept.append((keys, values))
        hidden = hidden[:, read_rows(i, len(base.encoder.layer), wanted, start)]
        out = F.scaled_dot_product_attention(split(attention.query(hidden)), keys.narrow(2, 0, end),
                                             values.narrow(2, 0, end), scale=attention.scaling)
        attended = layer.attention.output(out.transpose(1, 2).reshape(*hidden.shape), hidden)
        hidden = layer.output(layer.intermediate(attended), attended)
    return hidden, kept, []
