"""Half-precision answers that do not depend on the batch they ran in (``make_batch_invariant``).

The app batches what a class sends together; a student's answer must be, bit for bit, the one
the same request gets alone. In bfloat16 on the CPU it was not, for two reasons (the field's name is
batch invariance):

- a matrix multiply's kernel, and so the order it adds in, is picked by the matrix's shape
  (oneDNN's blocking; a lone 20-token text and a batch of 400 rows are different shapes for the
  same rows);
- the fused attention kernel adds a row's keys in other vector lanes and blocks when padding
  shifts them (a left-padded row in ``generate()``) or lengthens the row.

Two changes make a row's bits its own, whatever else is in its batch and wherever it sits in it:

- every linear layer multiplies fixed tiles of ``TILE`` rows (the last one padded with zeros), so
  each product has one shape, one kernel and one order of addition, and a row's result never
  depends on the other rows of its tile;
- attention runs one batch row at a time on that row's own tokens, padding cut off, with an explicit
  mask: the very call the row makes alone.

No library does this on the CPU (batch_invariant_ops replaces GPU kernels with Triton ones), so it
is done here, on the model's own modules: transformers' attention interface takes the per-row
attention by name, the families' hand-written layers call :func:`sdpa`, and each ``nn.Linear`` gets
the tiled forward.
"""

import types

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

TILE = 32  # rows per linear-layer call: a decoding class's rows fill about one
ATTENTION = "sdpa_per_row"  # the attention implementation's registered name


def per_row(attend, query, key, value, allowed, queries: list[slice] | None = None) -> torch.Tensor:
    """``attend(query, key, value, mask)`` ([1, heads, q, d] each, out alike) one batch row at a
    time, on the row's own keys (those some query may read: padding is on one side, so they are one
    run) and its own queries (``queries``, per row; None: the last keys' positions, as in
    self-attention with or without a cache), with an explicit mask: exactly as the row runs alone.
    ``allowed``: [batch, heads or 1, queries, keys], True where a query may read a key."""
    batch, q_length, kv_length = query.shape[0], query.shape[2], key.shape[2]
    real = allowed.any(2).any(1)  # [batch, keys]
    first, last = real.int().argmax(1).tolist(), (kv_length - real.flip(1).int().argmax(1)).tolist()
    new = kv_length - q_length
    out = query.new_zeros(batch, query.shape[1], q_length, value.shape[-1])
    for row, (start, end) in enumerate(zip(first, last)):
        keys = slice(start, end)
        own = queries[row] if queries is not None else slice(max(start - new, 0), end - new)
        out[row:row + 1, :, own] = attend(query[row:row + 1, :, own], key[row:row + 1, :, keys],
                                          value[row:row + 1, :, keys], allowed[row:row + 1, :, own, keys])
    return out


def sdpa(query, key, value, mask, scale=None, own_queries: list[int] | None = None) -> torch.Tensor:
    """Bidirectional attention as the families' own layers run it (``demo.engine.families``): one
    call over the batch, or each row on its own where it computes in half precision on the CPU.
    ``own_queries``: per row, how many of its first queries are its own (the rest fill the batch);
    None: all."""
    if not needed(query):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)
    allowed = _allowed(False, mask, query.shape[0], query.shape[2], key.shape[2], query.device)
    queries = [slice(0, n) for n in own_queries] if own_queries else [slice(None)] * query.shape[0]
    return per_row(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale),
                   query, key, value, allowed, queries)


def per_row_attention(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention (its interface's signature and output layout), row by row
    (:func:`per_row`)."""
    allowed = _allowed(getattr(module, "is_causal", True), attention_mask, query.shape[0], query.shape[2],
                       key.shape[2], query.device)

    def attend(q, k, v, mask):
        return sdpa_attention_forward(module, q, k, v, mask, **kwargs)[0].transpose(1, 2)
    return per_row(attend, query, key, value, allowed).transpose(1, 2), None


def _allowed(causal: bool, attention_mask, batch, q_length, kv_length, device) -> torch.Tensor:
    """Which keys each query reads, as a [batch, heads or 1, queries, keys] boolean tensor, also
    where the mask is left out (no padding: causal or full)."""
    if attention_mask is None:
        full = torch.ones(q_length, kv_length, dtype=torch.bool, device=device)
        if q_length > 1 and causal:
            full = full.tril(kv_length - q_length)
        return full.expand(batch, 1, q_length, kv_length)
    allowed = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
    return allowed.expand(batch, allowed.shape[1], q_length, kv_length)


AttentionInterface.register(ATTENTION, per_row_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)


def tiled_linear(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``self(x)`` as a batch of ``TILE``-row multiplies (one ``bmm``: each tile is its own
    [TILE, in] x [in, out] product, computed alike in any batch), the bias added after."""
    rows = x.reshape(-1, x.shape[-1])
    n = rows.shape[0]
    padding = -n % TILE
    if padding:
        rows = torch.cat([rows, rows.new_zeros(padding, rows.shape[1])])
    tiles = rows.view(-1, TILE, rows.shape[1])
    weight = self.weight.T.expand(tiles.shape[0], *self.weight.T.shape)
    out = torch.bmm(tiles, weight).view(-1, self.out_features)[:n]
    if self.bias is not None:
        out = out + self.bias
    return out.view(*x.shape[:-1], self.out_features)


def needed(computed: nn.Module | torch.Tensor) -> bool:
    """Whether a model (or a tensor it computes) is in a half precision on the CPU. float32 is left
    as it is: there a batched row agrees with the row alone to float32's rounding (tests/floats.py),
    and the tiles and the per-row loop would cost it 1.2-2.4x on a 2-core AVX2 CPU."""
    tensor = computed if isinstance(computed, torch.Tensor) else next(computed.parameters())
    return tensor.device.type == "cpu" and tensor.dtype in (torch.bfloat16, torch.float16)


def make_batch_invariant(model: nn.Module) -> nn.Module:
    """``model`` with the tiled linear layers and the per-row attention where it computes in a half
    precision on the CPU (``needed``). A model whose attention is not transformers' interface
    (DeBERTa's disentangled attention) keeps its own and gets the tiled linear layers only."""
    if not needed(model):
        return model
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.forward = types.MethodType(tiled_linear, module)
    if getattr(model.config, "_attn_implementation", None) in ("sdpa", "eager"):
        model.set_attn_implementation(ATTENTION)
    return model
