"""Text conventions shared by scoring, generation and prompts.

Why this exists: some tokenizers (BERT WordPiece, DeBERTa SentencePiece) turn "\\n" into a
space, so a few-shot prompt's line structure is lost. The BERTs paper writes every newline as the
two characters backslash-n followed by a space and stops generation when the model produces that
marker; we do the same, but only for tokenizers that actually lose "\\n".
"""

import re

NEWLINE_MARKER = "\\n "  # backslash, n, space: what the paper feeds DeBERTa instead of "\n"


def encode_newlines(text: str, newline_survives: bool) -> str:
    """Write newlines so that the tokenizer keeps them (identity when it already does)."""
    if newline_survives:
        return text
    # " \n" -> "\\n " keeps exactly one space around the marker. The replacement is a function:
    # as a replacement string, re.sub would turn the marker's backslash-n back into a newline.
    return re.sub(r"[ \t]*\n[ \t]*", lambda match: NEWLINE_MARKER, text)


def decode_newlines(text: str, newline_survives: bool) -> str:
    """Inverse of :func:`encode_newlines` on model output."""
    if newline_survives:
        return text
    return re.sub(r"[ ]?\\n ?", "\n", text)


def normalize_whitespace(text: str) -> str:
    """Collapse runs of spaces, drop spaces before punctuation and trim.

    The ALBERT paper shows that stray spaces before punctuation move PLL accuracy by points.
    Newlines are kept: they carry few-shot structure.
    """
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" +([.,;:!?'])(?=\s|$)", r"\1", text)
    text = re.sub(r" *\n *", "\n", text)
    return text.strip()
