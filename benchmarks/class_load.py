"""Class benchmark: a class of students on one app, pressing Run on each lesson step at once.

`python app.py` with the offline pair (the stand-in MLM and SmolLM2), each student with a client of
their own (gradio_client; ``--browsers`` of them real pages in Chromium pressing the buttons). A
student's press is the requests the page sends for the step (``demo.ui.warm_up.api_requests``:
the step's preset, every other input as the page is built), submitted together; its time runs
until the last answer is in.

1. alone: on an app that shares nothing, each step pressed by one student (the median of two),
   every answer computed: what one student waits without the class;
2. the class, on an app with its defaults (identical answers shared, the lesson computed at
   start-up; the time until the page says all steps are ready is ``warm_s``): every step pressed by
   all students at once, first with the step's preset as it is (same), then with each student's
   own text, a name appended to the step's first text (distinct; steps with a text);
3. forty students who vanish mid-queue (their process killed, no cancel) after sending distinct
   texts, and forty whose clients time out while staying connected, then a class on step 2 (or on
   the first step measured).

``--space-shapes``: a random-weight masked LM of the Space's default's shape (Ettin-150M:
ModernBERT, 22 layers, hidden 768) beside SmolLM2, steps 2 and 5 only.

    python benchmarks/class_load.py [--students 30 --browsers 2 --steps 1-10 --space-shapes --same-only]

Per step: alone, median, p95, last, the CPU seconds per press of the server process and of the API
students' clients (this process, on the same cores: what the server cannot use), failures, queue
full; for own texts also the class's efficiency: its model FLOPs (2 per layer parameter per token
read, from each answer's model and work lines) at this machine's measured matmul peak in each
model's precision, over the wall time. Last line:
``class_load students=30 same_p95_over_alone=<x> distinct_p95_over_alone=<y> own_p95_s=<s>
same_cpu_per_press_s=<s> failures=<n>
queue_full=<n> after_abandon_failures=<n>`` (the worst step's ratios; targets: same <= 2, aim 1.5).
"""

import argparse
import functools
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app_process import ROOT, running_app  # benchmarks/app_process.py

sys.path.insert(0, str(ROOT))
STANDIN = ROOT.parent / "shared" / "models" / "minilm-l6-mlm-standin"
NAMES = ["Ada", "Ben", "Chloe", "Dev", "Emma", "Femi", "Gus", "Hana", "Ivan", "Jo", "Kai", "Lena", "Milo", "Nia",
         "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara", "Uma", "Vic", "Wen", "Xavi", "Yara", "Zoe"]
TEXT_FIELDS = {"/generate_mlm": 0, "/generate_causal": 0, "/generate_mlm_any_order": 0, "/infill_mlm": 0,
               "/infill_causal": 0, "/rank_mlm": 0, "/rank_causal": 0}  # the position of each endpoint's text


# The button a step's press clicks on the page, and the name of its end-of-run marker, by tab
BUTTONS = {"prompting": ("#gen-run", "gen"), "infill": ("#fill-run", "fill"), "ranking": ("#rank-run", "rank"),
           "length": ("#probe-run", "probe"), "sweep": ("#sweep-run", "sweep")}


def step_presses(local_models: list[str]) -> list[tuple[str, list, tuple | None]]:
    """Each lesson step's title, its press (``api_requests``), from the page built here as the
    app builds it, and the page's button for it (None where loading the step runs it)."""
    os.environ["DEMO_LOCAL_MODELS"] = os.pathsep.join(local_models)
    from demo.ui import warm_up
    from demo.ui.app import build_app

    app = build_app()
    _, steps, parts = warm_up.prepared()
    return [(step["title"], warm_up.api_requests(app, parts[step["tab"]], step)
             if parts.get(step["tab"]) and parts[step["tab"]].presses else [],
             BUTTONS.get("sweep" if "sweep" in step else step["tab"])) for step in steps]


def own_text(press: list, student: int) -> list:
    """A press with the student's name appended to each request's text (the same name in all)."""
    name = NAMES[student % len(NAMES)] + (str(student // len(NAMES)) if student >= len(NAMES) else "")
    mine = []
    for endpoint, values in press:
        values = list(values)
        at = TEXT_FIELDS.get(endpoint)
        if at is not None:
            values[at] = f"{values[at]} ({name})"
        mine.append((endpoint, values))
    return mine


def failed(answer) -> bool:
    items = answer if isinstance(answer, (list, tuple)) else [answer]
    return any(isinstance(item, str) and 'class="demo-error"' in item for item in items)


def press(client, requests: list, timeout: float, answered: list | None = None) -> tuple[float, str | None]:
    """Submit a press's requests together; (seconds until the last answer, the problem if any);
    the answers added to ``answered`` if given."""
    began = time.perf_counter()
    try:
        jobs = [client.submit(*values, api_name=endpoint) for endpoint, values in requests]
        answers = [job.result(timeout=timeout) for job in jobs]
        problem = "error in the answer" if any(failed(a) for a in answers) else None
        if answered is not None:
            answered.extend(answers)
    except Exception as err:  # noqa: BLE001 (counted; the class goes on)
        problem = f"{type(err).__name__}: {str(err)[:160]}"
    return time.perf_counter() - began, problem


def server_cpu(process) -> float:
    """CPU seconds the app's process has used (user and system; /proc, so Linux only)."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


WORK = re.compile(r"([\d,]+) tokens? read")
MODEL = re.compile(r"<code>([^<]+)</code> · (masked|causal) · .*? · (float32|bfloat16|float16)")


@functools.cache
def layer_parameters(name: str, kind: str) -> int:
    """A model's parameters outside its embeddings, the ones every token read multiplies (a
    lookup costs no FLOPs; a masked LM's head runs only where a mask is read)."""
    from demo.ui.common import deployment
    lm = deployment().load(name, kind, dtype="float32")
    return sum(p.numel() for n, p in lm.model.named_parameters() if "embed" not in n and "decoder" not in n)


def model_seconds(answers: list) -> float:
    """The seconds the answers' model work takes at the measured matmul peak of each one's
    precision on this machine: 2 FLOPs per layer parameter per token read, as each answer's model
    and work lines say (a batched answer's work is its own; a shared one's is counted once per
    answer, so this is for distinct texts)."""
    from demo.engine.precision import matmul_gflops
    seconds = 0.0
    for answer in answers:
        for item in answer if isinstance(answer, (list, tuple)) else [answer]:
            if not isinstance(item, str):
                continue
            model, work = MODEL.search(item), WORK.search(item)
            if model and work:
                flops = 2 * layer_parameters(model.group(1), model.group(2)) * int(work.group(1).replace(",", ""))
                seconds += flops / (matmul_gflops(2048, model.group(3)) * 1e9)
    return seconds


def clients(url: str, count: int) -> list:
    """Students with the page open: each client's session made by the Results tab's first view, as
    a page's opening makes it (a server builds a session's copy of the page on its first event);
    answers read, not their files downloaded, as a page does."""
    from gradio_client import Client

    def student(_):
        client = Client(url, verbose=False, download_files=False)
        client.predict(["ours"], [], [], [], [], api_name="/results")
        return client
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(student, range(count)))


def browser_press(url: str, step: int, button: tuple, ready: threading.Barrier,
                  timeout: float) -> tuple[float, str | None]:
    """A student in Chromium: opens the page, loads the step from the lesson, then presses the
    step's ``button`` (its selector and end-of-run marker) with the others and waits for the
    page's end-of-run marker."""
    from playwright.sync_api import sync_playwright
    button, marker = button
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url, timeout=timeout * 1000)
            page.locator("#lesson").click()
            page.locator("#lesson-step label").nth(step).click()
            page.locator("#lesson-load").click()
            page.wait_for_function("() => Number(document.body.getAttribute('data-runs-lesson') || 0) >= 1 && "
                                   "document.body.getAttribute('data-running-lesson') === '0'")
            ready.wait()
            began = time.perf_counter()
            page.locator(button).click()
            page.wait_for_function(f"() => Number(document.body.getAttribute('data-runs-{marker}') || 0) >= 1 && "
                                   f"document.body.getAttribute('data-running-{marker}') === '0'",
                                   timeout=timeout * 1000)
            problem = "error in the page" if page.locator(".demo-error").count() else None
            return time.perf_counter() - began, problem
        except Exception as err:  # noqa: BLE001
            return float("nan"), f"browser: {type(err).__name__}: {str(err)[:120]}"
        finally:
            browser.close()


def the_class(url, presses: list, students: list, browsers: int, step: int, button: tuple | None,
              timeout: float, answered: list | None = None) -> list:
    """Every student presses at once (their ``presses``: one per student; ``browsers`` more press
    ``button`` in Chromium, none where the step has no button); (seconds, problem) each; the API
    students' answers added to ``answered`` if given."""
    browsers = browsers if button else 0
    gate = threading.Barrier(len(students) + browsers)

    def api_student(i):
        gate.wait()
        return press(students[i], presses[i], timeout, answered)

    with ThreadPoolExecutor(len(students) + browsers) as pool:
        pages = [pool.submit(browser_press, url, step, button, gate, timeout) for _ in range(browsers)]
        answers = list(pool.map(api_student, range(len(students))))
        return answers + [page.result() for page in pages]


def measured_class(app, presses: list, students: list, browsers: int, step: int, button, timeout: float):
    """:func:`the_class`, with the CPU seconds per press of the server and of the API students'
    clients (this process: they share the machine's cores with the server), and the model seconds
    at peak of the answers: (answers, (server, clients) cpu per press, model seconds at peak)."""
    answered, before, clients_before = [], server_cpu(app.process), time.process_time()
    answers = the_class(app.url, presses, students, browsers, step, button, timeout, answered)
    cpu = (server_cpu(app.process) - before, time.process_time() - clients_before)
    return answers, tuple(c / len(answers) for c in cpu), model_seconds(answered)


def summary(label: str, alone: float, answers: list, browsers: int = 0, cpu=(float("nan"), float("nan")),
            at_peak: float | None = None) -> dict:
    """The class's figures for one press (``answers``: the API students', then ``browsers``
    pages'); ``cpu``: the server's and the API clients' CPU seconds per press; ``at_peak``: the seconds the class's
    model work takes at the machine's matmul peak (its efficiency: that over the wall time)."""
    pages = [t for t, _ in answers[len(answers) - browsers:]] if browsers else []
    times = sorted(t for t, _ in answers if t == t)
    problems = [p for _, p in answers if p]
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))] if times else float("nan")
    row = dict(alone=alone, median=statistics.median(times) if times else float("nan"), p95=p95,
               last=times[-1] if times else float("nan"), failures=len(problems),
               queue_full=sum("Queue is full" in p for p in problems), cpu=cpu[0],
               efficiency=at_peak / times[-1] if at_peak is not None and times else float("nan"))
    print(f"{label:<60} alone {alone:5.2f} s · median {row['median']:5.2f} · p95 {p95:5.2f} · last "
          f"{row['last']:5.2f} · CPU a press: server {cpu[0]:.2f} s, clients {cpu[1]:.2f} s"
          + (f" · efficiency {row['efficiency']:.1%}" if at_peak is not None else "")
          + f" · {row['failures']} failed · {row['queue_full']} queue full"
          + (f" · pages in Chromium {', '.join(f'{t:.2f}' for t in pages)} s" if pages else "")
          + (f" (first: {problems[0]})" if problems else ""), flush=True)
    return row


def wait_warm(app, timeout: float) -> float:
    """Seconds from starting the app's process until its log says the lesson is ready."""
    began = time.perf_counter()
    while time.perf_counter() - began < timeout:
        if "demo: lesson ready" in app.log.read_text():
            return app.page_s + time.perf_counter() - began
        time.sleep(0.2)
    raise RuntimeError(f"the lesson was not ready within {timeout:.0f} s:\n{app.log.read_text()[-2000:]}")


VANISH = """
import sys, time
from gradio_client import Client
url, endpoint, values = sys.argv[1], sys.argv[2], eval(sys.argv[3])
for i in range(int(sys.argv[4])):
    Client(url, verbose=False).submit(*[v + f' (gone {i})' if k == 0 else v for k, v in enumerate(values)],
                                      api_name=endpoint)
print('submitted', flush=True)
time.sleep(600)
"""


def vanish(url: str, request: tuple, count: int) -> None:
    """``count`` students send distinct texts, then their process is killed (no cancel)."""
    endpoint, values = request
    child = subprocess.Popen([sys.executable, "-c", VANISH, url, endpoint, repr(values), str(count)],
                             stdout=subprocess.PIPE, text=True)
    child.stdout.readline()  # every request is queued
    time.sleep(1.0)
    child.send_signal(signal.SIGKILL)
    child.wait()


def time_out(students: list, requests: list) -> None:
    """Students whose clients give up after a second while their connection stays open."""
    for client in students:
        for endpoint, values in requests:
            job = client.submit(*values, api_name=endpoint)
            try:
                job.result(timeout=0.05)
            except Exception:  # noqa: BLE001 (their client timed out: the request stays queued)
                pass


def space_shapes_model(folder: Path) -> str:
    """A random ModernBERT of Ettin-150M's shape, saved as a local model folder."""
    from random_shapes import modernbert_base
    lm = modernbert_base()
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return str(folder)


def parse_steps(text: str, count: int) -> list[int]:
    chosen = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        chosen.update(range(int(low), int(high or low) + 1))
    return [s - 1 for s in sorted(chosen) if 1 <= s <= count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--browsers", type=int, default=2, help="of the students, how many are Chromium pages")
    parser.add_argument("--steps", default="1-10", help="lesson steps, e.g. 2,5 or 1-10")
    parser.add_argument("--space-shapes", action="store_true", help="a masked LM of Ettin-150M's shape (steps 2, 5)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one press may take")
    parser.add_argument("--same-only", action="store_true", help="skip the students' own texts (and the abandoning)")
    args = parser.parse_args()
    if not STANDIN.is_dir():
        raise SystemExit(f"{STANDIN} does not exist: this benchmark needs ../shared/models beside the clone.")
    folder = Path(tempfile.mkdtemp(prefix="class-load-"))
    masked = space_shapes_model(folder / "ettin-encoder-150m-shape") if args.space_shapes else str(STANDIN)
    presses = step_presses([masked])
    steps = [2 - 1, 5 - 1] if args.space_shapes else parse_steps(args.steps, len(presses))
    api_count = max(1, args.students - args.browsers)

    # 1. alone: nothing shared, nothing computed in advance
    alone = {}
    with running_app([masked], folder / "alone.log", DEMO_SHARE_RESULTS="False", DEMO_WARM_LESSON="False") as app:
        (student,) = clients(app.url, 1)
        for step in (1, 4):  # the models load (not timed)
            press(student, presses[step][1], args.timeout)
        for step in steps:
            alone[step] = statistics.median(press(student, presses[step][1], args.timeout)[0] for _ in range(2))

    # 2. the class, on the app as it is deployed
    rows, worst = [], dict(same=0.0, distinct=0.0)
    with running_app([masked], folder / "class.log", DEMO_WARM_LESSON="True") as app:
        warm_s = wait_warm(app, args.timeout)
        print(f"the lesson was ready {warm_s:.0f} s after start-up (page served after {app.page_s:.1f} s)")
        students = clients(app.url, api_count)
        for step in steps:
            title, requests, button = presses[step]
            if not requests:
                continue
            answers, cpu, _ = measured_class(app, [requests] * api_count, students, args.browsers, step, button,
                                             args.timeout)
            rows.append(summary(f"step {step + 1} ({title[:32]}), same", alone[step], answers,
                                args.browsers if button else 0, cpu))
            worst["same"] = max(worst["same"], rows[-1]["p95"] / alone[step])
            worst["same_cpu"] = max(worst.get("same_cpu", 0.0), cpu[0])
            if not args.same_only and any(endpoint in TEXT_FIELDS for endpoint, _ in requests):
                mine = [own_text(requests, i) for i in range(api_count)]
                answers, cpu, at_peak = measured_class(app, mine, students, 0, step, None, args.timeout)
                rows.append(summary(f"step {step + 1} ({title[:32]}), own texts", alone[step], answers, 0, cpu,
                                    at_peak))
                worst["distinct"] = max(worst["distinct"], rows[-1]["p95"] / alone[step])
                worst["own_p95"] = max(worst.get("own_p95", 0.0), rows[-1]["p95"])

        if args.same_only:
            print(f"class_load students={args.students} same_p95_over_alone={worst['same']:.2f} "
                  f"failures={sum(r['failures'] for r in rows)} queue_full={sum(r['queue_full'] for r in rows)} "
                  f"warm_s={warm_s:.0f}")
            return
        # 3. forty vanish mid-queue, forty time out while connected; then a class on step 2 (or the
        # first step measured)
        again = 1 if 1 in steps else steps[0]
        requests = presses[again][1]
        vanish(app.url, requests[0], 40)
        time_out(clients(app.url, 40), requests)
        after = summary(f"step {again + 1} after 40 vanished and 40 timed out, same", alone[again],
                        the_class(app.url, [requests] * api_count, students, 0, again, None, args.timeout))
    print(f"class_load students={args.students} same_p95_over_alone={worst['same']:.2f} "
          f"distinct_p95_over_alone={worst['distinct']:.2f} own_p95_s={worst.get('own_p95', 0.0):.2f} "
          f"same_cpu_per_press_s={worst.get('same_cpu', 0.0):.3f} failures={sum(r['failures'] for r in rows)} "
          f"queue_full={sum(r['queue_full'] for r in rows) + after['queue_full']} "
          f"after_abandon_failures={after['failures']} after_abandon_p95_over_alone={after['p95'] / alone[again]:.2f} "
          f"warm_s={warm_s:.0f}")


if __name__ == "__main__":
    main()
