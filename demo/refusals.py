"""Refusals in words: each of pydantic's error types, with its context, turned into one sentence
in the page's terms (one table, :data:`SENTENCES`), naming the setting as the page names it, its
bounds or choices as its JSON schema declares them and the value as its sender wrote it; the same
at every door. A settings class's own rules are ``rule`` errors (:func:`rule`), a deployment's caps
``deployment_cap`` ones (``demo.settings.within``)."""

from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from .declared import bounds_in, choices_in, kind_in, schema
from .user_text import as_said, nearest


@dataclass(frozen=True)
class Refused:
    """What a sentence says of a refused value: the class and the setting (its name, or its place
    where it was given in order), the setting's name in messages, the value, the schema of what it
    should have been, and whether it was read from text (a deployment's variable, an item typed in
    a list's text box), where text is no wrong type."""
    cls: type
    setting: str | int
    what: str
    value: object
    value_schema: dict
    read_from_text: bool = False


def rule(sentence: str) -> PydanticCustomError:
    """A settings class's own rule, broken: the error its validators raise, already in words."""
    return PydanticCustomError("rule", "{sentence}", {"sentence": sentence})


def unknown_choice(what: str, value, choices: list) -> str:
    """A value that is none of a setting's choices, and the choices."""
    return f"Unknown {what} {as_said(value)}; use one of {', '.join(map(str, choices))}."


def _must_be(refused: Refused, ctx: dict) -> str:
    """What the value must be (its kind, within its bounds) and what it was. Text where a number or
    a flag belongs is refused as text, whatever it spells: one rule for every door (JSON's numbers
    and true/false, as the API's schema types them)."""
    what, value, kind = refused.what, refused.value, kind_in(refused.value_schema)
    if kind == "choice":
        return unknown_choice(what, value, choices_in(refused.value_schema))
    as_text = isinstance(value, str) and not refused.read_from_text
    not_value = f"sent as a number, not as text ({as_said(value)})" if as_text else f"not {as_said(value)}"
    low, high, above = bounds_in(refused.value_schema)
    if kind == "boolean":
        return f"{what} must be true or false, " + (f"not the text {as_said(value)}." if as_text else f"{not_value}.")
    if kind == "integer":
        within = "" if low is None else f" from {low} to {high}" if high is not None else f" >= {low}"
        return f"{what} must be a whole number{within}, {not_value}."
    if kind == "number":
        if low is None:
            return f"{what} must be a number, {not_value}."
        within = (f"a number {'above' if above else 'from'} {low:g}"
                  + (f" {'up ' if above else ''}to {high:g}" if high is not None else " or more"))
        return f"{what} must be {within}, {not_value}."
    if kind == "string":
        return f"{what} must be some text, not {as_said(value)}."
    return f"{what} must be a list of its values, not {as_said(value)}."


def _over_the_cap(refused: Refused, ctx: dict) -> str:
    return (f"{refused.what} may be at most {ctx['cap']} per request here ({ctx['why']}); "
            f"you asked for {as_said(refused.value)}.")


def _no_such_setting(refused: Refused, ctx: dict) -> str:
    near = nearest(refused.setting, refused.cls.__pydantic_fields__)
    return f"{refused.cls.__name__} has no setting {as_said(refused.setting)}" + (
        f": did you mean {near}?" if near else ".")


def _past_the_last_place(refused: Refused, ctx: dict) -> str:
    return (f"{refused.cls.__name__} takes {len(refused.cls.__pydantic_fields__)} settings; name each, not "
            f"{as_said(refused.value)} in place {refused.setting + 1}.")


# pydantic's error types (https://docs.pydantic.dev/latest/errors/validation_errors/) a setting
# can meet, strict: a wrong JSON type, a bound, a choice, a setting missing or unknown; and this
# project's own
SENTENCES = {
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float", "float_type", "float_parsing", "finite_number",
                     "bool_type", "bool_parsing", "string_type", "list_type", "greater_than", "greater_than_equal",
                     "less_than", "less_than_equal", "literal_error"), _must_be),
    "missing": lambda refused, ctx: f"{refused.what} must be given.",
    "unexpected_keyword_argument": _no_such_setting,
    "unexpected_positional_argument": _past_the_last_place,
    "rule": lambda refused, ctx: ctx["sentence"],
    "value_error": lambda refused, ctx: str(ctx["error"]),  # a ValueError of code a validator calls, in words
    "deployment_cap": _over_the_cap,
}


def refusal(cls, err: ValidationError, name_of=None, setting: str | None = None) -> str:
    """pydantic's first refusal of a ``cls`` as a sentence (``SENTENCES``), the setting named as the
    page names it (``name_of(field)`` where given: a deployment's variable); ``setting``: the field
    the error is of, where one field was checked alone."""
    first = err.errors(include_url=False)[0]
    loc = (setting, *first["loc"]) if setting else first["loc"]
    return _said(first, _refused(cls, loc, first["input"], name_of))


def value_refusal(what: str, err: ValidationError, value_schema: dict) -> str:
    """pydantic's first refusal of a value that is no setting (an endpoint's text, its model), as
    a sentence naming it ``what``."""
    first = err.errors(include_url=False)[0]
    held = [member for member in value_schema.get("anyOf", ()) if member.get("type") != "null"]
    return _said(first, Refused(None, what, what, first["input"], held[0] if len(held) == 1 else value_schema))


def _said(first: dict, refused: Refused) -> str:
    say = SENTENCES.get(first["type"], lambda refused, ctx: f"{refused.what} cannot be {as_said(refused.value)}.")
    return say(refused, first.get("ctx", {}))


def _refused(cls, loc: tuple, value, name_of) -> Refused:
    """What was refused, from the error's location: a setting (by name, or by place), an item of a
    list setting ("0, 1, 2"), or the whole class (a rule of several settings)."""
    declared = list(cls.__pydantic_fields__)
    if not loc:
        return Refused(cls, "", cls.__name__, value, {})
    name = declared[loc[0]] if isinstance(loc[0], int) and loc[0] < len(declared) else loc[0]
    field = schema(cls, name) if name in declared else {}
    listed = len(loc) > 1 and isinstance(loc[1], int)
    what = name_of(name) if name_of else field.get("each" if listed else "what",
                                                    f"Each of {name}" if listed else str(name))
    return Refused(cls, name, what, value, field.get("items", {}) if listed else field,
                   read_from_text=listed or name_of is not None)
