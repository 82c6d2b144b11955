"""The page's side of a setting's declaration (``demo.settings.setting``): its widget, its line in
an API handler's docstring, and the values a page (or an API call) sends, read back as the core's
settings object. Each reads the declaration, so a widget's range, help and choices are the
validation's, the API's and the command line's.
"""

import dataclasses
import typing

import gradio as gr

from ..app.limits import whole
from ..settings import bounds, check_caps, choices_of, declaration, help_line, kind_of
from .common import Dropdown, Number, Radio, Slider, deployment

UNSET = (None, "")  # what an optional setting's widget shows when it is left to the core


def widget(cls, name: str, only=None, **layout):
    """The widget of the setting ``cls.name``: its label, its help line as info, its default (or
    ``layout``'s ``value``), and from its type and declaration its kind and range: a choice a
    radio (``only``: the values this page offers), a flag a checkbox, a bounded number a slider
    (down to its ``off`` value, which leaves it unset), an unbounded one a number box, an optional
    count with a named ``off`` a dropdown; its ``cap`` is the deployment's; ``layout``'s
    ``component``, where given, the widget's kind instead. The widget remembers
    its declaration (``.declared``)."""
    f = declaration(cls, name)
    hint, _ = kind_of(typing.get_type_hints(cls)[name])
    declared = dict(label=f.metadata.get("label", name), info=help_line(f), value=widget_default(cls, name))
    if "component" in layout:  # a widget of the page's choosing (a list of the tasks found)
        make, own = layout.pop("component"), {}
    else:
        make, own = _component(cls, f, hint, only)
    made = make(**own, **dict(declared, **layout))
    made.declared = (cls, name)
    return made


def widget_range(cls, name: str) -> tuple:
    """(least, largest) a page's widget offers for ``cls.name``: the declared bounds (an open
    lower bound one step up), down to the ``off`` value and up to the deployment's ``cap``."""
    f = declaration(cls, name)
    low, high = bounds(cls, name)
    cap = f.metadata.get("cap")
    if cap is not None:
        high = getattr(deployment().settings, cap) if high is None else min(high, getattr(deployment().settings, cap))
    off = f.metadata.get("off")
    if isinstance(off, (int, float)):
        return off, high
    return (low + f.metadata.get("step", 1) if f.metadata.get("above") else low), high


def _component(cls, f: dataclasses.Field, hint, only) -> tuple:
    """(widget class, its own keywords) for a declared setting."""
    if typing.get_origin(hint) is typing.Literal:
        shown = f.metadata.get("shown", {})
        values = [v for v in choices_of(cls, f.name) if only is None or v in only]
        return Radio, dict(choices=[(shown.get(v, str(v)), v) for v in values])
    if hint is bool:
        return gr.Checkbox, {}
    if hint in (int, float) and "low" in f.metadata:
        low, high = widget_range(cls, f.name)
        off = f.metadata.get("off")
        if isinstance(off, str):  # an optional count: its unset value named, then each count
            choices = [(f.metadata.get("shown", {}).get(off, "family default"), off)]
            return Dropdown, dict(choices=choices + [(str(n), str(n)) for n in range(low, high + 1)])
        if high is None or f.metadata.get("typed"):
            return Number, dict(minimum=low, maximum=high)  # (no precision: 3.5 reaches the check, never rounded)
        return Slider, dict(minimum=low, maximum=high, step=f.metadata.get("step", 1))
    return gr.Textbox, {}


def widget_default(cls, name: str):
    """A widget's first value: the field's default, its ``off`` value where that is unset."""
    f = declaration(cls, name)
    value = f.default if f.default is not dataclasses.MISSING else None
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        value = ", ".join(map(str, value)) if isinstance(value, list) else value
    return f.metadata.get("off", value) if value is None else value


def shown_value(cls, name: str, value) -> str:
    """A choice's value in the page's words (``shown``)."""
    return declaration(cls, name).metadata.get("shown", {}).get(value, str(value))


def arguments(*names, **page_lines) -> str:
    """An API handler's "Args:" lines: each of ``names`` (``(cls, field)`` or ``(cls, field,
    parameter)`` for a parameter named otherwise) its setting's help line; ``page_lines``,
    parameter -> line, for the page's own (the prompt, the model, ...). Gradio's docstring parser
    keeps one line per argument, and the MCP tool schemas are made from them."""
    lines = dict(page_lines)
    for cls, name, *parameter in names:
        lines[parameter[0] if parameter else name] = help_line(declaration(cls, name))
    return "".join(f"        {parameter}: {line}\n" for parameter, line in lines.items())


def settings_of(cls, values: dict, **fixed):
    """``cls`` from widget (or API) values by field name (other names left out): a whole-number field's value made whole
    (a slider's 3.0 is 3), an optional field's unset value (``UNSET``, or its declared ``off``)
    None (the core's default); then ``fixed``. The dataclass itself checks the rest and says in
    words what is wrong, after the deployment's caps."""
    hints, names = typing.get_type_hints(cls), {f.name for f in dataclasses.fields(cls)}
    given = {name: _as_field(hints[name], declaration(cls, name), value)
             for name, value in values.items() if name in names and name not in fixed}
    check_caps(cls, given, deployment().settings)
    return cls(**given, **fixed)


def _as_field(hint, f: dataclasses.Field, value):
    kind, optional = kind_of(hint)
    if optional and (value in UNSET or ("off" in f.metadata and value == f.metadata["off"]
                                        and not isinstance(value, bool))):
        return None
    return whole(value) if kind is int else value


def panel(cls, rows: list[tuple[str, ...]], prefix: str, values: dict | None = None,
          layout: dict | None = None) -> dict:
    """The widgets of ``cls``'s settings ``rows`` (each a row of names), by name: each with elem_id
    ``<prefix>-<name>`` (dashes for underscores), its first value from ``values`` where given, and
    what ``layout`` says for its name (elem_id, scale, ``only``, ...)."""
    values, layout, made = values or {}, layout or {}, {}
    for row in rows:
        with gr.Row():
            for name in row:
                extra = {"elem_id": f"{prefix}-{name.replace('_', '-')}", **layout.get(name, {})}
                if name in values:
                    extra["value"] = values[name]
                made[name] = widget(cls, name, **extra)
    return made
