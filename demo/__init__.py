"""MLM-ICL: masked language models as generative in-context learners.

The core (everything in this package except ``demo.ui``) never imports gradio. The engine:
``settings`` (every setting, as dataclasses), ``sources`` and ``models`` (loading), ``families``,
``text`` (the text conventions, applied by the engines), ``pll`` (scoring), ``mlm_decoder``,
``generation``, ``constraints`` and ``trace`` (generating). Then ``tasks`` (task definitions as
YAML data), ``fewshot``, ``metrics``, ``evaluate``, ``results``; ``haystack`` (the length probe),
``plots``, ``catalog``, ``cli`` (the ``mlm-icl`` command) and ``ui`` (the Gradio app).
"""
