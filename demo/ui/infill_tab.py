"""Infill tab: a blank in the middle of a text, filled by a masked LM that reads both sides of it,
and the same text given to a causal LM, which reads only what is left of the blank (or, with
fill-in-the-middle tokens, the text after it as a prompt).

Wiring only: ``demo.engine.infill.infill`` fills (with its step trace for the playback,
``demo.ui.playback``), ``demo.engine.infill_causal`` gives the causal side and scores both filled
texts with both models.
"""

import functools
from typing import NamedTuple

import gradio as gr

from ..app import budget
from ..app.catalog import Catalog
from ..app.in_effect import head_in_effect, in_effect
from ..app.limits import check_text
from ..settings import InfillSettings
from .common import TabParts, Textbox, deployment, escape, message, notes, score_text, tab_help, work_line
from .handlers import handler
from .loading import load
from .outputs import components, shown_in
from .pickers import EMD, emd_radio, model_note
from .playback import PLAYER_JS, lane_switch, playback, run_id
from .presets import preset_named, read_presets
from .reproduce_block import reproduction
from .run_marker import run_ends, run_starts
from .settings_form import Own, Setting, endpoint, model_argument, panel, setting_args, shown_value
from .sides import side_columns, side_pickers
from .turns import batch_note, together

HELP = ("Write a text with a **[blank]** in the middle: the **masked LM** fills it reading the words on "
        "both sides; the **causal LM** only sees the words before it.")

HOW = """
A masked LM was trained on exactly this: hide some tokens, predict them from everything around
them. Each `[blank]` becomes `[MASK]` tokens (`[blank:3]`: three; `[blank:auto]`: the model tries
1 to 4 and keeps the fill it scores best; `____` is a `[blank]`); then, one step per token, the
model reads the whole text, picks a masked position and writes its token there. The **order**
decides which position: *left to right* (the BERTs paper's order), *most confident first* (the
order masked diffusion LMs and Mask-Predict use) or *random*. The playback shows the order.

A causal LM reads left to right only: it continues the text before each blank, blind to what
follows, unless its tokenizer has fill-in-the-middle tokens (`<fim_prefix>`, `<fim_suffix>`),
which put the text after the blank into its prompt. Last, both filled texts are scored whole by
both models (PLL for the masked LM, log-likelihood for the causal LM): did reading the right
context give the masked LM a fill that both models like better?
"""

def _text(text) -> str:
    return check_text(text, "text", deployment().settings.max_prompt_chars)


def filled_html(text: str, fills: list[str], settings: InfillSettings) -> str:
    """``text`` with each blank replaced by its fill, marked (escaped: the user's and the model's
    text)."""
    from ..engine.infill import parse_blanks, segments_of

    segments = segments_of(text, parse_blanks(text, settings))
    parts = [escape(segments[0])]
    for fill, after in zip(fills, segments[1:]):
        parts.append(f'<mark class="demo-fill">{escape(fill) or "&nbsp;"}</mark>{escape(after)}')
    return f'<div class="demo-filled">{"".join(parts)}</div>'


class InfillOutputs(NamedTuple):
    """The masked LM's fill, as /infill_mlm gives it (in this order)."""
    filled: str = ""  # HTML: the text with each blank's fill marked; or the message shown instead
    stats: str = ""  # HTML: model, order, time, the work (forward passes, tokens read), notes
    trace: str = ""  # HTML: the playback's frames, one per filled token
    filled_text: str = ""  # the filled text (plain), for the ranking of both fills
    python: str = ""  # Reproduce: the Python call
    shell: str = ""  # Reproduce: the command line

    showing = shown_in("filled")


class CausalInfillOutputs(NamedTuple):
    """The causal LM's fill, as /infill_causal gives it (in this order)."""
    filled: str = ""  # HTML: the text with each blank's fill marked; or the message shown instead
    stats: str = ""  # HTML: model, what it could read (left only, or in the middle), time, the work
    filled_text: str = ""  # the filled text (plain), for the ranking of both fills
    python: str = ""  # Reproduce: the Python call
    shell: str = ""  # Reproduce: the command line
    trace: str = ""  # HTML: the decoding playback, blank after blank, in step with the masked LM's

    showing = shown_in("filled")


# What both fills take: the text, the model, the page's InfillSettings
FILL = (Own("text", "a text with blanks: [blank] (a token), [blank:3] (three), [blank:auto] (the model picks 1 to 4), "
                    "or ____"),
        model_argument(),
        *setting_args(InfillSettings, "order", "blank_tokens", "seed"))


def _idle(text: str) -> dict[str, str]:
    """The settings that do nothing for this text (``in_effect``'s ``idle``): the tokens of a
    [blank] where every blank gives its own size."""
    from ..engine.infill import BLANK
    sized = all(match.group(1) is not None for match in BLANK.finditer(text))
    return {"blank_tokens": "for a [blank] or ____ without a size of its own"} if sized else {}


def _stats(lm, result, extra: str, how: str) -> str:
    """The lines under a fill: the model, how it filled and its time, the work it did."""
    return (f"<div>{model_note(lm)}</div><div>{escape(extra)} · {result.seconds:.2f} s</div>"
            + work_line(result.reads, how) + "".join(message(note, "note") for note in result.notes))


def infill_estimate(settings: InfillSettings, arguments: dict, kind: str, parameters: float) -> budget.Work:
    """One fill's work, from the request's settings (``handlers.handler``'s ``estimate``): a step
    per blank token, each over the whole text, as a generation of that many tokens reads."""
    text = str(arguments.get("text") or "")
    blanks = max(1, text.count("[blank") + text.count("____"))
    steps = blanks * settings.blank_tokens
    return budget.estimated_generation_work(kind, parameters, text, steps, 1)


def fills_estimate(settings, arguments: dict, kind: str, parameters: float) -> budget.Work:
    """Scoring both filled texts whole (``common.handler``'s ``estimate``)."""
    texts = [str(arguments.get(name) or "") for name in ("masked_text", "causal_text")]
    return budget.estimated_ranking_work(kind, parameters, "", texts)


def _filled(model_name, emd, settings: InfillSettings, texts: list[str]) -> list:
    """Each text's (model, fill), or the ValueError refusing it before any run (work over the
    budget, blanks the model cannot take); the texts filled together (``infill_together``). The
    model loads in the generating turn, so a request waiting for it holds none."""
    from ..app.budget import infill_work
    from ..engine.infill import infill_together

    lm, checked = load(model_name, "masked", emd), []
    for text in texts:
        try:
            infill_work(lm, text, settings).check(deployment().settings)
            checked.append(text)
        except ValueError as err:
            checked.append(err)
    fills = iter(infill_together(lm, [t for t in checked if isinstance(t, str)], settings))
    return [t if isinstance(t, ValueError) else (lm, next(fills)) for t in checked]


@handler("generate", InfillOutputs.showing, estimate=infill_estimate, batches=True)
@endpoint(*FILL, EMD, builds=InfillSettings, fixed=dict(trace=True))
def infill_masked(text, model_name, emd, settings: InfillSettings, progress=gr.Progress(track_tqdm=True)):
    """Fill the blanks of a text with a masked LM, one token per step in the chosen order,
    reading the words on both sides. Also returns the playback of the steps."""
    text = _text(text)
    settings, unused = in_effect(settings, "masked", _idle(text))
    # texts of one model and settings waiting for the turn together are filled as one batch
    (lm, result), batch = together("generate", ("infill", model_name, emd, repr(settings)), text,
                                   functools.partial(_filled, model_name, emd, settings))
    emd, head = head_in_effect(emd, lm)
    python, shell = reproduction("infill", model_name, "masked", settings, emd, text=text)
    extra = f"order: {shown_value(InfillSettings, 'order', settings.order)}"
    how = "one pass per masked token, each over the whole text" + (
        ", then each length tried scored whole" if result.tries else "")
    return InfillOutputs(filled=filled_html(text, result.fills, settings),
                         stats=_stats(lm, result, extra, how) + notes(unused + head)
                         + batch_note(batch, result.seconds, "Filled"),
                         trace=playback(result.steps, "infill", run_id(text, result.order, result.seconds),
                                        group="fill"),
                         filled_text=result.filled, python=python, shell=shell)


@handler("generate", CausalInfillOutputs.showing, estimate=infill_estimate, models={"model_name": "causal"})
@endpoint(*FILL, builds=InfillSettings, fixed=dict(trace=True))
def infill_causal(text, model_name, settings: InfillSettings, progress=gr.Progress(track_tqdm=True)):
    """Fill the blanks of a text with a causal LM: it continues the words before each blank (it
    cannot read the words after it), or fills in the middle where its tokenizer can."""
    from ..app.budget import infill_work
    from ..engine.infill_causal import causal_infill

    if not model_name:
        return CausalInfillOutputs.showing(message("Skipped: no causal LM picked.", "note"))
    text = _text(text)
    settings, unused = in_effect(settings, "causal", _idle(text))
    lm = load(model_name, "causal")
    infill_work(lm, text, settings).check(deployment().settings)
    result = causal_infill(lm, text, settings)
    python, shell = reproduction("infill", model_name, "causal", settings, text=text)
    extra = "filled in the middle (its FIM tokens)" if result.mode == "fim" else "continued from the left"
    how = "per blank, its prompt once, then only the token written last" + (
        ", then each length tried scored whole" if result.tries else "")
    return CausalInfillOutputs(filled=filled_html(text, result.fills, settings),
                               stats=_stats(lm, result, extra, how) + notes(unused),
                               filled_text=result.filled, python=python, shell=shell,
                               trace=playback(result.steps, "causal", run_id(text, result.fills, result.seconds),
                                              group="fill"))


RANK_BOTH_MODELS = {"masked_name": "masked", "causal_name": "causal"}  # both models score both texts


@handler("score", lambda text: text, estimate=fills_estimate, models=RANK_BOTH_MODELS)
def rank_both(masked_text, causal_text, masked_name, causal_name, emd="auto"):
    """Both filled texts scored whole by both models (their own measures): which fill does each
    model like better? Its own step, with its own budget: when scoring is too big, the fills
    above stay and this says why it was skipped."""
    from ..app.budget import filled_texts_work
    from ..engine.infill_causal import rank_fills

    texts = [t for t in (masked_text, causal_text) if t]
    if len(texts) < 2 or not causal_name:
        return ""
    models = [load(masked_name, "masked", emd), load(causal_name, "causal")]
    app = deployment().settings
    too_big = next((w for w in (filled_texts_work(lm, texts) for lm in models) if not w.fits(app)), None)
    if too_big:
        return message(f"Both fills are above, but scoring them whole was skipped: it would be too big "
                       f"for this app ({too_big.size(app)}; one request may use at most "
                       f"{app.max_request_tflop:,.1f} trillion). A shorter text can be scored here.", "note")
    rows = "".join(
        f"<tr><td>{escape(name)} ({'PLL' if r.kind == 'masked' else 'log-likelihood'})</td>"
        + "".join(f"<td class='demo-num'>{'<b>' if i == r.best else ''}{score_text(s)}{'</b>' if i == r.best else ''}</td>"
                  for i, s in enumerate(r.scores)) + "</tr>"
        for name, r in zip((masked_name, causal_name), rank_fills(models, texts)))
    return ("<div class='demo-fill-ranking'><b>Both fills, scored whole by both models</b> (higher is "
            "likelier; bold: the fill that model prefers)<table><thead><tr><th>scored by</th>"
            "<th>masked LM's fill</th><th>causal LM's fill</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div>")


def preset_note(preset: dict | None) -> str:
    return f"**Expected:** *{preset['expected']}*" if preset and preset.get("expected") else ""


def build(catalog: Catalog) -> TabParts:
    """The Infill tab's components and events (call inside a gr.Blocks/gr.Tab context); a lesson
    step fills its preset."""
    presets = read_presets("infill")
    tab_help(HELP, HOW)
    preset = gr.Dropdown(choices=[p["name"] for p in presets], value=presets[0]["name"] if presets else None,
                         label="Preset", elem_id="fill-preset",
                         info="Texts whose blank is decided by the words after it.")
    text = Textbox(value=presets[0]["text"] if presets else "", label="Text with blanks", lines=3,
                      elem_id="fill-text", max_length=deployment().settings.max_prompt_chars,
                      info="[blank] is one token, [blank:3] three, [blank:auto] lets the model pick 1 to 4; "
                           "____ is a [blank].")
    note = gr.Markdown(preset_note(presets[0] if presets else None), elem_id="fill-note")
    masked_model, causal_model = side_pickers(catalog, "fill")
    settings = panel(InfillSettings, [tuple(t.name for t in FILL if isinstance(t, Setting))], "fill", layout=dict(
        order=dict(scale=2), blank_tokens=dict(elem_id="fill-tokens")))
    emd = emd_radio("fill-deberta-head", masked_model)
    run = gr.Button("Fill the blanks with both models", variant="primary", elem_id="fill-run")
    sides = side_columns("fill", {"filled": lambda kind, elem_id: gr.HTML(elem_id=elem_id),
                                  "stats": lambda kind, elem_id: gr.HTML(elem_id=elem_id)})
    ranking = gr.HTML(elem_id="fill-ranking")
    with gr.Accordion("Playback: the order each model fills in", open=True, elem_classes=["demo-playback"]):
        lane_switch("fill", "fill-playback")
        with gr.Row(elem_id="fill-playback", elem_classes=["demo-lanes"]):
            with gr.Column(min_width=320, elem_classes=["demo-lane"]):
                trace = gr.HTML(elem_id="fill-trace", js_on_load=PLAYER_JS)
            with gr.Column(min_width=320, elem_classes=["demo-lane"]):
                causal_trace = gr.HTML(elem_id="fill-causal-trace", js_on_load=PLAYER_JS)
    masked_text, causal_text = gr.State(""), gr.State("")

    def fill(name):
        chosen = preset_named(presets, name)
        return (chosen["text"], preset_note(chosen)) if chosen else (gr.update(), gr.update())

    preset.select(fill, preset, [text, note], api_visibility="private")
    widgets = dict(settings, text=text, emd=emd)
    masked_event = run.click(
        infill_masked, infill_masked.inputs(dict(widgets, model_name=masked_model)),
        components(InfillOutputs, **sides["masked"], trace=trace, filled_text=masked_text),
        api_name="infill_mlm", concurrency_id=infill_masked.group, show_progress_on=sides["masked"]["filled"],
        js=run_starts("fill"))
    causal_event = masked_event.then(
        infill_causal, infill_causal.inputs(dict(widgets, model_name=causal_model)),
        components(CausalInfillOutputs, **sides["causal"], filled_text=causal_text, trace=causal_trace),
        api_name="infill_causal", concurrency_id=infill_causal.group, show_progress_on=sides["causal"]["filled"])
    ranked = causal_event.then(rank_both, [masked_text, causal_text, masked_model, causal_model, emd], ranking,
                               api_visibility="private", concurrency_id=rank_both.group)
    run_ends("fill", ranked)
    return TabParts(lesson_fields=(preset, text, note), lesson_values=lambda step: [step["preset"], *fill(step["preset"])],
                    presses=lambda step: (infill_masked, infill_causal, rank_both))
