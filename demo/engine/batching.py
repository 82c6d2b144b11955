"""How the scoring methods run their forward passes: rows cut into sub-batches under a token
budget, right-padded, and the prediction head applied to the rows read in chunks.

Shared by the PLL's masked copies and the causal LM's texts (``demo.engine.pll``) and the
decoder's windows (``demo.engine.pll_decoder``): one budget rule, one padding rule, one way to
turn hidden states into a true token's log-probability and rank.
"""

import torch

HEAD_ROWS = 256  # hidden states sent through the vocabulary projection at a time


def sub_batches(lengths: list[int], token_budget: int) -> list[list[int]]:
    """Indices grouped so that count x longest length <= token_budget, longest first."""
    order = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    batches, current = [], []
    for k in order:
        if current and (len(current) + 1) * lengths[current[0]] > token_budget:
            batches.append(current)
            current = []
        current.append(k)
    if current:
        batches.append(current)
    return batches


def padded(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of ``rows`` right-padded to the longest: every row keeps its
    positions 0..n-1, and the mask hides the padding."""
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        input_ids[r, :len(row)] = torch.tensor(row)
        attention[r, :len(row)] = 1
    return input_ids.to(device), attention.to(device)


def logprobs_and_ranks(head, hidden: torch.Tensor, true_ids: torch.Tensor,
                       banned: torch.Tensor | None = None) -> tuple[list[float], list[int]]:
    """log P(true token) and its rank (1 = top), from the head applied to ``hidden`` rows in chunks.

    Chunks bound the [rows, vocab] logits (a causal LM scores every token of a long text).
    ``banned``: token ids left out of the distribution, as a decoder that never writes them
    leaves them out (``demo.engine.pll_decoder``); a row's true token always stays in, so a text
    holding one of them (an unknown character's [UNK]) still gets a finite score.
    """
    logprobs, ranks = [], []
    for start in range(0, len(true_ids), HEAD_ROWS):
        true_ids_here = true_ids[start:start + HEAD_ROWS, None]
        logits = head(hidden[start:start + HEAD_ROWS]).float()
        if banned is not None:
            kept = logits.gather(1, true_ids_here)
            logits[:, banned] = float("-inf")
            logits.scatter_(1, true_ids_here, kept)
        chunk = logits.log_softmax(-1)
        true = chunk.gather(1, true_ids_here)
        logprobs += true[:, 0].tolist()
        ranks += ((chunk > true).sum(1) + 1).tolist()
    return logprobs, ranks
