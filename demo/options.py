"""Command-line options from the settings classes (``demo.settings``): each field an option, its
help line the option's help, its type and default the option's.

    --max_new_tokens, --max-new-tokens N   an int field (both spellings of a name with "_")
    --strategy {greedy,beam,sample}        a Literal field: its values are the choices
    --trace [BOOL]                         a bool field: alone it means true; a true default
                                           also gets --no-<name>
    --lengths N [N ...]                    a list field: one value or more
    --stop                                 an alias from the field's words (``aliases``)

The rules are those of transformers' ``HfArgumentParser``, the options' first owner, kept here so
that ``--help`` needs neither transformers nor torch. The values are checked by the settings
class itself, as the page's and the API's are.
"""

import argparse
import dataclasses

from .app_settings import parse_boolean
from .declared import choices_in, default_of, field_info, help_line, kind_in, kind_of, schema


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """An option per field of the settings class ``cls``."""
    for f in dataclasses.fields(cls):
        _add_option(parser, cls, f.name)


def boolean(text: str) -> bool:
    """A yes/no option's value, read as a ``DEMO_*`` variable's is (``app_settings.parse_boolean``)."""
    try:
        return parse_boolean(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _add_option(parser: argparse.ArgumentParser, cls, name: str) -> None:
    names = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
    help = option_help(cls, name)
    parser.add_argument(*names, *schema(cls, name).get("aliases", []), help=help, **_typed(cls, name))
    if kind_of(cls, name)[0] == "boolean" and default_of(cls, name) is True:  # a true default can be turned off
        parser.add_argument(f"--no_{name}", f"--no-{name.replace('_', '-')}", action="store_false",
                            dest=name, help=help, default=False)


def option_help(cls, name: str) -> str:
    """An option's help: the setting's one line (``demo.settings.help_line``), then what only the
    command line says (``more``), on a line of its own."""
    more = schema(cls, name).get("more")
    return help_line(cls, name) + (f"\n{more}" if more else "")


# the Python type an option's text is read as, by the JSON type of the setting's values
READ_AS = {"integer": int, "number": float, "string": str}


def _typed(cls, name: str) -> dict:
    """The option's type, number of values, choices and default (or that it is required); an
    optional setting (X | None) is read as X: unset is its default, never typed."""
    default = {"required": True} if field_info(cls, name).is_required() else {"default": default_of(cls, name)}
    kind, value_schema = kind_of(cls, name)[0], schema(cls, name)
    if kind == "choice":
        choices = choices_in(value_schema)
        by_text = {str(choice): choice for choice in choices}
        return {"choices": choices, "type": lambda text: by_text.get(text, text), **default}
    if kind == "boolean":
        return {"type": boolean, "nargs": "?", "const": True, "default": default.get("default", False)}
    if kind == "array":
        return {"type": READ_AS[kind_in(value_schema["items"])], "nargs": "+", **default}
    return {"type": READ_AS[kind], **default}
