"""Few-shot tasks as data: each task is an entry of a YAML file (``specs/`` for the papers' tasks,
a folder of yours for your own), read into :class:`Task` objects.

- ``schema``      Source, Task, Example; rendering an example with the task's template
- ``converters``  raw records -> Examples, registered by name (``convert: copa``)
- ``registry``    reading and checking task files, looking tasks up, loading their examples
- ``fewshot``     demonstrations drawn from a seed, and the few-shot prompt
- ``metrics``     the papers' metrics, registered by name (``metrics: [accuracy, k_best]``)
- ``specs/``      the papers' tasks, one file per task group

Adding a task is adding an entry to a YAML file; see the README ("Your own task").
"""

from .converters import CONVERTERS, converter
from .registry import (
                       TASKS,
                       add_task_dir,
                       all_tasks,
                       data_root,
                       get_task,
                       load_examples,
                       preset_examples,
                       read_task_file,
)
from .schema import Example, Source, Task, check_template, render, render_parts, render_query

__all__ = ["CONVERTERS", "TASKS", "Example", "Source", "Task", "add_task_dir", "all_tasks",
           "check_template", "converter", "data_root", "get_task", "load_examples",
           "preset_examples", "read_task_file", "render", "render_parts", "render_query"]
