"""What every family's prefix-cache block encoder shares (``demo.engine.prefix_cache``).

A family's module has ``encode_block(mlm, windows, start, cached, keep, room, wanted=None)``: it
encodes a block of the window, windows[:, start:], given the cache of positions [0, start)
(``cached``, a ``Prefix``; None when start = 0), and returns (the block's hidden states, the layers
of positions [0, keep), the shared list): the cache, extended by the block's first keep - start
positions (keep >= 1: [CLS] is always cached). A refresh is start = 0; a tail step is
start = cached.start, keep = start + 1. Keys and values (and DeBERTa-v2's p2c scores) are buffers
that hold those positions first and room after them (``extended``), written in place: a tail step
reuses its cache's buffers, so a cache is good until the next one is made from it. ``room`` is how
many query positions, from the last refresh's ``keep`` on, tails can take (DeBERTa-v2 precomputes
the kept keys' position-to-content scores for them). ``wanted``: the window position whose final
hidden state a step reads, or a range of them (None: the whole block's, as tests read).
"""

import torch

# Positions of room a cached key/value buffer gets past what it holds (see ``extended``): a tail
# step writes FRESH + masks + 2 positions and keeps one, so R <= 32 steps rarely outgrow it.
GROWTH = 64


def read_rows(layer: int, layers: int, wanted: int | range | None, start: int) -> slice:
    """The block rows a layer must output: all of them but in the last layer, where a step reads
    only its predicted mask (``wanted``, a window position), or with parallel unmasking the masks
    after it too (a range of positions). The last layer's keys and values are kept for every
    position; its queries, attention and feed-forward for the others would serve nothing."""
    if wanted is None or layer < layers - 1:
        return slice(None)
    wanted = range(wanted, wanted + 1) if isinstance(wanted, int) else wanted
    return slice(wanted.start - start, wanted.stop - start)


def extended(buffer: torch.Tensor | None, start: int, block: torch.Tensor, dim: int = 2) -> torch.Tensor:
    """``buffer`` with ``block`` written at positions [start, start + n) along ``dim``; the
    positions before ``start`` are kept. The buffer has room after its positions, so a step writes
    its block in place (a larger copy only when the room runs out), where a ``torch.cat`` per
    layer and step would copy the whole cache every step. Readers take the positions they need
    with ``narrow``."""
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


def attend_cached(layers: list, hidden: torch.Tensor, start: int, cached, wanted, keys_values, layer_at):
    """The layers of families whose attention is plain (BERT's, ALBERT's) over a block:
    ``keys_values(layer, hidden)`` gives a layer's keys and values, ``layer_at(layer, rows, keys,
    values)`` its output at ``rows``; each layer's keys and values are kept with the cache's (the
    block encoder's contract). Returns (the block's hidden states, the kept layers)."""
    end, kept = start + hidden.shape[1], []
    for i, layer in enumerate(layers):
        cached_keys, cached_values = cached.layers[i] if cached is not None else (None, None)
        keys, values = keys_values(layer, hidden)
        keys, values = extended(cached_keys, start, keys), extended(cached_values, start, values)
        kept.append((keys, values))
        hidden = layer_at(layer, hidden[:, read_rows(i, len(layers), wanted, start)],
                          keys.narrow(2, 0, end), values.narrow(2, 0, end))
    return hidden, kept
