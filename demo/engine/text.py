"""Text conventions: how raw text becomes the text a model reads. One owner, applied by the engines.

``demo.engine.pll`` (scoring) and ``demo.engine.generation`` (decoding) take raw text from every caller (the
app, the command line, the evaluator) and apply these rules themselves, so two callers can never
score or continue different texts for the same input:

- **Newlines.** Some tokenizers (BERT WordPiece, DeBERTa SentencePiece) turn "\\n" into a space,
  so a few-shot prompt's blank lines vanish. The BERTs paper writes every newline as the two
  characters backslash-n followed by a space and stops generation when the model produces that
  marker. We do the same, but only for tokenizers that actually lose "\\n" (measured per
  tokenizer in ``demo.engine.models``).
- **The junction between a context and a candidate.** A candidate typed on its own ("Paris")
  follows its context after one space unless either side already has whitespace there
  (:func:`join`). Whitespace at the end of a context, newlines included, belongs to the
  completion (:func:`model_pair`), so a text split anywhere in its whitespace scores the same
  tokens ("because " + "he left" and "because" + " he left"; "Q:\\n" + "A" and "Q:" + "\\nA"):
  lm-evaluation-harness's own split (``LM._encode_pair``), so our scores compare with its HFLM's
  for any context ending (docs/method.md, section 3). This rule is for scoring; ``generate()``
  reads a prompt as given (newline markers only), and its ``choices`` follow the prompt by
  :func:`join`.

- **Chat turns.** A chat model reads its prompt as its chat template wraps one user turn
  (``GenerationSettings.chat``, :func:`chat_turn`), the tokens as ``apply_chat_template`` makes them.

- **Text a tokenizer cannot read.** A lone half of a surrogate pair (what a program leaves when
  it splits an emoji) is no text any encoding holds, and a text of only invisible characters has
  nothing to read: :func:`check_readable` refuses both in words before a tokenizer sees them, and
  :func:`quoted` writes user text into messages readably (never as Python escapes).

GPT-3's unconditional normalisation (subtract the candidate's score after a neutral context such
as "Answer:") is a scoring rule and lives in one function, ``demo.engine.pll.score_choices``.
"""

import re

from ..user_text import check_readable

NEWLINE_MARKER = "\\n "  # backslash, n, space: what the paper feeds DeBERTa instead of "\n"


def encode_newlines(text: str, newline_survives: bool) -> str:
    """Write newlines so that the tokenizer keeps them (identity when it already does)."""
    if newline_survives:
        return text
    # " \n" -> "\\n " keeps exactly one space around the marker. The replacement is a function:
    # as a replacement string, re.sub would turn the marker's backslash-n back into a newline.
    return re.sub(r"[ \t]*\n[ \t]*", lambda match: NEWLINE_MARKER, text)


def prompt_as_read(prompt: str, newline_survives: bool) -> str:
    """A prompt as ``generate()`` gives it to the model: as typed, with newline markers where the
    tokenizer needs them (no junction rule). Whoever measures a prompt in tokens before it is
    generated from (the needle grid) measures this text."""
    return encode_newlines(prompt, newline_survives)


def chat_turn(tokenizer, prompt: str) -> str:
    """``prompt`` as one user turn of the tokenizer's chat template, followed by what opens the
    answer (``add_generation_prompt``): the text a chat model was trained to answer. The prompt
    goes in as typed, without newline markers: the template renders it as the model's training
    data was rendered. ValueError in words for a tokenizer without a template."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("This model's tokenizer has no chat template, so the prompt cannot be written "
                         "as a chat turn: turn chat off to have the model continue the prompt as typed.")
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                         tokenize=False)


def model_prompt(lm, prompt: str, chat: bool = False) -> str:
    """The text ``generate()`` tokenizes for ``prompt``: as read (:func:`prompt_as_read`), or with
    ``chat`` the chat turn around it (:func:`chat_turn`)."""
    return chat_turn(lm.tokenizer, prompt) if chat else prompt_as_read(prompt, lm.newline_survives)


def prompt_ids_of(lm, prompt: str, chat: bool = False) -> list[int]:
    """The prompt's token ids as ``generate()`` gives them to the model (:func:`model_prompt`):
    no special tokens for a masked LM (the decoder adds its window's); the tokenizer's own at the
    start for a causal LM, none at the end (it continues the text). A chat turn has none added:
    its template writes those it wants, as ``apply_chat_template`` tokenizes it. The work budget
    (``demo.app.budget``) counts the same ids."""
    tokenizer = lm.tokenizer
    masked = lm.kind == "masked"
    check_readable(prompt, "prompt")
    # verbose=False: the length check is the engine's (with a clearer message)
    ids = tokenizer(model_prompt(lm, prompt, chat), add_special_tokens=not (masked or chat),
                    verbose=False)["input_ids"]
    if not (masked or chat):  # a causal LM continues the text: drop an end token the tokenizer appends
        while len(ids) > 1 and ids[-1] in (tokenizer.sep_token_id, tokenizer.eos_token_id):
            ids = ids[:-1]  # (ModernBERT-style tokenizers add [SEP], as Ettin's decoders' do)
    if not ids:
        raise ValueError("The prompt has nothing this model's tokenizer reads as text: type some words.")
    return ids


def newline_marker_note(text: str, newline_survives: bool) -> str | None:
    """A sentence for a page that shows the tokens of ``text`` (text as the model read it) when
    they include the newline marker: without it, a reader sees two odd tokens and no newline."""
    marker = NEWLINE_MARKER.strip()
    if newline_survives or marker not in text:
        return None
    return (f"The tokens {' '.join(marker)} are the BERTs paper's newline marker: this model's tokenizer "
            f"drops newlines, so each newline is written as {marker} for it to read.")


def decode_newlines(text: str, newline_survives: bool) -> str:
    """Inverse of :func:`encode_newlines` on model output."""
    if newline_survives:
        return text
    return re.sub(r"[ ]?\\n ?", "\n", text)


def newline_survives(tokenizer) -> bool:
    """Does "\\n" come back from this tokenizer's encode -> decode? (If not: the marker.)"""
    ids = tokenizer("a\nb", add_special_tokens=False)["input_ids"]
    return "\n" in tokenizer.decode(ids)


def special_token_note(text: str, tokenizer) -> str | None:
    """Special-token strings typed into a text ("[MASK]", "</s>") are read by the model as its
    special tokens, not as plain text: allowed (it is instructive to try), but always said.
    The app, the command line and ``generate()`` show this same note."""
    found = sorted({t for t in tokenizer.all_special_tokens if t and t in text})
    if not found:
        return None
    return (f"The text contains {', '.join(found)}: the model reads {'it' if len(found) == 1 else 'them'} "
            f"as its special token{'s' if len(found) > 1 else ''}, not as plain text.")


def join(context: str, candidate: str) -> str:
    """The completion for a candidate: a leading space when the junction has no whitespace."""
    if context and candidate and not context[-1].isspace() and not candidate[0].isspace():
        return " " + candidate
    return candidate


def model_pair(context: str, completion: str, newline_survives: bool) -> tuple[str, str]:
    """(context, completion) as the model reads them: newline markers where the tokenizer needs
    them, and all whitespace at the end of the context (spaces, tabs, newlines: ``str.rstrip``, as
    lm-eval's ``_encode_pair``) moved to the start of the completion.

    The whole text is encoded at once (a newline at the junction gets one marker, as anywhere
    else) and split after the context's text without its trailing whitespace, which ends in a
    character the newline rule leaves alone, so its encoding is always a prefix of the whole's."""
    text = encode_newlines(context + completion, newline_survives)
    head = encode_newlines(context.rstrip(), newline_survives)
    return head, text[len(head):]


