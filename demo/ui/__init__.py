"""Gradio wiring only: every computation lives in the floors below (``demo.app`` and down).

- ``app``           the page: five tabs, the queue, launching
- ``common``        messages in the page, model pickers, widgets, the handler wrapper, the GPU slot
- ``outputs``       each event's outputs as one named record
- ``sides``         the masked and causal sides every tab compares: their pickers and output columns
- ``settings_form`` a page's values as the core's settings, each by its field's type
- ``prompting``     the Prompting tab: generation, masked vs causal
- ``infill_tab``    the Infill tab: a blank in the middle, masked vs causal
- ``playback``      decoding playback: the steps of a generation as frames of a player
- ``scroll_hint``   boxes that scroll sideways say so
- ``ranking``       the Ranking tab: PLL and causal scores, heatmaps
- ``pll_copies``    one candidate's PLL masked copies as rows, and the causal LM's pass, as HTML
- ``length_probe``  the Length probe tab: needle grids
- ``mask_sweep``    how many masks? in the Length probe tab: a task at each number of masks
- ``results_tab``   the Results tab: published tables next to our runs
- ``lesson``        the lesson above the tabs: its steps, each loads its tab's inputs
- ``startup_check`` the start-up check of the default models, above the tabs
- ``gradio_mends``  the one place that reaches inside Gradio: missing API inputs, MCP tool calls
"""
