"""The mask window's size, in one place (no torch: the app's cost estimates read it too).

A masked LM predicts the next token from ``[CLS] text [MASK] [MASK]*p [SEP]`` (docs/method.md,
section 2): the predicted mask, ``p`` padding masks after it, and the model's start and end
tokens. ``demo.engine.mlm_decoder`` builds these windows; the length checks, the needle grid's token
counts and the work estimates count them with :func:`window_length`.
"""


def window_length(n_text_tokens: int, padding_masks: int) -> int:
    """Tokens in the window that predicts the token after ``n_text_tokens`` text tokens."""
    return n_text_tokens + padding_masks + 3  # start, predicted mask, end


def padding_masks_of(lm, requested: int | None) -> int:
    """The padding masks a generation uses: the requested number, else the family's default
    (``demo.engine.families``); a causal LM has none."""
    if lm.kind != "masked":
        return 0
    return lm.padding_masks if requested is None else requested
