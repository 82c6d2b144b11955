"""Iterative unmasking: a masked LM writes into the masks of a window, some tokens a step, in an
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

The state is the field's: one ``[B, L]`` tensor of windows, a mask of the positions to write, the
step and log-probability each was written with, as in LLaDA's ``generate`` and Fast-dLLM's
threshold decoder, so a batch is a batch by construction; each row writes, grows and stops as it
would alone, with its own seeded draws. The loop is written here: transformers' ``generate()``
decodes one position after the text, left to right, and has no way to write several masks of a
window, in another order, or to re-mask.
"""

import math
import time
from dataclasses import dataclass, field

import torch

from ..settings import GenerationSettings, SamplingSettings, WritingSettings
from .block_cache import BlockCache
from .counting import Reads, counting
from .heads import mlm_head
from .reading import hidden_at
from .sampling import generator, logits_processors
from .trace import StepTrace, piece_or_name

UNSET = -1  # step_of: a position not written (or written, then masked again)


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
    """The token proposed at each position a row reads: the likeliest, or a draw from the row's
    own generator (``demo.engine.sampling``)."""

    def __init__(self, s: SamplingSettings, generator: torch.Generator):
        self.generator = generator
        self.penalty, self.warpers = logits_processors(s)

    def __call__(self, logits: torch.Tensor, window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens, the log-probs the model gave them, after the penalty, before temperature & co.);
        ``window``: the row's window, the tokens a repetition penalty counts as seen."""
        if self.penalty:
            logits = self.penalty(window[None].expand(logits.shape[0], -1), logits)
        logprobs = logits.log_softmax(-1)
        if self.warpers:
            warped = self.warpers(None, logits)
            return torch.multinomial(warped.softmax(-1), 1, generator=self.generator)[:, 0], logprobs
        return logits.argmax(-1), logprobs


class Unmasker:
    """Windows written into, a row each, step by step (``step``); a row's window may grow between
    steps (generation appends masks: ``add_masks``). Only the masks given are written: a mask token
    typed into the text is text the model reads, never a blank to fill. ``banned`` ids are never
    written. ``refresh``: read against a block cache per row, refreshed every N steps of a block
    (None: exact); ``trace_top_k``: record each step with its top tokens (None: no trace)."""

    def __init__(self, lm, windows: list[list[int]], width: int, writing: WritingSettings, sampling: SamplingSettings,
                 banned: list[int], refresh: int | None = None, trace_top_k: int | None = None):
        self.lm, self.writing, self.trace_top_k = lm, writing, trace_top_k
        self.mask, self.pad = lm.tokenizer.mask_token_id, lm.tokenizer.pad_token_id
        self.head = mlm_head(lm.model)
        self.banned = torch.tensor(banned, dtype=torch.long)
        rows = len(windows)
        self.ids = torch.full((rows, width), self.pad, dtype=torch.long)  # [B, L], padded after each window's end
        for b, window in enumerate(windows):
            self.ids[b, :len(window)] = torch.tensor(window)
        self.length = torch.tensor([len(w) for w in windows])  # [B]: each window's end token is its last
        self.writable = torch.zeros(rows, width, dtype=torch.bool)  # [B, L]: positions given to write
        self.turn = torch.full((rows, width), width * width)  # [B, L]: the random order's drawn turn
        self.drawn = torch.zeros(rows, dtype=torch.long)  # [B]: turns drawn so far
        self.steps = torch.zeros(rows, dtype=torch.long)  # [B]: steps taken
        self.step_of = torch.full((rows, width), UNSET)  # [B, L]: the step that (last) wrote a position
        self.logprob = torch.zeros(rows, width)  # [B, L]: the log-prob it was written with
        self.caches = [BlockCache(lm.model, refresh) for _ in windows] if refresh is not None else None
        self.samplers = [_Sampler(sampling, generator(sampling.seed)) for _ in windows]
        self.outs = [Written(ids=[], order=[], remasked=[], logprobs={}, written_at={}) for _ in windows]

    def masked(self) -> torch.Tensor:
        """[B, L]: the positions still to write (given to write, holding a mask)."""
        return self.writable & (self.ids == self.mask)

    def add_masks(self, row: int, n: int) -> None:
        """``n`` masks to write at the end of a row's window, before its end token, which moves
        right."""
        start = int(self.length[row]) - 1
        self.ids[row, start + n] = self.ids[row, start]
        self.ids[row, start:start + n] = self.mask
        self.length[row] += n
        self.lm.check_length(int(self.length[row]), what="prompt with its masks")
        self.give(row, torch.arange(start, start + n))

    def give(self, row: int, positions: torch.Tensor) -> None:
        """The masks at ``positions`` of a row are to be written. The random order draws their turn
        now, before any of their tokens, so a seed gives the same order greedy or sampled."""
        self.writable[row, positions] = True
        if self.writing.order == "random":
            drawn = torch.randperm(len(positions), generator=self.samplers[row].generator)
            self.turn[row, positions[drawn]] = int(self.drawn[row]) + torch.arange(len(positions))
            self.drawn[row] += len(positions)

    def step(self, active: torch.Tensor, open_from: torch.Tensor, upto: torch.Tensor) -> list[list[int]]:
        """One forward pass over the ``active`` rows ([B] bool); each writes up to
        ``tokens_per_step`` of its masks before ``upto`` ([B]) and, with ``remask``, masks again its
        earlier tokens from ``open_from`` ([B]) on that are now less likely. -> each row's positions
        written, in the order it chose them (none for a row not active)."""
        positions = torch.arange(self.ids.shape[1])  # [L]
        open_masks = self.masked() & active[:, None] & (positions < upto[:, None])  # [B, L]
        k = open_masks.sum(1).clamp(max=self.writing.tokens_per_step)  # [B]
        read = self._read(open_masks, k)  # [B, L]
        logits, reads = self._forward(read, open_from)  # [n_read, V], row by row, left to right
        logits[:, self.banned] = float("-inf")
        tokens, logprobs = self._propose(read, logits)  # [n_read], [n_read, V]
        sure = logprobs.gather(1, tokens[:, None])[:, 0]  # [n_read]
        proposed = torch.zeros_like(self.ids).masked_scatter_(read, tokens)  # [B, L]
        score = torch.full(read.shape, float("-inf")).masked_scatter_(read, sure)  # [B, L]
        # re-masking: the earlier tokens not yet final compete at the log-prob they were written with
        earlier = ((self.step_of > UNSET) & (positions >= open_from[:, None]) & active[:, None]
                   if self.writing.remask else torch.zeros_like(read))  # [B, L]
        score = torch.where(earlier, self.logprob, score)
        keep = self._keep(read, score, k) + earlier.sum(1)  # [B]: how many hold a token after the step
        ranked = self._ranked(score)  # [B, L]: positions in the order the step chooses them
        place = ranked.argsort(1)  # [B, L]: each position's place in that order
        # (re-masking is the confidence order's: the other orders write what they read)
        chosen = (place < keep[:, None]) & (read | earlier) if self.writing.order == "confidence" else read
        new, remasked = chosen & read, earlier & ~chosen  # [B, L]
        if self.trace_top_k is not None:
            self._trace(read, new, remasked, tokens, logprobs, reads)
        self.ids = torch.where(remasked, self.mask, torch.where(new, proposed, self.ids))
        self.step_of = torch.where(remasked, UNSET, torch.where(new, self.steps[:, None], self.step_of))
        self.logprob = torch.where(new, score, self.logprob)
        self.steps += active
        written = [[] for _ in self.outs]
        for b in active.nonzero()[:, 0].tolist():
            written[b] = ranked[b][new[b, ranked[b]]].tolist()
            self.outs[b].reads += reads[b]
            self.outs[b].order.append(written[b])
            self.outs[b].remasked.append(remasked[b].nonzero()[:, 0].tolist())
        return written

    def _read(self, open_masks: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """[B, L]: the masks a step reads: all of them where the order compares them (confidence),
        else only the k the order names next (the leftmost; the first drawn)."""
        if self.writing.order == "confidence":
            return open_masks
        turn = self.turn if self.writing.order == "random" else torch.arange(self.ids.shape[1]).expand_as(self.ids)
        place = torch.where(open_masks, turn, turn.max() + 1).argsort(1).argsort(1)  # [B, L]
        return open_masks & (place < k[:, None])

    def _keep(self, read: torch.Tensor, score: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """[B]: how many of the masks read a step writes: k, raised to those whose guess passes the
        confidence threshold (a deterministic rule: the likelihood stays exact)."""
        if self.writing.confidence_threshold is None:
            return k
        return torch.maximum(k, (read & (score >= math.log(self.writing.confidence_threshold))).sum(1))

    def _ranked(self, score: torch.Tensor) -> torch.Tensor:
        """[B, L]: positions in the order a step chooses among them: surest first (ties: leftmost),
        the drawn order, or left to right."""
        if self.writing.order == "confidence":
            return (-score).argsort(dim=1, stable=True)
        if self.writing.order == "random":
            return self.turn.argsort(dim=1, stable=True)
        return torch.arange(self.ids.shape[1]).expand_as(self.ids)

    def _forward(self, read: torch.Tensor, open_from: torch.Tensor) -> tuple[torch.Tensor, dict[int, Reads]]:
        """([n_read, V]: the head's logits at the positions read, row by row; what each row's pass
        read): the rows' windows in one padded pass, or a row at a time (alone, or each against
        its own block cache)."""
        rows = read.any(1).nonzero()[:, 0].tolist()
        if self.caches is None and len(rows) > 1:
            width = int(self.length[rows].max())
            attention = (torch.arange(width) < self.length[rows, None]).long()
            at = read[rows, :width].nonzero()
            hidden = hidden_at(self.lm.model, self.ids[rows, :width].to(self.lm.device), attention.to(self.lm.device),
                               at[:, 0].tolist(), at[:, 1].tolist())
            return self.head(hidden).float().cpu(), {b: Reads(1, int(self.length[b])) for b in rows}
        logits, counted = [], {}
        for b in rows:
            at = read[b].nonzero()[:, 0].tolist()
            with counting() as counted[b]:
                if self.caches is not None:
                    hidden = self.caches[b].hidden(self.window(b), at, int(open_from[b]))
                else:
                    window = self.ids[b:b + 1, :int(self.length[b])].to(self.lm.device)
                    hidden = hidden_at(self.lm.model, window, None, [0] * len(at), at)
                logits.append(self.head(hidden).float().cpu())
        return (logits[0] if len(logits) == 1 else torch.cat(logits)), counted

    def _propose(self, read: torch.Tensor, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the token proposed at each position read, the log-probs they were drawn from): each
        row's from its own sampler."""
        counts = read.sum(1).tolist()
        parts = [self.samplers[b](chunk, self.ids[b, :int(self.length[b])])
                 for b, chunk in zip((b for b, n in enumerate(counts) if n), logits.split([n for n in counts if n]))]
        if len(parts) == 1:
            return parts[0]
        return torch.cat([t for t, _ in parts]), torch.cat([lp for _, lp in parts])

    def window(self, row: int) -> list[int]:
        return self.ids[row, :int(self.length[row])].tolist()

    def cut(self, row: int, end: int) -> None:
        """A row's text ends at ``end`` (an end token was written there): every position after it
        goes, so the window ends with that end token."""
        last = int(self.ids[row, int(self.length[row]) - 1])
        keep = end + 1 if int(self.ids[row, end]) == last else end + 2
        self.ids[row, end + 1] = last
        self.ids[row, keep:] = self.pad
        self.length[row] = keep
        self.writable[row, end + 1:] = False
        self.step_of[row, end + 1:] = UNSET

    def written(self, row: int) -> Written:
        """A row's window after unmasking, and how it got there."""
        out, n = self.outs[row], int(self.length[row])
        at = (self.step_of[row, :n] > UNSET).nonzero()[:, 0].tolist()
        out.ids = self.window(row)
        out.written_at = {p: int(self.step_of[row, p]) for p in at}
        out.logprobs = {p: float(self.logprob[row, p]) for p in at}
        return out

    def _trace(self, read, new, remasked, tokens, logprobs, reads: dict[int, Reads]) -> None:
        """Each stepping row's StepTrace, before the step's writing: the window it read, its top
        tokens at the first position it writes."""
        tokenizer, offset = self.lm.tokenizer, 0
        for b in read.any(1).nonzero()[:, 0].tolist():
            at = read[b].nonzero()[:, 0].tolist()
            rows = slice(offset, offset + len(at))
            offset += len(at)
            ids, written = self.window(b), new[b].nonzero()[:, 0].tolist()
            first = written[0] if written else at[0]
            i = at.index(first) + rows.start
            top = logprobs[i].exp().topk(min(self.trace_top_k, logprobs.shape[-1]))
            guessed = logprobs[rows].gather(1, tokens[rows, None])[:, 0].exp()  # each mask read: how likely its guess
            unwritten = ~new[b, at]
            self.outs[b].steps.append(StepTrace(
                step=int(self.steps[b]), window=tokenizer.convert_ids_to_tokens(ids),
                mask_positions=self.masked()[b].nonzero()[:, 0].tolist(),
                top=[(piece_or_name(tokenizer, ids[1:first], int(t), []), float(p))
                     for t, p in zip(top.indices, top.values)],
                chosen=piece_or_name(tokenizer, ids[1:first], int(tokens[i]), []), beams=None, prompt_length=0,
                predicted=first, reads=reads[b], written=written,
                remasked=remasked[b].nonzero()[:, 0].tolist(),
                surest=float(guessed.max()),
                surest_unwritten=float(guessed[unwritten].max()) if bool(unwritten.any()) else None,
                written_tokens=[piece_or_name(tokenizer, ids[1:p], int(tokens[rows.start + at.index(p)]), [])
                                for p in written]))


@torch.inference_mode()
def fill(lm, windows: list[list[int]], blanks: list[list[int]], order: str, s, banned: list[int]) -> list[Written]:
    """Write the masks at each fixed window's ``blanks`` (infilling), one a step in ``order``, each
    drawn as the ``InfillSettings`` ``s`` say: the windows read in one padded pass a step, each
    written as it is alone, until its last mask is written."""
    unmasker = Unmasker(lm, windows, max(len(w) for w in windows), WritingSettings(order=order), s, banned,
                        trace_top_k=s.trace_top_k if s.trace else None)
    for row, positions in enumerate(blanks):
        unmasker.give(row, torch.tensor(positions, dtype=torch.long))
    everything, first = torch.tensor([len(w) for w in windows]), torch.zeros(len(windows), dtype=torch.long)
    while (left := unmasker.masked().any(1)).any():
        unmasker.step(left, first, everything)
    return [unmasker.written(row) for row in range(len(windows))]


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

    @property
    def room(self) -> int:
        """The masks a window may get in all: a block never reaches past the budget; sliding, the
        last window is the paper's last: max_new_tokens - 1 tokens and M masks."""
        return self.max_new_tokens + (self.open_masks - 1 if self.window == "slide" else 0)


class _Growing:
    """Generations' windows as their masks follow the text (``growth``), a row each: the unmasker,
    where each text begins, the masks appended so far, whether it ended or a stop string stopped
    it, how much of it is decided."""

    def __init__(self, lm, prompts: list[list[int]], s: GenerationSettings, growth: Growth, banned: list[int], stops):
        tokenizer = lm.tokenizer
        start_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        windows = [[start_id, *ids, growth.end_id] for ids in prompts]
        self.unmasker = Unmasker(lm, windows, max(map(len, windows)) + growth.room, s, s, banned,
                                 s.cache_refresh if s.cache == "prefix" else None, s.trace_top_k if s.trace else None)
        self.growth, self.stops = growth, stops
        self.begin = torch.tensor([1 + len(ids) for ids in prompts])  # [B]
        self.appended = torch.zeros(len(prompts), dtype=torch.long)  # [B]
        self.ended = torch.zeros(len(prompts), dtype=torch.bool)  # [B]
        self.stopped = torch.zeros(len(prompts), dtype=torch.bool)  # [B]
        self.decided = torch.zeros(len(prompts), dtype=torch.long)  # [B]: tokens of text no mask precedes
        for b in range(len(prompts)):
            self.append(b, growth.max_new_tokens if growth.ahead else growth.open_masks)

    def append(self, b: int, n: int) -> None:
        n = min(n, self.growth.room - int(self.appended[b]))
        self.unmasker.add_masks(b, n)
        self.appended[b] += n

    def next_steps(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """([B] the rows still writing, where their open masks start, the end of the block a step
        writes in: the window's end, sliding)."""
        masked = self.unmasker.masked()  # [B, L]
        first = masked.int().argmax(1)  # [B]
        active = masked.any(1) & ~self.stopped & (self.decided < self.growth.max_new_tokens)
        if self.growth.window == "slide":
            return active, first, self.unmasker.length.clone()
        size = self.growth.open_masks
        open_from = self.begin + (first - self.begin).div(size, rounding_mode="floor") * size
        return active, open_from, open_from + size

    def after(self, b: int, written: list[int]) -> None:
        """What a step's writing does to a row's window: an end token ends the text there (what
        follows is dropped, never read again); sliding, as many masks come as were written; a full
        block brings the next."""
        unmasker, growth = self.unmasker, self.growth
        end = next((p for p in written if int(unmasker.ids[b, p]) == growth.end_id), None)
        if end is not None:
            self.ended[b] = True
            unmasker.cut(b, end)
        if not self.ended[b] and growth.window == "slide":
            self.append(b, len(written))
        elif not self.ended[b] and not unmasker.masked()[b].any():
            self.append(b, growth.open_masks)
        decided = _decided(unmasker.window(b), int(self.begin[b]), unmasker.mask)
        self.decided[b] = len(decided)
        self.stopped[b] = bool(self.stops[b] and self.stops[b](decided))


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


@torch.inference_mode()
def write_together(lm, prompts: list[list[int]], s: GenerationSettings, growth: Growth, banned: list[int],
                   stops: list | None = None, deadline: float | None = None,
                   progress=None) -> list[tuple[Written, int]]:
    """:func:`write` for several prompts at once: each step reads every unfinished window in one
    forward pass (padded, a row each), and each row writes, grows and stops as it would alone, with
    its own seeded draws, so every output is the one it gets alone (up to the float rounding of a
    padded batch). With the block cache, rows are read one at a time (each keeps its own cache)."""
    rows = _Growing(lm, prompts, s, growth, banned, stops or [None] * len(prompts))
    while True:
        active, open_from, upto = rows.next_steps()
        if not active.any():
            break
        written = rows.unmasker.step(active, open_from, upto)
        for b in active.nonzero()[:, 0].tolist():
            if progress:
                progress(len(written[b]))
            rows.after(b, written[b])
        if deadline is not None and time.perf_counter() > deadline:
            break
    return [(rows.unmasker.written(b), int(rows.begin[b])) for b in range(len(prompts))]


def _decided(ids: list[int], begin: int, mask: int) -> list[int]:
    """The text written so far that no mask precedes (what a stop string may end)."""
    text = ids[begin:-1]
    return text[:text.index(mask)] if mask in text else text
