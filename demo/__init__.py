"""MLM-ICL: masked language models as generative in-context learners.

The core (everything in this package except ``demo.ui``) never imports gradio:

- ``families``   per-family facts (special tokens, positions, padding masks, newlines)
- ``models``     ``load_model``: one entry point for masked and causal LMs, with a bounded cache
- ``text``       whitespace normalisation and the paper's newline encoding
- ``pll``        the scoring engine (PLL variants, causal log-likelihood, per-token scores)
- ``generation`` left-to-right generation with an MLM (and a causal LM) through ``generate()``
- ``haystack``   the needle-in-a-haystack length probe
- ``tasks``      the few-shot task registry; ``metrics`` and ``evaluate`` run it
- ``results``    the papers' published tables next to our own runs
- ``plots``      plotly figures shared by the app and the command line
"""
