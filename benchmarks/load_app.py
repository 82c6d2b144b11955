"""Load benchmark: a class on one app. `python app.py` with the offline stand-in MLM, then

1. one long job: the largest needle grid the default limits allow (22 runs x 512 tokens, just
   under the work budget), submitted first; while it runs, a separate client sends short
   rankings one after another and times each (``short_wait_s`` is the worst: the target is 5 s);
2. 32 clients x 20 mixed requests at once (rankings, 4-token generations, small grids, result
   filters), each timed end to end; a request fails if it raises or its answer holds an error.

Bounded: every request has a timeout, the whole run stops by itself (``--max-seconds``), the app
is stopped at the end. Peak memory is the server process's resident set (``/proc``), sampled.

    python benchmarks/load_app.py [--clients 32 --requests 20]

Last line: ``load_app failures=<n> p50_s=<x> p95_s=<y> peak_rss_mb=<z> short_wait_s=<w>``
(targets: failures=0, short_wait_s <= 5).
"""

import argparse
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app_process import ROOT, running_app  # benchmarks/app_process.py

STANDIN = ROOT.parent / "shared" / "models" / "minilm-l6-mlm-standin"
CONTEXTS = ["My body cast a shadow over the grass because", "The trophy doesn't fit into the suitcase because",
            "The man turned on the faucet, so", "The capital of France is"]
CANDIDATES = ["the sun was rising.\nthe grass was cut.", "it is too large.\nit is too small.",
              "water flowed.\nthe toilet filled.", "Paris.\nLyon.\nNice."]


def requests_of(model: str, client: int, count: int) -> list[tuple[str, dict]]:
    """A student's mixed requests: mostly rankings and short generations, some grids and filters."""
    out = []
    for k in range(count):
        i = (client + k) % len(CONTEXTS)
        kind = k % 10
        if kind < 5:
            out.append(("/rank_mlm", dict(context=CONTEXTS[i], candidates=CANDIDATES[i], model_name=model,
                                          method="right_masks", right_masks=2, normalize=False,
                                          scope="completion", unconditional="", answer="")))
        elif kind < 8:
            out.append(("/generate_mlm", dict(prompt=CONTEXTS[i], model_name=model, strategy="greedy",
                                              max_new_tokens=4, num_beams=2, temperature=1.0, top_k=0,
                                              top_p=1.0, repetition_penalty=1.0, padding_masks="default",
                                              stop_at_newline=True, seed=0)))
        elif kind == 8:
            out.append(("/probe_mlm", dict(model_name=model, lengths="128", depths="0.5", repetitions=1,
                                           seed=client)))
        else:
            out.append(("/results", dict(papers=[], groups=[], models=["GPT-3 1.3B"], shots=[], tasks=[])))
    return out


def failed(result) -> bool:
    items = result if isinstance(result, (list, tuple)) else [result]
    return any(isinstance(item, str) and "demo-error" in item for item in items)


def peak_rss(pid: int, stop: threading.Event, peak: list) -> None:
    while not stop.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    peak[0] = max(peak[0], int(line.split()[1]) / 1024)
        except OSError:
            return
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=20, help="per client")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one request may take")
    parser.add_argument("--max-seconds", type=float, default=1200, help="the whole run")
    args = parser.parse_args()
    if not STANDIN.is_dir():
        raise SystemExit(f"{STANDIN} does not exist: this benchmark needs ../shared/models beside the clone.")
    from gradio_client import Client

    model, deadline = str(STANDIN), time.perf_counter() + args.max_seconds
    with tempfile.TemporaryDirectory() as folder, running_app([model], Path(folder) / "app.log") as app:
        stop, peak = threading.Event(), [0.0]
        threading.Thread(target=peak_rss, args=(app.process.pid, stop, peak), daemon=True).start()
        warm = Client(app.url, verbose=False)
        warm.predict(**requests_of(model, 0, 1)[0][1], api_name="/rank_mlm")  # load the model

        # 1. the long job, and short rankings timed behind it
        grid = dict(model_name=model, lengths="512", depths=", ".join(f"{d / 10:.1f}" for d in range(11)),
                    repetitions=2, seed=0)
        job = Client(app.url, verbose=False).submit(**grid, api_name="/probe_mlm")
        while not job.outputs() and time.perf_counter() < deadline:
            time.sleep(0.2)
        short_waits = []
        while not job.done() and len(short_waits) < 10 and time.perf_counter() < deadline:
            begin = time.perf_counter()
            warm.predict(**requests_of(model, len(short_waits), 1)[0][1], api_name="/rank_mlm")
            short_waits.append(time.perf_counter() - begin)
        print(f"long job: {len(job.outputs())} grid updates seen; {len(short_waits)} short rankings behind "
              f"it, worst {max(short_waits, default=0):.2f} s, median "
              f"{statistics.median(short_waits) if short_waits else 0:.2f} s")

        # 2. the class: every client sends its requests one after another, all clients at once
        latencies, failures, lock = [], [], threading.Lock()

        def student(index: int) -> None:
            client = Client(app.url, verbose=False)
            for endpoint, arguments in requests_of(model, index, args.requests):
                if time.perf_counter() > deadline:
                    with lock:
                        failures.append((endpoint, "out of time"))
                    continue
                begin = time.perf_counter()
                try:
                    result = client.submit(**arguments, api_name=endpoint).result(timeout=args.timeout)
                    problem = "error in the answer" if failed(result) else None
                except Exception as err:  # noqa: BLE001 (counted, and the run goes on)
                    problem = f"{type(err).__name__}: {str(err)[:120]}"
                with lock:
                    latencies.append(time.perf_counter() - begin)
                    if problem:
                        failures.append((endpoint, problem))

        began = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(student, range(args.clients)))
        job.cancel()
        stop.set()
    wall = time.perf_counter() - began
    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(f"class: {args.clients} clients x {args.requests} requests = {len(latencies)} in {wall:.0f} s; "
          f"p50 {p50:.2f} s, p95 {p95:.2f} s, max {latencies[-1]:.2f} s; {len(failures)} failed"
          + (f" (first: {failures[0]})" if failures else ""))
    print(f"load_app failures={len(failures)} p50_s={p50:.2f} p95_s={p95:.2f} peak_rss_mb={peak[0]:.0f} "
          f"short_wait_s={max(short_waits, default=0):.2f}")


if __name__ == "__main__":
    main()
