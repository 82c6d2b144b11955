"""Needle in a haystack: exact lengths, needle depth, 6-digit answers, seeds, limits, resuming, plots."""

import re
from dataclasses import replace

import pandas as pd
import pytest

from demo.engine.generation import generate
from demo.engine.text import encode_newlines
from demo.evaluation.haystack import (
    ANSWER_TOKENS,
    build_needle_prompt,
    cell_needle_and_start,
    load_filler,
    reader_of,
    run_grid,
    split_sentences,
)
from demo.evaluation.plots import needle_heatmap, needle_heatmaps_side_by_side
from demo.evaluation_settings import GridSettings
from tests.conftest import MASKED_FAMILIES

FILLER = load_filler()  # the bundled book: the product's default, no ../shared needed


@pytest.fixture(scope="module")
def model(tiny_model, family_folder):
    """family -> tiny random model; the SentencePiece ones get digit pieces (and "\\").

    The SentencePiece models trained for the tests saw only books, so they cannot spell a number;
    real ALBERT and DeBERTa-v3 vocabularies can. Added tokens give them that, cheaply.
    """
    from transformers import AutoTokenizer

    from demo.engine.models import random_model

    cache = {}

    def get(family):
        if family not in ("albert", "deberta-v2"):
            return tiny_model(family)
        if family not in cache:
            tokenizer = AutoTokenizer.from_pretrained(family_folder(family))
            tokenizer.add_tokens(list("0123456789\\"))
            cache[family] = random_model(family_folder(family), tokenizer=tokenizer)
        return cache[family]

    return get


def window_tokens(lm, text: str) -> int:
    """Positions the answer needs, by hand: [CLS] text [SEP] from the tokenizer, plus for an MLM
    the 6 answer tokens read before the last one, the predicted [MASK] and its padding masks;
    for a causal LM the 7 answer tokens."""
    with_specials = len(lm.tokenizer(encode_newlines(text, lm.newline_survives), verbose=False)["input_ids"])
    if lm.kind == "masked":
        return with_specials + (ANSWER_TOKENS - 1) + 1 + lm.padding_masks
    return with_specials + ANSWER_TOKENS


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["gpt2"])
def test_prompt_has_exactly_the_requested_length(model, family):
    lm = model(family)
    for length in (161, 300, 512, 1500):
        for depth in (0.0, 0.37, 1.0):
            prompt = build_needle_prompt(lm, length, depth, "123456", FILLER, start=length)
            assert window_tokens(lm, prompt.text) == length == prompt.length
            assert prompt.text.count("123456") == 1
            assert prompt.text.endswith("mentioned in the provided text is")
            if not lm.newline_survives:  # the model reads the paper's marker instead of newlines
                model_text = encode_newlines(prompt.text, False)
                assert "\n" not in model_text and "\\n > Question:" in model_text
    # a bare tokenizer (preview before loading weights) counts just the tokenized prompt
    preview = build_needle_prompt(lm.tokenizer, 300, 0.5, "123456", FILLER)
    preview_text = encode_newlines(preview.text, lm.newline_survives)
    assert len(lm.tokenizer(preview_text, verbose=False)["input_ids"]) == 300


@pytest.mark.parametrize("family", ["bert", "albert", "gpt2"])
def test_length_agrees_with_the_engines_position_limit(model, family):
    # The generation engine refuses any request that would not fit: a prompt of exactly
    # max_length must just fit (and answer), one token more must be refused.
    lm = model(family)
    limit = lm.max_length
    fits = build_needle_prompt(lm, limit, 0.5, "654321", FILLER, start=3)
    result = generate(lm, fits.text, max_new_tokens=ANSWER_TOKENS, digits=6)
    assert re.fullmatch(r"\d{6}", re.sub(r"\s", "", result.text))
    too_long = build_needle_prompt(reader_of(lm), limit + 1, 0.5, "654321", FILLER, start=3)
    with pytest.raises(ValueError, match="reads at most|fills"):
        generate(lm, too_long.text, max_new_tokens=ANSWER_TOKENS, digits=6)


@pytest.mark.parametrize("family", MASKED_FAMILIES)
def test_needle_sits_at_the_requested_depth(model, family):
    lm = model(family)
    tokenizer = lm.tokenizer
    for length in (256, 1024):
        for depth in (0.0, 0.1, 0.25, 0.5, 0.8, 1.0):
            prompt = build_needle_prompt(lm, length, depth, "314159", FILLER, start=7)
            text = encode_newlines(prompt.text, lm.newline_survives)  # what the model reads
            # Measured independently: token offsets of the final prompt.
            offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                                verbose=False)["offset_mapping"]
            starts = [s for s, e in offsets if e > s]
            needle_char = text.index("The magic number is 314159.")
            # the filler runs from after the header's blank line to before the question's
            filler_begin = re.match(r".*?afterwards\.(?:\\n |\n)*", text).end()
            filler_end = re.search(r"(?:\\n |\n)*> Question:", text).start()
            before = sum(filler_begin <= s < needle_char for s in starts)
            after = sum(needle_char + len("The magic number is 314159.") <= s < filler_end for s in starts)
            # one sentence, in tokens, at most (the longest filler sentence around the needle)
            lines = re.split(r"\\n |\n", text[filler_begin:filler_end])
            longest = max(len(tokenizer(line, add_special_tokens=False)["input_ids"]) + 2 for line in lines)
            assert abs(before / (before + after) - depth) <= longest / (before + after), (length, depth)
            if depth == 0.0:
                assert before == 0
            if depth == 1.0:
                assert after == 0
            assert prompt.needle_depth == pytest.approx(before / (before + after), abs=0.02)


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["gpt2"])
def test_answer_is_always_six_digits(model, family):
    # Random weights through the real generation engine: the constraint alone makes 6 digits.
    table = run_grid(model(family), GridSettings(lengths=[200], depths=[0.0, 0.5, 1.0], repetitions=1))
    assert (table["status"] == "ok").all()
    assert table["answer"].str.fullmatch(r"\d{6}").all(), table["answer"].tolist()
    assert table["needle"].str.fullmatch(r"[1-9]\d{5}").all()
    assert (table["correct"] == (table["answer"] == table["needle"]).astype(int)).all()


def test_same_seed_same_grid_other_seed_other_needles(tiny_model, tmp_path):
    lm = tiny_model("bert")
    first = run_grid(lm, GridSettings(lengths=[150, 300], depths=[0.0, 0.5], repetitions=1, seed=3))
    again = run_grid(lm, GridSettings(lengths=[150, 300], depths=[0.0, 0.5], repetitions=1, seed=3), output=tmp_path / "g.csv")
    columns = ["length", "depth", "repetition", "needle", "answer", "correct", "status"]
    pd.testing.assert_frame_equal(first[columns], again[columns])
    assert first["needle"].nunique() == len(first)  # each cell has its own needle
    other = {cell_needle_and_start(4, n, d, 0, len(FILLER))[0] for n in (150, 300) for d in (0.0, 0.5)}
    assert not set(first["needle"]) & other
    a = build_needle_prompt(lm, 300, 0.5, "111111", FILLER, start=42)
    b = build_needle_prompt(lm, 300, 0.5, "111111", FILLER, start=42)
    assert a.text == b.text


def test_beyond_limit_cells_are_reported_not_run(tiny_model, model, tmp_path):
    calls = []

    def counting_generate(lm, prompt, settings):
        calls.append(prompt)
        return generate(lm, prompt, settings)

    bert = tiny_model("bert")
    table = run_grid(bert, GridSettings(lengths=[200, 512, 513, 2000], depths=[0.0, 1.0], repetitions=1), generate_fn=counting_generate, output=tmp_path / "bert.csv")
    beyond = table[table["length"] > 512]
    assert (beyond["status"] == "beyond_limit").all() and len(beyond) == 4
    assert (beyond["answer"] == "").all() and beyond["correct"].isna().all()
    assert (table[table["length"] <= 512]["status"] == "ok").all()
    assert len(calls) == 4  # only the cells that fit were generated
    saved = pd.read_csv(tmp_path / "bert.csv")
    assert (saved["status"] == "beyond_limit").sum() == 4
    # DeBERTa's relative positions: no limit, so it runs past 512 tokens
    deberta = run_grid(model("deberta-v2"), GridSettings(lengths=[640], depths=[0.5], repetitions=1))
    assert deberta["status"].tolist() == ["ok"] and len(deberta["answer"][0]) == 6


def test_interrupted_run_resumes_without_repeating_cells(tiny_model, tmp_path):
    lm, output = tiny_model("roberta"), tmp_path / "grid.csv"
    calls = []

    class Interrupted(Exception):
        pass

    def crashing_after_two(lm_, prompt, settings):
        if len(calls) == 2:
            raise Interrupted  # e.g. Ctrl-C in the middle of the third cell
        calls.append(prompt)
        return generate(lm_, prompt, settings)

    with pytest.raises(Interrupted):
        run_grid(lm, GridSettings(lengths=[150, 250], depths=[0.0, 1.0], repetitions=1), output=output, generate_fn=crashing_after_two)
    saved = [line for part in (tmp_path / "grid.csv.parts").glob("*.jsonl")
             for line in part.read_text(encoding="utf-8").splitlines()[1:]]
    assert len(saved) == 2 and not output.exists()  # the finished cells were saved as they finished

    resumed = []

    def counting(lm_, prompt, settings):
        resumed.append(prompt)
        return generate(lm_, prompt, settings)

    table = run_grid(lm, GridSettings(lengths=[150, 250], depths=[0.0, 1.0], repetitions=1), output=output, generate_fn=counting)
    assert len(resumed) == 2 and not set(resumed) & set(calls)  # only the 2 missing cells ran
    assert len(table) == 4
    saved = pd.read_csv(output)
    assert len(saved) == 4 and not saved.duplicated(["length", "depth", "repetition"]).any()
    # a rerun has nothing left to do; another seed into the same file is another run, beside it
    run_grid(lm, GridSettings(lengths=[150, 250], depths=[0.0, 1.0], repetitions=1), output=output, generate_fn=counting)
    assert len(resumed) == 2
    other = run_grid(lm, GridSettings(lengths=[150, 250], depths=[0.0, 1.0], repetitions=1, seed=9), output=output,
                     generate_fn=counting)
    assert len(resumed) == 6 and len(other) == 4 and other["run"].nunique() == 1
    saved = pd.read_csv(output, dtype={"needle": str})
    assert len(saved) == 8 and set(saved["run"]) == {table["run"].iloc[0], other["run"].iloc[0]}
    assert saved[saved["run"] == table["run"].iloc[0]]["needle"].tolist() == table["needle"].tolist()


def test_prefix_cache_cell_is_generate_with_the_prefix_cache_by_hand(tiny_model):
    """A cell of a fast grid is generate() with cache="prefix" on that cell's prompt, built by
    hand from the cell's seeded needle and filler start; its row says "prefix"."""
    from demo.settings import GenerationSettings
    lm, asked = tiny_model("bert"), []

    def recording(lm_, prompt, settings):
        asked.append(settings)
        return generate(lm_, prompt, settings)

    table = run_grid(lm, GridSettings(lengths=[300], depths=[0.5], repetitions=2, seed=1, cache="prefix"),
                     generate_fn=recording)
    assert [s.cache for s in asked] == ["prefix", "prefix"] and table["cache"].tolist() == ["prefix"] * 2
    defaults = GenerationSettings()
    assert all((s.cache_refresh, s.cache_margin) == (defaults.cache_refresh, defaults.cache_margin)
               for s in asked)
    for row in table.itertuples():
        needle, start = cell_needle_and_start(1, 300, 0.5, row.repetition, len(FILLER))
        prompt = build_needle_prompt(lm, 300, 0.5, needle, FILLER, start)
        by_hand = generate(lm, prompt.text, GenerationSettings(max_new_tokens=7, digits=6, cache="prefix"))
        assert row.needle == needle and row.answer == re.sub(r"\D", "", by_hand.text)


def test_exact_and_fast_grids_share_a_file_without_mixing(tiny_model, tmp_path):
    """The mode is part of a run: a fast grid into an exact grid's file runs every cell anew and
    returns only its own rows; a causal LM is recorded as exact whatever was asked; a file without
    the run column is refused, untouched, with what to do."""
    lm, output, calls = tiny_model("bert"), tmp_path / "grid.csv", []

    def counting(lm_, prompt, settings):
        calls.append(settings.cache)
        return generate(lm_, prompt, settings)

    grid = GridSettings(lengths=[150], depths=[0.0, 1.0], repetitions=1)
    exact = run_grid(lm, grid, output=output, generate_fn=counting)
    fast = run_grid(lm, replace(grid, cache="prefix"), output=output, generate_fn=counting)
    assert calls == ["exact", "exact", "prefix", "prefix"]
    assert exact["cache"].tolist() == ["exact"] * 2 and fast["cache"].tolist() == ["prefix"] * 2
    saved = pd.read_csv(output)
    assert sorted(saved["cache"]) == ["exact", "exact", "prefix", "prefix"]
    run_grid(lm, replace(grid, cache="prefix"), output=output, generate_fn=counting)
    assert len(calls) == 4  # resumed: nothing left in either mode

    old = tmp_path / "old.csv"  # a grid file written before rows named their run
    saved[saved["cache"] == "exact"].drop(columns=["run", "dtype"]).to_csv(old, index=False)
    before = old.read_bytes()
    with pytest.raises(ValueError, match=r"old\.csv has no 'run' column, so the settings its rows were made "
                                         r"with \(precision, masks, decoding, revision\) are unknown"):
        run_grid(lm, grid, output=old, generate_fn=counting)
    assert len(calls) == 4 and old.read_bytes() == before  # nothing run, nothing rewritten
    gpt2 = run_grid(tiny_model("gpt2"), replace(grid, cache="prefix"),
                    output=output, generate_fn=counting)
    assert gpt2["cache"].tolist() == ["exact"] * 2 and calls[-2:] == ["exact", "exact"]


def test_bad_input_gives_clear_messages(tiny_model, tmp_path):
    lm = tiny_model("bert")
    for depth in (-0.1, 1.5, "deep"):
        with pytest.raises(ValueError, match="Depth must be"):
            build_needle_prompt(lm, 300, depth, "123456", FILLER)
    with pytest.raises(ValueError, match="cannot hold the template and the needle"):
        build_needle_prompt(lm, 40, 0.5, "123456", FILLER)
    with pytest.raises(ValueError, match="cannot hold the template and the needle"):
        run_grid(lm, GridSettings(lengths=[40, 300], depths=[0.5], repetitions=1))
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    digits_only = tmp_path / "numbers.txt"
    digits_only.write_text("1 2 3. 45 67.\n")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81 not text")
    for path, message in [(empty, "no usable sentences"), (digits_only, "no usable sentences"),
                          (binary, "Cannot read the filler"), (tmp_path / "missing.txt", "does not exist"),
                          (tmp_path, "does not exist")]:
        with pytest.raises(ValueError, match=message):
            run_grid(lm, GridSettings(lengths=[300], depths=[0.5], repetitions=1, filler=str(path)))


def test_user_filler_file_is_used(tiny_model, tmp_path):
    story = tmp_path / "story.txt"
    story.write_text("The cat sat on the warm mat.\nIt purred.\n\nA dog barked at the moon! "
                     "Nobody answered it.\n")
    assert split_sentences(story.read_text()) == [
        "The cat sat on the warm mat.", "It purred.", "A dog barked at the moon!", "Nobody answered it."]
    prompt = build_needle_prompt(tiny_model("roberta"), 200, 0.5, "271828", load_filler(story))
    assert "warm mat" in prompt.text and "Elliot" not in prompt.text  # wraps round the short text
    assert window_tokens(tiny_model("roberta"), prompt.text) == 200


def _tidy():
    rows = []
    for length, accuracy in [(128, [1, 1, 0]), (256, [1, 0, 0]), (512, [0, 0, 0])]:
        for depth in (0.0, 1.0):
            for repetition, correct in enumerate(accuracy):
                rows.append(dict(model="m", length=length, depth=depth, repetition=repetition,
                                 needle="123456", answer="", correct=correct, seconds=0.1, status="ok"))
    for depth in (0.0, 1.0):
        rows.append(dict(model="m", length=1024, depth=depth, repetition=0, needle="123456",
                         answer="", correct=None, seconds=0.0, status="beyond_limit"))
    return pd.DataFrame(rows)


def test_heatmap_shows_accuracy_limits_and_pretraining_length(tmp_path):
    table = _tidy()
    table.to_csv(tmp_path / "grid.csv", index=False)
    fig = needle_heatmap(tmp_path / "grid.csv", pretrained_length=256, max_length=512)
    accuracy, beyond = fig.data[0], fig.data[1]
    assert list(fig.layout.xaxis.ticktext) == ["128", "256", "512", "1024"]
    assert list(fig.layout.yaxis.ticktext) == ["0%", "100%"]
    assert [round(v, 3) for v in accuracy.z[0][:3]] == [0.667, 0.333, 0.0]
    assert pd.isna(accuracy.z[0][3])  # no accuracy for a cell that could not run
    assert [row[3] for row in beyond.z] == [1, 1] and beyond.z[0][0] is None
    assert "beyond" in beyond.text[0][3]
    line = fig.layout.shapes[0]
    assert line.x0 == line.x1 == 1.5  # between the 256 and 512 columns
    label = next(a for a in fig.layout.annotations if "256" in a.text)
    # the label above the cells (the plot area's top is 1 in domain units), not over their colours
    assert label.yref == "y domain" and label.y >= 1 and label.yanchor == "bottom" and line.y1 > 1


def test_side_by_side_shares_one_colour_scale():
    a, b = _tidy(), _tidy().assign(model="other", correct=lambda t: t["correct"].fillna(0) * 0 + 1)
    fig = needle_heatmaps_side_by_side(a, b, pretrained_lengths=(512, None))
    panels = [t for t in fig.data if t.coloraxis == "coloraxis"]
    assert len(panels) == 2 and panels[0].xaxis == "x" and panels[1].xaxis == "x2"
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1
    assert [a.text for a in fig.layout.annotations][:2] == ["m", "other"]
    label = next(a for a in fig.layout.annotations if "512" in a.text)
    assert label.xref == "x" and label.yref == "y domain" and label.y >= 1  # the first panel's, above its cells
    with pytest.raises(ValueError, match="several models"):
        needle_heatmap(pd.concat([a, b]))


def test_smollm2_finds_the_needle(smollm2):
    # Real weights: SmolLM2-135M retrieves the needle from a short haystack (its precomputed
    # grid in assets/needle_grids finds every needle at 256 tokens).
    table = run_grid(smollm2, GridSettings(lengths=[256], depths=[0.5], repetitions=1))
    assert table["answer"][0] == table["needle"][0]
