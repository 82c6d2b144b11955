"""Refusals in words: pydantic's report on a value turned into one sentence in the page's terms,
naming the setting as the page names it, its bounds or choices and the value as its sender wrote
it, the same at every door; and a deployment's caps on top of the declarations'."""

import typing

from pydantic import ValidationError

from .declared import bounds, field_info, kind_of, limits, words
from .user_text import as_said


def refusal(cls, err: ValidationError) -> str:
    """pydantic's first refusal of a ``cls`` as a sentence: the setting named as the page names it,
    its bounds or choices, the value as its sender wrote it (``as_said``)."""
    first = err.errors(include_url=False)[0]
    if first["type"] == "value_error":  # a rule of the class's own, already in words
        return str(first["ctx"]["error"])
    name, value = first["loc"][0], first["input"]
    said = words(cls, name)
    what = said.get("what", name)
    kind, _ = kind_of(cls, name)
    rules = field_info(cls, name).metadata
    listed = len(first["loc"]) > 1 and isinstance(first["loc"][1], int)
    if listed:  # an item of a list (typed in a text box: "0, 1, 2"): its own type's
        what, item = said.get("each", f"Each of {name}"), typing.get_args(kind)[0]
        kind, *annotations = typing.get_args(item) if typing.get_origin(item) is typing.Annotated else (item,)
        rules = [rule for annotation in annotations for rule in annotation.metadata]
    return _sentence(what, kind, value, *limits(rules), read_from_text=listed)


def unknown_choice(what: str, value, choices: list[str]) -> str:
    """A value that is none of a setting's choices, and the choices."""
    return f"Unknown {what} {as_said(value)}; use one of {', '.join(choices)}."


def _sentence(what: str, kind, value, low, high, above: bool, read_from_text: bool = False) -> str:
    if typing.get_origin(kind) is typing.Literal:
        return unknown_choice(what, value, [str(choice) for choice in typing.get_args(kind)])
    # text where a number or a flag belongs is refused as text, whatever it spells (one rule for
    # every door: JSON's numbers and true/false, as the API's schema types them); a deployment's
    # variables are ``read_from_text``
    as_text = isinstance(value, str) and not read_from_text
    not_value = f"sent as a number, not as text ({as_said(value)})" if as_text else f"not {as_said(value)}"
    if kind is bool:
        return f"{what} must be true or false, " + (f"not the text {as_said(value)}." if as_text else f"{not_value}.")
    if kind is int:
        within = (f"from {low} to {high}" if high is not None else f">= {low}") if low is not None else ""
        return f"{what} must be a whole number {within}, {not_value}.".replace("  ", " ").replace(" ,", ",")
    if kind is float:
        if low is None:
            return f"{what} must be a number, {not_value}."
        within = (f"a number {'above' if above else 'from'} {low:g}"
                  + (f" {'up ' if above else ''}to {high:g}" if high is not None else " or more"))
        return f"{what} must be {within}, {not_value}."
    if kind is str:
        return f"{what} must be some text, not {as_said(value)}."
    return f"{what} must be a list of its values, not {as_said(value)}."


def check_caps(cls, values: dict, app) -> None:
    """The bounds a deployment (an AppSettings) sets on top of the declarations' (``cap``), on
    the values a request gives ``cls`` (by field name), before anything else is checked."""
    for name, value in values.items():
        cap = words(cls, name).get("cap") if name in cls.__pydantic_fields__ else None
        if cap is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value > getattr(app, cap):
            raise ValueError(f"{words(cls, name).get('what', name)} may be at most {getattr(app, cap)} per "
                             f"request here ({field_info(app, cap).description}); you asked for {as_said(value)}.")


def deployment_refusal(app_settings, err: ValidationError) -> str:
    """pydantic's first refusal of a deployment's setting (``app_settings``: the class, read from
    the environment), naming its variable."""
    first = err.errors(include_url=False)[0]
    name, value = first["loc"][0], first["input"]
    variable, kind = app_settings.variable(name), kind_of(app_settings, name)[0]
    if first["type"].endswith(("_type", "_parsing")):
        return f"{variable}={as_said(value)} is not a valid {getattr(kind, '__name__', 'value')}."
    return _sentence(variable, kind, value, *bounds(app_settings, name), read_from_text=True)
