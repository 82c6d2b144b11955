"""The positions a padded batch reads, as query slots per batch row: what the families'
``states_at`` (the last layer at the rows read only, ``demo.engine.reading``) share.

The last layer's keys and values need every position, its queries only the positions read. A
read (rows[i], cols[i]) becomes a slot of its batch row, so each row's queries attend to that
row's keys only (and its padding stays masked) without copying keys per read.
"""

import torch


def query_positions(rows, cols, batch: int, device) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """(query_at [batch, M], reads): the positions read per batch row (M = most reads of one row;
    unused slots read position 0 and are dropped), and the index (rows, slots) that takes each
    read's output, in the order read, from [batch, M, ...]."""
    rows, cols = torch.as_tensor(rows, device=device), torch.as_tensor(cols, device=device)
    counts, slots = [0] * batch, []
    for row in rows.tolist():
        slots.append(counts[row])
        counts[row] += 1
    slots = torch.tensor(slots, dtype=torch.long, device=device)
    query_at = torch.zeros(batch, max(counts + [1]), dtype=torch.long, device=device)
    query_at[rows, slots] = cols
    return query_at, (rows, slots)


def own_queries(reads: tuple[torch.Tensor, torch.Tensor], batch: int) -> list[int]:
    """Per batch row, how many of its query slots are reads (the rest fill the batch)."""
    return torch.bincount(reads[0], minlength=batch).tolist()


def rows_at(states: torch.Tensor, query_at: torch.Tensor) -> torch.Tensor:
    """``states`` [batch, length, ...] at the query positions: [batch, M, ...]."""
    index = query_at.view(*query_at.shape, *[1] * (states.dim() - 2)).expand(-1, -1, *states.shape[2:])
    return states.gather(1, index)


def device_of(layer) -> torch.device:
    """Where a layer's weights are (a model spread over devices puts layers apart)."""
    return next(layer.parameters()).device


def last_layer_at(last, hidden: torch.Tensor, attention_mask: torch.Tensor | None, rows, cols,
                  keys_values, layer_at) -> torch.Tensor:
    """A plain-attention last layer (BERT's, ALBERT's) at the positions read, from its input
    ``hidden`` [batch, length, width]: its keys and values from every position, its queries,
    attention and feed-forward only at (rows[i], cols[i]); padding masked. [len(rows), width]."""
    device = device_of(last)
    hidden = hidden.to(device)
    query_at, reads = query_positions(rows, cols, hidden.shape[0], device)
    keys, values = keys_values(last, hidden)
    padding = None if attention_mask is None else attention_mask.to(device).bool()[:, None, None, :]
    return layer_at(last, rows_at(hidden, query_at), keys, values, padding, own_queries(reads, hidden.shape[0]))[reads]
