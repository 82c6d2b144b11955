"""The start-up check: the deployment's default models, checked once in the background.

A Space serves real weights that no test here ran; a checkpoint read wrong (a head left random, a
missing enhanced mask decoder, a tokenizer that does not match) still answers, only badly. So, where
``AppSettings.self_check`` is on (by itself on a Space), the app runs ``mlm-icl check-model``'s
checks (``demo.evaluation.model_check``) on its default masked and causal LMs once the page is
served, and the page shows the outcome: which model, what was expected, what was measured, why.
Visitors' requests are served meanwhile; the models it loads are the ones they would load first.
"""

import logging
import threading
from dataclasses import dataclass, field

from .deployment import Deployment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelReport:
    name: str
    kind: str
    checks: tuple = ()  # demo.evaluation.model_check.Check, in its order
    error: str = ""  # why the model could not be checked (it did not load, ...)

    @property
    def failed(self) -> bool:
        return bool(self.error) or any(c.status == "fail" for c in self.checks)


@dataclass
class StartupCheck:
    """What the check has found so far; read by the page while it runs (``snapshot``)."""
    reports: list[ModelReport] = field(default_factory=list)
    running: str = ""  # the model being checked now
    done: bool = False
    skipped: str = ""  # why the check does not run here ("" when it does)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> "StartupCheck":
        with self._lock:
            return StartupCheck(list(self.reports), self.running, self.done, self.skipped)

    def run(self, deployment: Deployment, items: int) -> None:
        """Check each default model in turn (``items`` COPA items each), keeping every outcome."""
        from ..evaluation.model_check import check_model  # torch

        for kind in ("masked", "causal"):
            entry = deployment.catalog.default(kind)
            if entry is None:
                continue
            with self._lock:
                self.running = entry.name
            try:
                lm = deployment.load(entry.name, kind)
                report = ModelReport(entry.name, kind, tuple(check_model(
                    lm, deployment.catalog.location(entry.name), items,
                    deployment.settings.data_root or None)))
            except Exception as err:  # reported in the page; the app serves on
                log.exception("start-up check of %s failed", entry.name)
                report = ModelReport(entry.name, kind, error=f"{type(err).__name__}: {err}")
            with self._lock:
                self.reports.append(report)
        with self._lock:
            self.running, self.done = "", True


ITEMS = 50  # COPA items per model: few enough that the check ends soon after start on a CPU Space

STARTUP = StartupCheck()  # this process's check (one deployment per process)


def start(deployment: Deployment, after: threading.Thread | None = None, on_zerogpu: bool = False) -> None:
    """Run the start-up check in a background thread (after ``after``, the core's import), or say
    why it does not run here."""
    if not deployment.settings.self_check:
        STARTUP.skipped = "switched off (DEMO_SELF_CHECK)"
        return
    if on_zerogpu:  # ZeroGPU lends its GPU to visitors' requests only, never to a background thread
        STARTUP.skipped = "not run on ZeroGPU, which lends the GPU to requests only; run `mlm-icl check-model`"
        return

    def run():
        if after is not None:
            after.join()
        STARTUP.run(deployment, ITEMS)

    threading.Thread(target=run, name="startup-check", daemon=True).start()
