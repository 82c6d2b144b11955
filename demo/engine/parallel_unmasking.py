"""Parallel unmasking: a masked LM writes several tokens from one forward pass (an approximation).

The window ``[CLS] text [MASK] [MASK]*p [SEP]`` gives a distribution at every mask, and the
exact method reads only the first. Confidence-gated parallel unmasking (Fast-dLLM, Wu et al.
2025, on diffusion LMs) also commits the next masks whose top probability passes a threshold:
after a pass, padding mask 1's guess stands for the next token if it is confident, mask 2's for
the one after if mask 1's and its own both are, and so on; each such token saves a pass. The
guess at mask j was made with masks where the tokens before it now stand, so it may differ from
what the exact method, reading the real tokens, would pick: ``benchmarks/bench_cache.py``
measures speed-up and agreement with the exact method per threshold (docs/method.md, section 2).

It works through ``generate()`` unchanged, as one more seam of ``MaskedLMAsCausalLM``: a step
whose rows all extend the last pass's texts by tokens it guessed confidently returns that pass's
logits at the right mask instead of running the model, so constraints, penalties and beam search
still act on every step; where they pick another token than the guess, the next step runs the
model again.
"""

from dataclasses import dataclass

import torch


@dataclass
class Guesses:
    """What the last forward pass saw and predicted, for the steps after it."""
    text: torch.Tensor  # (rows, n) the text ids each row had
    windows: torch.Tensor  # (rows, window) what it saw (the step trace shows it for steps read from it)
    logits: torch.Tensor  # (rows, 1 + p, vocab) at the predicted mask and the p padding masks
    confident: torch.Tensor  # (rows,) how many padding masks, from the first on, pass the threshold

    @classmethod
    def of(cls, text: torch.Tensor, windows: torch.Tensor, logits: torch.Tensor,
           threshold: float) -> "Guesses":
        passes = logits[:, 1:].float().softmax(-1).amax(-1) >= threshold  # (rows, p)
        return cls(text, windows, logits, passes.int().cumprod(-1).sum(-1))

    def next_logits(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int] | None:
        """(logits, the windows they were read from, j) for a step whose rows each extend a row
        of the pass by j >= 1 tokens: the pass's logits at padding mask j. None where a row does
        not: a text that extends no row of the pass, a mask j that is not confident, or tokens
        committed since the pass other than its own guesses (the first, at the predicted mask,
        is whatever the decoder chose)."""
        n = self.text.shape[1]
        j = input_ids.shape[1] - n
        if not 1 <= j < self.logits.shape[1]:
            return None
        same = (input_ids[:, None, :n] == self.text[None]).all(-1)  # (rows, rows of the pass)
        if not bool(same.any(-1).all()):
            return None
        source = same.int().argmax(-1)  # beams are reordered and duplicated between steps
        guessed = self.logits[source, 1:j].argmax(-1)  # (rows, j - 1)
        if not bool(((input_ids[:, n + 1:] == guessed).all(-1) & (self.confident[source] >= j)).all()):
            return None
        return self.logits[source, j], self.windows[source], j
