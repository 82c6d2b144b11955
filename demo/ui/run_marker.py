"""The page's end-of-run marker, which browser tests and lessons wait for (never for text that may
still change)."""

import json

# The page marks when a run has ended. The text of its outputs is no such sign: a run streams
# its outputs, its chain's events fill them one after another, and the last run's text stays
# until this one's replaces it. The first event of each chain of a run counts the chain in
# flight (data-running-NAME on the page's body), its last event counts it out, a task after its
# outputs arrived (so they are drawn); when none of NAME's chains is in flight, data-runs-NAME
# goes up by one. A burst of runs (a filter's change events as a tab is first drawn) thus ends
# once, when its last chain does, and a next chain that starts as one ends keeps it in flight.
_RUN_RECORD_JS = """const runs = (window.demoRuns = window.demoRuns || {});
  const run = (runs[__NAME__] = runs[__NAME__] || {running: 0, ended: 0});
  const show = () => {
    document.body.setAttribute(`data-running-${__NAME__}`, String(run.running));
    document.body.setAttribute(`data-runs-${__NAME__}`, String(run.ended));
  };"""
RUN_STARTS_JS = """(...inputs) => {
  __RECORD__
  run.running += 1;
  show();
  return __FIRST__;
}"""
RUN_ENDS_JS = """async () => {
  await new Promise((drawn) => setTimeout(drawn));
  __RECORD__
  run.running -= 1;
  if (run.running === 0) run.ended += 1;
  show();
}"""


def _run_js(template: str, name: str, first: str = "") -> str:
    return (template.replace("__RECORD__", _RUN_RECORD_JS).replace("__FIRST__", first)
            .replace("__NAME__", json.dumps(name)))


def run_starts(name: str, js: str | None = None) -> str:
    """The ``js=`` of the first event of each chain of run ``name``: counts the chain in flight,
    then hands the event's inputs on (to ``js``, the event's own browser function, if any)."""
    return _run_js(RUN_STARTS_JS, name, f"({js.strip()})(...inputs)" if js else "inputs")


def run_ends(name: str, *last_events) -> None:
    """After each of ``last_events`` (the last event of each chain of run ``name``, each begun
    with :func:`run_starts`), the page counts that chain out. In the browser only: no API."""
    for event in last_events:
        event.then(None, None, None, js=_run_js(RUN_ENDS_JS, name), api_visibility="private",
                   show_progress="hidden")
