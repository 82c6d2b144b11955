"""Decoding playback: a generation's steps as the frames of a player (play, pause, step, scrub).

One frame per decoding step, rendered here as escaped HTML (what the model or the user wrote is
shown as text): the window the model read, token by token (the prompt, elided in its middle; the
tokens written so far, the newest marked; for a masked LM the predicted [MASK], the padding masks
and the end token; for a causal LM the next position), the top guesses as bars, the token kept
(it slides into place), and with beam search the beams as rows. Fast decoding marks the steps that
re-read the whole window (refreshes).

One script owns every player's state (``ENGINE_JS``, shared by the gr.HTML components that show
the frames, ``PLAYER_JS``); it shows one frame at a time. Every player of one group follows the
same step: the masked and the causal LM write side by side at the same pace, driven by the first
lane's controls; a new run of that lane starts its group at step 1 (a lane that arrives later
beside it joins at the step shown), and a speed change applies at once. A
hidden keeper (``link_keeper``) holds where each group rests, so a link to the page reopens the
players there. With ``prefers-reduced-motion`` nothing moves: no play button, no sliding; the
scrubber and the step buttons still reach every frame (style.css).
"""

import hashlib
import json
import re

import gradio as gr

from ..engine.counting import Reads
from .common import escape, work_text

HEAD, TAIL = 6, 12  # prompt tokens shown before its elided middle, and at its end
SPEEDS = [("slow", 1600), ("normal", 900), ("fast", 400)]  # milliseconds per step

def _chip(token: str, kind: str, label: str = "") -> str:
    """A legend entry: a chip and its label, one unit that never wraps apart (style.css)."""
    return (f'<span class="demo-legend-item"><span class="demo-tok {kind}">{token}</span>'
            + (f"<span>{label}</span>" if label else "") + "</span>")


LEGEND = (
    '<div class="demo-legend">'
    + _chip("prompt", "demo-prompt")
    + _chip("written so far", "demo-written")
    + _chip("[MASK]", "demo-mask-predicted", "predicted now")
    # a mask that is not predicted now: a padding mask in the paper's way, one of the block in any order
    + _chip("[MASK]", "demo-mask", "padding masks (paper's way: keep the end away)")
    + _chip("[MASK]", "demo-mask", "the block's masks still to fill (any order)")
    + _chip("end", "demo-end", "end token")
    + _chip("?", "demo-next", "next token (causal LM)")
    + _chip("tok", "demo-remasked", "masked again (any order)")
    + _chip("␣", "", "a space before the token")
    + _chip("##", "", "continues the word")
    + "</div>")


# How byte-level BPE (GPT-2, RoBERTa) and SentencePiece write a space or a line break inside a
# token; shown as visible marks (WordPiece's "##", a word's continuation, stays as it is).
VISIBLE = str.maketrans({"Ġ": "␣", "▁": "␣", "Ċ": "⏎"})


def _token(text: str, kind: str, written_at: int | None = None) -> str:
    """A window cell; ``written_at``: the step that wrote it (any-order writing shows when each
    position was filled)."""
    step = f'<span class="demo-step-no">{written_at}</span>' if written_at is not None else ""
    return f'<span class="demo-tok {kind}">{escape(text.translate(VISIBLE))}{step}</span>'


def _kinds(step, blanks: set[int], newest: set[int]) -> list[str]:
    """The class of each window position. Generation (``step.predicted`` is None): the prompt, the
    tokens written so far, the predicted mask (the first), the padding masks, the end. Infilling
    and any-order writing: the text, the masks' tokens written so far, the masks written this
    step, the others, the tokens masked again this step; [CLS] and [SEP] as ends."""
    window, masks = step.window, step.mask_positions
    if step.predicted is None:
        first = masks[0] if masks else len(window)
        kinds = ["demo-prompt"] * step.prompt_length + ["demo-written"] * (first - step.prompt_length)
        if first > step.prompt_length:
            kinds[first - 1] += " demo-new"
        if masks:  # (a step read from an earlier pass predicts mask read_from of its window)
            kinds += ["demo-mask"] * len(masks)
            kinds[masks[step.read_from]] = "demo-mask-predicted"
            kinds += ["demo-end"] * (len(window) - masks[-1] - 1)
        return kinds
    kinds = ["demo-end"] + ["demo-prompt"] * (len(window) - 2) + ["demo-end"]
    for i in blanks:
        if i < len(window) - 1:
            kinds[i] = "demo-written demo-new" if i in newest else "demo-written"
    predicted = set(step.written or [step.predicted])
    for i in masks:
        kinds[i] = "demo-mask-predicted" if i in predicted else "demo-mask"
    for i in step.remasked or []:
        kinds[i] = "demo-remasked"
    return kinds


def _window(step, blanks: set[int] = frozenset(), newest: frozenset = frozenset(),
            written_at: dict[int, int] | None = None) -> str:
    """The window's tokens as cells; a run of more than HEAD + TAIL prompt tokens loses its middle
    (its start and its end stay: the end is what the next token continues)."""
    kinds = _kinds(step, blanks, newest)
    written_at = written_at or {}
    cells, run = [], []

    def close_run():
        if len(run) > HEAD + TAIL + 1:
            cells.extend(run[:HEAD] + [f'<span class="demo-elided">… {len(run) - HEAD - TAIL} tokens …</span>']
                         + run[-TAIL:])
        else:
            cells.extend(run)
        run.clear()

    for i, (token, kind) in enumerate(zip(step.window, kinds)):
        if kind == "demo-prompt":
            run.append(_token(token, kind))
            continue
        close_run()
        cells.append(_token(token, kind, written_at.get(i)))
    close_run()
    if not step.mask_positions:  # causal LM: the position it predicts next
        cells.append(_token("?", "demo-next"))
    return '<div class="demo-window">' + "".join(cells) + "</div>"


def _guesses(step) -> str:
    bars = [f'<div class="demo-bar"><span class="demo-bar-label">{escape(repr(token))}</span>'
            f'<span class="demo-bar-track"><span class="demo-bar-fill" style="width:{100 * p:.0f}%">'
            f'</span></span><span class="demo-bar-value">{p:.2f}</span></div>' for token, p in step.top]
    return '<div class="demo-guesses"><b>Top guesses</b>' + "".join(bars) + "</div>"


def _beams(beams) -> str:
    rows = "".join(f"<li>{escape(repr(text))} <span class=\"demo-score\">{score:.2f}</span></li>"
                   for text, score in beams)
    return f'<div class="demo-beams"><b>Beams after this step</b><ol>{rows}</ol></div>'


def _refresh(step) -> str:
    if step.read_from:
        return (f' · <span class="demo-cached">no pass of its own: the guess at padding mask '
                f'{step.read_from} of step {step.step - step.read_from + 1}\'s window</span>')
    if step.refreshed is None:
        return ""
    return (' · <span class="demo-refresh">refresh: the whole window re-read</span>' if step.refreshed
            else ' · <span class="demo-cached">cached: only the last tokens re-read</span>')


def _work(steps, k: int) -> str:
    """What step k's passes read, and all steps up to it, as the engine counted (where it did)."""
    if steps[k].reads is None:
        return ""
    so_far = sum((s.reads for s in steps[:k + 1]), Reads())
    return (f'<div class="demo-step-work">this step: {work_text(steps[k].reads)} · '
            f'up to here: {work_text(so_far)}</div>')


def _filled(steps, k: int) -> tuple[set[int], frozenset, dict[int, int]]:
    """Infilling and any-order writing, at step k: the positions that were masks by then, those
    written by the step before, and (any-order writing) the step each written position was filled
    at, counted from 1 (a token masked again loses its number)."""
    if steps[k].predicted is None:
        return set(), frozenset(), {}
    blanks = {p for step in steps[:k + 1] for p in step.mask_positions}
    newest = frozenset((steps[k - 1].written or [steps[k - 1].predicted]) if k else [])
    written_at = {}
    for j, step in enumerate(steps[:k] if steps[k].written is not None else []):
        written_at.update({p: j + 1 for p in step.written})
        for p in step.remasked or []:
            written_at.pop(p, None)
    return blanks, newest, written_at


def _kept_line(step, agrees: str) -> str:
    """What the step wrote: its token, or (several a step) its tokens, and those masked again."""
    if not step.written_tokens or len(step.written_tokens) < 2 and not step.remasked:
        return f'kept <span class="demo-kept">{escape(repr(step.chosen))}</span> ({agrees})'
    tokens = " ".join(f'<span class="demo-kept">{escape(repr(t))}</span>' for t in step.written_tokens)
    again = (f' · masked again: {len(step.remasked)} token{"s" if len(step.remasked) > 1 else ""} (struck '
             "through), surer guesses took their turn" if step.remasked else "")
    surest = f" · surest guess {step.surest:.2f}" if step.surest is not None else ""
    return (f"wrote {len(step.written_tokens)}: {tokens} (the top guesses shown are the leftmost one's)"
            f"{surest}{again}")


def _written_counts(steps) -> list[int]:
    """Any-order writing: per step, the tokens written by its end (a token masked again is not)."""
    written, counts = set(), []
    for step in steps:
        written = (written | set(step.written or [])) - set(step.remasked or [])
        counts.append(len(written))
    return counts


def _frame(steps, k: int, written: list[int] | None) -> str:
    step = steps[k]
    blanks, newest, written_at = _filled(steps, k)
    top_token = step.top[0][0] if step.top else None
    if top_token == step.chosen:
        agrees = "its top guess"
    elif step.beams is not None:
        agrees = "not its top guess: beam search keeps the likeliest whole text, not each step's likeliest token"
    else:
        agrees = "not its top guess: sampled, with the guesses' probabilities as the odds"
    # the rows recorded at step k+1 are the hypotheses that step k left alive
    if step.beams is None:
        beams = ""
    elif k + 1 < len(steps):
        beams = _beams(steps[k + 1].beams)
    else:
        beams = '<div class="demo-beams">After the last step, the best beam is the output.</div>'
    hidden = " hidden" if k else ""
    # any-order writing counts its own steps (passes) and the tokens written by each: the page's
    # counter says the same (ENGINE_JS reads data-written)
    counted = f' data-written="{written[k]}"' if written else ""
    tokens = f" · {written[k]} of {written[-1]} tokens written" if written else ""
    return (f'<div class="demo-step" data-step="{k}"{counted}{hidden}><div class="demo-step-head">Step {k + 1} of '
            f'{len(steps)}{tokens}{_refresh(step)}</div>{_work(steps, k)}{_window(step, blanks, newest, written_at)}'
            f'<div class="demo-kept-line">{_kept_line(step, agrees)}</div>{_guesses(step)}{beams}</div>')


def _controls(n: int, position: str) -> str:
    speeds = "".join(f'<option value="{ms}"{" selected" if name == "normal" else ""}>{name}</option>'
                     for name, ms in SPEEDS)
    return ('<div class="demo-player-controls">'
            '<button type="button" class="demo-play" data-action="play">▶ Play</button>'
            '<button type="button" data-action="prev" aria-label="previous step">◀</button>'
            '<button type="button" data-action="next" aria-label="next step">▶</button>'
            f'<input type="range" class="demo-scrub" min="0" max="{n - 1}" value="0" step="1" '
            'aria-label="step">'
            f'<span class="demo-player-pos" aria-live="polite">{position}</span>'
            f'<select class="demo-speed" aria-label="speed">{speeds}</select></div>')


LANES = {"masked": ("Masked LM", "appends [MASK], padding masks and the end token; predicts the first mask"),
         "causal": ("Causal LM", "predicts the next token from the text on its left"),
         "infill": ("Masked LM", "fills the blanks one token per step, in the order chosen, reading both sides"),
         "previous": ("Masked LM, previous run", "the run before this one, step beside step"),
         "any_order": ("Masked LM, any order", "fills a block of masks after the text, several tokens a step, "
                       "surest first (masked diffusion); a small number marks the step that wrote each token")}


# On a phone the lanes of a run cannot stand side by side: a switch above them shows one lane at a
# time, all at the group's step (they move together), with its controls. Which lanes a group can
# have, first the one shown first; a lane the run lacks has no button (style.css).
SWITCHES = {"gen": [("masked", "Paper's way"), ("any_order", "Any order"), ("previous", "Previous run"),
                    ("causal", "Causal LM")],
            "fill": [("infill", "Masked LM"), ("causal", "Causal LM")]}

SWITCH_JS = """
const row = () => document.getElementById(element.querySelector('.demo-lane-switch').dataset.lanes);
const choose = (lane) => {
  const r = row();
  if (r) r.dataset.shown = lane;
  element.querySelectorAll('button').forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.lane === lane)));
};
element.addEventListener('click', (e) => { const b = e.target.closest('button[data-lane]'); if (b) choose(b.dataset.lane); });
choose(element.querySelector('button[data-lane]').dataset.lane);
"""


def lane_switch(group: str, lanes_id: str) -> gr.HTML:
    """The switch of a group's lanes (shown on narrow screens only, style.css); ``lanes_id``: the
    elem_id of the row that holds the group's lanes, each in a column of class ``demo-lane``."""
    buttons = "".join(f'<button type="button" data-lane="{lane}" aria-pressed="false">{escape(name)}</button>'
                      for lane, name in SWITCHES[group])
    return gr.HTML(f'<div class="demo-lane-switch" role="group" aria-label="lane shown" data-lanes="{lanes_id}">'
                   f'{buttons}</div>', elem_id=f"{group}-lane-switch", js_on_load=SWITCH_JS)


def run_id(*parts) -> str:
    """A run's name for its player (the page starts a new run's player at step 1)."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def playback(steps, lane: str, run: str = "", note: str | None = None, group: str = "gen") -> str:
    """A generation's or an infilling's steps as a player's HTML (an empty string for no steps).
    ``lane``: "masked", "causal", "infill" or "previous"; ``group``: the players that move together;
    ``run`` (``run_id``) tells the page a new run arrived (the player starts over);
    ``note``: a line under the lane's title (why the newline marker's tokens appear, or what changed)."""
    if not steps:
        return ""
    title, how = LANES[lane]
    # (the lane's note stays on a phone, where the line on how the lane writes is hidden)
    marker = f'<div class="demo-lane-how demo-lane-said">{escape(note)}</div>' if note else ""
    written = _written_counts(steps) if lane == "any_order" else None
    tokens, position = "", f"step 1 of {len(steps)}"
    if written:
        tokens, position = f' data-tokens="{written[-1]}"', f"{position} · {written[0]} of {written[-1]} tokens written"
    return (f'<div class="demo-player" data-group="{escape(group)}" data-lane="{escape(lane)}" '
            f'data-run="{escape(run)}"{tokens}><div class="demo-player-title">{title}</div>'
            f'<div class="demo-lane-how">{how}</div>{marker}' + _controls(len(steps), position)
            + '<div class="demo-lane-note">Follows the masked LM\'s player.</div>'
            + "".join(_frame(steps, k, written) for k in range(len(steps))) + "</div>")


# The appended-mask window, two steps of it, in the playback's colours (style.css gives the
# rects the same variables as the tokens): the prompt, the mask predicted, kept, one more mask.
DIAGRAM_ROWS = [
    ("step 1: predicts 'mat'", [("[CLS]", "end"), ("The", "prompt"), ("cat", "prompt"), ("sat", "prompt"),
                                ("on", "prompt"), ("the", "prompt"), ("[MASK]", "mask-predicted"),
                                ("[MASK]", "mask"), ("[MASK]", "mask"), ("[SEP]", "end")]),
    ("step 2: keeps 'mat', predicts '.'", [("[CLS]", "end"), ("The", "prompt"), ("cat", "prompt"),
                                          ("sat", "prompt"), ("on", "prompt"), ("the", "prompt"),
                                          ("mat", "written"), ("[MASK]", "mask-predicted"), ("[MASK]", "mask"),
                                          ("[MASK]", "mask"), ("[SEP]", "end")]),
]
CELL, GAP, ROW = 56, 4, 52  # pixels of one token box, the gap between boxes, one row with its note


def window_diagram() -> str:
    """The diagram as inline SVG (scaled to the page's width)."""
    width = max(len(tokens) for _, tokens in DIAGRAM_ROWS) * (CELL + GAP)
    parts = []
    for r, (note, tokens) in enumerate(DIAGRAM_ROWS):
        y = r * ROW
        parts.append(f'<text class="demo-diagram-note" x="0" y="{y + 12}">{escape(note)}</text>')
        for i, (text, kind) in enumerate(tokens):
            x = i * (CELL + GAP)
            parts.append(f'<rect class="{kind}" x="{x}" y="{y + 18}" width="{CELL}" height="24" rx="3"/>'
                         f'<text x="{x + CELL / 2}" y="{y + 34}" text-anchor="middle">{escape(text)}</text>')
    return (f'<svg class="demo-diagram" viewBox="-1 -1 {width + 2} {len(DIAGRAM_ROWS) * ROW + 2}" role="img" '
            'aria-label="The masked LM\'s window at two steps: the prompt, then the mask it predicts '
            'followed by two padding masks and the end token; the predicted token is kept and the masks '
            'move one place right.">' + "".join(parts) + "</svg>")


# The players' one owner, shared by every player on the page (and the link keeper below): per group
# of players, the runs it shows, the step, the timer. A group starts over when the runs its lanes
# show change, checked when a lane's value arrives (Gradio's `watch`) and again before every control
# acts: Gradio patches a new run into the old player's elements, so nothing else marks it.
ENGINE_JS = """
const demo = (window.demoPlayback = window.demoPlayback || (() => {
  const groups = {};
  let saved = {}, send = null;  // the steps a link kept; how the page tells the server its steps
  const lanes = (g) => [...document.querySelectorAll(`.demo-player[data-group="${g}"]`)];
  const of = (g) => groups[g] || (groups[g] = { key: null, lead: null, at: 0, last: 0, timer: null });
  function show(g, k) {
    const all = lanes(g), s = of(g);
    const last = Math.max(0, ...all.map((p) => p.querySelectorAll('.demo-step').length - 1));
    k = Math.max(0, Math.min(k, last));
    for (const p of all) {
      const frames = p.querySelectorAll('.demo-step');
      const j = Math.min(k, frames.length - 1);
      frames.forEach((f, i) => { f.hidden = i !== j; });
      const scrub = p.querySelector('.demo-scrub');
      if (scrub) { scrub.max = last; scrub.value = k; }
      const pos = p.querySelector('.demo-player-pos');
      if (pos && p.dataset.tokens !== undefined)  // any order: its own steps, and the tokens written
        pos.textContent = `step ${j + 1} of ${frames.length} · ${frames[j].dataset.written} of ${p.dataset.tokens} `
          + 'tokens written' + (k > j ? ' (done in fewer steps)' : '');
      else if (pos) pos.textContent = `step ${k + 1} of ${last + 1}` + (k > j ? ' (this model stopped earlier)' : '');
    }
    s.at = k; s.last = last;
  }
  function rest() {  // the server keeps where each group rests, for a link to the page
    const steps = {};
    for (const [g, s] of Object.entries(groups)) if (s.key !== null) steps[g] = { key: s.key, at: s.at };
    if (send && Object.keys(steps).length) send(steps);
  }
  function halt(g) {
    const s = of(g);
    if (s.timer) { clearInterval(s.timer); s.timer = null; }
    lanes(g).forEach((p) => p.querySelectorAll('.demo-play').forEach((b) => { b.textContent = '▶ Play'; }));
  }
  function tick(g) { const s = of(g); if (s.at >= s.last) { halt(g); rest(); } else show(g, s.at + 1); }
  function play(g, ms) {
    const s = of(g);
    halt(g);
    if (s.at >= s.last) show(g, 0);
    s.timer = setInterval(() => tick(g), ms);
    lanes(g).forEach((p) => p.querySelectorAll('.demo-play').forEach((b) => { b.textContent = '❚❚ Pause'; }));
  }
  function pause(g) { halt(g); rest(); }
  function move(g, k) { halt(g); show(g, k); rest(); }
  function speed(g, ms) {  // every lane's picker says it; a playing group changes pace now
    const s = of(g);
    lanes(g).forEach((p) => p.querySelectorAll('.demo-speed').forEach((e) => { e.value = String(ms); }));
    if (s.timer) { clearInterval(s.timer); s.timer = setInterval(() => tick(g), ms); }
  }
  // A new run of the leading lane (the first on the page): its first step, or the step a link
  // kept for these runs. A lane that arrives later beside the same leading run (the causal LM's
  // fill, the previous run) joins at the step shown, so a press made meanwhile stands.
  function sync(g) {
    const s = of(g), all = lanes(g), key = all.map((p) => p.dataset.run).sort().join(',');
    if (key === s.key) return;
    const lead = all.length ? all[0].dataset.run : null, joins = s.key !== null && lead === s.lead;
    s.key = key; s.lead = lead;
    if (saved[g] && saved[g].key === key) { halt(g); show(g, saved[g].at); }
    else if (joins) show(g, s.at);
    else { halt(g); show(g, 0); }
    rest();
  }
  function keep(sender, steps) {
    send = sender;
    saved = steps || {};
    for (const [g, s] of Object.entries(groups)) if (saved[g] && saved[g].key === s.key) show(g, saved[g].at);
    rest();
  }
  return { of, play, pause, move, speed, sync, keep };
})());
"""

# One player's controls, wired to the owner above.
PLAYER_JS = ENGINE_JS + """
let group = null;
const here = () => { const p = element.querySelector('.demo-player'); if (p) group = p.dataset.group; return group; };
element.addEventListener('click', (e) => {
  const button = e.target.closest('[data-action]');
  const player = button && button.closest('.demo-player');
  if (!player) return;
  const g = player.dataset.group;
  demo.sync(g);
  const s = demo.of(g);
  if (button.dataset.action !== 'play') demo.move(g, s.at + (button.dataset.action === 'next' ? 1 : -1));
  else if (s.timer) demo.pause(g);
  else demo.play(g, +player.querySelector('.demo-speed').value);
});
element.addEventListener('input', (e) => {
  if (!e.target.classList.contains('demo-scrub')) return;
  const g = e.target.closest('.demo-player').dataset.group;
  demo.sync(g);
  demo.move(g, +e.target.value);
});
element.addEventListener('change', (e) => {
  if (!e.target.classList.contains('demo-speed')) return;
  demo.speed(e.target.closest('.demo-player').dataset.group, +e.target.value);
});
watch('value', () => { if (here()) demo.sync(group); });
if (here()) demo.sync(group);
"""

# The link keeper: hands the owner the steps a link kept, and reports the steps back to the server.
KEEPER_JS = ENGINE_JS + """
let kept = {};
try { kept = JSON.parse(element.querySelector('[data-steps]').dataset.steps); } catch (err) { kept = {}; }
demo.keep((steps) => trigger('input', { steps }), kept);
"""

GROUP = re.compile(r"[a-z]{1,16}")
KEY = re.compile(r"[0-9a-f]{0,40}(,[0-9a-f]{0,40}){0,3}")  # the run ids (run_id) of a group's lanes
MAX_STEP = 100_000


def kept_steps(steps) -> dict:
    """Of the steps the page reported (``{group: {"key": runs, "at": step}}``), the well-formed
    ones: the report comes from the browser, and a link shows it to whoever opens it."""
    if not isinstance(steps, dict):
        return {}
    kept = {}
    for group, rest in list(steps.items())[:8]:
        if not (isinstance(group, str) and GROUP.fullmatch(group) and isinstance(rest, dict)):
            continue
        key, at = rest.get("key"), rest.get("at")
        if isinstance(key, str) and KEY.fullmatch(key) and type(at) is int and 0 <= at <= MAX_STEP:
            kept[group] = {"key": key, "at": at}
    return kept


def steps_html(steps) -> str:
    """The link keeper's value: the kept steps, as data for KEEPER_JS."""
    return f'<div class="demo-playback-steps" data-steps="{escape(json.dumps(kept_steps(steps)))}"></div>'


def link_keeper() -> gr.HTML:
    """A hidden component that keeps where each player rests, so that a link to the page (Gradio's
    deep link keeps every component's value) reopens the players at those steps."""
    keeper = gr.HTML(steps_html({}), elem_id="playback-steps", visible="hidden", js_on_load=KEEPER_JS)

    def report(event: gr.EventData) -> str:
        try:
            steps = event.steps
        except (AttributeError, TypeError):  # a report without steps (none, or not a dict)
            steps = None
        return steps_html(steps)

    # the last report wins: sent in order, one at a time; it runs no model, so not queued
    keeper.input(report, None, keeper, api_visibility="private", queue=False, show_progress="hidden",
                 trigger_mode="always_last")
    return keeper
