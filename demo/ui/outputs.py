"""An event's outputs by name: one NamedTuple per event, its fields in the order of the event's
outputs, which is the order API clients receive them in.

The record is the whole contract, written once:

- the event's outputs list is :func:`components`, the components named by the record's fields;
- a handler returns the record filled with values. A NamedTuple is the tuple Gradio needs, so
  nothing converts it, and API clients (gradio_client, MCP tools) receive its values by position;
- the error return is the record's ``showing(message)``: the message in its one field for
  messages, every other field its default, which is what that output shows cleared.

The field order is the public API's (clients read outputs by position): a new output goes last.
"""

from typing import Any, NamedTuple

import pandas as pd


def shown_in(field: str) -> classmethod:
    """A record's ``showing(message)``: the message in ``field``, every other output its default
    (what a cleared output shows)."""
    return classmethod(lambda cls, message: cls(**{field: message}))


class FigureOutputs(NamedTuple):
    """A probe's outputs, as /probe_mlm, /probe_second and /sweep_masks give them (in this order)."""
    plot: Any = None  # Plotly figure: the needle grid's heatmap, or the score at each number of masks
    summary: str = ""  # HTML: the model, what it found, the best value; or the message shown instead
    table: pd.DataFrame | None = None  # a row per run (the grid) or per value (the sweep)
    files: list[str] | None = None  # the table as CSV and the figure as an HTML page
    python: str | None = None  # Reproduce: the Python call
    shell: str | None = None  # Reproduce: the command line

    showing = shown_in("summary")  # an error, or why this side did not run; nothing stale


def components(record_type, **by_name) -> list:
    """The outputs list of an event whose handler returns ``record_type``: the components named by
    its fields, in its field order. Every field must be named, and nothing else."""
    fields = record_type._fields
    if set(by_name) != set(fields):
        missing, extra = set(fields) - set(by_name), set(by_name) - set(fields)
        raise TypeError(f"{record_type.__name__}'s components: missing {sorted(missing)}, "
                        f"unknown {sorted(extra)}")
    return [by_name[name] for name in fields]
