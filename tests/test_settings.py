"""Settings: one default per field, one validation, and the files that repeat them agree."""

import math
import re
from pathlib import Path

import pytest
import tomllib

from demo.app_settings import AppSettings
from demo.declared import default_of
from demo.evaluation_settings import GridSettings, RunSettings
from demo.settings import GenerationSettings, ModelSettings, ScoringSettings

ROOT = Path(__file__).resolve().parents[1]


def test_settings_env_lists_every_app_setting_with_its_default():
    """spaces_config/settings.env documents AppSettings: the same variables, the same defaults."""
    listed = dict(re.findall(r"^(DEMO_\w+)=(.*)$", (ROOT / "spaces_config" / "settings.env").read_text(), re.M))
    expected = {AppSettings.variable(name): str(default_of(AppSettings, name)) for name in AppSettings.model_fields}
    assert listed == expected


@pytest.fixture
def environ(monkeypatch):
    """The DEMO_* variables and SPACE_ID cleared; a function that sets some."""
    import os
    for name in [n for n in os.environ if n.startswith("DEMO_") or n == "SPACE_ID"]:
        monkeypatch.delenv(name)
    return lambda **variables: [monkeypatch.setenv(n, v) for n, v in variables.items()]


def test_app_settings_read_from_the_environment(environ):
    environ(DEMO_MAX_MODELS="5", DEMO_MAX_MODEL_GB="2.5", DEMO_LOCAL_MODELS="/a:/b", DEMO_CONCURRENCY="")
    settings = AppSettings()
    assert (settings.max_models, settings.max_model_gb, settings.local_models) == (5, 2.5, "/a:/b")
    assert settings.concurrency == 1  # empty means unset
    assert AppSettings(max_models=2).max_models == 2  # a value given wins over the variable
    environ(DEMO_MAX_MODELS="many")
    with pytest.raises(ValueError, match="DEMO_MAX_MODELS must be a whole number >= 1, not 'many'"):
        AppSettings()
    environ(DEMO_MAX_MODELS="5", DEMO_QUEUE_SIZE="0")
    with pytest.raises(ValueError, match="DEMO_QUEUE_SIZE must be a whole number >= 1, not '0'"):
        AppSettings()


def test_a_space_is_public_and_checks_itself_unless_its_variables_say_otherwise(environ):
    assert (AppSettings().public, AppSettings().self_check) == (False, False)
    environ(SPACE_ID="someone/mlm-icl")
    assert (AppSettings().public, AppSettings().self_check) == (True, True)
    environ(DEMO_PUBLIC="no")
    assert (AppSettings().public, AppSettings().self_check) == (False, True)


@pytest.mark.parametrize("word", ["yes", "TRUE", "t", "Y", "on", "1", "no", "False", "f", "N", "OFF", "0", "maybe"])
def test_a_yes_or_no_reads_alike_from_the_environment_and_the_command_line(word, capsys, environ):
    """One reader of yes/no text: a DEMO_* variable and a command-line option take the same words."""
    from demo.cli import build_parser
    environ(DEMO_MCP=word)
    try:
        variable = AppSettings().mcp
    except ValueError:
        variable = "refused"
    try:
        option = build_parser().parse_args(["generate", "--model", "m", "--prompt", "p", "--stop_at_newline",
                                            word]).stop_at_newline
    except SystemExit:
        option = "refused"
    assert variable == option == ("refused" if word == "maybe" else word.lower() in ("yes", "true", "t", "y", "on",
                                                                                     "1"))
    if word == "maybe":
        assert "Expected yes or no (yes/true/t/y/on/1 or no/false/f/n/off/0), not 'maybe'." in capsys.readouterr().err


def test_the_app_loads_float32_on_a_cpu_and_its_gpu_dtype_on_a_gpu(monkeypatch, tmp_path):
    import torch

    import demo.engine.models as models
    from demo.app.deployment import Deployment
    asked = []
    monkeypatch.setattr(models, "load_model", lambda location, **options: asked.append(options["dtype"]))
    deployment = Deployment.of(AppSettings())
    (tmp_path / "config.json").write_text("{}")  # a local model folder (load_model is replaced)
    for gpu, expected in ((False, "float32"), (True, "float16")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda gpu=gpu: gpu)
        deployment.load(str(tmp_path), paths=True)
        assert asked[-1] == expected
    deployment.load(str(tmp_path), paths=True, dtype="bfloat16")  # a caller's own choice stays
    assert asked[-1] == "bfloat16"
    with pytest.raises(ValueError, match="DEMO_GPU_DTYPE"):
        AppSettings(gpu_dtype="float64")


def test_pyproject_and_requirements_pin_the_same_runtime():
    """The Space installs requirements.txt, pip install -e . reads pyproject.toml: same lines."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert sorted(project["dependencies"]) == sorted(line for line in lines if line)


@pytest.mark.parametrize("cls, values, message", [
    (ScoringSettings, dict(method="nonsense"), "Unknown scoring method"),
    (ScoringSettings, dict(right_masks=-1), "right_masks"),
    (ScoringSettings, dict(right_masks=True), "right_masks"),
    (ScoringSettings, dict(reduction="median"), "reduction"),
    (ScoringSettings, dict(token_budget=0), "token_budget"),
    (ScoringSettings, dict(padding_masks=-1), "padding_masks"),
    (ScoringSettings, dict(padding_masks=99), "padding_masks"),
    (GenerationSettings, dict(max_new_tokens=0), "max_new_tokens"),
    (GenerationSettings, dict(top_p=math.nan), "top_p"),
    (GenerationSettings, dict(temperature=math.inf), "temperature"),
    (GenerationSettings, dict(temperature="hot"), "temperature"),
    (GenerationSettings, dict(seed=-1), "seed"),
    (GenerationSettings, dict(seed=2**70), "seed"),
    (GenerationSettings, dict(digits=6, choices=["a"]), "either digits or choices"),
    (GenerationSettings, dict(digits=40, max_new_tokens=8), "raise max_new_tokens"),
    (GenerationSettings, dict(stop_strings=[""]), "Stop strings"),
    (RunSettings, dict(shots=-1), "shots"),
    (RunSettings, dict(score="middle"), "scored span"),
    (RunSettings, dict(cache="fast"), r"Unknown cache 'fast'; use one of exact, prefix\."),
    (GridSettings, dict(cache="fast"), r"Unknown cache 'fast'; use one of exact, prefix\."),
    (GridSettings, dict(cache=None), "Unknown cache null"),
    (GridSettings, dict(lengths=[0]), "length"),
    (GridSettings, dict(depths=[1.5]), "depth"),
    (GridSettings, dict(depths=[]), "at least one"),
    (ModelSettings, dict(model=" "), "No model given"),
    (GenerationSettings, dict(window="block", block_length=4, tokens_per_step=8),
     r"8 tokens per step is more than a block holds \(4\)"),
    (ScoringSettings, dict(method="decoder", stride=4), "the approximate PLL's"),
    (ScoringSettings, dict(method="elbo", rescore_band=0.5), "the approximate PLL's"),
    (GenerationSettings, dict(tempreature=0.5), r"GenerationSettings has no setting 'tempreature': did you "
                                                r"mean temperature\?"),
    (ModelSettings, dict(), r"^model must be given\.$"),
])
def test_bad_values_are_refused_with_the_setting_named(cls, values, message):
    with pytest.raises(ValueError, match=message):
        cls(**values)


def test_single_strings_and_grid_normalisation():
    settings = GenerationSettings(stop_strings="END", choices=("yes", "no"))
    assert settings.stop_strings == ["END"] and settings.choices == ["yes", "no"]
    grid = GridSettings(lengths=[512, 256.0, 256], depths=[0.5, 0.0], repetitions=2)
    assert grid.lengths == [256, 512] and grid.depths == [0.0, 0.5] and grid.cells == 8


def test_readme_layout_names_every_module():
    """The README's layout is the folder list of the package, and each folder's __init__ is the map
    of that folder: every module is on one of them."""
    layout = (ROOT / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    modules = [p for p in (ROOT / "demo").rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    for module in modules:
        relative = module.relative_to(ROOT).as_posix()
        folder = module.parent.relative_to(ROOT).as_posix()
        if folder == "demo":
            assert f"`{relative}`" in layout, relative
        else:
            assert f"`{folder}/`" in layout, folder
            assert f"``{module.stem}``" in (module.parent / "__init__.py").read_text(), relative
    assert "docs/method.md" in layout and "tests/" in layout
