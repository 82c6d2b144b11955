"""DeBERTa-v2's layers with a key/value cache, for the prefix cache (the block encoder's contract:
``demo.engine.families.blocks``): disentangled attention with relative-position buckets in both
terms (c2p and p2c), the optional convolution after the first layer, and the enhanced mask
decoder (``demo.engine.families.deberta``) where it is on: at the row read, its queries attend to
the last layer's keys and values of the whole window (cached and block), which the cache keeps
anyway."""

import math
from dataclasses import dataclass

import torch

from . import deberta
from .blocks import extended, read_rows


def _buckets(attention, query_at: torch.Tensor, key_at: torch.Tensor) -> torch.Tensor:
    """DeBERTa-v2's relative position of each query to each key, bucketed as
    ``build_relative_position`` does, but for any query and key positions."""
    return deberta.relative_position(attention, query_at[:, None] - key_at[None, :])


def encode_block(mlm, windows, start, cached, keep, room, wanted=None):
    """DeBERTa-v2's layers (``DebertaV2Layer``, ``DisentangledSelfAttention``, the optional
    convolution after the first layer) written out with a key/value cache. With the enhanced mask
    decoder on, the hidden states returned are the decoder's (what the head reads)."""
    base = mlm.base_model
    encoder = base.encoder
    block_at = torch.arange(start, windows.shape[1], device=windows.device)
    embedded = base.embeddings(input_ids=windows[:, start:], position_ids=block_at[None])
    query_base = keep if cached is None else cached.query_base  # a refresh sets it
    # the bucketed distances are the same in every layer: computed once per call
    indices = (_position_indices(encoder.layer[0].attention.self, block_at, keep, query_base, room)
               if encoder.relative_attention else None)
    table = deberta.table_of(mlm)  # the enhanced mask decoder's positions, when it is on
    hidden, kept, shared = embedded, [], []
    for i, layer in enumerate(encoder.layer):
        attend, layer_kept, projections = _attention(layer.attention.self, encoder, hidden, cached, i,
                                                     start, indices, start - query_base)
        kept.append(layer_kept)
        if projections is not None:
            shared.append(projections)
        if table is not None and i == len(encoder.layer) - 1:
            # The enhanced mask decoder replaces the last layer's queries at the rows read: z + the
            # layer's input there, against this layer's keys and values of the whole window.
            read = read_rows(i, len(encoder.layer), wanted, start)
            first = deberta.position_rows(table, block_at[read]).to(hidden.dtype) + hidden[:, read]
            hidden = deberta.decode(layer, first, lambda states: attend(states, read))
            break
        context = attend(hidden)
        if not (i == 0 and encoder.conv is not None):  # (the convolution reads every row)
            read = read_rows(i, len(encoder.layer), wanted, start)
            context, hidden = context[:, read], hidden[:, read]
        attended = layer.attention.output(context, hidden)
        hidden = layer.output(layer.intermediate(attended), attended)
        if i == 0 and encoder.conv is not None:
            hidden = _deberta_conv(encoder.conv, embedded, hidden,
                                   cached.layers[-1][0] if cached is not None else None)
    if encoder.conv is not None:
        kept.append(_kept_embeddings(encoder.conv, embedded, cached, windows.shape[1], keep))
    return hidden, kept, shared


def _split(attention, x: torch.Tensor) -> torch.Tensor:
    """(rows, tokens, heads * d) -> (rows, heads, tokens, d)."""
    return x.view(x.shape[0], x.shape[1], attention.num_attention_heads, -1).transpose(1, 2)


@dataclass(frozen=True)
class _Attend:
    """A layer's attention for queries of the block: against the whole window's keys and values
    (cached and the block's), with the position terms the layer has."""
    attention: torch.nn.Module  # the layer's DisentangledSelfAttention
    keys: torch.Tensor  # (rows, heads, window, d)
    values: torch.Tensor
    scale: float
    pos_keys: torch.Tensor | None  # c2p's projected position table; None without that term
    c2p_index: torch.Tensor | None  # (block, window): where each query-key pair reads it
    p2c: torch.Tensor | None  # (rows, heads, block, window) position-to-content scores

    def __call__(self, states: torch.Tensor, read=slice(None)) -> torch.Tensor:
        """The attention's context for query states at the block's rows ``read``."""
        queries = _split(self.attention, self.attention.query_proj(states))
        scores = queries @ (self.keys.transpose(-1, -2) / self.scale)
        if self.pos_keys is not None:
            scores = scores + _c2p(self.pos_keys, self.c2p_index[read], self.scale, queries)
        if self.p2c is not None:
            scores = scores + self.p2c[:, :, read]
        return (scores.softmax(-1) @ self.values).transpose(1, 2).reshape(states.shape[0], queries.shape[2], -1)


def _attention(attention, encoder, hidden, cached, i, start, indices, first_query):
    """Layer ``i``'s attention for the block whose input is ``hidden`` (an ``_Attend``), what the
    cache keeps of it (keys, values, the kept keys' p2c scores), and the position table's
    projections (None without relative attention); ``first_query``: the block's first query
    among the positions the kept p2c scores are for."""
    keys, values = _split(attention, attention.key_proj(hidden)), _split(attention, attention.value_proj(hidden))
    types = attention.pos_att_type
    scale = math.sqrt(keys.shape[-1] * (1 + ("c2p" in types) + ("p2c" in types)))
    cached_keys, cached_values, p2c_cached = cached.layers[i] if cached is not None else (None, None, None)
    key_buffer, value_buffer = extended(cached_keys, start, keys), extended(cached_values, start, values)
    width = start + hidden.shape[1]
    keys, values = key_buffer.narrow(2, 0, width), value_buffer.narrow(2, 0, width)
    projections, p2c, p2c_kept = None, None, keys.new_zeros(hidden.shape[0], 0)  # (no p2c: nothing to keep)
    if attention.relative_attention:
        # the position table's projections depend on the weights only: once per refresh
        projections = cached.shared[i] if cached is not None else _position_projections(attention, encoder)
        p2c, p2c_kept = _p2c(projections[1], indices, scale, keys, hidden.shape[1], p2c_cached, first_query)
    pos_keys = projections[0] if projections is not None else None
    attend = _Attend(attention, keys, values, scale, pos_keys, indices[0] if pos_keys is not None else None, p2c)
    return attend, (key_buffer, value_buffer, p2c_kept), projections


def _kept_embeddings(conv, embedded, cached, width: int, keep: int) -> tuple[torch.Tensor]:
    """The embeddings a later block's convolution reads on its left: the last of the kept ones."""
    reach = (conv.conv.kernel_size[0] - 1) // 2
    if cached is not None:
        embedded = torch.cat([cached.layers[-1][0], embedded], 1)
    first_at = width - embedded.shape[1]
    return (embedded[:, max(keep - reach, first_at) - first_at:keep - first_at],)


def _position_projections(attention, encoder):
    """(pos_key, pos_query): the relative-position table projected for c2p and for p2c, each
    (1, heads, 2 span, d) or None when the layer has no such term."""
    table = encoder.get_rel_embedding()[:2 * attention.pos_ebd_size][None]
    shared, types = attention.share_att_key, attention.pos_att_type
    pos_keys = (_split(attention, attention.key_proj(table) if shared else attention.pos_key_proj(table))
                if "c2p" in types else None)
    pos_queries = (_split(attention, attention.query_proj(table) if shared else attention.pos_query_proj(table))
                   if "p2c" in types else None)
    return pos_keys, pos_queries


def _position_indices(attention, block_at: torch.Tensor, keep: int, query_base: int, room: int):
    """Where each query-key pair reads the position table (``disentangled_attention_bias``):
    c2p(q, k) = query_q . pos_key[bucket(q - k)] and p2c(q, k) = key_k . pos_query[-bucket(k - q)],
    offset by the table's half width and clipped to it. For the block's queries against every
    key (c2p), the block's keys against the block's queries (p2c) and the block's newly kept keys
    (those before ``keep``) against the ``room`` query positions tails can take (p2c)."""
    span = attention.pos_ebd_size

    def index(buckets):
        return (buckets + span).clamp(0, 2 * span - 1)

    keys_at = torch.arange(int(block_at[-1]) + 1, device=block_at.device)
    c2p = index(_buckets(attention, block_at, keys_at))  # (block, keys)
    p2c = index(-_buckets(attention, block_at, block_at))  # (block keys, block queries)
    tail_at = torch.arange(query_base, query_base + room, device=block_at.device)
    newly_kept = block_at[:max(keep - int(block_at[0]), 0)]
    return c2p, p2c, index(-_buckets(attention, newly_kept, tail_at))


def _c2p(pos_keys, c2p_index, scale, queries):
    """DeBERTa-v2's content-to-position scores of ``queries`` (rows, heads, a, d) at the block's
    query rows whose indices ``c2p_index`` (a, keys) holds (see ``_position_indices``)."""
    rows, heads = queries.shape[:2]
    scores = queries @ pos_keys.transpose(-1, -2)
    return scores.gather(-1, c2p_index.expand(rows, heads, -1, -1)) / scale  # scaled apart, as the model


def _p2c(pos_queries, indices, scale, keys, length, p2c_cached, first_query):
    """DeBERTa-v2's position-to-content scores of the block's ``length`` queries against every key
    (None without that term), and the p2c scores of the kept keys. p2c depends on the key's
    content, so for cached keys it comes from the step that kept them, which keeps it for the
    query positions tails can take (a gather from what that step computes anyway); the block's
    queries are rows ``first_query`` on of those."""
    rows, heads = keys.shape[:2]
    if pos_queries is None:
        return None, keys.new_zeros(rows, 0)
    _, p2c_index, kept_index = indices

    def gathered(scores, index):  # scores (rows, heads, a, 2 span), index (a, b) -> (rows, heads, a, b)
        return scores.gather(-1, index.expand(rows, heads, -1, -1)) / scale  # scaled apart, as the model

    own = keys[:, :, keys.shape[2] - length:] @ pos_queries.transpose(-1, -2)  # the block's keys
    block = gathered(own, p2c_index).transpose(-1, -2)
    start = keys.shape[2] - length  # cached keys
    if p2c_cached is not None:
        block = torch.cat([p2c_cached[:, :, first_query:first_query + length, :start], block], -1)
    p2c_kept = extended(p2c_cached, start, dim=3, block=gathered(
        own[:, :, :kept_index.shape[0]], kept_index).transpose(-1, -2))
    return block, p2c_kept


def _deberta_conv(conv, embedded, hidden, left):
    """The convolution over positions after DeBERTa-v2's first layer (``ConvLayer``): a tail's
    first tokens read the prefix's last embeddings on their left (embeddings do not depend on
    context, so those kept by the refresh are exact)."""
    rows, width = hidden.shape[0], 0 if left is None else left.shape[1]
    if width:
        embedded = torch.cat([left, embedded], 1)
        hidden = torch.cat([hidden.new_zeros(rows, width, hidden.shape[-1]), hidden], 1)
    mask = torch.ones(embedded.shape[:2], device=embedded.device)
    return conv(embedded, hidden, mask)[:, width:]
