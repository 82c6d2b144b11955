"""One setting, one refusal: a value one step past a setting's bound is refused by the command line,
the page's API and the core alike, in the same words; a page widget offers the values the core
takes, and nothing past them.

These call each door as a user would (the command line's ``main``, an endpoint's handler as the
API calls it, a settings class) and compare what comes back, never a declaration with itself.
"""

import html

import gradio as gr
import pytest

from demo import declared
from demo import settings as s
from demo.evaluation_settings import GridSettings

# (settings class, field, a value one step past its bound, the refusal, the API endpoint's handler
# and the arguments it is called with, the command line's words for the same request)
SCORE = ["score", "--input", "in.jsonl", "--output", "out.csv"]
PAST_A_BOUND = [
    (s.GenerationSettings, "top_p", 1.01, "top_p must be a number above 0 up to 1, not 1.01.",
     "prompting.generate_masked", ["generate", "--prompt", "p"]),
    (s.GenerationSettings, "min_p", 1.01, "min_p must be a number from 0 to 1, not 1.01.",
     "prompting.generate_any_order", ["generate", "--prompt", "p"]),
    (s.GenerationSettings, "temperature", 5.05, "temperature must be a number above 0 up to 5, not 5.05.",
     "prompting.generate_masked", ["generate", "--prompt", "p"]),
    (s.GenerationSettings, "block_length", 513, "block_length must be a whole number from 1 to 512, not 513.",
     "prompting.generate_any_order", ["generate", "--prompt", "p"]),
    (s.GenerationSettings, "padding_masks", 17, "padding_masks must be a whole number from 0 to 16, not 17.",
     "prompting.generate_masked", ["generate", "--prompt", "p"]),
    (s.ScoringSettings, "right_masks", 17, "right_masks must be a whole number from 0 to 16, not 17.",
     "ranking.rank_masked", SCORE),
    (s.ScoringSettings, "elbo_samples", 0, "elbo_samples must be a whole number from 1 to 4096, not 0.",
     "ranking.rank_masked", SCORE),
    (s.InfillSettings, "blank_tokens", 65, "blank_tokens must be a whole number from 1 to 64, not 65.",
     "infill_tab.infill_masked", ["infill", "--text", "a [blank] b"]),
    (GridSettings, "repetitions", 0, "repetitions must be a whole number >= 1, not 0.",
     "length_probe.probe_masked", ["probe", "--output", "grid.csv"]),
]
ARGUMENTS = {  # each endpoint's own arguments: texts the model never reads before the settings are refused
    "prompting": dict(prompt="A prompt", model_name="minilm-l6-mlm-standin"),
    "ranking": dict(context="A context", candidates="one\ntwo", model_name="minilm-l6-mlm-standin"),
    "infill_tab": dict(text="A [blank] text", model_name="minilm-l6-mlm-standin"),
    "length_probe": dict(model_name="minilm-l6-mlm-standin"),
}


def _core_refusal(cls, name, value) -> str:
    with pytest.raises(ValueError) as refused:
        cls(**({"model": "m"} if cls is s.ModelSettings else {}), **{name: value})
    return str(refused.value)


def _api_refusal(where: str, name: str, value) -> str:
    import importlib
    module, handler = where.split(".")
    fn = getattr(importlib.import_module(f"demo.ui.{module}"), handler)
    parameter = next(t.argument for t in fn.takes if getattr(t, "name", None) == name)
    outputs = fn(**ARGUMENTS[module], **{parameter: value})
    outputs = list(outputs)[-1] if not isinstance(outputs, tuple) else outputs  # a grid streams
    return html.unescape(" ".join(str(part) for part in outputs if isinstance(part, str)))


@pytest.mark.parametrize("cls, name, value, said, endpoint, command", PAST_A_BOUND,
                         ids=[f"{c.__name__}.{n}" for c, n, *_ in PAST_A_BOUND])
def test_a_value_past_a_bound_is_refused_alike_by_every_door(cls, name, value, said, endpoint, command, capsys):
    from demo.cli import main
    assert _core_refusal(cls, name, value) == said
    assert main([command[0], "--model", "m", *command[1:], f"--{name}", str(value)]) == 2
    assert said in capsys.readouterr().err
    assert said in _api_refusal(endpoint, name, value)


@pytest.fixture(scope="module")
def page():
    from demo.ui.app import build_app
    return build_app()


def _requests(page):
    """(endpoint, its arguments as the page first sends them, by name, the widget of each) for
    every API endpoint that takes settings."""
    for fn in page.fns.values():
        takes = getattr(fn.fn, "takes", None)
        if fn.api_name and takes is not None:
            widgets = dict(zip((t.argument for t in takes), fn.inputs))
            yield fn.fn, {name: getattr(w, "value", None) for name, w in widgets.items()}, widgets


def test_every_slider_offers_what_the_request_takes_and_nothing_past_it(page):
    checked = 0
    for endpoint, values, widgets in _requests(page):
        for taken in endpoint.takes:
            widget = widgets[taken.argument]
            if not isinstance(widget, gr.Slider) or getattr(taken, "cls", None) is not type(endpoint.settings(values)):
                continue
            what = declared.schema(taken.cls, taken.name).get("what", taken.name)
            for value in (widget.minimum, widget.maximum):  # both ends within the bounds (another setting may
                try:                                         # rule one out: tokens per step past a block)
                    endpoint.settings(dict(values, **{taken.argument: value}))
                except ValueError as err:
                    assert not str(err).startswith(f"{what} must be"), err
            with pytest.raises(ValueError, match=taken.name):  # a step past the end: refused (a bound, or a cap)
                endpoint.settings(dict(values, **{taken.argument: widget.maximum + widget.step}))
            checked += 1
    assert checked >= 15, checked  # generation, any order, ranking, infill, the grid


UNKNOWN_CHOICE = {  # each of the page's radios, sent "sideways"
    ("ModelSettings", "emd"): "Unknown DeBERTa head 'sideways'; use one of auto, on, off.",
    ("GenerationSettings", "strategy"): "Unknown strategy 'sideways'; use one of greedy, beam, sample.",
    ("GenerationSettings", "order"): "Unknown order 'sideways'; use one of left_to_right, confidence, random.",
    ("InfillSettings", "order"): "Unknown infilling order 'sideways'; use one of left_to_right, confidence, random.",
    ("ScoringSettings", "method"): "Unknown scoring method 'sideways'; use one of salazar, right_masks, "
                                   "within_word_l2r, whole_word, decoder, elbo, causal.",
    ("ScoringSettings", "scope"): "Unknown scope 'sideways'; use one of completion, full.",
    ("GridSettings", "cache"): "Unknown cache 'sideways'; use one of exact, prefix.",
    ("SweepSettings", "sweep"): "Unknown sweep 'sideways'; use one of padding_masks, right_masks.",
}


def test_every_choice_the_page_offers_is_taken_and_an_unknown_one_refused_in_words(page):
    for widget in [b for b in page.blocks.values() if hasattr(b, "declared") and isinstance(b, gr.Radio)]:
        cls, name = widget.declared
        for _, value in widget.choices:
            cls(**({"model": "m"} if cls is s.ModelSettings else {}), **{name: value})
        assert _core_refusal(cls, name, "sideways") == UNKNOWN_CHOICE[cls.__name__, name]


def test_an_agent_reads_every_setting_an_endpoint_takes_with_the_command_lines_help(page):
    """What Gradio's own docstring reader (the MCP tools' schemas are made from it) gives for each
    API parameter that is a setting is the first line of the command line's help for that setting:
    an agent and a person at the terminal read the same words, for every parameter, in order."""
    import argparse

    from gradio.utils import get_function_description

    from demo.cli import COMMANDS, build_parser
    parsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    options = {(cls, a.dest): a.help.split("\n")[0] for name, command in COMMANDS.items() for cls in command.settings
               for a in parsers[name]._actions if a.help and a.dest in cls.__pydantic_fields__}
    checked = 0
    for fn in page.fns.values():
        takes = getattr(fn.fn, "takes", None)
        if not fn.api_name or takes is None:
            continue
        _, described, _ = get_function_description(fn.fn)
        assert [p for p in described if p != "progress"] == [t.argument for t in takes], fn.api_name
        for taken in takes:
            if (getattr(taken, "cls", None), taken.name) in options:
                assert described[taken.argument] == options[taken.cls, taken.name], (fn.api_name, taken)
                checked += 1
    assert checked >= 40, checked


def test_work_over_the_budget_is_refused_in_one_sentence_of_at_most_300_characters():
    """The longest refusal the app gives (an ELBO ranking of many patterns over a long context)."""
    from demo.ui.ranking import rank_masked
    outputs = rank_masked(context="My body cast a shadow over the grass because " * 20, model_name="minilm-l6-mlm-standin",
                          candidates="the sun was rising over the hills.\nthe grass was cut by the gardener.",
                          method="elbo", elbo_samples=4096)
    said = html.unescape(outputs.summary.split('role="alert">')[1].split("</div>")[0])
    assert said.startswith("This request is too big for this app: 2 candidates, one masked copy of the whole text "
                           "per masking pattern, up to 4096 per text, about ")
    assert said.endswith("a request may use 4.0 trillion. Use fewer or shorter inputs, a smaller model, or mlm-icl on "
                         "your own machine.") and len(said) <= 300
