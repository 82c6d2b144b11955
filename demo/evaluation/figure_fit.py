"""A figure's words from a phone's width up: plotly wraps no title, axis title or legend entry,
and places a legend by fractions of the plot, whatever the text around it takes.

At 400 px a figure is some 310 px wide (the page's padding around it); the character budgets below
hold at 360 px, a small phone's width. The legend goes under everything else, in the figure's own
coordinates: plotly then keeps that strip for it and fits the axis's tick labels and title above it
(``automargin`` on the axis), so none covers another at any width.
"""

import html
import textwrap

TITLE_CHARS = 32  # a figure title's line (17 px type)
AXIS_CHARS = 30  # an axis title's line, centred under a plot
LEGEND_CHARS = 36  # a legend entry's line, beside its 40 px symbol

# under the plot, from the figure's left edge, its entries side by side where they fit
LEGEND_BELOW = dict(orientation="h", xref="container", x=0, xanchor="left", yref="container", y=0,
                    yanchor="bottom")
LEGEND_LINE_PX, LEGEND_ENTRY_PX = 16, 20  # a legend entry's first line takes more: its gap


def wrapped(text: str, chars: int) -> str:
    """``text`` for plotly (its tags shown as typed) on lines of at most ``chars`` characters,
    broken between words, the lines about as long as each other; a longer word keeps a line of
    its own."""
    def lines(width: int) -> list[str]:
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [text]

    width = chars
    while width > 1 and len(lines(width - 1)) == len(lines(chars)):
        width -= 1
    return "<br>".join(html.escape(line, quote=False) for line in lines(width))


def legend_px(names: list[str]) -> int:
    """The height a legend of ``names`` (as ``wrapped`` gives them) takes at a phone's width, one
    entry a row."""
    return 10 + sum(LEGEND_ENTRY_PX + LEGEND_LINE_PX * name.count("<br>") for name in names)
