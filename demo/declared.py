"""What a setting declares, read from its pydantic field: the page's words for it, its help line,
default, bounds, type and choices. Every door (the page, the API, the command line, the lm-eval
plugin) reads a setting through these, so it is described once, where it is declared.

A setting is a pydantic field: its default, its bounds (ge, gt, le), its help line (the
description) and, in json_schema_extra, the page's own words for it:
  label    the widget's label                     shown   {value: the page's words}, for a choice
  applies  where it acts ("masked LMs"), said before the help line (``demo.app.in_effect``)
  more     what only the command line's help adds  aliases more command-line names
  step     a slider's step                          typed   asked in a number box (a seed)
  off      the widget's value that leaves an optional setting unset (the core's default)
  cap      the AppSettings field that bounds it further on a deployment (``refusals.check_caps``)
  what     its name in messages (default: the field's)   each   a list item's name in messages
"""

import types
import typing

import annotated_types
from pydantic.fields import FieldInfo

from .user_text import LARGEST


def field_info(settings, name: str) -> FieldInfo:
    """The pydantic field ``name`` of a settings class (or of an instance's class)."""
    cls = settings if isinstance(settings, type) else type(settings)
    found = cls.__pydantic_fields__.get(name)
    if found is None:
        raise KeyError(f"{cls.__name__} declares no setting {name!r}")
    return found


def words(settings, name: str) -> dict:
    """The page's own words for a setting (its json_schema_extra)."""
    return field_info(settings, name).json_schema_extra or {}


def help_line(settings, name: str) -> str:
    """A setting's one line: where it applies, then what it does."""
    applies, line = words(settings, name).get("applies"), field_info(settings, name).description
    line = f"{applies}: {line}" if applies else line
    return line[0].upper() + line[1:]


def default_of(settings, name: str):
    """A setting's default (a fresh one where it is made by a factory; None for a required one)."""
    f = field_info(settings, name)
    if f.default_factory is not None:
        return f.default_factory()
    return None if f.is_required() else f.default


def bounds(settings, name: str) -> tuple:
    """(least, largest, whether the least itself is refused) of a number setting; None where it
    has none (the largest whole number a setting may take counts as none)."""
    return limits(field_info(settings, name).metadata)


def kind_of(settings, name: str) -> tuple:
    """(the type a setting holds, whether None is allowed)."""
    hint = field_info(settings, name).annotation
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return (args[0] if len(args) == 1 else hint), len(args) < len(typing.get_args(hint))
    return hint, False


def choices_of(settings, name: str) -> tuple:
    """A choice setting's values, from its ``Literal`` type."""
    return typing.get_args(kind_of(settings, name)[0])


def limits(rules: list) -> tuple:
    """(least, largest, whether the least itself is refused) from pydantic's constraints; None
    where there is none (the largest whole number a setting may take counts as none)."""
    low = high = None
    above = False
    for rule in rules:
        if isinstance(rule, annotated_types.Ge):
            low = rule.ge
        elif isinstance(rule, annotated_types.Gt):
            low, above = rule.gt, True
        elif isinstance(rule, annotated_types.Le):
            high = None if rule.le == LARGEST else rule.le
    return low, high, above
