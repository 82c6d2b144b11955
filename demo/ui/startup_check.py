"""The start-up check in the page (``demo.app.self_check``): an opener above the tabs whose title
says how the default models did, refreshed every few seconds until the check is done."""

import gradio as gr

from ..app import self_check
from .common import escape

REFRESH_SECONDS = 5
STATUS_LABELS = {"pass": "pass", "fail": "FAIL", "unclear": "unclear", "not run": "not run"}


def title(state: self_check.StartupCheck) -> str:
    if state.skipped:
        return f"Start-up check of the default models: {state.skipped}"
    if not state.done:
        return f"Start-up check of the default models: checking {state.running or 'soon'}..."
    failed = [r.name for r in state.reports if r.failed]
    if failed:
        return f"Start-up check: {', '.join(failed)} failed a check (open to read which)"
    return "Start-up check: no check failed for the default models (open to see them)"


def report_html(state: self_check.StartupCheck) -> str:
    parts = ["<p>Each default model answers questions with known answers (<code>mlm-icl check-model</code>): "
             "a checkpoint read wrong still answers, only badly, and this is where it shows.</p>"]
    for report in state.reports:
        parts.append(f"<h4>{escape(report.name)} ({escape(report.kind)} LM)</h4>")
        if report.error:
            parts.append(f"<p>Could not be checked: {escape(report.error)}</p>")
            continue
        rows = "".join(
            f"<tr class='check-{escape(c.status.replace(' ', '-'))}'><td>{escape(STATUS_LABELS[c.status])}</td>"
            f"<td>{escape(c.what)}</td><td>{escape(c.expected)}</td><td>{escape(c.measured)}</td>"
            f"<td>{escape(c.why)}</td></tr>" for c in report.checks)
        parts.append("<div class='demo-checks'><table><thead><tr><th></th><th>check</th><th>expected</th>"
                     f"<th>measured</th><th>why</th></tr></thead><tbody>{rows}</tbody></table></div>")
    if state.running:
        parts.append(f"<p>Checking {escape(state.running)}...</p>")
    return "".join(parts)


def view():
    state = self_check.STARTUP.snapshot()
    finished = state.done or bool(state.skipped)
    return (gr.Accordion(label=title(state), open=any(r.failed for r in state.reports)),
            report_html(state), gr.Timer(active=not finished))


def build() -> tuple:
    """The opener; returns the page-load view (function, inputs, outputs) for ``build_app``."""
    with gr.Accordion(title(self_check.STARTUP.snapshot()), open=False, elem_id="startup-check") as opener:
        report = gr.HTML(elem_id="startup-check-report")
    timer = gr.Timer(REFRESH_SECONDS)
    # Reading the state is instant: never queued behind a visitor's model run, never an API.
    timer.tick(view, outputs=[opener, report, timer], concurrency_limit=None, show_progress="hidden",
               api_visibility="private")
    return view, [], [opener, report, timer]
