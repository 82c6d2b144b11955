"""The decoding playback's frames (demo.ui.playback) and the trace facts they show.

The player itself (play, scrub, reduced motion) runs in Chromium: tests/test_browser.py."""

import re

import pytest

from demo.engine.generation import generate
from demo.engine.text import prompt_as_read
from demo.engine.trace import StepTrace

pytest.importorskip("gradio")
from demo.ui.playback import HEAD, TAIL, playback  # noqa: E402

PROMPT = "Input: sane\nOutput: insane\n\nInput: direct\nOutput: indirect\n\nInput: happy\nOutput:"


def frames(html: str) -> list[str]:
    return re.findall(r'<div class="demo-step" data-step="\d+"(?: hidden)?>.*?(?=<div class="demo-step"|$)', html)


def cells(frame: str) -> list[tuple[str, str]]:
    """(classes, text) of the window's token cells, in order."""
    window = re.search(r'<div class="demo-window">(.*?)</div>', frame).group(1)
    return re.findall(r'<span class="demo-tok ([^"]*)">(.*?)</span>', window)


def test_a_masked_generation_plays_one_frame_per_step(standin_mlm):
    result = generate(standin_mlm, PROMPT, max_new_tokens=5, trace=True, stop_at_newline=False)
    html = playback(result.steps, "masked", "run-1")
    shown = frames(html)
    assert len(shown) == len(result.steps) and 'data-step="0">' in shown[0]
    assert all(" hidden>" in f.split("\n")[0][:60] for f in shown[1:])  # only the first is shown at first
    read = prompt_as_read(PROMPT, standin_mlm.newline_survives)  # with the paper's newline markers
    ids = standin_mlm.tokenizer(read, add_special_tokens=False)["input_ids"]
    for t, frame in enumerate(shown):
        kinds = [k.split()[0] for k, _ in cells(frame)]
        # [CLS] + prompt (elided past HEAD + TAIL tokens), t written tokens (the last one new), the
        # predicted mask, the padding masks, the end token: as the window was built (test_generation)
        prompt_cells = HEAD + TAIL  # (the prompt is longer: asserted below)
        assert kinds == (["demo-prompt"] * prompt_cells + ["demo-written"] * t + ["demo-mask-predicted"]
                         + ["demo-mask"] * standin_mlm.padding_masks + ["demo-end"])
        assert ("demo-new" in cells(frame)[prompt_cells + t - 1][0]) == (t > 0)
        assert f"Step {t + 1} of {len(shown)}" in frame
        assert f"kept <span class=\"demo-kept\">{repr(result.steps[t].chosen)}" in frame.replace("&#x27;", "'")
    assert len(ids) + 1 > HEAD + TAIL + 1 and f"… {len(ids) + 1 - HEAD - TAIL} tokens …" in html
    assert 'data-lane="masked"' in html and 'data-run="run-1"' in html


def test_a_causal_generation_shows_the_text_so_far_and_the_next_position(tiny_model):
    lm = tiny_model("gpt2")
    result = generate(lm, "The cat sat on the", max_new_tokens=3, trace=True, stop_at_newline=False)
    shown = frames(playback(result.steps, "causal"))
    assert len(shown) == len(result.steps) == 3
    for t, frame in enumerate(shown):
        kinds = [k.split()[0] for k, _ in cells(frame)]
        assert kinds[-1] == "demo-next" and kinds.count("demo-written") == t
        assert "demo-mask" not in frame
        assert "␣cat" in frame  # byte-level BPE's space mark "Ġ", shown as a visible space


def test_fast_decoding_marks_its_refreshes(standin_mlm):
    # refresh every 3 tokens and never on doubt: refreshes at steps 0, 3, 6 (test_prefix_cache.py)
    result = generate(standin_mlm, PROMPT, max_new_tokens=7, trace=True, stop_at_newline=False,
                      cache="prefix", cache_refresh=3, cache_margin=0)
    assert [s.refreshed for s in result.steps] == [t % 3 == 0 for t in range(len(result.steps))]
    html = playback(result.steps, "masked")
    assert [("demo-refresh" in f) for f in frames(html)] == [s.refreshed for s in result.steps]
    exact = generate(standin_mlm, PROMPT, max_new_tokens=2, trace=True)
    assert all(s.refreshed is None for s in exact.steps) and "demo-refresh" not in playback(exact.steps, "masked")


def test_the_legend_says_what_each_lanes_masks_are(standin_mlm):
    """A mask not predicted now is a padding mask in the paper's way and one of the block still to
    fill in the any-order way (masked diffusion has no padding masks): the legend names each, by
    the lane names of the lane switch."""
    from demo.ui.playback import LEGEND, SWITCHES

    lane = dict(SWITCHES["gen"])
    said = re.findall(r'<span class="demo-tok demo-mask">\[MASK\]</span><span>(.*?)</span>', LEGEND)
    assert len(said) == 2, said
    paper, any_order = (next(s for s in said if lane[name].lower() in s.lower()) for name in ("masked", "any_order"))
    assert "padding" in paper and "padding" not in any_order and "block" in any_order
    # the any-order lane's masks are the block's: the window holds the prompt, the block and the end
    result = generate(standin_mlm, PROMPT, max_new_tokens=8, trace=True, stop_at_newline=False, window="block",
                      order="confidence", tokens_per_step=2, block_length=8)
    first = re.search(r'<div class="demo-step" data-step="0"[^>]*>.*?(?=<div class="demo-step"|$)',
                      playback(result.steps, "any_order")).group(0)
    kinds = [k.split()[0] for k, _ in cells(first) if not k.startswith("demo-prompt")]
    assert kinds[0] == kinds[-1] == "demo-end"  # [CLS] and [SEP]
    assert sorted(kinds[1:-1]) == ["demo-mask"] * 6 + ["demo-mask-predicted"] * 2  # 8 masks, 2 written this step


def test_what_the_model_or_user_wrote_is_shown_as_text():
    step = StepTrace(step=0, window=["[CLS]", "<script>", "[MASK]", "[SEP]"], mask_positions=[2],
                     top=[("<marquee>", 0.5)], chosen="<img src=x>", beams=[("<blink>beam", -1.0)], prompt_length=2)
    html = playback([step, step], "masked", run='"><script>')
    assert not any(tag in html for tag in ("<script>", "<marquee>", "<img", "<blink>"))
    assert "&lt;script&gt;" in html and "&lt;img src=x&gt;" in html


def test_no_steps_no_player():
    assert playback([], "masked") == ""


def test_an_infilling_plays_in_the_order_it_filled(standin_mlm):
    from demo.engine.infill import infill
    from demo.settings import InfillSettings

    text = "We opened the presents on [blank:2] [blank], which was Christmas Day."
    result = infill(standin_mlm, text, InfillSettings(order="confidence", trace=True))
    shown = frames(playback(result.steps, "infill"))
    assert len(shown) == len(result.order) == 3
    blanks = set(result.steps[0].mask_positions)
    for k, frame in enumerate(shown):
        kinds = [k.split() for k, _ in cells(frame)]
        predicted = [i for i, kind in enumerate(kinds) if "demo-mask-predicted" in kind]
        assert predicted == [result.order[k]]  # the position this step fills, in the order it filled
        written = {i for i, kind in enumerate(kinds) if "demo-written" in kind}
        assert written == set(result.order[:k]) and written <= blanks
        newest = [i for i, kind in enumerate(kinds) if "demo-new" in kind]
        assert newest == ([result.order[k - 1]] if k else [])
        assert kinds[0] == ["demo-end"] and kinds[-1] == ["demo-end"]  # [CLS] and [SEP]


def test_the_link_keeper_keeps_only_well_formed_steps():
    """The steps come from the browser and a link shows them to others: only group names, run ids
    and step numbers are kept, and the keeper's HTML holds them as escaped data."""
    from demo.ui.playback import kept_steps, steps_html

    good = {"gen": {"key": "0a1b2c3d4e5f,abcdef012345", "at": 3}, "fill": {"key": "", "at": 0}}
    assert kept_steps(good) == good
    bad = {"gen": {"key": "<script>", "at": 1}, "Fill": {"key": "ab", "at": 1}, "x": {"key": "ab", "at": -1},
           "y": {"key": "ab", "at": True}, "z": {"key": "ab", "at": 1.5}, "w": ["ab", 1], "v": {"key": "ab"}}
    assert kept_steps(bad) == {} and kept_steps(None) == {} and kept_steps("gen") == {}
    assert len(kept_steps({"g" + "a" * k: {"key": "ab", "at": 1} for k in range(12)})) == 8  # a few groups at most
    html = steps_html({"gen": {"key": "ab", "at": 2}, "evil": {"key": '"><img src=x onerror=alert(1)>', "at": 0}})
    assert html == ('<div class="demo-playback-steps" data-steps="{&quot;gen&quot;: {&quot;key&quot;: '
                    '&quot;ab&quot;, &quot;at&quot;: 2}}"></div>')


@pytest.mark.parametrize("strategy, why", [("beam", "beam search keeps the likeliest whole text"),
                                           ("sample", "sampled, with the guesses' probabilities as the odds")])
def test_a_token_that_is_not_the_top_guess_says_why(standin_mlm, strategy, why):
    """Each frame whose kept token differs from its top guess names the decoding that kept it;
    found by running both decodings until some step keeps another token (a flat temperature)."""
    overrides = dict(temperature=3.0, seed=0) if strategy == "sample" else {}
    result = generate(standin_mlm, PROMPT, max_new_tokens=12, trace=True, stop_at_newline=False,
                      strategy=strategy, **overrides)
    shown = frames(playback(result.steps, "masked"))
    other = [t for t, s in enumerate(result.steps) if s.top[0][0] != s.chosen]
    assert other, "no step kept another token: choose a prompt where one does"
    for t, frame in enumerate(shown):
        assert (why in frame.replace("&#x27;", "'")) == (t in other)
        assert ("(its top guess)" in frame) == (t not in other)
