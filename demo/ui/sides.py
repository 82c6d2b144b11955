"""The two sides every tab compares: the masked LM on the left, the causal LM (or the model it is
compared with) on the right. Their pickers and their output columns are built here, once, so
each tab says only which parts a side shows.
"""

from collections.abc import Callable

import gradio as gr

from ..app.catalog import Catalog
from .pickers import model_picker, pair_picker
from .reproduce_block import reproduce_block

SIDES = {"masked": "mlm", "causal": "causal"}  # a side's kind -> its part of the element ids
KIND_NAMES = {"masked": "Masked LM", "causal": "Causal LM"}


def side_pickers(catalog: Catalog, prefix: str, causal_label: str = KIND_NAMES["causal"], any_kind: bool = False):
    """(masked LM picker, causal LM picker) in a row, and the pair picker that sets both; the
    causal side may be skipped, and with ``any_kind`` be any model (compared in its natural kind)."""
    with gr.Row(elem_classes=["demo-pickers"]):  # (stacked on a phone: a model's name in full)
        masked = model_picker(catalog, "masked", KIND_NAMES["masked"], f"{prefix}-mlm")
        causal = model_picker(catalog, "causal", causal_label, f"{prefix}-causal", with_none=True,
                              any_kind=any_kind)
    pair_picker(catalog, f"{prefix}-pair", masked, causal)
    return masked, causal


Part = Callable[[str, str], "gr.Component | None"]  # (side's kind, elem_id) -> the part, or None


def side_columns(prefix: str, parts: dict[str, Part]) -> dict[str, dict[str, gr.Component]]:
    """Two output columns in a row, the masked LM's left: in each the ``parts`` in order, each
    made by ``make(kind, elem_id)`` with elem_id ``<prefix>-<mlm|causal>-<part>`` (None: that side
    has no such part), then the Reproduce block (parts ``python`` and ``shell``). Returns each
    side's parts by name, as the tab's output records name them (``demo.ui.outputs.components``)."""
    made = {kind: {} for kind in SIDES}
    with gr.Row():
        for kind, short in SIDES.items():
            with gr.Column():
                for name, make in parts.items():
                    part = make(kind, f"{prefix}-{short}-{name}")
                    if part is not None:
                        made[kind][name] = part
                made[kind]["python"], made[kind]["shell"] = reproduce_block(f"{prefix}-{short}-reproduce")
    return made
