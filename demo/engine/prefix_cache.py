"""The prefix cache: a faster, approximate way for a masked LM to generate (``docs/method.md``,
section 2).

The exact method re-encodes the whole window at every step:

    window = [CLS] prompt generated [MASK] [MASK]*p [SEP]

The prefix cache encodes the whole window only on a *refresh* and keeps, for every layer, the
keys and values of the window's *prefix*: [CLS] and the text except its last ``FRESH`` (16)
tokens. The steps in between encode only the *tail*: those last 16 text tokens, the masks and the
end token; the tail's queries attend to the cached keys/values plus the tail's own, and each step
adds its tail's first position to the cache, so the tail keeps its length (a rolling cache, like
a causal LM's, with the last 16 tokens kept fresh). The distant text is then updated at refreshes
only (the two remedies the BERTs paper names: a prefix cache, and not updating distant tokens at
every step). A refresh happens at the first step, every R generated tokens, and at every step
whose top two tokens are nearly tied (refresh on doubt, below: closer than ``margin`` nats,
scaled down for steps soon after a refresh).

What is exact:
- every refresh step: the whole window is encoded (the model's own modules and weights, layer
  by layer, equal to its forward pass up to float rounding), so its prediction is the exact
  method's. With R = 1 every step is a refresh and the output equals the exact method's token
  for token (tested).
- the tail's own computation: each tail token gets the position it has in the full window
  (BERT/RoBERTa position ids, ModernBERT's rotary angles and its local layers' sliding window,
  DeBERTa-v2's relative-position buckets in both disentangled terms, c2p and p2c, and its
  convolution's left neighbour) and attends to the cached positions and to the tail as in the
  full window. A tail read against a cache of its own window gives the model's own hidden
  states, and the cache it passes on is what a refresh would keep (tested); a whole generation
  equals a plain forward pass per step that spells the approximation out with an attention mask
  (tested on BERT).

What is approximate:
- a cached position's keys and values (and DeBERTa-v2's position-to-content scores of the cached
  keys) are those of the step that cached it: the refresh, where [MASK]s and [SEP] stood where
  later tokens now stand, or the tail that last held it. Until the next refresh it does not see
  the tokens generated since; only the tail does. The error shows as a changed choice where the
  exact method's top two tokens are nearly tied, and a changed token changes everything after
  it; refreshing on doubt redoes exactly those steps. ``benchmarks/bench_cache.py`` measures
  speed and agreement with the exact method; the defaults of R and margin are picked there.

Beam search and sampling: every row of the batch keeps its own cache from the refresh; at a
later step each row finds the cached row whose text it extends (beams are reordered and
duplicated between steps), so every decoding strategy of ``generate()`` works unchanged.

Supported families: ``ENCODERS`` (BERT, RoBERTa, ModernBERT, DeBERTa-v2); the others are
refused with a ValueError that names these.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position
from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

# The last FRESH text tokens are re-encoded at every step with the masks: they are the ones whose
# states change most when a token is generated right after them. At least 2 (the predicted
# mask's position must never be cached). A tail step mostly reads the weights, so its cost
# hardly depends on FRESH up to 16 (+1 ms of ~20 on the stand-in at 16, +25% at 32, +70% at 64).
# Measured on the stand-in MLM (benchmarks/bench_cache.py, 20 few-shot prompts of ~470 tokens,
# margin 0.1 with the ramp below): greedy agreement with the exact method 86.9% with 8, 90.9%
# with 12, 98.8% with 16 and 24, at about the same number of refreshes.
FRESH = 16
# Refresh on doubt grows with the cache's age: a step t tokens after the last refresh is redone
# when its top two tokens are less than margin * min(1, t / MARGIN_RAMP) apart. Every token
# generated since the refresh is one the cached states have not seen, so their error grows with
# t; right after a refresh only a near-exact tie can flip. Same benchmark, margin 0.1: a flat
# margin refreshed 3.0 steps of 32 (99.1% agreement, FRESH 8), the ramp over 24 tokens 2.2
# (98.8%); over 16, 2.5 (98.8%); over 32, 2.05 (94.7%).
MARGIN_RAMP = 24
# Positions of room a cached key/value buffer gets past what it holds (see ``_extended``): a tail
# step writes FRESH + masks + 2 positions and keeps one, so R <= 32 steps rarely outgrow it.
GROWTH = 64


@dataclass
class Prefix:
    """The cached states: of window positions [0, start), for the text each row had when they
    were last extended, and where the last refresh put the first tail query (``query_base``)."""
    text: torch.Tensor  # (rows, n) text ids after [CLS]
    start: int  # cached positions: [0, start) of the window
    layers: list[tuple[torch.Tensor, ...]]  # batch-first, per family: keys, values (DeBERTa: more);
    # key/value buffers hold positions [0, start) first, then room (see ``_extended``)
    shared: list = ()  # per layer, the same for every row (DeBERTa's position projections)
    query_base: int = 0  # DeBERTa-v2's kept p2c scores are for queries at query_base + [0, room)
    refreshed_at: int = 0  # text length at the last refresh

    def rows(self, index: torch.Tensor) -> "Prefix":
        """The cache for the given cached rows, in that order (beams reorder and duplicate)."""
        if index.numel() == self.text.shape[0] and bool((index == torch.arange(
                index.numel(), device=index.device)).all()):
            return self  # the usual case (greedy, sampling): no copy
        layers = [tuple(t.index_select(0, index) for t in layer) for layer in self.layers]
        return Prefix(self.text.index_select(0, index), self.start, layers, self.shared,
                      self.query_base, self.refreshed_at)


# ---------------------------------------------------------------- families
#
# Each family encodes a block of the window, windows[:, start:], given the cache of positions
# [0, start) (``cached``, None when start = 0), and returns (the block's hidden states, the layers
# of positions [0, keep), the shared list): the cache, extended by the block's first keep - start
# positions (keep >= 1: [CLS] is always cached). A refresh is start = 0; a tail step is
# start = cached.start, keep = start + 1. Keys and values (and DeBERTa-v2's p2c scores) are
# buffers that hold those positions first and room after them (``_extended``), written in place:
# a tail step reuses its cache's buffers, so a cache is good until the next one is made from it.
# ``room`` is how many query positions, from the last refresh's ``keep`` on, tails can take
# (DeBERTa-v2 precomputes the kept keys' position-to-content scores for them). ``wanted``: the
# window position whose final hidden state a step reads (None: the whole block's, as tests read).


def _read_rows(layer: int, layers: int, wanted: int | None, start: int) -> slice:
    """The block rows a layer must output: all of them but in the last layer, where a step reads
    one position only (its predicted mask). The last layer's keys and values are kept for every
    position; its queries, attention and feed-forward for the others would serve nothing (a
    sixth of a refresh's work on the stand-in)."""
    if wanted is None or layer < layers - 1:
        return slice(None)
    return slice(wanted - start, wanted - start + 1)


def _positions(base, windows: torch.Tensor) -> torch.Tensor:
    """Position ids of the full window as the model numbers them (RoBERTa: after padding_idx)."""
    embeddings = base.embeddings
    if hasattr(embeddings, "create_position_ids_from_input_ids"):
        return embeddings.create_position_ids_from_input_ids(windows, embeddings.padding_idx)
    return torch.arange(windows.shape[1], device=windows.device).expand(windows.shape[0], -1)


def _extended(buffer: torch.Tensor | None, start: int, block: torch.Tensor, dim: int = 2) -> torch.Tensor:
    """``buffer`` with ``block`` written at positions [start, start + n) along ``dim``; the
    positions before ``start`` are kept. The buffer has room after its positions, so a step writes
    its block in place (a larger copy only when the room runs out): a ``torch.cat`` per layer and
    step instead cost about a sixth of a tail step on the stand-in. Readers take the positions
    they need with ``narrow``."""
    end = start + block.shape[dim]
    if buffer is None or buffer.shape[dim] < end:
        shape = list(block.shape)
        shape[dim] = end + GROWTH
        grown = block.new_empty(shape)
        if buffer is not None:
            grown.narrow(dim, 0, start).copy_(buffer.narrow(dim, 0, start))
        buffer = grown
    buffer.narrow(dim, start, block.shape[dim]).copy_(block)
    return buffer


def _bert(mlm, windows, start, cached, keep, room, wanted=None):
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
        keys = _extended(cached_keys, start, split(attention.key(hidden)))
        values = _extended(cached_values, start, split(attention.value(hidden)))
        kept.append((keys, values))
        hidden = hidden[:, _read_rows(i, len(base.encoder.layer), wanted, start)]
        out = F.scaled_dot_product_attention(split(attention.query(hidden)), keys.narrow(2, 0, end),
                                             values.narrow(2, 0, end), scale=attention.scaling)
        attended = layer.attention.output(out.transpose(1, 2).reshape(*hidden.shape), hidden)
        hidden = layer.output(layer.intermediate(attended), attended)
    return hidden, kept, []


def _modernbert(mlm, windows, start, cached, keep, room, wanted=None):
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
            keys, values = _extended(cached_keys, start, keys), _extended(cached_values, start, values)
            kept.append((keys, values))
            keys, values = keys.narrow(2, 0, windows.shape[1]), values.narrow(2, 0, windows.shape[1])
        read = _read_rows(i, len(base.layers), wanted, start)
        queries, hidden = queries[:, :, read], hidden[:, read]
        out = F.scaled_dot_product_attention(queries, keys, values,
                                             attn_mask=None if mask is None else mask[read],
                                             scale=attention.head_dim ** -0.5)
        out = out.transpose(1, 2).reshape(*hidden.shape)
        hidden = hidden + attention.out_drop(attention.Wo(out))
        hidden = hidden + layer.mlp(layer.mlp_norm(hidden))
    return base.final_norm(hidden), kept, []


def _buckets(attention, query_at: torch.Tensor, key_at: torch.Tensor) -> torch.Tensor:
    """DeBERTa-v2's relative position of each query to each key, bucketed as
    ``build_relative_position`` does, but for any query and key positions."""
    relative = query_at[:, None] - key_at[None, :]
    if attention.position_buckets > 0 and attention.max_relative_positions > 0:
        relative = make_log_bucket_position(relative, attention.position_buckets,
                                            attention.max_relative_positions)
    return relative.long()


def _deberta_v2(mlm, windows, start, cached, keep, room, wanted=None):
    """DeBERTa-v2's layers (``DebertaV2Layer``, ``DisentangledSelfAttention``, the optional
    convolution after the first layer) written out with a key/value cache."""
    base = mlm.base_model
    encoder = base.encoder
    block_at = torch.arange(start, windows.shape[1], device=windows.device)
    embedded = base.embeddings(input_ids=windows[:, start:], position_ids=block_at[None])
    rows, length = embedded.shape[:2]
    query_base = keep if cached is None else cached.query_base  # a refresh sets it
    # the bucketed distances are the same in every layer: computed once per call
    indices = (_position_indices(encoder.layer[0].attention.self, block_at, keep, query_base, room)
               if encoder.relative_attention else None)
    hidden, kept, shared = embedded, [], []
    for i, layer in enumerate(encoder.layer):
        attention = layer.attention.self
        heads = attention.num_attention_heads

        def split(x):  # (rows, tokens, heads * d) -> (rows, heads, tokens, d)
            return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)

        queries = split(attention.query_proj(hidden))
        keys, values = split(attention.key_proj(hidden)), split(attention.value_proj(hidden))
        types = attention.pos_att_type
        scale = math.sqrt(queries.shape[-1] * (1 + ("c2p" in types) + ("p2c" in types)))
        cached_keys, cached_values, p2c_cached = (cached.layers[i] if cached is not None
                                                  else (None, None, None))
        key_buffer, value_buffer = _extended(cached_keys, start, keys), _extended(cached_values, start, values)
        keys, values = key_buffer.narrow(2, 0, windows.shape[1]), value_buffer.narrow(2, 0, windows.shape[1])
        scores = queries @ (keys.transpose(-1, -2) / scale)
        p2c_kept = keys.new_zeros(rows, 0)  # (no p2c term: nothing to keep)
        if attention.relative_attention:
            # the position table's projections depend on the weights only: once per refresh
            projections = (cached.shared[i] if cached is not None
                           else _position_projections(attention, encoder, split))
            shared.append(projections)
            position_scores, p2c_kept = _disentangled(projections, indices, scale, queries, keys,
                                                      p2c_cached, start - query_base)
            scores = scores + position_scores
        kept.append((key_buffer, value_buffer, p2c_kept))
        context = (scores.softmax(-1) @ values).transpose(1, 2).reshape(rows, length, -1)
        if not (i == 0 and encoder.conv is not None):  # (the convolution reads every row)
            read = _read_rows(i, len(encoder.layer), wanted, start)
            context, hidden = context[:, read], hidden[:, read]
        attended = layer.attention.output(context, hidden)
        hidden = layer.output(layer.intermediate(attended), attended)
        if i == 0 and encoder.conv is not None:
            hidden = _deberta_conv(encoder.conv, embedded, hidden,
                                   cached.layers[-1][0] if cached is not None else None)
    if encoder.conv is not None:  # the embeddings a later block's convolution reads
        width = (encoder.conv.conv.kernel_size[0] - 1) // 2
        if cached is not None:
            embedded = torch.cat([cached.layers[-1][0], embedded], 1)
        first_at = windows.shape[1] - embedded.shape[1]
        kept.append((embedded[:, max(keep - width, first_at) - first_at:keep - first_at],))
    return hidden, kept, shared


def _position_projections(attention, encoder, split):
    """(pos_key, pos_query): the relative-position table projected for c2p and for p2c, each
    (1, heads, 2 span, d) or None when the layer has no such term."""
    table = encoder.get_rel_embedding()[:2 * attention.pos_ebd_size][None]
    shared, types = attention.share_att_key, attention.pos_att_type
    pos_keys = (split(attention.key_proj(table) if shared else attention.pos_key_proj(table))
                if "c2p" in types else None)
    pos_queries = (split(attention.query_proj(table) if shared else attention.pos_query_proj(table))
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


def _disentangled(projections, indices, scale, queries, keys, p2c_cached, first_query):
    """DeBERTa-v2's position terms for the block's queries against every key (c2p and p2c, see
    ``_position_indices``), and the p2c scores of the kept keys. p2c depends on the key's content,
    so for cached keys it comes from the step that kept them, which keeps it for the query
    positions tails can take (a gather from what that step computes anyway); the block's queries
    are rows ``first_query`` on of those."""
    rows, heads, length = queries.shape[:3]
    pos_keys, pos_queries = projections
    c2p_index, p2c_index, kept_index = indices
    total, p2c_kept = 0, keys.new_zeros(rows, 0)

    def gathered(scores, index):  # scores (rows, heads, a, 2 span), index (a, b) -> (rows, heads, a, b)
        return scores.gather(-1, index.expand(rows, heads, -1, -1)) / scale  # scaled apart, as the model

    if pos_keys is not None:
        total = total + gathered(queries @ pos_keys.transpose(-1, -2), c2p_index)
    if pos_queries is not None:
        own = keys[:, :, keys.shape[2] - length:] @ pos_queries.transpose(-1, -2)  # the block's keys
        block = gathered(own, p2c_index).transpose(-1, -2)
        start = keys.shape[2] - length  # cached keys
        if p2c_cached is not None:
            block = torch.cat([p2c_cached[:, :, first_query:first_query + length, :start], block], -1)
        total = total + block
        p2c_kept = _extended(p2c_cached, start, dim=3, block=gathered(
            own[:, :, :kept_index.shape[0]], kept_index).transpose(-1, -2))
    return total, p2c_kept


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


# model_type -> how that family encodes a block with a cache
ENCODERS = {"bert": _bert, "roberta": _bert, "modernbert": _modernbert, "deberta-v2": _deberta_v2}


def encoder_of(mlm):
    """The family's block encoder, or a ValueError naming the supported families."""
    model_type = getattr(mlm.config, "model_type", "")
    if model_type not in ENCODERS:
        raise ValueError(f"The prefix cache supports the {', '.join(ENCODERS)} families, not "
                         f"{model_type or type(mlm).__name__}; use cache='exact' for this model.")
    return ENCODERS[model_type]


# ---------------------------------------------------------------- one request's cache


class PrefixCache:
    """One generation's cache (made per request: nothing is stored on the shared model).

    ``next_token_logits`` has the exact method's inputs and outputs: the text ids of every row and
    their windows in, the logits at each row's predicted mask out.

    Refresh on doubt: a tail step whose top two logits (any row) are less than ``margin`` apart
    (scaled by the cache's age, see ``MARGIN_RAMP``) is redone as a refresh. A near-tie is where
    the cache's small error can flip the choice, and a flipped token changes everything after it;
    the refresh makes that step exact and brings the cache up to date.
    """

    def __init__(self, mlm, head, padding_masks: int, refresh_every: int, margin: float = 0.0):
        self.mlm, self.head, self.encode = mlm, head, encoder_of(mlm)
        self.refresh_every, self.margin = refresh_every, margin
        # query positions a tail can take after a refresh: it starts at most R - 1 positions
        # later and holds FRESH text tokens, the predicted mask, the padding masks and the end
        self.room = refresh_every + FRESH + padding_masks + 1
        self.prefix: Prefix | None = None
        self.steps = self.refreshes = 0  # what the app and the benchmark report

    def next_token_logits(self, input_ids: torch.Tensor, windows: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        at = input_ids.shape[1] + 1  # the predicted mask's position in the window
        keep = max(at + 1 - FRESH, 1)  # the next step's tail starts here ([CLS] always cached)
        rows = self._cached_rows(input_ids)
        if rows is not None:
            cached = self.prefix.rows(rows)
            hidden, layers, _ = self.encode(self.mlm, windows, cached.start, cached,
                                            max(keep, cached.start), self.room, at)
            logits = self.head(hidden[:, 0])
            age = input_ids.shape[1] - cached.refreshed_at  # tokens since the last refresh
            margin = self.margin * min(1.0, age / MARGIN_RAMP)
            if margin <= 0 or bool((_top_two_gap(logits) >= margin).all()):
                self.prefix = Prefix(input_ids, max(keep, cached.start), layers, cached.shared,
                                     cached.query_base, cached.refreshed_at)
                return logits
        # refresh: the whole window, exact
        self.refreshes += 1
        hidden, layers, shared = self.encode(self.mlm, windows, 0, None, keep, self.room, at)
        self.prefix = Prefix(input_ids, keep, layers, shared, keep, input_ids.shape[1])
        return self.head(hidden[:, 0])

    def _cached_rows(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        """For each row, the cached row whose text it extends; None when a refresh is due."""
        if self.prefix is None or input_ids.shape[1] - self.prefix.refreshed_at >= self.refresh_every:
            return None
        cached = self.prefix.text
        same = (input_ids[:, None, :cached.shape[1]] == cached[None]).all(-1)  # (rows, cached)
        if not bool(same.any(-1).all()):
            return None
        return same.int().argmax(-1)


def _top_two_gap(logits: torch.Tensor) -> torch.Tensor:
    """Per row, the best logit minus the second best (= the gap in log-probabilities)."""
    top = logits.topk(2, dim=-1).values
    return top[:, 0] - top[:, 1]
