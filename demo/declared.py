"""What a setting declares, read from pydantic's JSON schema of its class: its type, bounds,
choices and help line (the description), and the page's own words for it. Every door (the page,
the API, the command line, the lm-eval plugin, the refusals) reads a setting through these, so it
is described once, where it is declared.

A setting is a pydantic field: its default, its bounds (ge, gt, le), its help line (the
description) and, in json_schema_extra (which pydantic writes into the schema), the page's words:
  label    the widget's label                     shown   {value: the page's words}, for a choice
  applies  where it acts ("masked LMs"), said before the help line (``demo.app.in_effect``)
  more     what only the command line's help adds  aliases more command-line names
  step     a slider's step                          typed   asked in a number box (a seed)
  off      the widget's value that leaves an optional setting unset (the core's default)
  cap      the AppSettings field that bounds it further on a deployment (``demo.settings.within``)
  what     its name in messages (default: the field's)   each   a list item's name in messages
"""

import functools

from pydantic import TypeAdapter
from pydantic.fields import FieldInfo

from .user_text import LARGEST

# A setting's kind, from its schema: "choice" (an enum), or the JSON type of its values
KINDS = ("choice", "integer", "number", "boolean", "string", "array")


@functools.cache
def _properties(cls: type) -> dict:
    return TypeAdapter(cls).json_schema()["properties"]


def _class(settings) -> type:
    return settings if isinstance(settings, type) else type(settings)


def schema(settings, name: str) -> dict:
    """The JSON schema of a setting of a settings class (or of an instance's class); an optional
    one's (``X | None``) is X's, with the setting's own keys (description, default and the page's
    words, its json_schema_extra). Shared: never changed by its readers."""
    return _schema(_class(settings), name)


@functools.cache
def _schema(cls: type, name: str) -> dict:
    found = _properties(cls).get(name)
    if found is None:
        raise KeyError(f"{cls.__name__} declares no setting {name!r}")
    held = [member for member in found.get("anyOf", ()) if member.get("type") != "null"]
    if len(held) == 1:
        return {**{key: value for key, value in found.items() if key != "anyOf"}, **held[0]}
    return found


def field_info(settings, name: str) -> FieldInfo:
    """The pydantic field ``name`` (for what JSON cannot hold: a default made by a factory)."""
    found = _class(settings).__pydantic_fields__.get(name)
    if found is None:
        raise KeyError(f"{_class(settings).__name__} declares no setting {name!r}")
    return found


def help_line(settings, name: str) -> str:
    """A setting's one line: where it applies, then what it does."""
    said = schema(settings, name)
    applies, line = said.get("applies"), said["description"]
    line = f"{applies}: {line}" if applies else line
    return line[0].upper() + line[1:]


def default_of(settings, name: str):
    """A setting's default (a fresh one where it is made by a factory; None for a required one)."""
    f = field_info(settings, name)
    if f.default_factory is not None:
        return f.default_factory()
    return None if f.is_required() else f.default


def kind_of(settings, name: str) -> tuple[str, bool]:
    """(what a setting holds, one of KINDS; whether it may be unset, null)."""
    found = _properties(_class(settings))[name]
    optional = any(member.get("type") == "null" for member in found.get("anyOf", ()))
    return kind_in(schema(settings, name)), optional


def kind_in(value_schema: dict) -> str:
    """The kind (one of KINDS) of the values a schema describes (a setting's, a list's items')."""
    return "choice" if "enum" in value_schema or "const" in value_schema else value_schema.get("type", "string")


def choices_of(settings, name: str) -> list:
    """A choice setting's values, in their declared order."""
    return choices_in(schema(settings, name))


def choices_in(value_schema: dict) -> list:
    return value_schema["enum"] if "enum" in value_schema else [value_schema["const"]]


def bounds(settings, name: str) -> tuple:
    """(least, largest, whether the least itself is refused) of a number setting; None where it
    has none (the largest whole number a setting may take counts as none)."""
    return bounds_in(schema(settings, name))


def bounds_in(value_schema: dict) -> tuple:
    """(least, largest, whether the least is refused) from a schema's minimum, exclusiveMinimum and
    maximum."""
    above = "exclusiveMinimum" in value_schema
    low = value_schema.get("exclusiveMinimum", value_schema.get("minimum"))
    high = value_schema.get("maximum")
    return low, (None if high == LARGEST else high), above
