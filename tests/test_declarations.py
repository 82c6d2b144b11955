"""One declaration per setting (``demo.settings.setting``), read by the page, the API, the command
line and the validation: this walks every setting and checks each reader against the declaration
itself, never against another reader.

- Every widget the tabs build from a declaration: its label, its info (the help line), its range
  (the declared bounds, down to its ``off`` value, up to the deployment's cap) and its choices.
- The validation: each declared bound is accepted and the next value past it refused.
- The API: each endpoint parameter fed by a declared widget is documented by the same help line
  (the MCP tools' descriptions are made from these lines), under the field's name or a rename
  listed here.
- The command line: each option's first help line is the setting's help line.
"""

import dataclasses
import inspect
import re

import gradio as gr
import pytest

from demo import settings as s
from demo.settings import help_line

SETTINGS = (s.ModelSettings, s.ScoringSettings, s.WritingSettings, s.GenerationSettings, s.InfillSettings,
            s.RunSettings, s.GridSettings, s.SweepSettings, s.ResultsFilter)
# API parameters named otherwise than the field they set (their widgets are that field's)
RENAMED = {"unconditional": "unconditional_context", "setting": "sweep"}


@pytest.fixture(scope="module")
def page():
    from demo.ui.app import build_app
    return build_app()


def _declared(page) -> list:
    return [block for block in page.blocks.values() if hasattr(block, "declared")]


def _field(cls, name) -> dataclasses.Field:
    return {f.name: f for f in dataclasses.fields(cls)}[name]


def _page_range(cls, f: dataclasses.Field) -> tuple:
    """The widget range the declaration asks for, computed from it here."""
    from demo.ui.common import deployment
    low, high = f.metadata.get("low"), f.metadata.get("high")
    if isinstance(high, str):
        high = getattr(cls, high, None) if high not in {g.name for g in dataclasses.fields(cls)} \
            else _field(cls, high).default
    if "cap" in f.metadata:
        cap = getattr(deployment().settings, f.metadata["cap"])
        high = cap if high is None else min(high, cap)
    off = f.metadata.get("off")
    if isinstance(off, (int, float)) and not isinstance(off, bool):
        return off, high
    return (low + f.metadata["step"] if f.metadata.get("above") else low), high


def test_every_tab_builds_its_settings_from_their_declarations(page):
    widgets = _declared(page)
    shown = {(cls.__name__, name) for cls, name in (w.declared for w in widgets)}
    for expected in [("GenerationSettings", "max_new_tokens"), ("GenerationSettings", "confidence_threshold"),
                     ("ScoringSettings", "method"), ("ScoringSettings", "right_masks"), ("InfillSettings", "order"),
                     ("GridSettings", "repetitions"), ("SweepSettings", "limit"), ("ResultsFilter", "papers"),
                     ("ModelSettings", "emd")]:
        assert expected in shown
    for w in widgets:
        cls, name = w.declared
        f = _field(cls, name)
        where = f"{cls.__name__}.{name} ({w.elem_id})"
        assert w.label == f.metadata["label"], where
        assert w.info == help_line(f), where
        if isinstance(w, gr.Slider):
            assert (w.minimum, w.maximum) == _page_range(cls, f), where
            assert w.step == f.metadata.get("step", 1), where
        elif isinstance(w, gr.Number):  # a number box: unbounded above, or a seed
            assert (w.minimum, w.maximum) == (f.metadata["low"], f.metadata.get("high")), where
            assert f.metadata.get("high") is None or f.metadata.get("typed"), where
        if hasattr(w, "choices") and w.choices and typing_literal(cls, name):
            assert {value for _, value in w.choices} <= set(s.choices_of(cls, name)), where
            shown_words = f.metadata.get("shown", {})
            assert all(label == shown_words.get(value, str(value)) for label, value in w.choices), where


def typing_literal(cls, name) -> bool:
    import typing
    kind, _ = s.kind_of(typing.get_type_hints(cls)[name])
    return typing.get_origin(kind) is typing.Literal


def _numeric(cls):
    import typing
    for f in dataclasses.fields(cls):
        kind, _ = s.kind_of(typing.get_type_hints(cls)[f.name])
        if kind in (int, float) and "low" in f.metadata:
            yield f, kind


def _refusal(cls, name, value, what) -> str | None:
    """The message refusing ``cls`` with ``name=value`` about that field, or None."""
    try:
        cls(**({"model": "m"} if cls is s.ModelSettings else {}), **{name: value})
    except ValueError as err:
        return str(err) if str(err).startswith(f"{what} must be") else None
    return None


@pytest.mark.parametrize("cls", SETTINGS, ids=lambda c: c.__name__)
def test_the_validation_holds_each_declared_bound(cls):
    for f, kind in _numeric(cls):
        low, high = s.bounds(cls, f.name)
        step = 1 if kind is int else f.metadata.get("step", 0.01)
        what = f.metadata.get("what", f.name)
        if f.metadata.get("above"):  # the least itself refused, a step above it taken
            assert _refusal(cls, f.name, low, what) and _refusal(cls, f.name, low + step, what) is None, f.name
        else:
            assert _refusal(cls, f.name, low, what) is None, f.name
            assert _refusal(cls, f.name, low - step, what), f.name
        if high is not None:
            assert _refusal(cls, f.name, high, what) is None, f.name
            assert _refusal(cls, f.name, high + step, what), f.name


def _arguments(fn) -> dict[str, str]:
    doc = inspect.getdoc(fn) or ""
    block = doc.split("Args:", 1)[1] if "Args:" in doc else ""
    return dict(re.findall(r"^\s*(\w+): (.*)$", block, re.M))


def test_every_declared_api_parameter_has_the_declared_line(page):
    checked = 0
    for fn in page.fns.values():
        if not fn.api_name or fn.fn is None or getattr(fn, "api_visibility", "public") != "public":
            continue
        parameters = list(inspect.signature(fn.fn).parameters)
        lines = _arguments(fn.fn)
        for parameter, component in zip(parameters, fn.inputs):
            if not hasattr(component, "declared"):
                continue
            cls, name = component.declared
            assert RENAMED.get(parameter, parameter) == name, (fn.api_name, parameter)
            assert lines.get(parameter) == help_line(_field(cls, name)), (fn.api_name, parameter)
            checked += 1
    assert checked >= 40  # every endpoint with settings: generation, any order, ranking, infill, grid, sweep, results


def test_every_option_opens_with_the_settings_help_line():
    import argparse

    from demo.cli import COMMANDS, build_parser
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, command in COMMANDS.items():
        options = {a.dest: a for a in commands[name]._actions}
        for cls in command.settings:
            for f in dataclasses.fields(cls):
                assert options[f.name].help.split("\n")[0] == help_line(f), (name, f.name)
