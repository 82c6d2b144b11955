"""A masked LM dressed as a causal LM, so that transformers' ``generate()`` can drive it.

The BERTs paper's trick (SPEC section 2): to get the next token, append a [MASK] after the
text, ``p`` more [MASK]s to keep [SEP] away from the prediction, and read the model's
distribution at the first mask:

    window = [CLS] prompt generated-so-far [MASK] [MASK]*p [SEP]

``MaskedLMAsCausalLM.forward(input_ids)`` receives exactly what a causal LM would (the text ids,
no specials), builds that window for every row of the batch (beams and samples of one request
go through in one forward pass) and returns the first mask's logits as if they were a causal
LM's last-position logits. Everything else, greedy, beam search, sampling, repetition penalty,
logits processors, stopping criteria, comes from ``GenerationMixin`` unchanged.

There is no key/value cache: the encoder is bidirectional, so every step re-encodes the whole
window. ``next_token_logits`` is the one seam a cheaper approximate mode (reusing the prompt's
hidden states, SPEC section 2) would replace.
"""

import threading
from dataclasses import dataclass

import torch
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput


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


def window_length(n_text_tokens: int, padding_masks: int) -> int:
    """Tokens in the window that predicts the token after ``n_text_tokens`` text tokens."""
    return n_text_tokens + padding_masks + 3  # start, predicted mask, end


class MaskedLMAsCausalLM(PreTrainedModel, GenerationMixin):
    """Wraps a loaded ``*ForMaskedLM`` (not copied) so ``generate()`` sees a causal LM."""

    config_class = PretrainedConfig
    main_input_name = "input_ids"
    _supports_cache_class = False  # no KV cache: each step re-reads the whole window

    def __init__(self, mlm: PreTrainedModel, tokenizer, padding_masks: int):
        super().__init__(PretrainedConfig(vocab_size=mlm.config.vocab_size, is_encoder_decoder=False))
        self.mlm = mlm
        self.specials = WindowSpecials.of(tokenizer)
        self.padding_masks = padding_masks
        # Set by the step trace: each forward's windows are appended here (what the model saw).
        self.recorded_windows: list[torch.Tensor] | None = None
        self.forward_calls = 0

    def next_token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Exact method: (rows, text length) ids -> (rows, vocab) logits at the first mask.

        This is the seam for an approximate mode: same inputs, same outputs.
        """
        windows = build_windows(input_ids, self.specials, self.padding_masks)
        if self.recorded_windows is not None:
            self.recorded_windows.append(windows.cpu())
        self.forward_calls += 1
        position = input_ids.shape[1] + 1
        with _project_only_at(self.mlm, position, windows.shape[1]):
            logits = self.mlm(input_ids=windows).logits
        # The hook makes logits (rows, 1, vocab); a head it could not reach returns every position.
        return logits[:, 0] if logits.shape[1] == 1 else logits[:, position]

    def forward(self, input_ids: torch.Tensor, **unused) -> CausalLMOutput:
        return CausalLMOutput(logits=self.next_token_logits(input_ids)[:, None, :])


class _project_only_at:
    """Run the MLM's vocabulary projection at one position instead of all of them.

    Why hand-written: transformers' masked LMs have no ``logits_to_keep`` and their heads are
    named differently per family (``cls``, ``lm_head``, ``predictions``, ``lm_predictions``). All
    of them expose ``get_output_embeddings()``; a forward pre-hook there slices the hidden states
    to the predicted position, which saves the (window x vocab) projection every step (about a
    fifth of BERT-base's compute at 512 tokens). The hook only acts on this thread's call, so a
    scorer sharing the model in another thread is untouched.
    """

    def __init__(self, mlm, position: int, length: int):
        self.module = mlm.get_output_embeddings() if hasattr(mlm, "get_output_embeddings") else None
        self.position, self.length, self.thread = position, length, threading.get_ident()
        self.handle = None

    def _slice(self, module, args):
        hidden = args[0] if args else None
        if (threading.get_ident() != self.thread or not isinstance(hidden, torch.Tensor)
                or hidden.ndim != 3 or hidden.shape[1] != self.length):
            return None
        return (hidden[:, self.position:self.position + 1], *args[1:])

    def __enter__(self):
        if isinstance(self.module, torch.nn.Module):
            self.handle = self.module.register_forward_pre_hook(self._slice)
        return self

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.remove()
