"""The package works installed from a wheel, not only from the clone: ``pip install .`` (not
editable) into a fresh virtual environment, then ``python -m demo results`` run from another
folder reads the tables that ship inside the package (``demo.paths``).

The environment sees this one's packages (``--system-site-packages``), so nothing is downloaded:
the build runs without isolation and the install without dependencies. The sources are copied
first, so the build leaves nothing in the clone.
"""

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("pyproject.toml", "README.md", "demo", "assets")  # what a build reads


def _run(command, cwd, env, timeout=600):
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The python of a fresh environment with the package installed from a copy of the sources."""
    pytest.importorskip("setuptools", reason="building without isolation needs setuptools here")
    pytest.importorskip("pip", reason="installing needs pip here")
    base = tmp_path_factory.mktemp("wheel_install")
    source = base / "source"
    source.mkdir()
    for name in SHIPPED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, source / name)
    try:  # (pip too comes from this environment's packages)
        venv.create(base / "venv", system_site_packages=True)
    except Exception as err:
        pytest.skip(f"cannot create a virtual environment here: {err}")
    python = base / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                "--no-index", "-q", str(source)], base, env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return python, env


def test_python_m_demo_results_works_from_a_wheel_install(installed, tmp_path):
    python, env = installed
    where = _run([str(python), "-c", "import demo.paths as p; print(p.ASSETS)"], tmp_path, env)
    assert where.returncode == 0, where.stderr[-2000:]
    assets = Path(where.stdout.strip())
    assert assets.is_dir() and assets.name == "assets" and ROOT not in assets.parents  # the package's copy
    run = _run([str(python), "-m", "demo", "results"], tmp_path, env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "Samuel 2024" in run.stdout and "shipped runs" in run.stdout
    assert not list(tmp_path.iterdir())  # it wrote nothing where it ran


def test_the_wheel_lists_every_package_of_the_sources():
    """pyproject.toml names the packages (assets/ is mapped into the package, which
    packages.find cannot do): every folder of demo/ with an __init__.py must be among them."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "demo").rglob("__init__.py")}
    assert found <= listed and listed - found == {"demo.assets"}, found ^ listed
