"""A dropdown opens wherever its box is tapped. Gradio opens one when its line of text (the input)
takes focus, and the rest of the box takes no tap: its padding, a phone's 44 px (style.css), a
multiselect's chips, the arrow; on a phone most of the box. A press anywhere else in the box
gives the input the focus, which opens the list; the chips' remove buttons keep their own press.

A page script, not a style: the input would have to grow over the whole box, which its text and a
multiselect's chips do not allow (an input stretched by padding has a box far larger than the one
drawn, which is where a pointer aimed at the input lands)."""

import gradio as gr

TAP_JS = """
if (!window.demoDropdownTaps) {
  window.demoDropdownTaps = true;
  document.addEventListener('mousedown', (event) => {
    const box = event.target.closest && event.target.closest('.wrap-inner');
    const input = box && box.querySelector(':scope > .secondary-wrap > input[role=combobox]');
    if (!input || input.disabled || event.target === input || event.target.closest('.token-remove')
        || input.getAttribute('aria-expanded') === 'true') return;  // (a press beside an open list closes it)
    event.preventDefault();  // (the press would take the focus to the box)
    if (document.activeElement === input) input.blur();  // focused with its list closed: a new focus opens it
    input.focus();
  }, true);
}
"""


def dropdown_taps() -> gr.HTML:
    """The hidden component whose script opens a dropdown from anywhere in its box (place it once
    on the page)."""
    return gr.HTML("", elem_id="dropdown-taps", visible="hidden", js_on_load=TAP_JS)
