"""Evaluation: runs tasks and probes with the engine, keeps and compares the results.

- ``evaluate``       the resumable evaluator: a task, a model, settings -> rows and a summary
- ``results``        the papers' published tables next to our runs
- ``haystack``       the needle-in-a-haystack length probe
- ``mask_sweep``     how many masks? a task at each number of padding or right masks
- ``model_check``    is a model read right? known answers and a task slice against the paper
- ``plots``          plotly figures shared by the app and the command line
- ``figure_fit``     a figure's text wrapped to fit a phone: titles and legend entries, the legend's height
- ``exports``        downloads: tidy tables, file names that say model, what and date
- ``runs``           what ``mlm-icl score``, ``probe`` and ``evaluate`` run: settings in, files out
- ``identity``       what a run's numbers depend on: names its files, part files and rows
- ``rows``           result tables on disk: a run's new rows in place of its old ones
- ``resumable``      a run in chunks saved as they finish (part files, fingerprint), resumed,
                     merged by rank 0 into the output (``score``, ``probe``, the mask sweep, ``evaluate``)
- ``data_parallel``  several processes (accelerate, torchrun): which process this is, whose share is what
- ``harness_tasks``  our tasks as lm-eval tasks (``mlm-icl export-tasks``; the model is ``demo.harness``)
"""
