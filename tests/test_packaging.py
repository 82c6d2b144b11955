"""The package works installed from a wheel, not only from the clone: a wheel built from the
sources, ``pip install``-ed (not editable) into a fresh virtual environment, then ``python -m demo
results`` run from another folder reads the tables that ship inside the package (``demo.paths``).

Everything comes from this test's own environment, never from the base Python's packages (a stock
Python's setuptools may be too old to build a wheel): the wheel is built by this interpreter, without
isolation, with the setuptools of requirements-dev.txt; the fresh environment sees this one's
packages (pip, the package's dependencies) through a ``.pth`` file rather than
``--system-site-packages``, which would show it the base Python's. So nothing is downloaded and the
install needs no dependencies. The sources are copied first, so the build leaves nothing in the clone.
"""

import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("pyproject.toml", "README.md", "demo", "assets")  # what a build reads


def _run(command, cwd, env, timeout=600):
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The python of a fresh environment with the package installed from a wheel of a copy of the sources."""
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
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    wheels = base / "wheels"
    run = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                "-w", str(wheels), str(source)], base, env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    (wheel,) = wheels.glob("*.whl")
    try:  # without pip and without the base Python's packages: both come from this environment, below
        venv.create(base / "venv")
    except Exception as err:
        pytest.skip(f"cannot create a virtual environment here: {err}")
    python = base / "venv" / "bin" / "python"
    where = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], base, env)
    assert where.returncode == 0, where.stderr[-2000:]
    # This environment's packages (pip, the dependencies) go after the new environment's own folder,
    # so the installed copy of the package is found before this environment's (editable) one.
    ours = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if p in sys.path]
    (Path(where.stdout.strip()) / "test_environment.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in ours))
    # (--ignore-installed: pip leaves this environment's copy alone rather than weighing it as installed)
    run = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q",
                str(wheel)], base, env)
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
