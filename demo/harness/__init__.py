"""Our engines inside lm-evaluation-harness: a command line above the app floor, like ``mlm-icl``,
so a model name goes through the deployment's one door (``demo.app.deployment``).

- ``model``     our engines as lm-eval's ``mlm`` model (``--model_args``, accelerate, device maps)
- ``__main__``  ``python -m demo.harness``: lm-eval's own command line with ``mlm`` registered
"""
