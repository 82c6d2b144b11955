"""Benchmark: how fast `python app.py` serves its page, and how fast the first ranking comes back.

    python benchmarks/bench_app.py [--repeats 3] [--model FOLDER]

1. page: wall time from starting `python app.py` (a fresh process) to the first HTTP 200 for
   the page. No model is loaded on the way (the app imports torch only after serving); the
   script checks the server's output for model-loading messages at that moment.
   Baseline, same run: a fresh `python -c "import gradio"`, the floor any Gradio app pays.
2. first rank: one ranking request through the app's own API (``/rank_mlm``, the Ranking tab's
   button) with the offline stand-in MLM of ../shared/models, named by ``DEMO_LOCAL_MODELS`` as
   a user would. It includes loading that model. Timed from sending the request to having the
   result (gradio_client, connected beforehand). Sent once the app has finished importing torch
   and the engines in the background (it prints "demo: core imported in N s" a few seconds after
   serving the page, while a person is still reading it); a request sent earlier waits for that
   import, so the script also reports that case (a user clicking the moment the page appears),
   measured in separate runs ("b").
   Baseline, same run: the same request again (model cached): the warm cost.

Targets: page < 10 s, first rank < 3 s on the 2-core CPU machine.
The last line reads: ``bench_app page_s=<x> first_rank_s=<y>`` (medians over the repeats).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app_process import ROOT, running_app  # benchmarks/app_process.py

STANDIN = ROOT.parent / "shared" / "models" / "minilm-l6-mlm-standin"
CONTEXT = "My body cast a shadow over the grass because"
CANDIDATES = "the sun was rising.\nthe grass was cut."
MODEL_LOAD_MARKERS = ("Loading weights", "de-quantizing GGUF")
CORE_READY_MESSAGE = "demo: core imported"  # demo.ui.handlers prints it (not imported: no torch here)


def gradio_import_seconds() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import gradio"], check=True,
                   env=dict(os.environ, GRADIO_ANALYTICS_ENABLED="False"))
    return time.perf_counter() - start


def one_run(model: Path, wait_for_core: bool) -> dict:
    from gradio_client import Client

    with tempfile.TemporaryDirectory() as folder:
        try:
            with running_app([str(model)], Path(folder) / "app.log") as app:
                return _timed_requests(Client, app, model, wait_for_core)
        except RuntimeError as err:
            raise SystemExit(str(err)) from None


def _timed_requests(Client, app, model: Path, wait_for_core: bool) -> dict:
    loaded_at_page = any(m in app.log.read_text() for m in MODEL_LOAD_MARKERS)
    client = Client(app.url, verbose=False)
    start = time.perf_counter() - app.page_s  # when the process started
    while wait_for_core and CORE_READY_MESSAGE not in app.log.read_text():
        if time.perf_counter() - start > 120:
            raise SystemExit("the app never finished importing its core")
        time.sleep(0.05)
    core_s = time.perf_counter() - start
    args = dict(context=CONTEXT, candidates=CANDIDATES, model_name=str(model),
                method="right_masks", right_masks=2, normalize=False, scope="completion",
                unconditional="", api_name="/rank_mlm")
    begin = time.perf_counter()
    first = client.predict(**args)
    first_rank_s = time.perf_counter() - begin
    begin = time.perf_counter()
    client.predict(**args)
    warm_rank_s = time.perf_counter() - begin
    assert "Masked LM ranking" in first[0], first[0]
    return dict(page_s=app.page_s, first_rank_s=first_rank_s, warm_rank_s=warm_rank_s,
                loaded_at_page=loaded_at_page, core_s=core_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=str(STANDIN), help="local MLM folder (default: the stand-in)")
    args = parser.parse_args()
    model = Path(args.model)
    if not model.is_dir():
        raise SystemExit(f"{model} does not exist: this benchmark needs ../shared/models beside the clone.")

    runs, imports, at_once = [], [], []
    for repeat in range(args.repeats):
        imports.append(gradio_import_seconds())
        runs.append(one_run(model, wait_for_core=True))
        r = runs[-1]
        print(f"run {repeat + 1}: page {r['page_s']:.2f} s (import gradio alone {imports[-1]:.2f} s), "
              f"core imported at {r['core_s']:.2f} s, first rank {r['first_rank_s']:.2f} s, "
              f"warm rank {r['warm_rank_s']:.2f} s"
              f"{', a model was loaded before the page!' if r['loaded_at_page'] else ''}")
        at_once.append(one_run(model, wait_for_core=False)["first_rank_s"])
        print(f"run {repeat + 1}b: first rank sent the moment the page is served: {at_once[-1]:.2f} s")
    page = statistics.median(r["page_s"] for r in runs)
    first = statistics.median(r["first_rank_s"] for r in runs)
    warm = statistics.median(r["warm_rank_s"] for r in runs)
    floor = statistics.median(imports)
    print(f"page: {page:.2f} s = {page / floor:.2f} x a bare `import gradio` ({floor:.2f} s); "
          f"target < 10 s: {'met' if page < 10 else 'MISSED'}")
    print(f"first rank: {first:.2f} s = {first / warm:.2f} x a warm rank ({warm:.2f} s); "
          f"target < 3 s: {'met' if first < 3 else 'MISSED'}")
    print(f"page -> rank: a request sent the moment the page is served returns after "
          f"{statistics.median(at_once):.2f} s (it waits for the background import)")
    if any(r["loaded_at_page"] for r in runs):
        print("WARNING: a model was loaded before the page was served")
    print(f"bench_app page_s={page:.2f} first_rank_s={first:.2f}")


if __name__ == "__main__":
    main()
