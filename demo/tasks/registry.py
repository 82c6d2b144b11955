"""The task registry: tasks read from YAML files, and their examples read from files or the Hub.

``specs/*.yaml`` holds the papers' tasks, one file per task group: a ``defaults`` mapping shared
by the group and a ``tasks`` list, each entry a :class:`demo.tasks.schema.Task` (its field
names, with ``data``/``demos`` as :class:`Source` mappings). Your own tasks are files of the same
shape in a folder of yours, added with :func:`add_task_dir` (``mlm-icl evaluate --tasks-dir``);
their relative ``local`` paths start at that folder.

A task file is checked completely when it is read, before any model loads: its fields, its
converter's arguments and its metrics (against the task's kind) for every file; for your own
files also their local data, converted, against the template (every placeholder a field of every
example). A Hub-only split is checked when it is first loaded (``mlm-icl evaluate`` loads every
requested split before the model). Each error is one sentence naming the file, the task and the
field.

Data root of the package's tasks: the run's ``data_root`` (the command line fills it from
``$DEMO_DATA_ROOT``), else ``../shared/data`` beside the repository. Local files win; without one
the task loads from the Hub (parquet conversion of the dataset, read with pandas, which needs
``pyarrow``); with neither, a ValueError says what is missing. A local ``jsonl`` or ``json`` file
is read by what it holds (a JSON list of records, or one record per line), whatever its
extension or ``format`` says.
"""

import difflib
import json
from pathlib import Path

import yaml

from ..paths import ASSETS, SHARED_DATA, SPECS
from ..user_text import quoted
from .converters import CONVERTERS, check_arguments
from .schema import Example, Source, Task, check_template

PRESETS = ASSETS / "presets" / "task_examples.json"


# ---------------------------------------------------------------- task files


def read_task_file(path: str | Path, base: str | Path | None = None) -> list[Task]:
    """The tasks of one YAML file; ``base``: the folder relative data paths start at (your own
    files: their local data is read and checked against the template now)."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"Cannot read the task file {path}: {err}") from None
    if not isinstance(document, dict) or not isinstance(document.get("tasks"), list):
        raise ValueError(f"{path}: a task file holds a 'tasks' list (and optional 'defaults').")
    defaults = document.get("defaults") or {}
    tasks = []
    for number, entry in enumerate(document["tasks"], start=1):
        spec = {**defaults, **(entry or {})}
        name = spec.get("name", f"#{number}")
        unknown = sorted(set(spec) - Task.field_names())
        if unknown:
            raise ValueError(f"{path}, task {name!r}: unknown field(s) {unknown}; a task has "
                             f"{sorted(Task.field_names() - {'base'})}.")
        spec.setdefault("title", name)
        spec.setdefault("group", path.stem)  # the file names the group unless it says otherwise
        spec.setdefault("demos", None)
        missing = sorted(Task.required_fields() - set(spec))
        if missing:
            raise ValueError(f"{path}, task {name!r}: give the field(s) {', '.join(missing)}.")
        try:
            task = _task(spec, name, base)
        except (TypeError, ValueError) as err:  # TypeError: a value of the wrong type
            raise ValueError(f"{path}, task {name!r}: {str(err).removeprefix(f'Task {name!r}: ')}") from None
        tasks.append(task)
    return tasks


def _task(spec: dict, name: str, base: str | Path | None) -> Task:
    """One entry of a task file as a checked Task (ValueError: a sentence naming the field)."""
    for which in ("data", "demos"):
        if spec[which] is not None and not isinstance(spec[which], dict):
            raise ValueError(f"{which}: give a mapping such as {{local: file.jsonl}}, not "
                             f"{spec[which]!r}.")
    if not isinstance(spec["metrics"], list):
        raise ValueError(f"metrics: give a list such as [accuracy], not {spec['metrics']!r}.")
    if not isinstance(spec.get("convert_args", {}), dict):
        raise ValueError(f"convert_args: give a mapping such as {{marker: \"_\"}}, not "
                         f"{spec['convert_args']!r}.")
    try:
        spec["data"] = Source(**spec["data"])
        spec["demos"] = Source(**spec["demos"]) if spec["demos"] else None
    except TypeError as err:  # an unknown key inside data: {...}
        raise ValueError(f"data/demos: {err}; a source has "
                         f"{', '.join(Source.__dataclass_fields__)}.") from None
    spec["metrics"] = tuple(spec["metrics"])
    if base is not None:
        spec["base"] = str(Path(base).resolve())
    task = Task(**spec)
    if task.convert not in CONVERTERS:
        raise ValueError(f"convert: no converter named {task.convert!r}; known: "
                         f"{', '.join(sorted(CONVERTERS))}.")
    check_arguments(task.convert, task.convert_args)
    if base is not None:
        _check_local_data(task)
    return task


def _check_local_data(task: Task) -> None:
    """Convert the task's local splits now, which checks them (records, converter, template)."""
    for which in ("data", "demos"):
        source = getattr(task, which)
        if source is None or (source.hub_id and not (Path(task.base) / (source.local or "")).is_file()):
            continue  # a Hub split is checked when it is loaded
        load_examples(task, which)


def _register(tasks: list[Task], where: Path) -> None:
    for task in tasks:
        known = TASKS.get(task.name)
        if known is not None and known != task:
            raise ValueError(f"{where} defines task {task.name!r}, which already exists with a "
                             f"different definition; give yours another name.")
        TASKS[task.name] = task


TASKS: dict[str, Task] = {}
for _file in sorted(SPECS.glob("*.yaml")):
    _register(read_task_file(_file), _file)


def add_task_dir(folder: str | Path) -> list[Task]:
    """Register every task of the ``*.yaml`` files in ``folder`` (data paths relative to it)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"Task folder {folder} does not exist.")
    added = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        tasks = read_task_file(path, base=folder)
        _register(tasks, path)
        added += tasks
    if not added:
        raise ValueError(f"Task folder {folder} holds no task files (*.yaml or *.yml).")
    return added


def all_tasks() -> list[Task]:
    return list(TASKS.values())


def get_task(name: str) -> Task:
    if name not in TASKS:
        close = difflib.get_close_matches(name.lower().replace("-", "_"), TASKS, n=5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ValueError(f"Unknown task '{quoted(str(name))}'.{hint} List them with `mlm-icl evaluate --list`.")
    return TASKS[name]


# ---------------------------------------------------------------- examples


def data_root(path: str | Path | None = None) -> Path:
    """The given folder (a run's ``data_root``), else ../shared/data beside the repository."""
    return Path(path or SHARED_DATA).expanduser()


def load_examples(task: Task | str, which: str = "data", root: str | Path | None = None) -> list[Example]:
    """Converted examples of the evaluated split (which="data") or the demonstration pool
    (which="demos"; the evaluated split itself when the task has no separate pool)."""
    task = get_task(task) if isinstance(task, str) else task
    source = task.data if which == "data" else (task.demos or task.data)
    folder = Path(task.base) if task.base else data_root(root)
    local = folder / source.local if source.local else None
    edited = local.stat().st_mtime_ns if local is not None and local.is_file() else None
    key = (repr(task), source, str(folder), edited)  # a Task holds dicts: its repr is its identity
    if key not in _EXAMPLES:
        if len(_EXAMPLES) >= 32:  # a few splits stay converted; the oldest goes first
            _EXAMPLES.pop(next(iter(_EXAMPLES)))
        _EXAMPLES[key] = _convert(task, source, folder, which)
    return list(_EXAMPLES[key])


_EXAMPLES: dict[tuple, tuple[Example, ...]] = {}


def _convert(task: Task, source: Source, root: Path, which: str) -> tuple[Example, ...]:
    records, where = _read_records(task, source, root, which)
    try:
        examples = CONVERTERS[task.convert](records, root, **task.convert_args)
    except KeyError as err:
        keys = sorted(records[0]) if records else []
        raise ValueError(
            f"Task {task.name!r}: {which}: the records in {where} have no field {err}; their fields "
            f"are {keys}. They do not match this task's converter ({task.convert!r}) and template "
            f"{task.template!r}.") from err
    except TypeError as err:  # convert_args that the converter does not take
        raise ValueError(f"Task {task.name!r}: converter {task.convert!r}: {err}.") from err
    except ValueError as err:  # a converter's own sentence about a record
        raise ValueError(f"Task {task.name!r}: {which}: {where}: {err}") from None
    if not examples:
        raise ValueError(f"Task {task.name!r}: {which}: {where} holds no usable examples.")
    check_template(task, examples)
    if task.kind == "choice" and not all(e.candidates and e.labels for e in examples):
        raise ValueError(f"Task {task.name!r}: kind: a ranked task (choice) needs candidates and "
                         f"a label in every example, and converter {task.convert!r} gave some "
                         f"without (convert: fields names them in convert_args: {{candidates: "
                         f"FIELD, label: FIELD}}).")
    return tuple(examples)


def preset_examples(task: Task | str) -> list[Example]:
    """The few examples shipped in assets/presets (COPA, Winograd), usable without any data root."""
    task = get_task(task) if isinstance(task, str) else task
    presets = json.loads(PRESETS.read_text(encoding="utf-8"))
    if task.name not in presets:
        shipped = [k for k in presets if k != "about"]
        raise ValueError(f"No preset examples for {task.name!r}; the app ships some for: "
                         f"{', '.join(shipped)}.")
    examples = CONVERTERS[task.convert](presets[task.name], PRESETS.parent, **task.convert_args)
    check_template(task, examples)
    return examples


def _read_records(task: Task, source: Source, root: Path, which: str) -> tuple[list[dict], str]:
    if source.local:
        path = root / source.local
        if path.is_file():
            try:
                return _read_local(path, source.format), f"'{path}'"
            except ValueError as err:
                raise ValueError(f"Task {task.name!r}: {which}: {err}") from None
    if source.hub_id:
        return _read_hub(task, source, root), f"Hub dataset '{source.hub_id}'"
    hint = ("Put it beside the task file." if task.base else
            f"Pass --data-root (or set DEMO_DATA_ROOT) to the folder holding '{source.local}'.")
    raise ValueError(f"Task {task.name!r} needs the local file '{root / source.local}', which does "
                     f"not exist, and has no Hub copy. {hint}")


def _read_local(path: Path, fmt: str) -> list[dict]:
    """The records of a local file; jsonl and json by what the file holds (a JSON list, or one
    JSON record per line), since a file's name or its task's ``format`` may not say it right."""
    try:
        if fmt == "csv":
            import pandas as pd
            return pd.read_csv(path, keep_default_na=False).to_dict("records")
        text = path.read_text(encoding="utf-8")
        if fmt == "json_examples":
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("examples"), dict):
                raise ValueError('format json_examples is {"examples": {"1": {...}, ...}}')
            records = [data["examples"][k] for k in sorted(data["examples"], key=int)]
        else:
            records = _json_records(text)
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError and pandas' errors included
        raise ValueError(f"'{path}' is not valid {fmt}: {err}") from None
    for number, record in enumerate(records):
        if not isinstance(record, dict):
            raise ValueError(
                f"'{path}': record {number} is {type(record).__name__} {_shorten(record)}, not an "
                f"object of named fields; a data file holds one JSON object per line (jsonl) or a "
                f"JSON list of objects (json).")
    return records


def _json_records(text: str) -> list:
    """A JSON list of records, a file of one record, or one JSON record per line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        pass  # more than one JSON value: one per line
    else:
        return data if isinstance(data, list) else [data]
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"line {number}: {err}") from None
    return records


def _shorten(value, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[:width - 3] + "..."


def _read_hub(task: Task, source: Source, root: Path) -> list[dict]:
    """Rows of a Hub dataset split from its parquet conversion (refs/convert/parquet)."""
    where = (f"'{source.hub_id}'" + (f" config '{source.hub_config}'" if source.hub_config else "")
             + f" split '{source.hub_split}'")
    local_hint = (f" There is no local copy at '{root / source.local}'." if source.local
                  else " This task has no local copy here.")
    from ..engine.sources import hub_switched_off
    switched_off = hub_switched_off()
    if switched_off:
        raise ValueError(f"Task {task.name!r}: {where} is on the Hugging Face Hub, and Hub access "
                         f"is switched off ({switched_off} is set).{local_hint}")
    try:
        import pandas as pd
        from huggingface_hub import HfApi, hf_hub_download
        config = source.hub_config or "default"
        files = HfApi().list_repo_files(source.hub_id, repo_type="dataset", revision="refs/convert/parquet")
        wanted = sorted(f for f in files if f.startswith(config + "/") and f.endswith(".parquet")
                        and (f"/{source.hub_split}/" in f or f.endswith(f"-{source.hub_split}.parquet")))
        if not wanted:
            raise ValueError(f"no parquet files for that config and split (files: {files[:10]})")
        frames = [pd.read_parquet(hf_hub_download(source.hub_id, f, repo_type="dataset",
                                                  revision="refs/convert/parquet")) for f in wanted]
    except ImportError as err:
        raise ValueError(f"Task {task.name!r}: reading {where} from the Hub needs {err.name} "
                         f"(pip install pyarrow).{local_hint}") from err
    except Exception as err:  # offline, unknown id, gated dataset, ...
        raise ValueError(
            f"Task {task.name!r}: could not load {where} from the Hugging Face Hub "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}).{local_hint} "
            f"Connect to the internet, or put the data under the data root (--data-root).") from err
    return [_plain(row) for frame in frames for row in frame.to_dict("records")]


def _plain(value):
    """numpy arrays and scalars from parquet -> lists and Python scalars (what converters expect)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
