"""The app's figures, from hand-made inputs whose cells and means are computed here by hand."""

import math

import pandas as pd
import pytest

from demo.engine.pll import CandidateScore, TokenScore
from demo.evaluation.plots import accuracy_vs_shots, accuracy_vs_size, pll_difference, token_heatmap


def _candidate(candidate: str, logprobs: list[float], pieces: list[str] | None = None) -> CandidateScore:
    pieces = pieces or candidate.split()
    text, tokens = "ctx ", []
    for piece, logprob in zip(pieces, logprobs):
        start = len(text) + 1 if tokens else len(text)
        text += (" " if tokens else "") + piece
        tokens.append(TokenScore(token=piece, start=start, end=start + len(piece), logprob=logprob,
                                 rank=1, masked=[]))
    total = sum(logprobs)
    return CandidateScore(candidate=candidate, text=text, tokens=tokens, total=total,
                          mean=total / len(logprobs), score=total)


def test_token_heatmap_has_one_cell_per_token_best_candidate_first():
    scores = [_candidate("a b c", [-1.0, -2.0, -3.0]), _candidate("d e", [-0.5, -0.25])]
    trace = token_heatmap(scores).data[0]
    # best first: "d e" (-0.75) above "a b c" (-6.0); the shorter row is padded with empty cells
    assert list(trace.y) == ["1. d e", "2. a b c"]
    assert [list(row) for row in trace.z] == [[-0.5, -0.25, None], [-1.0, -2.0, -3.0]]
    assert [list(row) for row in trace.text] == [["d", "e", ""], ["a", "b", "c"]]
    assert sum(1 for row in trace.z for v in row if v is not None) == 5


def test_token_heatmap_rows_follow_a_given_order_with_their_own_ranks():
    scores = [_candidate("a b c", [-1.0, -2.0, -3.0]), _candidate("d e", [-0.5, -0.25])]
    trace = token_heatmap(scores, order=[0, 1]).data[0]  # another figure's order: worst first here
    assert list(trace.y) == ["2. a b c", "1. d e"]
    assert [list(row) for row in trace.z] == [[-1.0, -2.0, -3.0], [-0.5, -0.25, None]]


def test_token_figures_give_every_labelled_cell_room_and_a_short_title():
    other = _candidate("c d", [-1.0, -3.0])
    short = token_heatmap([_candidate("a b c d e f g h", [-1.0] * 8), other])
    long = token_heatmap([_candidate("a b c d e f g hhhhhhhhhhhh", [-1.0] * 8), other])
    wide = token_heatmap([_candidate(" ".join("abcdefghijklmnopqr"), [-1.0] * 18), other])
    # a width of their own: more tokens or longer tokens, a wider figure (the app scrolls it)
    assert short.layout.width < long.layout.width and short.layout.width < wide.layout.width
    assert wide.layout.width - short.layout.width >= 10 * 34  # ten more cells of at least 34 px
    difference = pll_difference([_candidate("a b", [-1.0, -2.0])], [_candidate("a b", [-1.5, -2.0])],
                                "+2 right masks (Samuel 2024)", "1 mask (Salazar et al. 2020)")
    # each title line fits a phone (400 px at about 8 px a character)
    for figure in (short, difference):
        assert max(len(line) for line in figure.layout.title.text.split("<br>")) <= 45, figure.layout.title.text


def test_token_heatmap_keeps_rows_of_equal_or_whitespace_tokens_apart():
    same = [_candidate("x y", [-1.0, -1.0]), _candidate("x y ", [-2.0, -2.0], ["x", " "])]
    trace = token_heatmap(same).data[0]
    assert len(set(trace.y)) == 2  # numbered labels: two rows even when the texts look alike
    assert trace.text[1][1] == "␣"  # a whitespace-only token still gets a visible cell


def test_pll_difference_is_second_minus_first_per_token():
    one_mask = [_candidate("super.", [-1.0, -0.5], ["super", "."]),
                _candidate("supercalifragilistic.", [-4.0, -0.1, -0.1], ["super", "cali", "."])]
    right_masks = [_candidate("super.", [-1.5, -0.5], ["super", "."]),
                   _candidate("supercalifragilistic.", [-4.0, -6.0, -3.0], ["super", "cali", "."])]
    trace = pll_difference(one_mask, right_masks, "1 mask", "+2 right masks").data[0]
    by_row = {label.split(" (")[0]: [v for v in row if v is not None] for label, row in zip(trace.y, trace.z)}
    assert by_row["1. super."] == pytest.approx([-0.5, 0.0])
    assert by_row["2. supercalifragilistic."] == pytest.approx([0.0, -5.9, -2.9])
    assert "(Δ -8.80)" in trace.y[1]  # -13.0 - (-4.2)
    with pytest.raises(ValueError, match="one variant only"):
        pll_difference(one_mask, right_masks[:1], "a", "b")


def _results(rows):
    columns = ["paper", "table", "task", "task_label", "group", "model", "model_size", "shots",
               "shots_label", "metric", "value", "variant", "source"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["shots"] = frame["shots"].astype("Int64")
    return frame


def _points(figure):
    return {(trace.name, str(x)): y for trace in figure.data for x, y in zip(trace.x, trace.y)}


def test_accuracy_plots_average_the_tasks_shown_per_group():
    rows = []
    for model, size, kind in (("DeBERTa 0.1B", 1e8, "m"), ("DeBERTa 1.4B", 1.4e9, "m"), ("GPT-3 1.3B", 1.3e9, "c")):
        for shots, label in ((0, "0-shot"), (1, "1-shot")):
            for task, title, value in (("copa", "COPA", 60 + 10 * shots + size / 1e8),
                                       ("rte", "RTE", 50 + 10 * shots)):
                rows.append(["P", "T", task, title, "SuperGLUE", model, size, shots, label,
                             "accuracy", value, "", "published"])
            # ignored: a published average, a second metric of a task, a number printed twice
            rows.append(["P", "T", "average", "Average", "SuperGLUE", model, size, shots, label,
                         "accuracy", 0.0, "", "published"])
            rows.append(["P", "T", "cb", "CB", "SuperGLUE", model, size, shots, label, "f1_macro",
                         0.0, "", "published"])
            rows.append(["P", "T", "cb", "CB", "SuperGLUE", model, size, shots, label, "accuracy",
                         40.0, "", "published"])
            rows.append(["P", "T2", "cb", "CB", "SuperGLUE", model, size, shots, label, "accuracy",
                         40.0, "", "published"])
    frame = _results(rows)

    size_points = _points(accuracy_vs_size(frame))
    # mean of COPA, RTE, CB accuracy: (60 + 10s + size/1e8 + 50 + 10s + 40) / 3
    for model, size in (("DeBERTa 0.1B", 1e8), ("DeBERTa 1.4B", 1.4e9)):
        for shots in (0, 1):
            expected = (60 + 10 * shots + size / 1e8 + 50 + 10 * shots + 40) / 3
            assert math.isclose(size_points[(f"DeBERTa, {shots}-shot", str(size))], expected)
    shot_figure = accuracy_vs_shots(frame)
    shot_points = _points(shot_figure)
    assert math.isclose(shot_points[("GPT-3 1.3B", "1-shot")], (60 + 10 + 13 + 50 + 10 + 40) / 3)
    assert [a.text for a in shot_figure.layout.annotations] == ["SuperGLUE"]  # one panel per group


def test_results_figures_stack_their_panels_with_the_legend_below():
    """One panel per row, at full width (so a phone's 400 px fit), with room between panels for
    the tick labels, the axis title and the next panel's title; the legend under the last."""
    rows = [["P", "T", task, task, group, model, size, shots, f"{shots}-shot", "accuracy", 50.0, "", "published"]
            for task, group in (("copa", "SuperGLUE"), ("piqa", "commonsense QA"), ("hellaswag", "language modeling"))
            for model, size in (("DeBERTa 0.1B", 1e8), ("DeBERTa 1.4B", 1.4e9), ("GPT-3 1.3B", 1.3e9))
            for shots in (0, 1)]
    for figure in (accuracy_vs_size(_results(rows)), accuracy_vs_shots(_results(rows))):
        layout = figure.layout
        panels = sorted(((layout[f"xaxis{i or ''}"].domain, layout[f"yaxis{i or ''}"].domain)
                         for i in ("", 2, 3)), key=lambda p: -p[1][1])
        assert [tuple(x) for x, _ in panels] == [(0.0, 1.0)] * 3
        area = layout.height - layout.margin.t - layout.margin.b  # plot area, pixels
        gaps = [(upper[1][0] - lower[1][1]) * area for upper, lower in zip(panels, panels[1:])]
        assert min(gaps) >= 90 and panels[0][1][1] == 1.0 and panels[-1][1][0] == 0.0
        entries = sum(1 for t in figure.data if t.showlegend is not False)
        assert layout.legend.orientation == "h" and layout.legend.y < 0
        assert layout.margin.b >= 60 + 22 * -(-entries // 2)  # two entries a row at phone width


def test_accuracy_plots_accept_an_empty_selection():
    empty = _results([])
    assert accuracy_vs_size(empty).data == () and accuracy_vs_shots(empty).data == ()


def test_downloads_get_folders_of_their_own_and_old_ones_are_swept(tmp_path, monkeypatch):
    """A public Space writes files on every click: each download has its own folder under one
    folder, and folders older than a day go when a download is made, at most once a minute."""
    import os
    import time

    import pandas as pd

    from demo.app import downloads
    monkeypatch.setattr(downloads, "DOWNLOADS", tmp_path / "downloads")
    first = downloads.download(pd.DataFrame({"a": [1]}), "ranking", "m")
    second = downloads.download(pd.DataFrame({"a": [2]}), "ranking", "m")  # same name, same day
    assert first != second and pd.read_csv(first)["a"].tolist() == [1]
    old = os.path.dirname(first)
    day_and_a_bit = time.time() - downloads.KEEP_SECONDS - 60
    os.utime(old, (day_and_a_bit, day_and_a_bit))
    downloads.download(pd.DataFrame({"a": [3]}), "ranking", "m")
    assert os.path.exists(old)  # swept at most once a minute: the first download swept
    monkeypatch.setattr(downloads, "SWEEP_EVERY_S", 0.0)
    downloads.download(pd.DataFrame({"a": [4]}), "ranking", "m")
    assert not os.path.exists(old) and os.path.exists(second)


def test_a_figures_words_wrap_between_words_in_lines_of_about_one_length():
    from demo.evaluation.figure_fit import legend_px, wrapped
    assert wrapped("extra masks right of each scored token (N)", 30) == "extra masks right of<br>each scored token (N)"
    assert wrapped("short", 30) == "short" and wrapped("", 30) == ""
    assert wrapped("a-very-long-model-name-without-spaces on copa", 20) == "a-very-long-model-name-without-spaces<br>on copa"
    assert wrapped("<b> & co", 30) == "&lt;b&gt; &amp; co"  # shown as typed
    assert legend_px(["one", "two<br>lines"]) > legend_px(["one", "two"])
