"""The block cache: a faster, approximate way for a masked LM to write block by block
(``GenerationSettings(window="block", cache="prefix")``; docs/method.md, section 9).

Writing in blocks (``demo.engine.unmasking``), the exact way reads the whole window at every step:

    window = [CLS] prompt finished-blocks [open block] [later blocks' masks] [SEP]

The block cache is Fast-dLLM's prefix cache (arXiv 2505.22618): at a block's first step the whole
window is read (a *refresh*, exact) and every layer's keys and values of what precedes the open
block, the prompt and the finished blocks, are kept; the block's other steps read only the open
block and what follows it, its queries attending to the kept keys and values and to its own. A
refresh also comes every ``refresh_every`` steps within a block: 1 makes every step a refresh,
the exact way, token for token (tested). What is approximate: the kept positions' states are
those of the block's first step, before its tokens were written, so the prompt's and the
finished blocks' states do not see the tokens the open block has written since; the tokens after
the open block are read fresh (Fast-dLLM's dual cache would keep those too).

The layers with a key/value cache are the prefix cache's (``demo.engine.prefix_cache``: one
``encode_block`` per family, DeBERTa's enhanced mask decoder included); the other families are
refused with the list of those it runs.
"""

import torch

from .counting import count_pass
from .prefix_cache import Prefix, encoder_of


class BlockCache:
    """One generation's block cache: ``hidden`` gives what the head reads at the masks a step
    reads, from the kept keys and values of the window before the open block."""

    def __init__(self, mlm, refresh_every: int):
        self.mlm, self.encode, self.refresh_every = mlm, encoder_of(mlm), refresh_every
        self.prefix: Prefix | None = None
        self.steps = self.refreshes = 0  # steps since the last refresh; refreshes made

    def hidden(self, ids: list[int], read: list[int], open_from: int) -> torch.Tensor:
        """[len(read), hidden]: the final states at window positions ``read`` (all at or after
        ``open_from``, the open block's first position) of the one-row window ``ids``."""
        window = torch.tensor([ids], device=self.mlm.device)
        wanted = range(open_from, len(ids))  # the last layer's rows: the block and what follows
        if self.prefix is None or self.prefix.start != open_from or self.steps >= self.refresh_every:
            count_pass(window)
            hidden, layers, shared = self.encode(self.mlm, window, 0, None, open_from, len(ids) - open_from, wanted)
            self.prefix = Prefix(window, open_from, layers, shared, open_from, 0)
            self.steps, self.refreshes = 0, self.refreshes + 1
        else:
            count_pass(window[:, open_from:])
            hidden, _, _ = self.encode(self.mlm, window, open_from, self.prefix, open_from,
                                       len(ids) - open_from, wanted)
        self.steps += 1
        return hidden[0, [p - open_from for p in read]]
