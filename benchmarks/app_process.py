"""`python app.py` in a child process on a free loopback port, waited for until its page is served.

Shared by the benchmarks that drive the running app (bench_app.py) and by the browser test
(tests/test_browser.py imports it as ``benchmarks.app_process``).
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class RunningApp:
    url: str
    process: subprocess.Popen
    log: Path  # the server's stdout and stderr
    page_s: float  # from starting the process to the first HTTP 200 for the page


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(local_models: list[str], log: Path, timeout: float = 120.0, **settings: str):
    """Yield a RunningApp serving the given local models (``settings``: more DEMO_* variables);
    RuntimeError with the log's tail if the page is not served within ``timeout`` seconds. The
    process is stopped on exit."""
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False",
               HF_HUB_OFFLINE="1", DEMO_LOCAL_MODELS=os.pathsep.join(local_models), **settings)
    url = f"http://127.0.0.1:{port}/"
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        while not _serves(url):
            if process.poll() is not None or time.perf_counter() - start > timeout:
                raise RuntimeError(f"app.py did not serve its page:\n{Path(log).read_text()[-3000:]}")
            time.sleep(0.05)
        yield RunningApp(url, process, Path(log), time.perf_counter() - start)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _serves(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False
