"""Picking models: a model dropdown per kind (the catalog's, or any name typed), the pair picker
that sets both sides, the model note under a result, and DeBERTa's head for a masked LM that may
be a DeBERTa."""

import gradio as gr

from ..app.catalog import Catalog, standin_note
from ..engine.precision import BFLOAT16_AGREEMENT
from ..settings import ModelSettings
from .common import deployment, escape, message
from .run_marker import run_ends, run_starts
from .settings_form import Setting, widget


class ModelPicker(gr.Dropdown):
    """A model dropdown whose API schema accepts what the picker accepts: any name, with the app's
    models as examples. Gradio's Dropdown schema lists its choices as an enum even when a value
    may be typed in, so a client that checks the schema (every MCP client) would refuse a Hub id
    before the app could answer; an unusable name is refused by :func:`load`, in a sentence."""

    is_template = True  # drawn by the page as the Dropdown it is (Gradio's mark for such subclasses)

    def api_info_as_input(self) -> dict:
        return {"type": "string", "examples": [value for _, value in self.choices if value]}


def model_picker(catalog: Catalog, kind: str, label: str, elem_id: str, with_none: bool = False,
                 any_kind: bool = False):
    """Dropdown of the catalog's models of ``kind`` (first, and the default) or, with
    ``any_kind``, followed by those of the other kind; a Hub id may be typed in."""
    other = "causal" if kind == "masked" else "masked"
    choices = catalog.choices(kind) + (catalog.choices(other) if any_kind else [])
    if with_none:
        choices = choices + [("(none: skip this side)", "")]
    what = "masked LM (BERT-like)" if kind == "masked" else "causal LM (GPT-like)"
    if any_kind:
        what += " or any other masked or causal LM"
    return ModelPicker(
        choices=choices, value=getattr(catalog.default(kind), "name", None), label=label, elem_id=elem_id,
        allow_custom_value=True, filterable=True,
        info=f"A {what}. " + ("Offline: local models and Hub models downloaded before; a typed Hub id "
                              "loads only if it was downloaded too." if catalog.offline else
                              "'local' models load offline; Hub models download on first use. "
                              "You may also type a Hugging Face Hub id (owner/name)."))


def pair_picker(catalog: Catalog, elem_id: str, masked, causal):
    """A dropdown of the catalog's model pairs that sets both model pickers together (shown where
    the catalog lists pairs), and a note on the two models chosen: why a listed pair is a fair
    comparison, or what else differs between two models chosen apart (call after the two pickers
    exist). Choosing a model by hand leaves the pair unless the two chosen are one."""
    defaults = tuple(getattr(catalog.default(kind), "name", None) for kind in ("masked", "causal"))
    chosen = next((p for p in catalog.pairs if (p.masked, p.causal) == defaults), None)

    def note_of(pair, masked_name, causal_name) -> str:
        if pair is not None:
            return message(catalog.pair_note(pair), "note")
        if not masked_name or not causal_name:  # a side left out: nothing compared
            return ""
        return message(catalog.free_pair_note(masked_name, causal_name), "note")

    picker = gr.Dropdown(
        choices=[("(choose the two models yourself)", "")] + [(p.name, p.name) for p in catalog.pairs],
        value=chosen.name if chosen else "", label="Model pair", elem_id=elem_id, visible=bool(catalog.pairs),
        info="The listed pairs are a masked LM and a causal LM trained alike, so their differences come from "
             "the objective (fill in blanks vs continue the text), not from data or size.")
    note = gr.HTML(note_of(chosen, *defaults), elem_id=f"{elem_id}-note", elem_classes=["demo-hide-empty"])

    def choose(name, masked_name, causal_name):
        pair = catalog.pair(name)
        if pair is None:  # back to choosing freely: the pickers stay as they are
            return gr.update(), gr.update(), note_of(None, masked_name, causal_name)
        return pair.masked, pair.causal, note_of(pair, pair.masked, pair.causal)

    def picked(masked_name, causal_name):
        pair = next((p for p in catalog.pairs if (p.masked, p.causal) == (masked_name, causal_name)), None)
        return (pair.name if pair else ""), note_of(pair, masked_name, causal_name)

    quick = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden", js=run_starts("pair"))
    run_ends("pair", picker.change(choose, [picker, masked, causal], [masked, causal, note], **quick),
             *(side.input(picked, [masked, causal], [picker, note], **quick)  # a model chosen by hand
               for side in (masked, causal)))
    return picker


def model_note(lm) -> str:
    """One line (HTML) under an output: which model, how big, where it runs; a caveat for the
    offline stand-in, so nobody reads its weak answers as what masked LMs can do."""
    where = "local" if lm.local else "Hub"
    name = deployment().catalog.shown_name(lm.name, lm.local)
    line = (f"<code>{escape(name)}</code> · {lm.kind} · "
            f"{escape(lm.family.name)} · {lm.n_parameters / 1e6:,.0f}M parameters · {where} · "
            f"{lm.device.type} · {str(lm.dtype).removeprefix('torch.')}")
    if getattr(lm, "precision", None):  # left to the machine: why this one
        line += f' <span class="demo-precision" title="{escape(lm.precision.why)}">({escape(precision_words(lm))})</span>'
    if getattr(lm, "emd", False):
        line += " · head: enhanced mask decoder"
    caveat = standin_note(lm.name)
    notes = [note for note in (caveat, getattr(lm, "emd_note", None)) if note]
    return line + "".join(message(note, "note") for note in notes)


def precision_words(lm) -> str:
    """Why a model left to the machine runs in its precision, short (the whole measurement is the
    title), and for bfloat16 how far it was measured to keep float32's answers."""
    if lm.precision.dtype != "bfloat16":
        return lm.precision.short
    return f"{lm.precision.short}; {BFLOAT16_AGREEMENT}"


# The DeBERTa heads the page offers (an endpoint's argument and its radio): "on" is the command
# line's, refusing a checkpoint without the decoder's table, where "auto" says why it runs without
EMD = Setting(ModelSettings, "emd", only=("auto", "off"))


def emd_radio(elem_id: str, masked_picker):
    """What a DeBERTa masked LM's head reads (``ModelSettings.emd``), shown while the masked LM
    picked may be a DeBERTa (a listed one is, or a name the catalog does not know); other
    families ignore it."""
    def maybe_deberta(name) -> bool:
        entry = deployment().catalog.entry(name) if name else None
        return entry is None or not entry.family or entry.family.startswith("deberta")


    radio = widget(ModelSettings, "emd", only=EMD.only, elem_id=elem_id,
                   visible=maybe_deberta(masked_picker.value))
    run_ends("model-pick", masked_picker.change(lambda name: gr.update(visible=maybe_deberta(name)), masked_picker,
                                                radio, api_visibility="private", concurrency_limit=None,
                                                show_progress="hidden", js=run_starts("model-pick")))
    return radio
