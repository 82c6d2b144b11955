"""The decoder's own likelihood: a masked LM scores a text by the probability that its
left-to-right generation writes it (``ScoringSettings.method="decoder"``; docs/method.md,
section 3).

Generation (``demo.engine.mlm_decoder``) predicts each next token at the first mask of

    [CLS] text-so-far [MASK] [MASK]*p [SEP]

so a candidate w_0..w_k after a context c is scored token by token in the same windows:

    log P(w | c) = sum_i log P(w_i | [CLS] c w_<i [MASK] [MASK]*p [SEP])

the BERTs paper's "exact unidirectional computation of log-likelihood, using the same input
formatting as for generation" (Table 5, last row). Everything is generation's: the window's
layout and special ids (``WindowSpecials``), the padding masks (the family's default unless
set), what the head reads (``demo.engine.reading.hidden_at``: DeBERTa's enhanced mask decoder
where it is on) and the tokens the decoder may write (``demo.engine.generation.suppressed_ids``:
never [CLS], [MASK], [PAD], [UNK]). So each token's probability is the one greedy decoding and
sampling at temperature 1 choose from, and a generated text's score is the sum of its steps'
log-probabilities (tested).

Unlike a PLL copy, a window holds nothing after its masks: the rest of the text is absent, not
hidden. One window per scored token, as long as the text before it plus p + 3; the windows of
all texts share the sub-batches of the token budget (``demo.engine.batching``). Exact: the
context's states depend on what follows it in each window, so no prefix is shared between them.
"""

import torch
from tqdm.auto import tqdm

from .batching import logprobs_and_ranks, padded, sub_batches
from .decoding import suppressed_ids
from .heads import mlm_head
from .mask_window import window_length
from .mlm_decoder import WindowSpecials
from .reading import hidden_at


def windows(lm, texts, padding_masks: int) -> list[tuple[int, int, list[int]]]:
    """(text index, scored position, window) for every scored token of ``texts`` (the scoring
    engine's tokenized texts: ``ids``, ``special``, ``scored``). The window is generation's for
    the text before the token: the tokenizer's own specials left out, the window's put around."""
    specials = WindowSpecials.of(lm.tokenizer)
    masks = [specials.mask] * (1 + padding_masks)
    rows = []
    for k, t in enumerate(texts):
        scored, before = set(t.scored), []
        for i, (token_id, special) in enumerate(zip(t.ids, t.special)):
            if i in scored:
                rows.append((k, i, [specials.start, *before, *masks, specials.end]))
            if not special:  # a special typed into the text is text, as in a prompt
                before.append(token_id)
    return rows


def check_room(lm, t, padding_masks: int) -> None:
    """Refuse (InputTooLong) a text whose last scored token's window is longer than an
    absolute-position model reads: that window is p + 1 tokens longer than the text before it
    with its own specials."""
    before = sum(not special for special in t.special[:t.scored[-1]])
    lm.check_length(window_length(before, padding_masks),
                    what=f"window that predicts its last token ([CLS], the text before it, [MASK], "
                         f"{padding_masks} padding mask(s), [SEP])")


@torch.inference_mode()
def decoder_scores(lm, texts, padding_masks: int, token_budget: int,
                   progress: bool) -> dict[tuple[int, int], tuple[float, int, tuple]]:
    """(text index, position) -> (logprob, rank among the tokens the decoder may write, the
    window's mask positions) for every scored token, one window per token, batched."""
    head = mlm_head(lm.model)
    end = WindowSpecials.of(lm.tokenizer).end
    banned = torch.tensor(suppressed_ids(lm, [end]), dtype=torch.long, device=lm.device)
    rows = windows(lm, texts, padding_masks)
    results = {}
    with tqdm(total=len(rows), desc="Scoring (decoder windows)", unit="window",
              disable=not progress) as bar:
        for batch in sub_batches([len(window) for *_, window in rows], token_budget):
            input_ids, attention = padded([rows[r][2] for r in batch], lm.tokenizer.pad_token_id,
                                          lm.device)
            # the predicted mask: before the padding masks and the end token
            at = [len(rows[r][2]) - padding_masks - 2 for r in batch]
            true_ids = torch.tensor([texts[rows[r][0]].ids[rows[r][1]] for r in batch], device=lm.device)
            hidden = hidden_at(lm.model, input_ids, attention, list(range(len(batch))), at)
            logprobs, ranks = logprobs_and_ranks(head, hidden, true_ids, banned)
            for r, a, logprob, rank in zip(batch, at, logprobs, ranks):
                k, i, _ = rows[r]
                results[(k, i)] = (logprob, rank, tuple(range(a, a + 1 + padding_masks)))
            bar.update(len(batch))
    return results
