"""The list-driven loop the tensor one replaced, kept for one benchmark run (bench_decoding --versus-lists).

Iterative unmasking: a masked LM writes into the masks of a window, some tokens a step, in an
order (docs/method.md, section 9). One loop for every way a masked LM writes by unmasking:

- infilling (``demo.engine.infill``): the masks are the text's blanks, one token a step;
- generation (``demo.engine.generation``): the masks follow the prompt. ``slide`` keeps M masks
  after the text, appending one for each token written (the BERTs paper: M = 1 + p padding
  masks, one token a step, left to right); ``block`` fills a block of M masks, then appends the
  next block (masked diffusion LMs' semi-autoregressive blocks); with ``masks_ahead`` every
  block's masks follow the prompt from the first step and a step writes in the first unfinished
  block only (LLaDA's and dLLM's samplers: the model reads how much room is left).

A step reads the window once (one forward pass), proposes a token at the masks it reads and writes
``tokens_per_step`` of them (most confident first, with ``confidence_threshold``: also every other
whose guess is at least that likely, Fast-dLLM's threshold writing), chosen by the order: the
leftmost (``left_to_right``), the likeliest (``confidence``: Mask-Predict's and LLaDA's; the
proposals not kept stay masked, LLaDA's "low-confidence remasking") or a seeded shuffle
(``random``). With ``remask`` (most confident first only) the tokens written earlier and not yet
final (the block's; sliding: those after the first mask) compete too, at the log-probability they
were written with, and a mask goes back where one loses to the new proposals (Mask-Predict's
re-masking): it is written again later.

Every output carries its log-likelihood under the order it was written: the sum of each token's
log-probability at the step it was (last) written, which for a deterministic order is the exact
probability that this decoder writes this output (DUEL, arXiv 2603.01367).

The loop is written here: transformers' ``generate()`` decodes one position after the text, left to
right, and has no way to write several masks of a window, in another order, or to re-mask.
"""

import math
import time
from dataclasses import dataclass, field

import torch

from ..settings import GenerationSettings, SamplingSettings, WritingSettings
from .batching import padded
from .block_cache import BlockCache
from .counting import Reads, counting
from .heads import mlm_head
from .reading import hidden_at
from .sampling import logits_processors
from .trace import StepTrace, piece_or_name


@dataclass
class Written:
    """A window after unmasking, and how it got there."""
    ids: list[int]  # the window at the end ([CLS] ... [SEP]); masks left only where a stop cut in
    order: list[list[int]]  # per step: the positions written
    remasked: list[list[int]]  # per step: the positions masked again (``remask``)
    logprobs: dict[int, float]  # per written position: its token's log-prob at the step it was last written
    written_at: dict[int, int]  # per written position: that step (0-based)
    steps: list[StepTrace] = field(default_factory=list)  # empty unless tracing
    reads: Reads = field(default_factory=Reads)


class _Sampler:
    """The token proposed at each position read: the likeliest, or a draw (``demo.engine.sampling``)."""

    def __init__(self, s: SamplingSettings, generator: torch.Generator):
        self.generator = generator
        self.penalty, self.warpers = logits_processors(s)

    def __call__(self, logits: torch.Tensor, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens, the log-probs the model gave them, after the penalty, before temperature & co.)"""
        if self.penalty:
            logits = self.penalty(torch.tensor([ids] * logits.shape[0]), logits)
        logprobs = logits.log_softmax(-1)
        if self.warpers:
            warped = self.warpers(None, logits)
            tokens = torch.multinomial(warped.softmax(-1), 1, generator=self.generator)[:, 0]
        else:
            tokens = logits.argmax(-1)
        return tokens, logprobs


class Unmasker:
    """Writes into a window's masks, step by step (``step``); the window may grow between steps
    (generation appends masks). It writes only the masks it is given (``add_masks``): a mask token
    typed into the text is text the model reads, never a blank to fill. ``banned`` ids are never
    written. ``refresh``: read against the block cache, refreshed every N steps of a block (None:
    exact); ``trace_top_k``: record each step with its top tokens (None: no trace)."""

    def __init__(self, lm, ids: list[int], writing: WritingSettings, sampling: SamplingSettings, banned: list[int],
                 refresh: int | None = None, trace_top_k: int | None = None):
        self.lm, self.writing, self.ids, self.trace_top_k = lm, writing, list(ids), trace_top_k
        self.mask = lm.tokenizer.mask_token_id
        self.head = mlm_head(lm.model)
        self.cache = BlockCache(lm.model, refresh) if refresh is not None else None
        self.banned = torch.tensor(banned, dtype=torch.long)
        self.generator = torch.Generator()
        if sampling.seed is not None:
            self.generator.manual_seed(sampling.seed)
        else:
            self.generator.seed()
        self.sample = _Sampler(sampling, self.generator)
        self.shuffled: list[int] = []  # the random order's positions not yet written, in order
        self.writable: set[int] = set()  # the positions given to write (add_masks), written or not
        self.out = Written(ids=self.ids, order=[], remasked=[], logprobs={}, written_at={})

    def masks(self) -> list[int]:
        """The positions still to write: given to write and holding a mask."""
        return sorted(p for p in self.writable if self.ids[p] == self.mask)

    def add_masks(self, positions: list[int]) -> None:
        """New masks to write (already in ``ids``): the random order draws their turn now, before
        any of their tokens, so a seed gives the same order greedy or sampled."""
        self.writable.update(positions)
        if self.writing.order == "random":
            drawn = torch.randperm(len(positions), generator=self.generator).tolist()
            self.shuffled += [positions[i] for i in drawn]

    def reading(self, upto: int | None = None) -> tuple[list[int], int]:
        """(the masks a step reads, how many it writes at least): among the masks before ``upto``
        (all when None)."""
        masks = [p for p in self.masks() if upto is None or p < upto]
        k = min(self.writing.tokens_per_step, len(masks))
        return self._read(masks, k), k

    @torch.inference_mode()
    def step(self, open_from: int, upto: int | None = None) -> list[int]:
        """One forward pass; write up to ``tokens_per_step`` of the masks before ``upto`` (all when
        None) and, with ``remask``, mask again earlier tokens from ``open_from`` on that are now
        less likely. -> the positions written."""
        read, k = self.reading(upto)
        with counting() as reads:
            if self.cache is not None:
                hidden = self.cache.hidden(self.ids, read, open_from)
            else:
                hidden = hidden_at(self.lm.model, torch.tensor([self.ids], device=self.lm.device), None,
                                   [0] * len(read), read)
            logits = self.head(hidden)
        return self.write(logits, read, k, open_from, reads)

    def write(self, logits: torch.Tensor, read: list[int], k: int, open_from: int, reads: Reads) -> list[int]:
        """A step's writing, from the head's ``logits`` at the masks ``read`` (``reading``); ``reads``:
        what its forward pass read. -> the positions written."""
        logits = logits.float().cpu()
        logits[:, self.banned] = float("-inf")
        tokens, logprobs = self.sample(logits, self.ids)
        sure = logprobs.gather(1, tokens[:, None])[:, 0].tolist()
        # re-masking: the earlier tokens not yet final compete at the log-prob they were written with
        remasking = self.writing.remask
        written = [p for p in range(open_from, len(self.ids)) if p in self.out.written_at] if remasking else []
        chosen = self._choose(read + written, len(read), sure + [self.out.logprobs[p] for p in written], k)
        remasked = [p for p in written if p not in chosen]
        if self.trace_top_k is not None:
            self.out.steps.append(self._trace(read, chosen, remasked, tokens, logprobs, reads))
        step = len(self.out.order)
        for p in remasked:
            self.ids[p] = self.mask
            del self.out.logprobs[p], self.out.written_at[p]
            if self.writing.order == "random":
                self.shuffled.append(p)
        new = [p for p in chosen if p not in self.out.written_at]
        for i, p in enumerate(read):
            if p in new:
                self.ids[p] = int(tokens[i])
                self.out.logprobs[p], self.out.written_at[p] = sure[i], step
        self.out.order.append(new)
        self.out.remasked.append(remasked)
        self.out.reads = self.out.reads + reads
        return new

    def cut(self, end: int) -> None:
        """The text ends at ``end`` (an end token was written there): every position after it
        goes, so the window ends with that end token."""
        del self.ids[end + 1:-1]
        self.ids[-1:] = [] if self.ids[end] == self.ids[-1] else self.ids[-1:]
        for p in [p for p in self.out.written_at if p > end]:
            del self.out.written_at[p], self.out.logprobs[p]
        self.shuffled = [p for p in self.shuffled if p < end]
        self.writable = {p for p in self.writable if p <= end}

    def _read(self, masks: list[int], k: int) -> list[int]:
        """The masks a step reads: all of them where the order compares them (confidence, or any
        order that may re-mask), else only the k the order names next."""
        if self.writing.order == "confidence":
            return masks
        if self.writing.order == "random":  # the next k of the drawn order among the masks open
            open_masks = set(masks)
            return sorted([p for p in self.shuffled if p in open_masks][:k])
        return masks[:k]

    def _choose(self, read: list[int], n_masks: int, sure: list[float], k: int) -> list[int]:
        """The positions that hold a token after this step (``read``: the masks read, then with
        ``remask`` the earlier tokens): the k masks the order names, or, most confident first,
        the k + (earlier tokens) surest of all, k raised to the masks whose guess passes the
        confidence threshold, if one is set."""
        if self.writing.order == "random":  # the masks read, in their drawn order
            picked = [p for p in self.shuffled if p in read]
            self.shuffled = [p for p in self.shuffled if p not in read]
            return picked
        if self.writing.order == "left_to_right":
            return read[:k]
        sure_enough = k
        if self.writing.confidence_threshold is not None:  # (a deterministic rule: the likelihood stays exact)
            floor = math.log(self.writing.confidence_threshold)
            sure_enough = max(k, sum(1 for p in sure[:n_masks] if p >= floor))
        keep = sure_enough + (len(read) - n_masks)  # confidence: the surest, new proposals and old tokens alike
        ranked = sorted(range(len(read)), key=lambda i: (-sure[i], read[i]))  # ties: leftmost
        return [read[i] for i in ranked[:keep]]

    def _trace(self, read, chosen, remasked, tokens, logprobs, reads) -> StepTrace:
        tokenizer = self.lm.tokenizer
        first = min((p for p in chosen if p not in self.out.written_at), default=read[0])
        i = read.index(first)
        context = self.ids[1:first]
        top = logprobs[i].exp().topk(min(self.trace_top_k, logprobs.shape[-1]))
        new = [p for p in sorted(chosen) if p not in self.out.written_at]
        return StepTrace(step=len(self.out.order), window=tokenizer.convert_ids_to_tokens(self.ids),
                         mask_positions=self.masks(),
                         top=[(piece_or_name(tokenizer, context, int(t), []), float(p))
                              for t, p in zip(top.indices, top.values)],
                         chosen=piece_or_name(tokenizer, context, int(tokens[i]), []), beams=None,
                         prompt_length=0, predicted=first, reads=reads,
                         written=new, remasked=list(remasked),
                         surest=float(logprobs.gather(1, tokens[:, None]).max().exp()),
                         written_tokens=[piece_or_name(tokenizer, self.ids[1:p], int(tokens[read.index(p)]), [])
                                         for p in new])


def fill(lm, ids: list[int], blanks: list[int], order: str, s, banned: list[int]) -> Written:
    """Write the masks at ``blanks`` of a fixed window (infilling), one a step in ``order``, each
    drawn as the ``InfillSettings`` ``s`` say."""
    unmasker = Unmasker(lm, ids, WritingSettings(order=order), s, banned,
                        trace_top_k=s.trace_top_k if s.trace else None)
    unmasker.add_masks(blanks)
    while unmasker.masks():
        unmasker.step(open_from=0)
    return unmasker.out


@dataclass(frozen=True)
class Growth:
    """How a generation's masks follow the text (``GenerationSettings``)."""
    window: str  # "slide": M masks kept after the text; "block": blocks of M masks, one after another
    open_masks: int  # M (demo.engine.mask_window.open_masks)
    max_new_tokens: int
    end_id: int  # the token that ends the text (a masked LM's [SEP])
    # block: every block's masks follow the prompt from the first step, filled one block at a time
    # (LLaDA's and dLLM's samplers), so the model reads how much room the text has
    ahead: bool = False


class _Growing:
    """One generation's window as its masks follow the text (``growth``): its unmasker, the masks
    appended so far, whether the text has ended, what is decided."""

    def __init__(self, lm, prompt_ids: list[int], s: GenerationSettings, growth: Growth, banned: list[int], stop):
        tokenizer = lm.tokenizer
        start_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.lm, self.growth, self.stop = lm, growth, stop
        self.begin = 1 + len(prompt_ids)
        self.unmasker = Unmasker(lm, [start_id, *prompt_ids, growth.end_id], s, s, banned,
                                 s.cache_refresh if s.cache == "prefix" else None, s.trace_top_k if s.trace else None)
        self.appended, self.ended, self.stopped, self.decided = 0, False, False, []
        self.append(growth.max_new_tokens if growth.ahead else growth.open_masks)

    def append(self, n: int) -> None:
        # a block never reaches past the budget; sliding, the last window is the paper's last:
        # max_new_tokens - 1 tokens and M masks
        growth, unmasker = self.growth, self.unmasker
        room = growth.max_new_tokens + (growth.open_masks - 1 if growth.window == "slide" else 0)
        n = min(n, room - self.appended)
        at = len(unmasker.ids) - 1  # before the end token
        unmasker.ids[at:at] = [unmasker.mask] * n
        self.appended += n
        self.lm.check_length(len(unmasker.ids), what="prompt with its masks")
        unmasker.add_masks(list(range(at, at + n)))

    def next_step(self) -> tuple[int, int | None] | None:
        """(where the open masks start, the end of the block a step writes in: None sliding), or
        None when the text is done."""
        masks = self.unmasker.masks()
        if self.stopped or not masks or len(self.decided) >= self.growth.max_new_tokens:
            return None
        if self.growth.window == "slide":
            return masks[0], None
        open_from = self.begin + (masks[0] - self.begin) // self.growth.open_masks * self.growth.open_masks
        return open_from, open_from + self.growth.open_masks

    def after(self, written: list[int]) -> None:
        """What a step's writing does to the window: an end token ends the text there (what follows
        is dropped, never read again); sliding, as many masks come as were written; a full block
        brings the next."""
        unmasker = self.unmasker
        end = next((p for p in written if unmasker.ids[p] == self.growth.end_id), None)
        if end is not None:
            self.ended = True
            unmasker.cut(end)
        if not self.ended and self.growth.window == "slide":
            self.append(len(written))
        elif not self.ended and not unmasker.masks():
            self.append(self.growth.open_masks)
        self.decided = _decided(unmasker.ids, self.begin, unmasker.mask)
        self.stopped = bool(self.stop and self.stop(self.decided))


def write(lm, prompt_ids: list[int], s: GenerationSettings, growth: Growth, banned: list[int],
          stop=None, deadline: float | None = None, progress=None) -> tuple[Written, int]:
    """Generate after ``prompt_ids`` by unmasking ``[CLS] prompt [MASK]*M [SEP]``, the masks
    growing as ``growth`` says (``ahead``: all the blocks' masks from the start, a step writing in
    its block only), until the end token is written with no mask before it, ``max_new_tokens``
    tokens of text are decided (no mask before them), ``stop(the text decided so far)`` says it
    is done, or the ``deadline`` (``time.perf_counter()``) passes.
    ``progress(n)`` hears of each step's tokens. A block never reaches past ``max_new_tokens``;
    sliding keeps M masks, as the paper's window does to its last step. -> (the window, where the
    text starts in it: the text is what precedes its first mask, at most ``max_new_tokens``)."""
    return write_together(lm, [prompt_ids], s, growth, banned, [stop], deadline, progress)[0]


def write_together(lm, prompts: list[list[int]], s: GenerationSettings, growth: Growth, banned: list[int],
                   stops: list | None = None, deadline: float | None = None,
                   progress=None) -> list[tuple[Written, int]]:
    """:func:`write` for several prompts at once: each step reads every unfinished window in one
    forward pass (padded, a row each), and each row writes, grows and stops as it would alone, with
    its own seeded draws, so every output is the one it gets alone (up to the float rounding of a
    padded batch). With the block cache, rows step one at a time (each keeps its own cache)."""
    rows = [_Growing(lm, ids, s, growth, banned, stop) for ids, stop in zip(prompts, stops or [None] * len(prompts))]
    while True:
        active = [(row, opened) for row in rows if (opened := row.next_step()) is not None]
        if not active:
            break
        if len(active) == 1 or s.cache == "prefix":
            written = [row.unmasker.step(*opened) for row, opened in active]
        else:
            written = _step_together([row.unmasker for row, _ in active], [opened for _, opened in active])
        for (row, _), new in zip(active, written):
            if progress:
                progress(len(new))
            row.after(new)
        if deadline is not None and time.perf_counter() > deadline:
            break
    return [(row.unmasker.out, row.begin) for row in rows]


@torch.inference_mode()
def _step_together(unmaskers: list[Unmasker], opened: list[tuple[int, int | None]]) -> list[list[int]]:
    """One forward pass for several unmaskers' windows (right-padded, a row each), then each one's
    step as ``Unmasker.step`` takes it alone. -> each one's positions written."""
    lm = unmaskers[0].lm
    plans = [u.reading(upto) for u, (_, upto) in zip(unmaskers, opened)]
    ids, attention = padded([u.ids for u in unmaskers], lm.tokenizer.pad_token_id, lm.device)
    rows = [r for r, (read, _) in enumerate(plans) for _ in read]
    logits = unmaskers[0].head(hidden_at(lm.model, ids, attention, rows, [p for read, _ in plans for p in read]))
    written, at = [], 0
    for u, (read, k), (open_from, _) in zip(unmaskers, plans, opened):
        written.append(u.write(logits[at:at + len(read)], read, k, open_from, Reads(1, len(u.ids))))
        at += len(read)
    return written


def _decided(ids: list[int], begin: int, mask: int) -> list[int]:
    """The text written so far that no mask precedes (what a stop string may end)."""
    text = ids[begin:-1]
    return text[:text.index(mask)] if mask in text else text
