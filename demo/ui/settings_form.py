"""The page's side of a setting (a field of ``demo.settings``): its widget, and the endpoints that
take settings. Each reads the field, so a widget's range, help and choices are the validation's,
the API's and the command line's.

An endpoint is declared once, as the list of what it takes (:class:`Own` arguments of the page,
:class:`Setting` fields); :func:`endpoint` makes from that list its signature (the API's parameters,
in order), its "Args:" lines (the API's docs and the MCP tools' schemas), its Gradio inputs
(``.inputs``) and the settings object its handler receives, built whole from the call's values.
"""

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import gradio as gr
from pydantic import TypeAdapter, ValidationError

from ..app.limits import whole
from ..declared import bounds, choices_of, default_of, help_line, kind_of, schema
from ..refusals import unknown_choice, value_refusal
from ..settings import STRICT, field_value, within
from ..user_text import as_said, check_readable
from .common import Dropdown, Number, Radio, Slider, Textbox, deployment

UNSET = (None, "")  # what an optional setting's widget shows when it is left to the core


def widget(cls, name: str, only=None, **layout):
    """The widget of the setting ``cls.name``: its label, its help line as info, its default (or
    ``layout``'s ``value``), and from its type and words its kind and range: a choice a radio
    (``only``: the values this page offers), a flag a checkbox, a bounded number a slider (down to
    its ``off`` value, which leaves it unset), an unbounded one or a ``typed`` one a number box,
    an optional count with a named ``off`` a dropdown; its ``cap`` is the deployment's; ``layout``'s
    ``component``, where given, the widget's kind instead. The widget remembers its setting
    (``.declared``)."""
    declared = dict(label=schema(cls, name).get("label", name), info=help_line(cls, name),
                    value=widget_default(cls, name))
    if "component" in layout:  # a widget of the page's choosing (a list of the tasks found)
        make, own = layout.pop("component"), {}
    else:
        make, own = _component(cls, name, only)
    made = make(**own, **dict(declared, **layout))
    made.declared = (cls, name)
    return made


def widget_range(cls, name: str) -> tuple:
    """(least, largest) a page's widget offers for ``cls.name``: the bounds (an open lower bound
    one step up), down to the ``off`` value and up to the deployment's ``cap``."""
    said = schema(cls, name)
    low, high, above = bounds(cls, name)
    cap = said.get("cap")
    if cap is not None:
        high = getattr(deployment().settings, cap) if high is None else min(high, getattr(deployment().settings, cap))
    off = said.get("off")
    if isinstance(off, (int, float)):
        return off, high
    return (low + said.get("step", 1) if above else low), high


def _component(cls, name: str, only) -> tuple:
    """(widget class, its own keywords) for a setting."""
    said, (kind, _) = schema(cls, name), kind_of(cls, name)
    if kind == "choice":
        shown = said.get("shown", {})
        values = [v for v in choices_of(cls, name) if only is None or v in only]
        return Radio, dict(choices=[(shown.get(v, str(v)), v) for v in values])
    if kind == "boolean":
        return gr.Checkbox, {}
    low, high = widget_range(cls, name) if kind in ("integer", "number") else (None, None)
    if low is None:
        return Textbox, {}
    off = said.get("off")
    if isinstance(off, str):  # an optional count: its unset value named, then each count
        choices = [(said.get("shown", {}).get(off, "family default"), off)]
        return Dropdown, dict(choices=choices + [(str(n), str(n)) for n in range(low, high + 1)])
    if high is None or said.get("typed"):
        return Number, dict(minimum=low, maximum=high)  # (no precision: 3.5 reaches the check, never rounded)
    return Slider, dict(minimum=low, maximum=high, step=said.get("step", 1))


def widget_default(cls, name: str):
    """A widget's first value: the field's default (a list as the text "a, b"), its ``off`` value
    where that is unset."""
    value = default_of(cls, name)
    value = ", ".join(map(str, value)) if isinstance(value, list) else value
    return schema(cls, name).get("off", value) if value is None else value


def shown_value(cls, name: str, value) -> str:
    """A choice's value in the page's words (``shown``)."""
    return schema(cls, name).get("shown", {}).get(value, str(value))


def settings_of(cls, values: dict, **fixed):
    """``cls`` from widget (or API) values by field name: a whole-number field's value made whole
    (a slider's 3.0 is 3), an optional field's unset value (``UNSET``, or its ``off``) None (the
    core's default); then ``fixed``. The class itself checks the rest and says in words what is
    wrong, the deployment's caps included."""
    given = {name: as_field(cls, name, value) for name, value in values.items()}
    return within(deployment().settings, cls, **given, **fixed)


def check_given(cls, name: str, value, default, widget=None) -> None:
    """Null or empty text sent for ``cls.name`` leaves it to the core only where the page has an
    empty box for it (an optional setting's text or number box: the unconditional context, a
    seed; ``widget``: the page's own, where the endpoint is wired); elsewhere (a choice, a slider,
    a dropdown) it is refused, with the page's first value (``default``)."""
    if value not in UNSET or not kind_of(cls, name)[1]:
        return
    if (type(widget) if widget is not None else _component(cls, name, None)[0]) in (Textbox, Number):
        return
    what = schema(cls, name).get("what", name)
    raise ValueError(f"{what} has no empty value: send one of its values (the page starts at "
                     f"{as_said(default)}), not {as_said(value)}.")


def as_field(cls, name: str, value):
    """A widget's value as the field ``cls.name`` takes it (see :func:`settings_of`)."""
    (kind, optional), off = kind_of(cls, name), schema(cls, name).get("off")
    if optional and (value in UNSET or (off is not None and value == off and not isinstance(value, bool))):
        return None
    if isinstance(off, str) and isinstance(value, str):  # a count's dropdown: its choices, exactly
        low, high = widget_range(cls, name)
        counts = [str(n) for n in range(low, high + 1)]
        if value not in counts:
            what = schema(cls, name).get("what", name)
            raise ValueError(unknown_choice(what, value, [off, counts[0], counts[1], "...", counts[-1]]))
        return int(value)
    return whole(value) if kind == "integer" else value


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


# ---------------------------------------------------------------- endpoints


class Own(NamedTuple):
    """An endpoint's own argument (the prompt, the model): its name, its line in the API's docs,
    its default, the values it takes (a type pydantic checks strictly, as it checks a setting)."""
    name: str
    line: str
    default: object = inspect.Parameter.empty
    takes: object = str

    @property
    def argument(self) -> str:
        return self.name


class Setting(NamedTuple):
    """An endpoint's argument that is the setting ``cls.name``; ``parameter``: the API's name for
    it where that differs; ``only``: the choices this endpoint offers where they are fewer than the
    field's (a masked LM's scoring methods)."""
    cls: type
    name: str
    parameter: str | None = None
    only: tuple | None = None

    @property
    def argument(self) -> str:
        return self.parameter or self.name


def model_argument(which: str = "the model", then: str = "") -> Own:
    """An endpoint's model: its picker's value, a name (empty where that side may be skipped)."""
    return Own("model_name", f"{which}: one of the app's models (listed as examples) or a Hugging Face Hub id "
                             f"(owner/name){then}", takes=str | None)


def setting_args(cls, *names: str) -> list[Setting]:
    """:class:`Setting` arguments for the fields ``names`` of ``cls``."""
    return [Setting(cls, name) for name in names]


def endpoint(*takes, builds=None, defaults: dict | None = None, fixed: dict | None = None, derived=None):
    """Decorator: a page handler taking ``takes`` (:class:`Own` and :class:`Setting` arguments, in
    the API's order). Its signature, docs and inputs come from that list; its defaults from the
    fields (a setting's widget default, or ``defaults``' page value). The handler receives the
    settings of ``builds`` as one object, ``settings`` (made by :func:`settings_of`, with ``fixed``
    and ``derived(values)``'s values), and the other arguments it names, by name, as their widgets
    hold them (one it does not name is read by ``derived`` alone).

    Every argument is checked before the handler runs, each as its field or its ``Own.takes``
    says, in the refusals' words: ``.check(arguments)`` (by name, the defaults filled in) checks a
    call before anything keys, batches or shares it (``handlers.handler``).
    ``.settings(values)`` builds the settings object from values by name (an estimate's);
    ``.inputs(widgets)`` lists the widgets, by argument name, in order, and remembers them (a
    refusal then names the page's first value)."""
    checks = Checks(takes, builds, defaults or {}, fixed or {}, derived)
    def decorate(fn):
        named = inspect.signature(fn).parameters
        built = checks.built
        passed = [t for t in takes if t not in built and t.argument in named]
        if derived is None and len(passed) + len(built) < len(takes):  # an argument nobody reads
            raise TypeError(f"{fn.__name__} takes no {[t.argument for t in takes if t not in passed + built]}")
        progress = named.get("progress")
        parameters = [_parameter(t, checks.defaults) for t in takes] + ([progress] if progress else [])
        signature = inspect.Signature(parameters)

        def bound(args, kwargs) -> dict:
            values = signature.bind(*args, **kwargs)
            values.apply_defaults()
            return values.arguments

        def call(args, kwargs) -> dict:
            """The handler's keywords: its own arguments, the built settings, the progress tracker."""
            values = bound(args, kwargs)
            given = {t.argument: values[t.argument] for t in passed}
            settings = checks.check(values)
            if builds is not None:
                given["settings"] = settings
            return dict(given, **({"progress": values["progress"]} if progress else {}))

        if inspect.isgeneratorfunction(fn):  # a streaming handler stays one (Gradio and shows_errors ask)
            @functools.wraps(fn)
            def handler(*args, **kwargs):
                yield from fn(**call(args, kwargs))
        else:
            @functools.wraps(fn)
            def handler(*args, **kwargs):
                return fn(**call(args, kwargs))

        def inputs(widgets: dict) -> list:
            checks.page.update({t.argument: widgets[t.argument] for t in takes})
            return [widgets[t.argument] for t in takes]

        handler.__signature__ = signature
        handler.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n    Args:\n" + "".join(
            f"        {t.argument}: "
            f"{t.line if isinstance(t, Own) else help_line(t.cls, t.name)}\n" for t in takes)
        handler.settings, handler.takes, handler.inputs = checks.settings_from, takes, inputs
        handler.check = lambda arguments: checks.check(bound((), arguments))
        return handler
    return decorate


@dataclass
class Checks:
    """How an endpoint checks its arguments (``endpoint``'s): each :class:`Own` by what it takes,
    each :class:`Setting` by its field (``builds``' together, as one object), and null only where
    the page's widget (``page``, by argument, once wired) has an empty box."""
    takes: tuple
    builds: type | None
    defaults: dict
    fixed: dict
    derived: Callable | None
    page: dict = field(default_factory=dict)

    @property
    def built(self) -> list:
        return [t for t in self.takes if isinstance(t, Setting) and t.cls is self.builds]

    def check(self, values: dict):
        """The call's arguments checked, in the API's order; the built settings (or None)."""
        for t in self.takes:
            if isinstance(t, Own):
                own_value(t, values[t.argument])
            elif t.cls is not self.builds:
                self.check_setting(t, values[t.argument])
        return self.settings_from(values) if self.builds is not None else None

    def settings_from(self, values: dict):
        """The settings object ``builds`` from values by name (an estimate's too)."""
        built = [t for t in self.built if t.argument in values]
        for t in built:
            self.check_setting(t, values[t.argument])
        given = {t.name: values[t.argument] for t in built}
        return settings_of(self.builds, dict(given, **(self.derived(values) if self.derived else {})), **self.fixed)

    def check_setting(self, t: Setting, value) -> None:
        check_given(t.cls, t.name, value, self.first_value(t), self.page.get(t.argument))
        what = schema(t.cls, t.name).get("what", t.name)
        if t.only is not None and value not in t.only:
            raise ValueError(unknown_choice(what, value, t.only))
        if isinstance(value, str):
            check_readable(value, what.replace("_", " "))
        if t.cls is not self.builds:
            field_value(t.cls, t.name, as_field(t.cls, t.name, value))

    def first_value(self, t: Setting):
        """The value the page's widget starts at (the field's page default before it is wired)."""
        shown = self.page.get(t.argument)
        if shown is not None and shown.value not in UNSET:
            return shown.value
        return self.defaults.get(t.argument, widget_default(t.cls, t.name))


def own_value(taken: Own, value) -> None:
    """An :class:`Own` argument checked against the values it takes, refused in the settings' words."""
    what = taken.name.replace("_", " ")
    try:
        _adapter(taken.takes).validate_python(value)
    except ValidationError as err:
        raise ValueError(value_refusal(what, err, _adapter(taken.takes).json_schema())) from None
    if isinstance(value, str):
        check_readable(value, what)


@functools.cache
def _adapter(takes) -> TypeAdapter:
    return TypeAdapter(takes, config=STRICT)


def _parameter(taken, defaults: dict) -> inspect.Parameter:
    """The signature's parameter for an argument: its default the page's (``defaults``), else
    the field's widget default, else the :class:`Own` argument's."""
    name = taken.argument
    if name in defaults:
        default = defaults[name]
    elif isinstance(taken, Setting):
        default = widget_default(taken.cls, taken.name)
    else:
        default = taken.default
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
