"""A masked LM dressed as a causal LM, so that transformers' ``generate()`` can drive it.

The BERTs paper's trick (``docs/method.md``, section 2): to get the next token, append a [MASK] after the
text, ``p`` more [MASK]s to keep [SEP] away from the prediction, and read the model's
distribution at the first mask:

    window = [CLS] prompt generated-so-far [MASK] [MASK]*p [SEP]

``MaskedLMAsCausalLM.forward(input_ids)`` receives exactly what a causal LM would (the text ids,
no specials), builds that window for every row of the batch (beams and samples of one request
go through in one forward pass) and returns the first mask's logits as if they were a causal
LM's last-position logits. Everything else, greedy, beam search, sampling, repetition penalty,
logits processors, stopping criteria, comes from ``GenerationMixin`` unchanged.

The exact method has no key/value cache: the encoder is bidirectional, so every step re-encodes
the whole window. ``next_token_logits`` is the one seam where the two approximations take over:
the prefix cache (``demo.engine.prefix_cache``: the prompt's keys and values reused between
refreshes) when ``refresh_every`` is given, and parallel unmasking
(``demo.engine.parallel_unmasking``: confident guesses at the padding masks stand for the next
tokens, without a pass) when ``parallel_threshold`` is. What the steps did comes back as a
``DecodingRecord`` (``MaskedLMAsCausalLM.record``).
"""

from dataclasses import dataclass

import torch
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from .heads import mlm_head
from .parallel_unmasking import Guesses
from .prefix_cache import PrefixCache
from .reading import hidden_at


@dataclass(frozen=True)
class WindowSpecials:
    """The three special ids a window needs, read from the tokenizer."""
    start: int  # [CLS] / <s>
    end: int  # [SEP] / </s>
    mask: int  # [MASK] / <mask>

    @classmethod
    def of(cls, tokenizer) -> "WindowSpecials":
        start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        end = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        if start is None or end is None or tokenizer.mask_token_id is None:
            raise ValueError(f"{type(tokenizer).__name__} lacks a start ([CLS]/<s>), end ([SEP]/</s>) "
                             f"or mask token, so it cannot drive masked-LM generation.")
        return cls(start=start, end=end, mask=tokenizer.mask_token_id)


def build_windows(input_ids: torch.Tensor, specials: WindowSpecials, padding_masks: int) -> torch.Tensor:
    """``[start] ids [mask] [mask]*padding_masks [end]`` for every row of ``input_ids``.

    The predicted mask sits at position ``input_ids.shape[1] + 1`` of every row.
    """
    rows = input_ids.shape[0]

    def column(token_id: int, width: int = 1) -> torch.Tensor:
        return torch.full((rows, width), token_id, dtype=input_ids.dtype, device=input_ids.device)

    return torch.cat([column(specials.start), input_ids, column(specials.mask, 1 + padding_masks),
                      column(specials.end)], dim=1)


def build_padded_windows(input_ids: torch.Tensor, attention_mask: torch.Tensor, specials: WindowSpecials,
                         padding_masks: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(windows, their attention mask, each row's predicted position) for a left-padded batch
    (``generate()``'s layout for texts of different lengths): every row's text, its padding left
    out, in a window of its own, ``[start] text [mask] [mask]*padding_masks [end]``, right-padded
    with masked positions. Positions count from the row's own [start], as when it runs alone."""
    width = input_ids.shape[1]
    n = attention_mask.sum(1, keepdim=True)  # each row's text tokens
    j = torch.arange(int(n.max()) + padding_masks + 3, device=input_ids.device)[None, :]  # window position
    text = input_ids.gather(1, (width - n + j - 1).clamp(0, width - 1))  # window position j reads text token j - 1
    end = n + padding_masks + 2
    windows = torch.where(j == 0, specials.start, torch.where(j <= n, text, torch.where(
        j < end, specials.mask, specials.end)))
    return windows, (j <= end).long(), n[:, 0] + 1


@dataclass(frozen=True)
class DecodingRecord:
    """What a masked LM's decoding did at each step, handed back with its output: the result's
    figures and the step trace read this, not the wrapper."""
    padding_masks: int
    # per step: 0 where it ran a forward pass, j where it read padding mask j of the last one
    read_from: tuple[int, ...]
    # per step, every row's window (what the model saw); None unless recorded for the trace
    windows: tuple[torch.Tensor, ...] | None = None
    # per forward pass: was it a refresh; None for the exact method, whose every pass is one
    refreshed: tuple[bool, ...] | None = None
    parallel: bool = False  # parallel unmasking was on

    @property
    def refreshes(self) -> int | None:
        """The prefix cache's whole-window encodings; None for the exact method."""
        return None if self.refreshed is None else sum(self.refreshed)

    @property
    def guessed(self) -> int | None:
        """The steps that ran no forward pass of their own; None when parallel unmasking is off."""
        return sum(j > 0 for j in self.read_from) if self.parallel else None


class MaskedLMAsCausalLM(PreTrainedModel, GenerationMixin):
    """Wraps a loaded ``*ForMaskedLM`` (not copied) so ``generate()`` sees a causal LM."""

    config_class = PretrainedConfig
    main_input_name = "input_ids"
    _supports_cache_class = False  # no transformers KV cache: the prefix cache is our own

    def __init__(self, mlm: PreTrainedModel, tokenizer, padding_masks: int,
                 refresh_every: int | None = None, refresh_margin: float = 0.0,
                 parallel_threshold: float | None = None, record_windows: bool = False):
        super().__init__(PretrainedConfig(vocab_size=mlm.config.vocab_size, is_encoder_decoder=False))
        self.mlm = mlm
        self.specials = WindowSpecials.of(tokenizer)
        self.padding_masks = padding_masks
        self.head = mlm_head(mlm)
        # None: the exact method; R: the approximate prefix cache, refreshed every R new tokens
        self.prefix_cache = (PrefixCache(mlm, self.head, padding_masks, refresh_every, refresh_margin)
                             if refresh_every is not None else None)
        self.parallel_threshold = parallel_threshold
        self.guesses: Guesses | None = None  # the last pass's, while parallel unmasking is on
        # Per step: 0 where it ran a forward pass, j where it read padding mask j of the last one.
        self.read_from: list[int] = []
        # For the step trace: each step's windows (what the model saw, a row's padding left out),
        # when asked for.
        self.recorded_windows: list[list[torch.Tensor]] | None = [] if record_windows else None

    def record(self, row: int | None = None) -> DecodingRecord:
        """What the steps so far did, frozen: generation and its trace read this, not these lists;
        ``row``: only the windows of that row of a batch of requests (its only row then)."""
        windows, cache = self.recorded_windows, self.prefix_cache
        if windows is not None and row is not None:
            windows = [[step[row]] for step in windows]
        return DecodingRecord(self.padding_masks, tuple(self.read_from),
                              None if windows is None else tuple(windows),
                              None if cache is None else tuple(cache.refreshed),
                              self.parallel_threshold is not None)

    def next_token_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(rows, text length) ids -> (rows, vocab) logits at the first mask.

        The exact method encodes the whole window; the prefix cache, when set, only what its
        cache lacks (same inputs, same outputs); parallel unmasking, when on, first looks for the
        step among the last pass's confident guesses. The trace records the window either way.
        ``attention_mask``: the rows are texts of different lengths, left-padded (requests decoded
        together, by the exact method only); each reads its own window.
        """
        if attention_mask is not None and not bool(attention_mask.all()):
            assert self.prefix_cache is None and self.parallel_threshold is None, "a batch of texts decodes exactly"
            windows, window_mask, at = build_padded_windows(input_ids, attention_mask, self.specials,
                                                            self.padding_masks)
            self._record(windows, 0, window_mask.sum(1))
            rows = torch.arange(windows.shape[0], device=windows.device)
            return self.head(hidden_at(self.mlm, windows, window_mask, rows, at))
        guessed = self.guesses.next_logits(input_ids) if self.guesses is not None else None
        if guessed is not None:
            logits, windows, j = guessed
            self._record(windows, j)
            return logits
        windows = build_windows(input_ids, self.specials, self.padding_masks)
        self._record(windows, 0)
        reads = 1 + self.padding_masks if self.parallel_threshold is not None else 1
        if self.prefix_cache is not None:
            logits = self.prefix_cache.next_token_logits(input_ids, windows, reads)
        else:
            # What the head reads (the last layer, or DeBERTa's enhanced mask decoder) and the
            # vocabulary projection only at the masks read: over the whole window, the projection
            # would be a large share of a step's compute, spent on rows nobody reads.
            at = input_ids.shape[1] + 1
            rows = torch.arange(windows.shape[0], device=windows.device).repeat_interleave(reads)
            cols = torch.arange(at, at + reads, device=windows.device).repeat(windows.shape[0])
            hidden = hidden_at(self.mlm, windows, None, rows, cols)
            logits = self.head(hidden).view(windows.shape[0], reads, -1)
        if self.parallel_threshold is not None:
            self.guesses = Guesses.of(input_ids, windows, logits, self.parallel_threshold)
        return logits[:, 0]

    def _record(self, windows: torch.Tensor, read_from: int, lengths: torch.Tensor | None = None) -> None:
        self.read_from.append(read_from)
        if self.recorded_windows is not None:
            windows = windows.cpu()
            self.recorded_windows.append(list(windows) if lengths is None else
                                         [w[:length] for w, length in zip(windows, lengths.tolist())])

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **unused) -> CausalLMOutput:
        return CausalLMOutput(logits=self.next_token_logits(input_ids, attention_mask)[:, None, :])
