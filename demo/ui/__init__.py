"""Gradio wiring only: every computation lives in the floors below (``demo.app`` and down).

- ``app``           the page: five tabs, the queue, launching
- ``common``        the deployment served, widgets, messages, the work line, a tab's help and parts
- ``handlers``      what every model-running handler gets: errors as messages, a visitor's share, the GPU slot
- ``loading``       the page's one way to load a model, and what a waiting request is told
- ``sharing``       identical requests answered once: a handler's answer shared by its identity
- ``turns``         model runs take turns, one kind at a time; a cancelled request never runs
- ``run_marker``    the page's end-of-run marker, which tests and lessons wait for
- ``pickers``       model pickers, the pair picker, the model note, DeBERTa's head
- ``presets``       a tab's presets, from assets/presets/
- ``reproduce_block`` the Reproduce block under a result: its Python call and command line
- ``outputs``       each event's outputs as one named record
- ``sides``         the masked and causal sides every tab compares: their pickers and output columns
- ``settings_form`` a setting's widget, and each endpoint declared once: its signature, docs, inputs, settings object
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
- ``warm_up``       the lesson ready before the class: every step computed at start-up
- ``startup_check`` the start-up check of the default models, above the tabs
- ``gradio_mends``  the one place that reaches inside Gradio: missing API inputs, MCP tool calls
"""
