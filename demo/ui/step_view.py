"""The step-by-step view of the masked-LM decoder, as HTML: one card per generated token.

Each card shows the window the model read at that step, token by token, with the predicted mask,
the padding masks and the end token marked (a long prompt loses its middle, never its end), the
model's top guesses as bars, the token kept, and with beam search the beams after the step. Every
token and guess is escaped: what the model or the user wrote is shown as text.
"""

from .common import escape

HEAD, TAIL = 6, 12  # window tokens shown before the elided middle, and before the first mask

LEGEND = (
    '<p class="demo-legend">How to read a step: the masked LM reads the <b>window</b> '
    '(<span class="demo-tok demo-mask-predicted">[MASK]</span> is the position it predicts, '
    '<span class="demo-tok demo-mask">[MASK]</span> are padding masks that keep the '
    '<span class="demo-tok demo-end">end token</span> away from it). <b>Top guesses</b> are its '
    'likeliest tokens there, with probabilities. <b>Kept</b> is the token this step added to the '
    'final output; with beam search that is the best whole sequence\'s token, which need not be '
    'this step\'s top guess. <b>Beams after this step</b> are the hypotheses still alive, with '
    'their total log-probability.</p>')


def _window(step) -> str:
    masks = step.mask_positions
    first = masks[0] if masks else len(step.window)
    cells = []
    for i, token in enumerate(step.window):
        if HEAD <= i < first - TAIL:
            if i == HEAD:
                cells.append(f'<span class="demo-elided">… {first - TAIL - HEAD} tokens …</span>')
            continue
        kind = ("demo-mask-predicted" if masks and i == first else "demo-mask" if i in masks
                else "demo-end" if masks and i == len(step.window) - 1 else "")
        cells.append(f'<span class="demo-tok {kind}">{escape(token)}</span>')
    return '<div class="demo-window">' + "".join(cells) + "</div>"


def _guesses(step) -> str:
    bars = [f'<div class="demo-bar"><span class="demo-bar-label">{escape(repr(token))}</span>'
            f'<span class="demo-bar-track"><span class="demo-bar-fill" style="width:{100 * p:.0f}%">'
            f'</span></span><span class="demo-bar-value">{p:.2f}</span></div>' for token, p in step.top]
    return '<div class="demo-guesses">' + "".join(bars) + "</div>"


def _beams(beams) -> str:
    rows = "".join(f"<li>{escape(repr(text))} <span class=\"demo-score\">{score:.2f}</span></li>"
                   for text, score in beams)
    return f'<div class="demo-beams"><b>Beams after this step</b><ol>{rows}</ol></div>'


def step_view(steps) -> str:
    """All steps of a trace as HTML cards (an empty string for no steps)."""
    if not steps:
        return ""
    cards = []
    for k, step in enumerate(steps):
        top_token = step.top[0][0] if step.top else None
        agrees = "(its top guess)" if top_token == step.chosen else "(not its top guess)"
        # the rows recorded at step k+1 are the hypotheses that step k left alive
        if step.beams is None:
            beams = ""
        elif k + 1 < len(steps):
            beams = _beams(steps[k + 1].beams)
        else:
            beams = '<div class="demo-beams">After the last step, the best beam is the output.</div>'
        cards.append(
            f'<div class="demo-step"><div class="demo-step-head">Step {step.step + 1} · kept '
            f'<b>{escape(repr(step.chosen))}</b> {agrees}</div>{_window(step)}{_guesses(step)}'
            f'{beams}</div>')
    return '<div class="demo-steps">' + LEGEND + "".join(cards) + "</div>"
