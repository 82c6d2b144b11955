"""Plotly figures for the demo: plain functions that take tables and return ``go.Figure``.

No gradio here: the app shows these figures, the command line saves them (``save_figure``).
"""

import colorsys
import functools
import html
import itertools
import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .figure_fit import AXIS_CHARS, LEGEND_BELOW, LEGEND_CHARS, TITLE_CHARS, legend_px, wrapped

ACCURACY_COLOURS = "RdYlGn"  # red = never found, green = always found (as the paper's Figure 3)
BEYOND_COLOUR = "#c8c8c8"


# ---------------------------------------------------------------- needle in a haystack


def needle_accuracy(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(accuracy, answered cells, beyond-limit cells): depth x length tables from a tidy grid.

    Accuracy is the mean exact match over a cell's answered repetitions; NaN where none was
    answered. A cell is beyond the limit when every repetition of it is.
    """
    missing = {"length", "depth", "correct", "status"} - set(table.columns)
    if missing:
        raise ValueError(f"Not a needle grid table: missing columns {sorted(missing)}.")
    answered = table[table["status"] == "ok"].assign(correct=lambda t: pd.to_numeric(t["correct"]))
    lengths = sorted(table["length"].unique())
    depths = sorted(table["depth"].unique())
    accuracy = (answered.pivot_table(index="depth", columns="length", values="correct", aggfunc="mean")
                .reindex(index=depths, columns=lengths))
    counts = (answered.pivot_table(index="depth", columns="length", values="correct", aggfunc="count")
              .reindex(index=depths, columns=lengths).fillna(0).astype(int))
    beyond = (table.assign(beyond=table["status"] == "beyond_limit")
              .pivot_table(index="depth", columns="length", values="beyond", aggfunc="all")
              .reindex(index=depths, columns=lengths).fillna(False).astype(bool))
    return accuracy, counts, beyond


def _needle_table(df_or_grid, model: str | None) -> pd.DataFrame:
    table = pd.read_csv(df_or_grid, dtype={"needle": str, "answer": str}) \
        if isinstance(df_or_grid, (str, Path)) else df_or_grid
    if "model" in table.columns:
        models = list(dict.fromkeys(table["model"]))
        if model is not None:
            if model not in models:
                raise ValueError(f"No rows for model {model!r}; the table holds {models}.")
            table = table[table["model"] == model]
        elif len(models) > 1:
            raise ValueError(f"The table holds several models {models}: pick one with model=...")
    if table.empty:
        raise ValueError("The needle grid table is empty.")
    return table


def _model_name(table: pd.DataFrame) -> str:
    name = str(table["model"].iloc[0]) if "model" in table.columns else "model"
    return Path(name).name if name.startswith(("/", ".", "~")) else name  # a local path: its folder


def _add_needle_panel(fig: go.Figure, table: pd.DataFrame, col: int, pretrained_length: int | None,
                      max_length: int | None) -> None:
    accuracy, counts, beyond = needle_accuracy(table)
    lengths, depths = list(accuracy.columns), list(accuracy.index)
    # Cells sit at integer positions so that lengths are evenly spaced (like the paper) and the
    # pretraining-length line can fall between two columns.
    xs, ys = list(range(len(lengths))), list(range(len(depths)))
    custom = [[[int(n), float(d), int(counts.loc[d, n])] for n in lengths] for d in depths]
    text = [["" if pd.isna(accuracy.loc[d, n]) else f"{accuracy.loc[d, n]:.0%}" for n in lengths]
            for d in depths]  # percent, like the colour bar
    fig.add_trace(go.Heatmap(
        x=xs, y=ys, z=accuracy.values, text=text, texttemplate="%{text}", customdata=custom,
        coloraxis="coloraxis", xgap=1, ygap=1, name=_model_name(table),
        hovertemplate="length %{customdata[0]} tokens<br>needle depth %{customdata[1]:.0%}"
                      "<br>exact match %{z:.0%} over %{customdata[2]} run(s)<extra></extra>"),
        row=1, col=col)
    if beyond.values.any():
        limit = f" ({max_length} tokens)" if max_length else ""
        fig.add_trace(go.Heatmap(
            x=xs, y=ys, z=[[1 if b else None for b in row] for row in beyond.values],
            text=[["beyond<br>limit" if b else "" for b in row] for row in beyond.values],
            texttemplate="%{text}", textfont=dict(size=9, color="#444"), customdata=custom,
            colorscale=[[0, BEYOND_COLOUR], [1, BEYOND_COLOUR]], showscale=False, xgap=1, ygap=1,
            hovertemplate=f"length %{{customdata[0]}} tokens<br>beyond the model's position limit"
                          f"{limit}: not run<extra></extra>"),
            row=1, col=col)
    axis_title = "prompt length (tokens)"
    if pretrained_length and pretrained_length <= lengths[-1]:
        # the line goes after the last column within the pretraining length
        inside = sum(1 for n in lengths if n <= pretrained_length)
        # the line reaches above the cells, and its label sits there, on white: over no cell's
        # colour or number at any width
        fig.add_vline(x=inside - 0.5, y0=0, y1=1.06, line=dict(color="black", dash="dash", width=2),
                      layer="above", row=1, col=col)
        axis = "" if col == 1 else col
        fig.add_annotation(x=inside - 0.5, xref=f"x{axis}", y=1.06, yref=f"y{axis} domain", yanchor="bottom",
                           text=f"pretrained: {pretrained_length}", showarrow=False, font=dict(size=11),
                           bgcolor="white")
    elif pretrained_length:
        axis_title += f"; pretrained on {pretrained_length}"
    fig.update_xaxes(tickvals=xs, ticktext=[str(n) for n in lengths], title_text=axis_title,
                     row=1, col=col)
    fig.update_yaxes(tickvals=ys, ticktext=[f"{d:.0%}" for d in depths], autorange="reversed",
                     row=1, col=col)


def _needle_layout(fig: go.Figure, title: str, width: int | None, n_depths: int) -> go.Figure:
    """``width`` None: the figure takes its box's width (the app's, from a phone's up)."""
    fig.update_layout(
        # at least 320 px: plotly.js fails ("axis scaling") on a one-row grid drawn shorter
        title=title, width=width, height=max(320, 190 + 34 * n_depths), margin=dict(t=110, l=70, r=20, b=60),
        # the title beside the bar, turned: it takes a line's height of width, not a word's
        coloraxis=dict(colorscale=ACCURACY_COLOURS, cmin=0, cmax=1,
                       colorbar=dict(title=dict(text="exact match", side="right"), tickformat=".0%",
                                     thickness=16)),
        plot_bgcolor="white")
    fig.update_yaxes(title_text="needle depth (0% = start)", row=1, col=1)
    for subplot_title in fig.layout.annotations:  # lift panel titles above the pretraining labels
        if subplot_title.yref == "paper":
            subplot_title.yshift = 36
    return fig


def needle_heatmap(df_or_grid, *, model: str | None = None, title: str | None = None,
                   pretrained_length: int | None = None, max_length: int | None = None) -> go.Figure:
    """Length (x) by needle depth (y) heatmap of exact-match accuracy, as wide as its box.

    ``df_or_grid``: the tidy table of ``demo.evaluation.haystack.run_grid`` or its CSV path. Cells beyond an
    absolute-position model's limit are grey with "beyond limit"; a dashed line marks the
    pretraining length.
    """
    table = _needle_table(df_or_grid, model)
    fig = make_subplots(rows=1, cols=1)
    _add_needle_panel(fig, table, 1, pretrained_length, max_length)
    return _needle_layout(fig, title or f"Needle in a haystack: {_model_name(table)}", None,
                          table["depth"].nunique())


def needle_heatmaps_side_by_side(grid_a, grid_b, *, models: tuple = (None, None),
                                 titles: tuple | None = None, title: str = "Needle in a haystack",
                                 pretrained_lengths: tuple = (None, None),
                                 max_lengths: tuple = (None, None)) -> go.Figure:
    """Two needle heatmaps (e.g. an MLM and a causal LM) on one colour scale, depths aligned."""
    tables = [_needle_table(grid_a, models[0]), _needle_table(grid_b, models[1])]
    if sorted(tables[0]["depth"].unique()) != sorted(tables[1]["depth"].unique()):
        raise ValueError("The two grids use different depths, so their rows would not line up.")
    titles = titles or [_model_name(t) for t in tables]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=list(titles),
                        horizontal_spacing=0.05)
    for col, table in enumerate(tables, start=1):
        _add_needle_panel(fig, table, col, pretrained_lengths[col - 1], max_lengths[col - 1])
    width = 360 + 80 * sum(t["length"].nunique() for t in tables)
    return _needle_layout(fig, title, width, tables[0]["depth"].nunique())


# ---------------------------------------------------------------- how many masks?

SWEEP_AXES = {"padding_masks": "padding masks after the predicted [MASK] (p)",
              "right_masks": "extra masks right of each scored token (N)"}
SWEEP_SYMBOLS = {"padding_masks": "p", "right_masks": "N"}
PAPER_COLOUR = "#d62728"
SWEEP_PLOT_PX = 240


def mask_sweep_plot(table: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Score (y) against the number of masks (x) from a mask sweep's tidy table
    (``demo.evaluation.mask_sweep``): a line with points per model, the task's first metric,
    its standard error as error bars; the paper's choice (``paper_value``) a star and a dashed line."""
    missing = {"model", "task", "setting", "value", "metric", "score", "stderr", "paper_value"} - set(table.columns)
    if missing:
        raise ValueError(f"Not a mask sweep table: missing columns {sorted(missing)}.")
    if table.empty:
        raise ValueError("The mask sweep table is empty.")
    setting, metric = table["setting"].iloc[0], table["metric"].iloc[0]
    rows = table[(table["setting"] == setting) & (table["metric"] == metric)].sort_values("value")
    fig = go.Figure()
    for model, line in rows.groupby("model", sort=False):
        name = _model_name(line)
        fig.add_trace(go.Scatter(
            x=line["value"], y=line["score"], mode="lines+markers", name=wrapped(name, LEGEND_CHARS),
            marker=dict(size=9),
            error_y=dict(type="data", array=line["stderr"].fillna(0), visible=True),
            customdata=line[["n"]].values if "n" in line else None,
            hovertemplate=f"{name}<br>%{{x}} masks: %{{y:.1f}} over %{{customdata[0]}} items<extra></extra>"))
        chosen = line[line["value"] == line["paper_value"]]
        fig.add_trace(go.Scatter(
            x=chosen["value"], y=chosen["score"], mode="markers",
            name=wrapped(f"the paper's choice ({name})", LEGEND_CHARS),
            marker=dict(symbol="star", size=18, color=PAPER_COLOUR, line=dict(width=1, color="white")),
            hovertemplate="the paper's choice: %{x} masks, %{y:.1f}<extra></extra>"))
    symbol = SWEEP_SYMBOLS.get(setting, "")
    for value in sorted(set(rows["paper_value"])):
        fig.add_vline(x=value, line=dict(color=PAPER_COLOUR, dash="dash", width=1),
                      annotation_text=f"the paper's {symbol} = {value}", annotation_position="top")
    about = wrapped(f"{_model_name(rows)} on {rows['task'].iloc[0]}", TITLE_CHARS)
    title = title or f"How many masks?<br>{about}"
    # above the plot: the title (in the middle of the top margin) and under it the label of the
    # paper's line; under the plot its axis (ticks, a title on two lines: some 70 px), the legend
    top = 40 + 22 * (title.count("<br>") + 1)
    fig.update_layout(
        title=title,
        height=top + SWEEP_PLOT_PX + 70 + legend_px([trace.name for trace in fig.data]),
        plot_bgcolor="white", margin=dict(t=top, l=70, r=20, b=10), legend=LEGEND_BELOW)
    fig.update_xaxes(title_text=wrapped(SWEEP_AXES.get(setting, setting), AXIS_CHARS), automargin=True,
                     tickvals=sorted(set(rows["value"])), showgrid=True, gridcolor="#eee")
    fig.update_yaxes(title_text=f"{str(metric).replace('_', ' ')} (%)", rangemode="tozero",
                     showgrid=True, gridcolor="#eee")
    return fig


# ---------------------------------------------------------------- saving


@functools.cache
def _cdn_script() -> str:
    """The tag that loads plotly.js from its CDN, as plotly writes it (with its integrity hash). Made
    once: plotly hashes its whole bundle again for every figure it writes so."""
    html = go.Figure().to_html(include_plotlyjs="cdn", full_html=False)
    return re.search(r'<script[^>]*src="https://cdn[^"]*"[^>]*></script>', html).group(0)


def save_figure(fig: go.Figure, path: str | Path, offline: bool = True) -> Path:
    """Write a figure to .html or .png/.svg/.pdf (needs kaleido). An offline .html carries
    plotly.js whole; otherwise the page loads it from plotly's CDN, and the file holds only the figure."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        html = fig.to_html(include_plotlyjs=offline, full_html=True)
        path.write_text(html if offline else html.replace("</head>", _cdn_script() + "</head>", 1), encoding="utf-8")
    elif suffix in (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp"):
        try:
            fig.write_image(path)
        except (ImportError, ValueError, RuntimeError) as err:
            detail = str(err).strip().splitlines()
            raise ValueError(f"Cannot write {path.name}: image export needs the kaleido package "
                             f"(pip install kaleido) and a browser; write an .html file instead."
                             + (f" ({detail[0]})" if detail else "")) from err
    else:
        raise ValueError(f"Unknown figure format {suffix!r}: use .html or .png.")
    return path


# ---------------------------------------------------------------- per-token scores (Ranking tab)


LABELLED_TOKENS = 40  # rows longer than this get no cell labels (they would overlap): hover instead


def _plain(text: str) -> str:
    """Text for a plotly label or hover: entities, so tags typed by a user show as typed."""
    return html.escape(text, quote=False)


def _token_label(token: str) -> str:
    """A token as it reads in a cell: its text without the leading space ("␣" if only spaces)."""
    shown = token.strip()
    return _plain(shown) if shown else "␣"


def _row_label(candidate: str, prefix: str = "", suffix: str = "", width: int = 22) -> str:
    short = candidate if len(candidate) <= width else candidate[: width - 1] + "…"
    return _plain(f"{prefix}{short}{suffix}")


def _token_grid(rows: list[list], token_of, value_of, hover_of):
    """z, text and hover matrices for ragged rows of tokens (None pads short rows: no cell)."""
    width = max((len(r) for r in rows), default=0)
    z = [[value_of(t) for t in r] + [None] * (width - len(r)) for r in rows]
    text = [[_token_label(token_of(t)) for t in r] + [""] * (width - len(r)) for r in rows]
    hover = [[hover_of(t) for t in r] + [""] * (width - len(r)) for r in rows]
    return z, text, hover


def log_prob_floor(*score_sets) -> float:
    """The bottom of the log-prob colour scale for heatmaps read side by side (a masked and a
    causal LM's): the lowest log-prob of any of their tokens, so one colour is one log-prob in
    every figure (never exactly 0, which would leave no scale)."""
    lowest = min((t.logprob for scores in score_sets for s in scores for t in s.tokens), default=-1.0)
    return min(lowest, -1e-3)


# Under the figure at its left edge, a fixed length: on screen with the first tokens whatever the
# figure's width (a phone scrolls a long one sideways), and no width taken from the cells.
COLOUR_BAR = dict(title=dict(text="log-prob", side="right", font=dict(size=13)), orientation="h",
                  thickness=14, tickfont=dict(size=12), len=240, lenmode="pixels", nticks=6,
                  xref="container", x=0.02, xanchor="left", yref="container", y=0.0, yanchor="bottom",
                  ypad=12)

# Pixel sizes of a per-token figure. Each token gets a cell wide enough for its label whatever
# the screen, so the figure has a width of its own; the app shows it in a box that scrolls
# sideways (demo/ui/style.css, .demo-scroll-plot) rather than squeeze tokens over each other.
CHAR_PX = 8  # a character of a 13 px cell label or a 12 px row label, with room to spare
MIN_CELL_PX, BARE_CELL_PX = 34, 14  # a labelled cell; a cell without a label (hover instead)
MIN_WIDTH_PX = 340  # the colour bar and its title, and the figure's title


def _token_figure(z, text, hover, labels, title: str, colours: dict, colour_bar: dict) -> go.Figure:
    """A heatmap of ragged token rows (one per label) at a width that fits every cell's label."""
    longest = max((len(t) for row in text for t in row), default=1)
    cell = max(MIN_CELL_PX, CHAR_PX * longest + 10) if any(t for row in text for t in row) else BARE_CELL_PX
    tokens = max((len(row) for row in z), default=1)
    label_px = CHAR_PX * max((len(label) for label in labels), default=1) + 20
    # one constructor: plotly validates what it is given once, where each update validates again
    return go.Figure(go.Heatmap(
        z=z, text=text, customdata=hover, texttemplate="%{text}", textfont=dict(size=13),
        hovertemplate="%{customdata}<extra></extra>", y=labels, xgap=2, ygap=4,
        colorbar=colour_bar, **colours), layout=dict(
        yaxis=dict(autorange="reversed", tickfont=dict(size=12)),
        xaxis=dict(title=dict(text="token position in the scored text"), showgrid=False, zeroline=False),
        # the title at the left edge: in view when the box scrolls, however wide the figure; the
        # bottom margin holds the tick labels, the axis title and the colour bar under them
        title=dict(text=title, font=dict(size=15), x=0, xanchor="left", xref="container", pad=dict(l=10)),
        height=230 + 52 * len(labels), width=max(MIN_WIDTH_PX, label_px + tokens * cell + 20),
        margin=dict(l=10, r=10, t=40 + 22 * (title.count("<br>") + 1), b=120), plot_bgcolor="white"))


def token_heatmap(scores, title: str = "Log-probability of each scored token",
                  zmin: float | None = None, order: list[int] | None = None) -> go.Figure:
    """One row per candidate, one cell per scored token, coloured by its log-prob.

    ``scores``: ``demo.engine.pll.CandidateScore`` list. Cells read left to right like the text, so the
    tokens that pulled a candidate down stand out in red. Rows go best first, or in ``order``
    (indices into ``scores``: the order of a figure read beside this one); each row's label starts
    with its candidate's rank. ``zmin``: the scale's bottom, shared with the figures read beside
    this one (:func:`log_prob_floor`); by default its own lowest.
    """
    best_first = sorted(range(len(scores)), key=lambda k: scores[k].score, reverse=True)
    rank = {k: r for r, k in enumerate(best_first, 1)}
    rows = [scores[k] for k in (best_first if order is None else order)]
    shown_ranks = [rank[k] for k in (best_first if order is None else order)]
    z, text, hover = _token_grid(
        [s.tokens for s in rows], lambda t: t.token, lambda t: t.logprob,
        lambda t: (f"token {_plain(repr(t.token))}<br>log-prob {t.logprob:.3f}<br>rank {t.rank}"
                   + (f"<br>masked positions {t.masked}" if t.masked else "")))
    if max((len(s.tokens) for s in rows), default=0) > LABELLED_TOKENS:
        text = [["" for _ in row] for row in text]
        title += "<br>(hover a cell to see its token)"
    labels = [_row_label(s.candidate, prefix=f"{r}. ") for r, s in zip(shown_ranks, rows)]
    floor = log_prob_floor(scores) if zmin is None else zmin
    return _token_figure(z, text, hover, labels, title,
                         dict(colorscale="RdYlGn", zmin=floor, zmax=0.0), COLOUR_BAR)


def pll_difference(first, second, first_label: str, second_label: str) -> go.Figure:
    """Per-token log-prob of ``second`` minus ``first`` (two PLL variants, same model and texts).

    Positive cells: the second variant finds that token likelier. With "1 mask" first and
    "+ right masks" second, the later pieces of a multi-token word go strongly negative: one mask
    lets the neighbours give them away, which is why a long word looks too likely under it.
    """
    by_candidate = {s.candidate: s for s in second}
    rows, labels = [], []
    for i, a in enumerate(sorted(first, key=lambda s: s.score, reverse=True), 1):
        b = by_candidate.get(a.candidate)
        if b is None:
            raise ValueError(f"Candidate {a.candidate!r} was scored by one variant only.")
        b_tokens = {(t.start, t.end): t for t in b.tokens}
        pairs = [(t, b_tokens[(t.start, t.end)]) for t in a.tokens if (t.start, t.end) in b_tokens]
        rows.append(pairs)
        # numbered like the ranking of the first variant; numbers also keep equal texts apart
        labels.append(_row_label(a.candidate, prefix=f"{i}. ", suffix=f" (Δ {b.score - a.score:+.2f})"))
    z, text, hover = _token_grid(
        rows, lambda p: p[0].token, lambda p: p[1].logprob - p[0].logprob,
        lambda p: (f"token {_plain(repr(p[0].token))}<br>{first_label}: {p[0].logprob:.3f}<br>"
                   f"{second_label}: {p[1].logprob:.3f}<br>difference {p[1].logprob - p[0].logprob:+.3f}"))
    extent = max((abs(v) for row in z for v in row if v is not None), default=1.0) or 1.0
    # a line per variant (their names run long): the title fits a phone's width
    title = (f"{_plain(second_label)}<br>minus {_plain(first_label)}, per token<br>"
             "(row label: the score's change)")
    return _token_figure(z, text, hover, labels, title,
                         dict(colorscale="RdBu", zmid=0.0, zmin=-extent, zmax=extent),
                         COLOUR_BAR | dict(title=COLOUR_BAR["title"] | dict(text="Δ log-prob")))


# ---------------------------------------------------------------- results (Results tab)


def model_family(model: str) -> str:
    """'DeBERTa 1.4B' -> 'DeBERTa', 'GPT-3 Ada' -> 'GPT-3'; a one-word name is its own family."""
    return model.split(" ")[0].rstrip(",") if " " in model else model


FAMILY_COLOURS = {"deberta": "#d62728", "gpt-3": "#1f77b4"}  # as in the BERTs paper's figures
# plotly's D3 colours less the paper's two, then ColorBrewer Dark2's unlike them
OTHER_COLOURS = ["#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                 "#7f7f7f", "#1b9e77", "#e6ab02", "#7570b3", "#e7298a", "#a6761d"]
# a family's shades (HLS lightness): wide apart, so that four sizes tell apart; the palest still
# clear on white
DARKEST, LIGHTEST = 0.3, 0.72


def model_colours(frame: pd.DataFrame) -> dict[str, str]:
    """One colour per model of ``frame`` (its ``model`` and ``model_size`` columns), for every
    figure that shows them: make it once from all the models a page can show, so that a model
    keeps its colour from figure to figure and from one filter to the next.

    The family gives the hue (the BERTs paper's red for DeBERTa and blue for GPT-3, others in
    turn), the size within the family the shade (darker = larger), so that the sizes of a family
    read as one series and still differ.
    """
    models = (frame[["model", "model_size"]].drop_duplicates("model")
              .assign(family=lambda f: f["model"].map(lambda m: model_family(m).casefold()))
              .sort_values(["family", "model_size", "model"], ascending=[True, False, True],
                           na_position="last"))
    others = itertools.cycle(OTHER_COLOURS)
    colours = {}
    for family, members in models.groupby("family", sort=True):
        base = FAMILY_COLOURS.get(family) or next(others)
        n = len(members)
        for rank, model in enumerate(members["model"]):  # largest first: darkest
            colours[model] = base if n == 1 else _shade(base, DARKEST + (LIGHTEST - DARKEST) * rank / (n - 1))
    return colours


def _hls(colour: str) -> tuple[float, float, float]:
    return colorsys.rgb_to_hls(*(int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)))


def _shade(colour: str, lightness: float) -> str:
    """``colour`` (#rrggbb) at another lightness (HLS), its hue and saturation kept."""
    hue, _, saturation = _hls(colour)
    return "#" + "".join(f"{round(255 * c):02x}" for c in colorsys.hls_to_rgb(hue, lightness, saturation))


def _task_means(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean score over tasks per ``keys``: one number per model, task and shots.

    Each task counts by its first metric in the registry (``demo.tasks``), any other task by its
    most frequent one; a number printed in two tables counts once. Groups are the frame's own
    (``demo.evaluation.results`` gives every registered task its registry group). Published
    "average" rows are left out: every point is the plain mean of the tasks shown, so points
    stay comparable when a filter drops tasks (the papers' own averages are in the table).
    """
    from ..tasks import TASKS

    rows = frame[(frame["task"] != "average") & frame["value"].notna()].copy()
    if rows.empty:
        return rows.assign(tasks=pd.Series(dtype=int), task_list=pd.Series(dtype=str))
    frequent = rows.groupby("task")["metric"].agg(lambda m: m.value_counts().index[0])
    primary = rows["task"].map(lambda t: TASKS[t].metrics[0] if t in TASKS else frequent[t])
    rows = rows[rows["metric"] == primary].drop_duplicates(["model", "task", "shots_label", "metric"])
    return (rows.groupby(keys, dropna=False)
            .agg(value=("value", "mean"), tasks=("task", "nunique"),
                 task_list=("task_label", lambda t: ", ".join(sorted(set(map(str, t))))))
            .reset_index())


# Pixel sizes of the panels: one panel per row, so a figure is as readable at phone width
# (400 px) as on a wide screen, where the Results tab puts its two figures side by side.
PANEL_PX = 220
GAP_PX = 95  # under a panel: its tick labels and axis title, then the next panel's title
TOP_PX = 70  # the figure's title
LEGEND_ROW_PX = 22


def _facets(groups: list[str], title: str, y_title: str, legend_entries: int):
    """One panel per task group, stacked, the legend under the last; returns (figure, panel
    positions). The bottom margin holds the legend at two entries a row (a phone's width), so
    the legend never covers a panel's axis."""
    n = max(len(groups), 1)
    area = n * PANEL_PX + (n - 1) * GAP_PX
    bottom = 60 + LEGEND_ROW_PX * -(-legend_entries // 2)
    fig = make_subplots(rows=n, cols=1, subplot_titles=groups or [""],
                        vertical_spacing=GAP_PX / area if n > 1 else 0.0)
    fig.update_layout(title=title, height=TOP_PX + area + bottom, plot_bgcolor="white",
                      margin=dict(t=TOP_PX, l=60, r=20, b=bottom),
                      legend=dict(orientation="h", x=0, xanchor="left", y=-55 / area, yanchor="top"))
    fig.update_yaxes(title_text=y_title)
    return fig, [(i + 1, 1) for i in range(n)]


def accuracy_vs_size(frame: pd.DataFrame, title: str = "Score vs model size",
                     colours: dict[str, str] | None = None) -> go.Figure:
    """The BERTs paper's Figure 1 from a tidy results table: one panel per task group, x =
    parameters (log scale), y = mean score over the tasks shown, one line per model family and
    number of shots (e.g. DeBERTa 0.1B -> 1.4B at 1 shot next to GPT-3 1.3B), each point in its
    model's colour (``colours``, default ``model_colours(frame)``)."""
    sized = frame[frame["model_size"].notna()].assign(family=lambda f: f["model"].map(model_family))
    means = _task_means(sized, ["group", "family", "model", "model_size", "shots_label"])
    colours = colours or model_colours(frame)
    groups = list(dict.fromkeys(means["group"])) if len(means) else []
    lines = means.groupby(["family", "shots_label"]).ngroups if len(means) else 0
    fig, panels = _facets(groups, title, "mean score (%)", lines)
    shown = set()
    for (row, col), group in zip(panels, groups):
        for (family, shots), line in means[means["group"] == group].groupby(["family", "shots_label"]):
            line = line.sort_values("model_size")
            name = f"{family}, {shots}"
            # each point in its model's colour, the line in its family's (any model's hue, darker)
            family_colour = _shade(colours[line["model"].iloc[0]], 0.4)
            fig.add_trace(go.Scatter(
                x=line["model_size"], y=line["value"], mode="lines+markers", name=name,
                legendgroup=name, showlegend=name not in shown,
                marker=dict(color=[colours[m] for m in line["model"]], symbol=_symbol(shots), size=9),
                line=dict(color=family_colour, dash="solid" if shots != "0-shot" else "dot"),
                customdata=line[["model", "tasks", "task_list"]].values,
                hovertemplate="%{customdata[0]}, " + shots + "<br>mean %{y:.1f} over %{customdata[1]} "
                              "task(s): %{customdata[2]}<extra></extra>"), row=row, col=col)
            shown.add(name)
        # decades only: plotly's minor log labels ("2", "5") collide with "100M"
        fig.update_xaxes(type="log", title_text="parameters", dtick=1, row=row, col=col)
    return fig


def accuracy_vs_shots(frame: pd.DataFrame, title: str = "Score vs number of shots",
                      colours: dict[str, str] | None = None) -> go.Figure:
    """The BERTs paper's Figure 4 from a tidy results table: one panel per task group, x = shots
    (0, 1, few), y = mean score over the tasks shown, one line per model (DeBERTa vs GPT-3) in
    its colour (``colours``, default ``model_colours(frame)``)."""
    means = _task_means(frame, ["group", "model", "shots_label"])
    order = (frame.assign(order=frame["shots"].astype("Float64").fillna(1e6)).groupby("shots_label")["order"]
             .min().sort_values().index.tolist())
    colours = colours or model_colours(frame)
    groups = list(dict.fromkeys(means["group"])) if len(means) else []
    fig, panels = _facets(groups, title, "mean score (%)", means["model"].nunique() if len(means) else 0)
    shown = set()
    for (row, col), group in zip(panels, groups):
        for model, line in means[means["group"] == group].groupby("model"):
            line = line.assign(rank=line["shots_label"].map(order.index)).sort_values("rank")
            fig.add_trace(go.Scatter(
                x=line["shots_label"], y=line["value"], mode="lines+markers", name=model,
                legendgroup=model, showlegend=model not in shown,
                marker=dict(color=colours[model], size=9), line=dict(color=colours[model]),
                customdata=line[["tasks", "task_list"]].values,
                hovertemplate=model + ", %{x}<br>mean %{y:.1f} over %{customdata[0]} task(s): "
                                      "%{customdata[1]}<extra></extra>"), row=row, col=col)
            shown.add(model)
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order,
                         title_text="shots", row=row, col=col)
    return fig


def _symbol(shots_label: str) -> str:
    return {"0-shot": "circle-open", "1-shot": "circle", "few-shot": "diamond"}.get(shots_label, "square")


# ---------------------------------------------------------------- ranking methods (Table 5)

ABLATION_SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "star", "cross", "hexagon"]


def ranking_ablation_figure(rows: pd.DataFrame, title: str = "Score by ranking method",
                            colours: dict[str, str] | None = None) -> go.Figure:
    """The BERTs paper's Table 5 beside our runs: x = ranking method (1 mask ... the decoder's
    likelihood, the table's order), y = score, one line per source, task, model, shots and metric
    of ``rows`` (``demo.evaluation.results.ranking_ablation``), in its model's colour: the paper's
    and our mean over tasks bold, each of our tasks thin, each in a marker of its own."""
    colours = colours or model_colours(rows)
    methods = list(dict.fromkeys(rows["method_label"]))
    lines = list(rows.groupby(["source", "model", "task_label", "shots_label", "metric"], sort=False))
    fig = go.Figure()
    symbols = itertools.cycle(ABLATION_SYMBOLS)
    for (source, model, task, shots, metric), line in lines:
        bold = source == "published" or str(task).startswith("mean ")
        who = "paper" if source == "published" else "ours"
        name = f"{who}: {task} {metric}, {model} {shots}"
        fig.add_trace(go.Scatter(
            x=line["method_label"], y=line["value"], mode="lines+markers", name=wrapped(name, LEGEND_CHARS),
            line=dict(color=colours.get(model, "#555"), width=3.5 if bold else 1.5,
                      dash="dash" if metric == "token_f1" else "solid"),
            marker=dict(symbol=next(symbols), size=10 if bold else 7, color=colours.get(model, "#555")),
            opacity=1.0 if bold else 0.6,
            hovertemplate=_plain(name) + "<br>%{x}: %{y:.1f}<extra></extra>"))
    # under the plot, its axis: the method names, slanted on a phone (some 110 px with the axis
    # title); then the legend, one entry a row on a phone (the names run long)
    fig.update_layout(title=title, height=TOP_PX + 2 * PANEL_PX + 110 + legend_px([trace.name for trace in fig.data]),
                      plot_bgcolor="white", margin=dict(t=TOP_PX, l=60, r=20, b=10), legend=LEGEND_BELOW)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=methods, title_text="ranking method",
                     automargin=True)
    fig.update_yaxes(title_text="score (%)", rangemode="tozero")
    return fig
