"""The mends to Gradio's internals (demo/ui/gradio_mends.py), each against Gradio unmended."""

import asyncio

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from demo.ui import gradio_mends


def _copied_values(narrowed) -> list:
    """A filter picked as ["a"], then updated by ``narrowed`` (its choices narrowed), then picked
    as ["b"]: the values the server's copy of the session holds for it (what "Copy a link to
    this view" saves) after each pick, looked up by the filter's id as a page knows it."""
    with gr.Blocks() as app:
        picker = gr.Dropdown(choices=["a", "b", "c"], value=[], multiselect=True)
        picker.change(narrowed, picker, picker)
    state = SessionState(app)
    copied = []
    for pick in (["a"], ["b"]):
        asyncio.run(app.process_api(block_fn=0, inputs=[pick], state=state))
        copied.append(state.config_values[picker._id]["props"]["value"])
    return copied


def _choices_only(chosen):
    return gr.Dropdown(choices=["a", "b"])


@pytest.fixture
def unmended():
    """Gradio's own SessionState for the test, the mend's after it, whatever the test did."""
    mended = SessionState.__setitem__, SessionState._update_config
    SessionState.__setitem__, SessionState._update_config = gradio_mends._replace, gradio_mends._refresh
    yield
    SessionState.__setitem__, SessionState._update_config = mended


def test_gradio_alone_loses_the_copied_values(unmended):
    """What the mend is for: unmended, the copy falls back to the built value and the next pick is
    written under another id (the page shows ["a"], then ["b"])."""
    assert _copied_values(_choices_only) == [[], []]


def test_a_choices_update_keeps_the_copied_values():
    gradio_mends.mend(gr.Blocks())
    assert _copied_values(_choices_only) == [["a"], ["b"]]


def test_an_update_with_a_value_still_sets_it():
    gradio_mends.mend(gr.Blocks())
    assert _copied_values(lambda chosen: gr.Dropdown(choices=["b", "c"], value=["c"])) == [["c"], ["c"]]
