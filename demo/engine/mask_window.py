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


def open_masks(lm, settings) -> int:
    """The masks a masked LM's generation keeps open after its text (a ``GenerationSettings``'s):
    sliding, the predicted mask and its padding masks (the paper's window); in blocks, a block's
    ``block_length``."""
    return settings.block_length if settings.window == "block" else 1 + padding_masks_of(lm, settings.padding_masks)


def last_window(n_prompt: int, max_new_tokens: int, padding_masks: int, window: str = "slide") -> int:
    """Tokens in a generation's longest window: sliding, the one that predicts its last token;
    with blocks (``GenerationSettings.window``), the prompt and every block's tokens between the
    start and end tokens (a block never reaches past ``max_new_tokens``, and pads with nothing)."""
    if window == "block":
        return n_prompt + max_new_tokens + 2
    return window_length(n_prompt + max_new_tokens - 1, padding_masks)


def unmasking_windows(n_prompt: int, max_new_tokens: int, masks: int, tokens_per_step: int = 1,
                      window: str = "slide", order: str = "left_to_right", masks_ahead: bool = False) -> list[int]:
    """The tokens each forward pass reads, at most, when a masked LM writes ``max_new_tokens``
    tokens by unmasking (``demo.engine.unmasking``; fewer passes where it ends or stops early):
    one entry per pass. ``masks``: the masks kept open after the text (:func:`open_masks`).

    Each step fills ``tokens_per_step`` more positions, re-masking or not (a re-masked token gives
    way to a new one), so a block of L masks takes ceil(L / tokens_per_step) steps, each reading the
    prompt and the blocks so far (every block, with ``masks_ahead``) between the start and end
    tokens. Sliding left to right, each step decides its tokens; in another order a step may write
    past the text's end, into the up to ``masks - 1`` positions the last window adds."""
    k = tokens_per_step
    if window == "block":
        windows = []
        for start in range(0, max_new_tokens, masks):
            length = min(masks, max_new_tokens - start)
            read = last_window(n_prompt, max_new_tokens if masks_ahead else start + length, 0, "block")
            windows += [read] * -(-length // k)
        return windows
    written = max_new_tokens if order == "left_to_right" else max_new_tokens + masks - 1
    return [window_length(n_prompt + min(step * k, max_new_tokens - 1), masks - 1) for step in range(-(-written // k))]
