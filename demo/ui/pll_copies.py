"""The PLL made visible, as HTML: one candidate's masked copies as rows, the causal LM's one pass below.

Every number and every mask comes from the scores the ranking computed (``demo.engine.pll``): a
scored token's log-prob and the positions its copy masked (``TokenScore.masked``, read from the
very copy the model ran), so the view cannot show a copy the scorer did not run, and its total
is the ranking's. Tokens and text are escaped: what the user typed is shown as text.
"""

import math

from .common import escape, score_text

MASK = "[MASK]"
CONTEXT_CHARS = 24  # the end of the context shown before the candidate's tokens

LEGEND = (
    '<p class="demo-copies-legend">Each row is one copy of the text the masked LM reads: '
    f'<span class="demo-tok demo-mask-predicted">{MASK}</span> is the token it predicts, '
    f'<span class="demo-tok demo-mask">{MASK}</span> are the other positions this variant hides '
    'in that copy. P is the probability the model gave the right token; the running sum adds '
    'the log-probs, and its last value is the candidate\'s score.</p>')

DECODER_LEGEND = (
    '<p class="demo-copies-legend">Each row is the window the masked LM reads when it writes that token, as in '
    f'the Prompting tab: the text before it, <span class="demo-tok demo-mask-predicted">{MASK}</span> where it '
    f'writes, <span class="demo-tok demo-mask">{MASK}</span> padding masks, then the end; '
    '<span class="demo-tok demo-absent">·</span> marks text not written yet. P is the probability it writes the '
    "right token there; the sum is the log-probability that its decoding writes the whole candidate.</p>")


def _shown(token) -> str:
    """A token as its cell shows it (``␣`` for a token that only marks whitespace)."""
    return escape(token.token) if token.token.strip() else "␣"


def _probability(token) -> str:
    """P(token) as a percentage with two significant digits; tinier ones as "< 0.01%" (the
    log-prob beside it is exact)."""
    percent = 100 * math.exp(token.logprob)
    if percent < 0.01:
        return f"P({_shown(token)}) &lt; 0.01%"
    return f"P({_shown(token)}) = {percent:.0f}%" if percent >= 10 else f"P({_shown(token)}) = {percent:.2g}%"


def _context_cell(score, hidden: int) -> str:
    """The end of the text before the scored tokens (the model reads it too), and how many of its
    positions this copy masks."""
    before = score.text[:score.tokens[0].start].rstrip()
    tail = before if len(before) <= CONTEXT_CHARS else "…" + before[-CONTEXT_CHARS:]
    masks = f' <span class="demo-tok demo-mask">{MASK}×{hidden}</span>' if hidden else ""
    return f'<td class="demo-copies-context">{escape(tail)}{masks}</td>'


def _total_line(score) -> str:
    """The running sum's last value, and how the ranking's score follows from it."""
    line = f"Sum of log-probs: <b>{score_text(score.total)}</b>"
    base = score.score + (score.unconditional or 0.0)
    how = "the sum" if math.isclose(base, score.total) else "the mean per token"
    if score.unconditional is not None:
        how += f" minus its score after the unconditional context ({score_text(score.unconditional)})"
    return f'<p class="demo-copies-total">{line} · ranking score: <b>{score_text(score.score)}</b> ({how})</p>'


def _cell(other, token, masked: set[int], decoder: bool) -> str:
    """One candidate token's cell in ``token``'s copy: predicted, masked, absent (the decoder's
    window ends after its masks: the text to the right is not written yet) or shown."""
    if decoder and other.position > max(masked):
        return '<td><span class="demo-tok demo-absent">·</span></td>'
    kind = ("demo-mask-predicted" if other.position == token.position
            else "demo-mask" if other.position in masked else "")
    return f'<td><span class="demo-tok {kind}">{MASK if kind else _shown(other)}</span></td>'


def masked_copies(score, variant: str, decoder: bool = False) -> str:
    """One row per scored token of ``score`` (a masked LM's ``CandidateScore``): the candidate's
    tokens with that copy's masked positions as ``[MASK]``, P(token), its log-prob, the running
    sum. ``decoder`` (the decoder's own likelihood): each row is a generation window, whose
    padding masks past the candidate show after it."""
    positions = [t.position for t in score.tokens]
    head = "".join(f"<th>{i}</th>" for i in range(1, len(positions) + 1))
    rows, running = [], 0.0
    for i, token in enumerate(score.tokens, 1):
        masked = set(token.masked)
        running += token.logprob
        cells = [_cell(other, token, masked, decoder) for other in score.tokens]
        hidden = len(masked - set(positions))
        if decoder:  # the padding masks after the candidate's last token, then the window's end
            after = f'<span class="demo-tok demo-mask">{MASK}×{hidden}</span>' if hidden else ""
            cells.append(f"<td>{after}</td>")
            hidden = 0
        rows.append(f"<tr><th>{i}</th>{_context_cell(score, hidden)}{''.join(cells)}"
                    f'<td class="demo-num">{_probability(token)}</td>'
                    f'<td class="demo-num">{score_text(token.logprob)}</td>'
                    f'<td class="demo-num">{score_text(running)}</td></tr>')
    head += "<th>after</th>" if decoder else ""
    table = (f'<table class="demo-copies-table"><thead><tr><th>copy</th><th>context</th>{head}'
             f"<th>P(token)</th><th>log-prob</th><th>running sum</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>")
    what = "windows, one per token written" if decoder else "copies, one per scored token"
    return (f'<div class="demo-copies-title">Masked LM, {escape(variant)}: '
            f"{len(score.tokens)} {what}</div>"
            f'<div class="demo-copies-scroll">{table}</div>{_total_line(score)}')


def causal_pass(score) -> str:
    """A causal LM's ``CandidateScore`` as one row: one pass, each token predicted from its left."""
    running, sums = 0.0, []
    for token in score.tokens:
        running += token.logprob
        sums.append(running)
    tokens = "".join(f'<td><span class="demo-tok">{_shown(t)}</span></td>' for t in score.tokens)
    logprobs = "".join(f'<td class="demo-num">{score_text(t.logprob)}</td>' for t in score.tokens)
    running_sums = "".join(f'<td class="demo-num">{score_text(s)}</td>' for s in sums)
    table = (f'<table class="demo-copies-table demo-copies-pass"><tbody>'
             f"<tr><th>token</th>{tokens}</tr><tr><th>log-prob</th>{logprobs}</tr>"
             f"<tr><th>running sum</th>{running_sums}</tr></tbody></table>")
    return ('<div class="demo-copies-title">Causal LM: one pass, no copies; each token is predicted '
            f'from the tokens to its left</div><div class="demo-copies-scroll">{table}</div>'
            f"{_total_line(score)}")


def copies_view(masked, variant: str, causal=None, decoder: bool = False) -> str:
    """The whole view for one candidate: its masked copies (``decoder``: the decoder's windows),
    then (if given) the causal LM's pass."""
    parts = [DECODER_LEGEND if decoder else LEGEND, masked_copies(masked, variant, decoder)]
    if causal is not None:
        parts.append(causal_pass(causal))
    return '<div class="demo-copies">' + "".join(parts) + "</div>"
