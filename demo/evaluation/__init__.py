"""Evaluation: runs tasks and probes with the engine, keeps and compares the results.

- ``evaluate``       the resumable evaluator: a task, a model, settings -> rows and a summary
- ``results``        the papers' published tables next to our runs
- ``haystack``       the needle-in-a-haystack length probe
- ``model_check``    is a model read right? known answers and a task slice against the paper
- ``plots``          plotly figures shared by the app and the command line
- ``exports``        downloads: tidy tables, file names that say model, what and date
- ``data_parallel``  several processes (accelerate, torchrun): which share is whose, part files,
                     the merge in input order, resuming (``mlm-icl score`` and ``probe``)
- ``harness_tasks``  our tasks as lm-eval tasks (``mlm-icl export-tasks``; the model is ``demo.harness``)
"""
