"""User text in the app's messages and checks: whether a tokenizer can read a text
(:func:`check_readable`), a text quoted on one line with what is drawn as nothing made visible
(:func:`quoted`), any value a person or program sent, in their own terms (:func:`as_said`), and
the known name nearest a misspelt one (:func:`nearest`). Every message that quotes what someone
sent goes through these."""

import difflib
import math
import unicodedata

# Unicode categories drawn as nothing: controls, format characters (zero-width space and joiner,
# the byte-order mark), surrogates, private use, unassigned
UNSEEN = ("Cc", "Cf", "Cs", "Co", "Cn")


def check_readable(text: str, what: str) -> str:
    """``text``, if a tokenizer can read it; else ValueError in words naming the ``what`` (the
    page's word: "prompt", "candidate", ...)."""
    broken = next((c for c in text if unicodedata.category(c) == "Cs"), None)
    if broken is not None:
        raise ValueError(f"The {what} holds a broken character (U+{ord(broken):04X}, half of an emoji or "
                         f"other symbol that a program split in two): delete it, or type that symbol again.")
    # (whitespace alone is text a tokenizer reads: a newline is a token of its own for many)
    if text and not text.isspace() and all(c.isspace() or unicodedata.category(c) in UNSEEN for c in text):
        raise ValueError(f"The {what} is only invisible characters (such as zero-width spaces): type "
                         f"some words.")
    return text


def quoted(text: str, width: int = 80) -> str:
    """User text as a message quotes it: on one line, characters drawn as nothing written as their
    code point (⟨U+200B⟩), whole up to ``width`` characters, else its start."""
    def seen(char: str) -> str:
        if char in "\n\r\t":
            return " "
        return f"⟨U+{ord(char):04X}⟩" if unicodedata.category(char) in UNSEEN else char
    text = "".join(seen(c) for c in text)
    return text if len(text) <= width else text[:width - 3] + "..."


LARGEST = 2 ** 63 - 1  # the largest whole number a setting could take (int64)


def as_said(value, quote: str = "'") -> str:
    """A value as a refusal quotes it, in the terms of the person who sent it (JSON's, as the API
    takes them) and short: text in quotes, at most its start, odd characters as code points (never
    a Python escape such as ``\\ud800``); null, true, false, lists and objects as JSON writes them;
    a number past any bound, NaN and the infinities in words, never a 300-digit number. Text
    inside a list or object is in JSON's double quotes (``quote``)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, str):
        return f"{quote}{quoted(value)}{quote}"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "NaN (not a number)"
        if isinstance(value, float) and math.isinf(value):
            return "infinity" if value > 0 else "minus infinity"
        if isinstance(value, float) and abs(value) >= 1e16:  # a float as JSON writes it: 1e308
            return f"{value:.3g}".replace("e+", "e")
        if abs(value) > LARGEST:
            return f"a number far above {LARGEST}" if value > 0 else f"a number far below -{LARGEST}"
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(as_said(v, '"') for v in value[:4]) + (", ..." if len(value) > 4 else "") + "]"
    if isinstance(value, dict):
        items = [as_said(str(k), '"') + ": " + as_said(v, '"') for k, v in list(value.items())[:4]]
        return "{" + ", ".join(items) + (", ..." if len(value) > 4 else "") + "}"
    return "an unexpected value"


def nearest(name: str, known) -> str | None:
    """The one of ``known`` names that ``name`` most likely misspells, if any is close (difflib's
    ratio of at least 0.6): what a "did you mean" offers."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return close[0] if close else None
