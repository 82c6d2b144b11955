"""Boxes that scroll sideways say so. A figure with a cell per token, the masked copies' table and
the fills' ranking keep their own width and scroll inside their box on a narrow screen (never
squeezed or cut, style.css); a student on a phone sees the cut edge only. This marks, as the page
changes or turns, each such box whose content is wider than it, and the page writes a line under
it saying to swipe. Only a page script can tell: CSS cannot ask whether a box overflows."""

import gradio as gr

SCROLLING = ".demo-scroll-plot .js-plotly-plot, .demo-copies-scroll, .demo-fill-ranking"

HINT_JS = """
if (!window.demoScrollHints) {
  window.demoScrollHints = true;
  let queued = false;
  const mark = () => {  // a parent holding several boxes says so when any of them scrolls
    queued = false;
    const boxes = [...document.querySelectorAll('%s')];
    const scrolling = new Set(boxes.filter((b) => b.scrollWidth > b.clientWidth + 1).map((b) => b.parentElement));
    boxes.forEach((b) => b.parentElement.classList.toggle('demo-scrolls', scrolling.has(b.parentElement)));
  };
  const soon = () => { if (!queued) { queued = true; requestAnimationFrame(mark); } };
  new MutationObserver(soon).observe(document.body, { childList: true, subtree: true });
  window.addEventListener('resize', soon);
  soon();
}
""" % SCROLLING


def scroll_hints() -> gr.HTML:
    """The hidden component whose script marks the boxes that scroll (place it once on the page)."""
    return gr.HTML("", elem_id="scroll-hints", visible="hidden", js_on_load=HINT_JS)
