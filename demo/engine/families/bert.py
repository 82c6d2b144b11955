"""BERT's layers (and the families that copy ``BertLayer``: RoBERTa, XLM-RoBERTa, CamemBERT,
ELECTRA) written out: with a key/value cache for the prefix cache (the block encoder's contract:
``demo.engine.families.blocks``), and with the last layer at the rows read only
(``demo.engine.reading``). Both run the layer through :func:`keys_values` and :func:`layer_at`."""

import torch
from transformers.masking_utils import create_bidirectional_mask

from ..batch_invariance import sdpa
from .blocks import attend_cached
from .queries import last_layer_at


def _positions(base, windows: torch.Tensor) -> torch.Tensor:
    """Position ids of the full window as the model numbers them (RoBERTa: after padding_idx)."""
    embeddings = base.embeddings
    if hasattr(embeddings, "create_position_ids_from_input_ids"):
        return embeddings.create_position_ids_from_input_ids(windows, embeddings.padding_idx)
    return torch.arange(windows.shape[1], device=windows.device).expand(windows.shape[0], -1)


def _heads(attention, x: torch.Tensor) -> torch.Tensor:
    """(rows, tokens, heads * d) -> (rows, heads, tokens, d)."""
    return x.view(x.shape[0], x.shape[1], -1, attention.attention_head_size).transpose(1, 2)


def keys_values(layer, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's keys and values of its input ``hidden``, (rows, heads, tokens, d) each."""
    attention = layer.attention.self
    return _heads(attention, attention.key(hidden)), _heads(attention, attention.value(hidden))


def layer_at(layer, hidden: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
             mask: torch.Tensor | None = None, own_queries: list[int] | None = None) -> torch.Tensor:
    """``BertLayer`` (self-attention, then the feed-forward, each followed by its residual
    LayerNorm) at the rows whose input is ``hidden`` (rows, queries, hidden): their queries attend
    to ``keys`` and ``values`` where ``mask`` (True: attend) allows (``own_queries``:
    ``demo.engine.batch_invariance.sdpa``); the model's own modules compute everything but the
    attention."""
    attention = layer.attention.self
    out = sdpa(_heads(attention, attention.query(hidden)), keys, values, mask, attention.scaling,
               own_queries)
    attended = layer.attention.output(out.transpose(1, 2).reshape(*hidden.shape), hidden)
    return layer.output(layer.intermediate(attended), attended)


def encode_block(mlm, windows, start, cached, keep, room, wanted=None):
    """The layers with a key/value cache (the block encoder's contract)."""
    base = mlm.base_model
    hidden = base.embeddings(input_ids=windows[:, start:],
                             position_ids=_positions(base, windows)[:, start:])
    hidden, kept = attend_cached(list(base.encoder.layer), hidden, start, cached, wanted, keys_values, layer_at)
    return hidden, kept, []


def states_at(mlm, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, rows, cols) -> torch.Tensor:
    """The last layer's output at positions (rows[i], cols[i]) of a right-padded batch:
    [len(rows), hidden]. The embeddings and every layer but the last run as the model's forward
    pass runs them (its own modules and attention mask); the last layer's keys and values come
    from every position, its queries, attention and feed-forward only at the positions read."""
    base = mlm.base_model
    hidden = base.embeddings(input_ids=input_ids)
    if hasattr(base, "embeddings_project"):  # ELECTRA, whose embeddings are narrower than its layers
        hidden = base.embeddings_project(hidden)
    mask = create_bidirectional_mask(config=base.config, inputs_embeds=hidden, attention_mask=attention_mask)
    *before, last = base.encoder.layer
    for layer in before:
        hidden = layer(hidden, mask)
    return last_layer_at(last, hidden, attention_mask, rows, cols, keys_values, layer_at)
