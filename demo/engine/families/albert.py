"""ALBERT's layers written out: with a key/value cache for the prefix cache (the block encoder's
contract: ``demo.engine.families.blocks``), and with the last layer at the rows read only
(``demo.engine.reading``). Both run the layer through :func:`keys_values` and :func:`layer_at`.

ALBERT differs from BERT in its layout, not its computation: embeddings narrower than the layers
(mapped in by ``embedding_hidden_mapping_in``), and layers shared in groups, so its
``num_hidden_layers`` layers are a few weight sets applied in turn (:func:`layers`). The cache keeps
keys and values per layer applied, not per weight set: each application sees its own input."""

import torch
from transformers.masking_utils import create_bidirectional_mask

from ..batch_invariance import sdpa
from .blocks import attend_cached
from .queries import last_layer_at


def layers(base) -> list:
    """The layers in the order the model applies them (AlbertTransformer.forward's group index)."""
    config, groups = base.config, base.encoder.albert_layer_groups
    return [layer for i in range(config.num_hidden_layers)
            for layer in groups[int(i / (config.num_hidden_layers / config.num_hidden_groups))].albert_layers]


def _heads(attention, x: torch.Tensor) -> torch.Tensor:
    """(rows, tokens, heads * d) -> (rows, heads, tokens, d)."""
    return x.view(x.shape[0], x.shape[1], -1, attention.attention_head_size).transpose(1, 2)


def keys_values(layer, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's keys and values of its input ``hidden``, (rows, heads, tokens, d) each."""
    attention = layer.attention
    return _heads(attention, attention.key(hidden)), _heads(attention, attention.value(hidden))


def layer_at(layer, hidden: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
             mask: torch.Tensor | None = None, own_queries: list[int] | None = None) -> torch.Tensor:
    """``AlbertLayer`` (self-attention with its residual LayerNorm, then the feed-forward with
    ``full_layer_layer_norm``) at the rows whose input is ``hidden`` (rows, queries, hidden): their
    queries attend to ``keys`` and ``values`` where ``mask`` (True: attend) allows (``own_queries``:
    ``demo.engine.batch_invariance.sdpa``); the model's own modules compute everything but the
    attention."""
    attention = layer.attention
    out = sdpa(_heads(attention, attention.query(hidden)), keys, values, mask, attention.scaling,
               own_queries)
    attended = attention.LayerNorm(hidden + attention.dense(out.transpose(1, 2).reshape(*hidden.shape)))
    return layer.full_layer_layer_norm(layer.ff_chunk(attended) + attended)


def _embedded(base, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The embeddings mapped to the layers' width."""
    return base.encoder.embedding_hidden_mapping_in(base.embeddings(input_ids=input_ids, position_ids=position_ids))


def encode_block(mlm, windows, start, cached, keep, room, wanted=None):
    """The layers with a key/value cache (the block encoder's contract)."""
    base = mlm.base_model
    positions = torch.arange(start, windows.shape[1], device=windows.device).expand(windows.shape[0], -1)
    hidden, kept = attend_cached(layers(base), _embedded(base, windows[:, start:], positions), start, cached,
                                 wanted, keys_values, layer_at)
    return hidden, kept, []


def states_at(mlm, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, rows, cols) -> torch.Tensor:
    """As ``bert.states_at``: every layer applied but the last as the model runs it, the last at
    the positions read only."""
    base = mlm.base_model
    hidden = _embedded(base, input_ids)
    mask = create_bidirectional_mask(config=base.config, inputs_embeds=hidden, attention_mask=attention_mask)
    *before, last = layers(base)
    for layer in before:
        hidden = layer(hidden, mask)
    return last_layer_at(last, hidden, attention_mask, rows, cols, keys_values, layer_at)
