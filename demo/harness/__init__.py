"""Our engines inside lm-evaluation-harness: a command line above the app floor, like ``mlm-icl``,
so a model name goes through the deployment's one door (``demo.app.deployment``).

- ``model``     our engines as lm-eval's ``mlm`` model (accelerate, device maps)
- ``model_args`` lm-eval's ``--model_args`` and generation kwargs as our settings
- ``__main__``  ``python -m demo.harness``: lm-eval's own command line with ``mlm`` registered
"""
