"""Where the files that ship with the package are: the one owner of those paths.

``importlib.resources`` finds the package wherever it is installed. ``assets/`` (the presets, the
lesson, the papers' tables and our runs, the precomputed needle grids, the haystack text) stays
at the repository's top, where the docs name it, and a wheel carries it inside the package as
``demo/assets`` (``pyproject.toml`` maps it there); a clone or an editable install reads the
repository's own. Nothing here imports another module of the project.
"""

from importlib.resources import files
from pathlib import Path

# The installed package as a folder (pip installs packages as files, never zipped).
PACKAGE = Path(str(files("demo"))).resolve()
_PACKAGED_ASSETS = PACKAGE / "assets"  # a wheel's copy
ASSETS = _PACKAGED_ASSETS if _PACKAGED_ASSETS.is_dir() else PACKAGE.parent / "assets"
SPECS = PACKAGE / "tasks" / "specs"  # the papers' tasks (demo.tasks.registry)
STYLE = PACKAGE / "ui" / "style.css"  # the page's style sheet
FAST_PLL = ASSETS / "scoring" / "fast_pll.csv"  # the approximate PLL's measured settings (demo.engine.pll_approx)
# The offline datasets, in shared/data beside the clone (where a task's data_root is not given).
SHARED_DATA = PACKAGE.parent.parent / "shared" / "data"
