"""MLM-ICL: masked language models as generative in-context learners.

The package is built in floors; each imports only the floors below it (pyproject.toml's
import-linter contracts, checked by the tests):

- ``settings``    every setting as a dataclass (``declared`` reads what a field declares,
                  ``refusals`` says a refused value in words, ``user_text`` quotes what people
                  send; ``evaluation_settings`` are evaluation's, ``app_settings`` a deployment's
                  ``DEMO_*`` variables), and
                  ``paths``, where the packaged files are (the ground every floor stands on)
- ``engine/``     loading and running masked and causal LMs: scoring, generating
- ``tasks/``      few-shot tasks as data (YAML), demonstrations, metrics
- ``evaluation/`` the evaluator, the length probe, results, plots, our tasks for lm-eval
- ``app/``        a deployment's rules: settings read once, catalog, budget, limits
- ``ui/``, ``cli``, ``harness/``  the Gradio app, the ``mlm-icl`` command line and our model
  inside lm-evaluation-harness (only ``ui`` imports gradio)
"""
