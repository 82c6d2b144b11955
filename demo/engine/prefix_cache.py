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

Each family's layers with a key/value cache are its own module in ``demo.engine.families`` (what
they compute: ``demo.engine.families.blocks``); the families table names it (``Family.prefix_cache``,
listed in ``PREFIX_CACHE_FAMILIES``). The other families are refused with a ValueError that names
these.
"""

import importlib
from dataclasses import dataclass

import torch

from . import families
from .counting import count_pass

# The last FRESH text tokens are re-encoded at every step with the masks: they are the ones whose
# states change most when a token is generated right after them. At least 2 (the predicted
# mask's position must never be cached). Picked with benchmarks/bench_cache.py: agreement with the
# exact method rises up to 16 and not beyond, while a tail step's cost hardly grows up to 16
# (docs/method.md, section 2, has the figures).
FRESH = 16
# Refresh on doubt grows with the cache's age: a step t tokens after the last refresh is redone
# when its top two tokens are less than margin * min(1, t / MARGIN_RAMP) apart. Every token
# generated since the refresh is one the cached states have not seen, so their error grows with
# t; right after a refresh only a near-exact tie can flip. Picked with the same benchmark (fewest
# refreshes at the flat margin's agreement; docs/method.md, section 2).
MARGIN_RAMP = 24


@dataclass
class Prefix:
    """The cached states: of window positions [0, start), for the text each row had when they
    were last extended, and where the last refresh put the first tail query (``query_base``)."""
    text: torch.Tensor  # (rows, n) text ids after [CLS]
    start: int  # cached positions: [0, start) of the window
    layers: list[tuple[torch.Tensor, ...]]  # batch-first, per family: keys, values (DeBERTa: more);
    # key/value buffers hold positions [0, start) first, then room (``families.blocks.extended``)
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


# ---------------------------------------------------------------- the family's block encoder


def encoder_of(mlm):
    """The family's block encoder (``encode_block`` of the module its ``Family.prefix_cache`` names),
    or a ValueError naming the families the prefix cache supports."""
    family = families.family_of(mlm.config)
    if family.prefix_cache is None:
        model_type = getattr(mlm.config, "model_type", "") or type(mlm).__name__
        raise ValueError(f"The prefix cache supports the {', '.join(families.PREFIX_CACHE_FAMILIES)} "
                         f"families, not {model_type}; use cache='exact' for this model.")
    return importlib.import_module(f"{families.__name__}.{family.prefix_cache}").encode_block


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
        self.refreshed: list[bool] = []  # per step: was it a refresh (the step trace marks them)

    def next_token_logits(self, input_ids: torch.Tensor, windows: torch.Tensor, reads: int = 1) -> torch.Tensor:
        """(rows, reads, vocab) logits at the predicted mask and the ``reads - 1`` masks after it
        (parallel unmasking reads those: ``demo.engine.parallel_unmasking``)."""
        self.steps += 1
        at = input_ids.shape[1] + 1  # the predicted mask's position in the window
        wanted = range(at, at + reads)
        keep = max(at + 1 - FRESH, 1)  # the next step's tail starts here ([CLS] always cached)
        rows = self._cached_rows(input_ids)
        if rows is not None:
            cached = self.prefix.rows(rows)
            count_pass(windows[:, cached.start:])  # the tail: what the cache lacks
            hidden, layers, _ = self.encode(self.mlm, windows, cached.start, cached,
                                            max(keep, cached.start), self.room, wanted)
            logits = self.head(hidden)
            age = input_ids.shape[1] - cached.refreshed_at  # tokens since the last refresh
            margin = self.margin * min(1.0, age / MARGIN_RAMP)
            if margin <= 0 or bool((_top_two_gap(logits[:, 0]) >= margin).all()):
                self.prefix = Prefix(input_ids, max(keep, cached.start), layers, cached.shared,
                                     cached.query_base, cached.refreshed_at)
                self.refreshed.append(False)
                return logits
        # refresh: the whole window, exact
        self.refreshes += 1
        self.refreshed.append(True)
        count_pass(windows)
        hidden, layers, shared = self.encode(self.mlm, windows, 0, None, keep, self.room, wanted)
        self.prefix = Prefix(input_ids, keep, layers, shared, keep, input_ids.shape[1])
        return self.head(hidden)

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
