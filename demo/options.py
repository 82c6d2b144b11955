"""Command-line options from the settings dataclasses (``demo.settings``): each field an option,
its declaration's help the option's help, its type and default the option's.

    --max_new_tokens, --max-new-tokens N   an int field (both spellings of a name with "_")
    --strategy {greedy,beam,sample}        a Literal field: its values are the choices
    --trace [BOOL]                         a bool field: alone it means true; a true default
                                           also gets --no-<name>
    --lengths N [N ...]                    a list field: one value or more
    --stop                                 an alias from the field's metadata (``aliases``)

The rules are those of transformers' ``HfArgumentParser``, the options' first owner, kept here so
that ``--help`` needs neither transformers nor torch.
"""

import argparse
import dataclasses
import typing

from .settings import help_line, kind_of, parse_boolean


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """An option per field of the dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.init:
            _add_option(parser, f, kind_of(hints[f.name])[0])  # X | None: unset is the default, never typed


def boolean(text: str) -> bool:
    """A yes/no option's value, read as a ``DEMO_*`` variable's is (``settings.parse_boolean``)."""
    try:
        return parse_boolean(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _add_option(parser: argparse.ArgumentParser, f: dataclasses.Field, kind) -> None:
    names = [f"--{f.name}"] + ([f"--{f.name.replace('_', '-')}"] if "_" in f.name else [])
    aliases = f.metadata.get("aliases", [])
    help = option_help(f)
    parser.add_argument(*names, *([aliases] if isinstance(aliases, str) else aliases), help=help,
                        **_typed(f, kind))
    if kind is bool and f.default is True:  # a true default can be turned off
        parser.add_argument(f"--no_{f.name}", f"--no-{f.name.replace('_', '-')}", action="store_false",
                            dest=f.name, help=help, default=False)


def option_help(f: dataclasses.Field) -> str | None:
    """An option's help: the setting's one line (``demo.settings.help_line``), then what only the
    command line says (``more``), on a line of its own."""
    if "help" not in f.metadata:
        return None
    more = f.metadata.get("more")
    return help_line(f) + (f"\n{more}" if more else "")


def _typed(f: dataclasses.Field, kind) -> dict:
    """The option's type, number of values, choices and default (or that it is required)."""
    if f.default is not dataclasses.MISSING:
        default = {"default": f.default}
    elif f.default_factory is not dataclasses.MISSING:
        default = {"default": f.default_factory()}
    else:
        default = {"required": True}
    if typing.get_origin(kind) is typing.Literal:
        choices = typing.get_args(kind)
        by_text = {str(choice): choice for choice in choices}
        return {"choices": choices, "type": lambda text: by_text.get(text, text), **default}
    if kind is bool:
        return {"type": boolean, "nargs": "?", "const": True, "default": default.get("default", False)}
    if typing.get_origin(kind) is list:
        return {"type": typing.get_args(kind)[0], "nargs": "+", **default}
    return {"type": kind, **default}
