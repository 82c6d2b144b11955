"""The Python call and the command line that reproduce a result, written from its settings object.

Every result in the app carries both (a "Reproduce" block), so a teacher or a student can redo
it in a notebook or a terminal. They are generated here from the same settings dataclass the
handler ran with, listing only what differs from the defaults; nothing is formatted per tab.

    python_call("generate", "smollm2", "causal", GenerationSettings(max_new_tokens=8), prompt="Hi")
    command_line("generate", "smollm2", "causal", GenerationSettings(max_new_tokens=8), prompt="Hi")
"""

import dataclasses
import json
import shlex

# What each engine is called with: (module, function, the line that prints its result).
ENGINES = {
    "generate": ("demo.engine.generation", "generate", "print(result.text)"),
    "score": ("demo.engine.pll", "score_candidates",
              'for s in result:\n    print(f"{s.score:.4f}  {s.candidate}")'),
    "probe": ("demo.evaluation.haystack", "run_grid", "print(result)"),
    "results": ("demo.evaluation.results", "filter_results", "print(result.to_string())"),  # no model
    "infill": ("demo.engine.infill", "infill", "print(result.filled)"),
}
CAUSAL_ENGINES = {  # where a causal LM runs another function than a masked LM
    "infill": ("demo.engine.infill_causal", "causal_infill", "print(result.filled)"),
}


def non_defaults(settings) -> dict:
    """The fields of a settings dataclass that differ from their defaults, in field order."""
    changed = {}
    for f in dataclasses.fields(settings):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        value = getattr(settings, f.name)
        if value != default:
            changed[f.name] = value
    return changed


def python_call(command: str, model: str, kind: str | None, settings, emd: str = "auto", **inputs) -> str:
    """A Python snippet: load the model (``emd`` as ``ModelSettings.emd``), run the engine on
    ``inputs`` with ``settings``, print."""
    module, function, show = (CAUSAL_ENGINES.get(command) if kind == "causal" else None) or ENGINES[command]
    cls = type(settings).__name__
    arguments = ", ".join(f"{k}={v!r}" for k, v in non_defaults(settings).items())
    inputs_text = "".join(f"{value!r}, " for value in inputs.values())
    if model is None:
        return (f"from {module} import {function}\nfrom demo.settings import {cls}\n\n"
                f"result = {function}({inputs_text}{cls}({arguments}))\n{show}\n")
    kind_text = (f", kind={kind!r}" if kind else "") + (f", emd={emd!r}" if emd != "auto" else "")
    return (f"from demo.app.deployment import Deployment\n"
            f"from {module} import {function}\n"
            f"from demo.settings import {cls}\n\n"
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


def command_line(command: str, model: str, kind: str | None, settings, emd: str = "auto", **inputs) -> str:
    """The ``mlm-icl`` command (with, for ``score``, the line writing its input file)."""
    head = (["mlm-icl", command] + (["--model", model] if model else []) + (["--kind", kind] if kind else [])
            + (["--emd", emd] if emd != "auto" else []))
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
    elif command == "results":
        head += ["show"]
    return prepare + shlex.join(head + options(settings)) + "\n"
