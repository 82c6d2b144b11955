"""A property-based fuzz of the running app at both doors, Gradio's HTTP API and MCP, with values
drawn by Hypothesis from the JSON schemas the MCP tools publish (hypothesis-jsonschema) and off
them (other JSON types, lists, objects, numbers as text, NaN, huge numbers, lone surrogates).

Properties, for every call: both doors answer (no error event; a tool error only for text that
JSON cannot carry on from the MCP server, with the page's sentence); neither says
"Something went wrong"; a refusal is the same sentence at both doors, at most 300 characters, in
the page's words (no Python or JSON-schema notation); an accepted generation's Python Reproduce
code reruns here to the text the app wrote; and the server's log gains no traceback.

The suite runs a bounded, derandomized budget (about a minute); ``MLM_ICL_FUZZ=3000`` runs that
many examples with fresh random draws. A failure Hypothesis found and shrank is kept in
``REGRESSIONS`` and checked on every run.
"""

import asyncio
import concurrent.futures
import html
import os
import re
import threading

import pytest

from tests.test_app_api import MCP_CALLS, PYTHON_TEXT, SCHEMA_TEXT, SMOLLM2, STANDIN_NAME, _error_sentence, http_call

hypothesis = pytest.importorskip("hypothesis")
jsonschema_strategies = pytest.importorskip("hypothesis_jsonschema")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from benchmarks.app_process import running_app  # noqa: E402
from tests.conftest import STANDIN_MLM  # noqa: E402

pytestmark = pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in "
                                "MLM) is not beside this clone")

LONG_RUN = int(os.environ.get("MLM_ICL_FUZZ", "0"))
EXAMPLES = LONG_RUN or 120
UNEXPECTED = "Something went wrong"
PYTHON_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}")  # Python's escape of an odd character

# Found by this fuzz and shrunk (the tool, the arguments changed from its valid call): each was a
# server traceback or a refusal that was not the page's sentence
REGRESSIONS = [
    ("rank_masked", dict(model_name=[])),  # a batch key built from a raw list (found on the old code)
    ("rank_masked", dict(model_name=[STANDIN_NAME])),
    ("rank_causal", dict(model_name={"a": 1})),
    ("generate_masked", dict(emd=["off"])),
    ("infill_masked", dict(emd={"0": 0})),
    ("generate_causal", dict(model_name=[SMOLLM2])),
    ("generate_any_order", dict(strategy="beam")),  # named a setting the tool does not have
    ("generate_causal", dict(temperature=1e308)),  # an integer's bound said for a float
    ("sweep_masks", dict(values=["0", "1"])),  # lists of numbers as text refused, as numbers taken
    ("probe_masked", dict(lengths=[128])),
    ("rank_masked", dict(normalize="true")),
    ("lookup_results", dict(papers=["OURS"])),
    ("sweep_masks", dict(shots=None)),
    ("sweep_masks", dict(task="")),
    ("generate_causal", dict(model_name="\u00a1", min_p=0.0)),  # refused in the JSON schema's words ("is not one of")
    ("generate_any_order", dict(block_length="inf")),  # the value as sent, quoted, spells anything
    ("generate_causal", dict(model_name="")),  # the causal side skipped: no Reproduce code
    ("generate_any_order", dict(strategy="sample", seed=None)),  # accepted: a drawn seed reruns
    ("generate_causal", dict(strategy="sample", seed=None, padding_masks="4")),
]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The app with the offline pair, each run cut short (the fuzz checks answers, not models)."""
    log = tmp_path_factory.mktemp("fuzz") / "app.log"
    with running_app([str(STANDIN_MLM)], log, DEMO_MAX_REQUEST_SECONDS="4", DEMO_MAX_NEW_TOKENS="8",
                     DEMO_MAX_GRID_CELLS="2", DEMO_MAX_GRID_TOKENS="256", DEMO_MAX_SWEEP_ITEMS="2") as running:
        yield running


class Doors:
    """One MCP session (in a loop of its own) and the HTTP API's parameter order, for many calls."""

    def __init__(self, url: str):
        self.url, self.loop = url, asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.opened = concurrent.futures.Future()
        self.served = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        self.tools = self.opened.result(120)
        self.order = _http_order(url)

    def _run(self, coroutine, timeout: float = 120):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def _serve(self):
        """The session, open until :meth:`close` (entered and left in this one task, as anyio asks)."""
        import httpx
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        self.closing = asyncio.Event()
        async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=600)) as http, \
                streamable_http_client(self.url + "gradio_api/mcp/", http_client=http) as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            self.session = session
            self.opened.set_result({tool.name: tool for tool in (await session.list_tools()).tools})
            await self.closing.wait()

    def mcp(self, tool: str, arguments: dict):
        return self._run(self.session.call_tool(tool, arguments))

    def http(self, tool: str, arguments: dict):
        endpoint = MCP_CALLS[tool][1]
        return http_call(self.url, endpoint, [arguments.get(name, default) for name, default in self.order[endpoint]])

    def close(self):
        self.loop.call_soon_threadsafe(self.closing.set)
        self.served.result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)


def _http_order(url: str) -> dict:
    """Each endpoint's parameters, in order, with their defaults (Gradio's API info)."""
    import json
    import urllib.request
    with urllib.request.urlopen(f"{url}gradio_api/info", timeout=60) as response:
        info = json.load(response)
    return {name: [(p["parameter_name"], p.get("parameter_default")) for p in endpoint["parameters"]]
            for name, endpoint in info["named_endpoints"].items()}


@pytest.fixture(scope="module")
def doors(app):
    import json

    import httpx._content
    with pytest.MonkeyPatch.context() as patch:
        # the MCP client writes JSON's escapes, as a browser does, so that a lone surrogate can travel
        patch.setattr(httpx._content, "json_dumps", lambda obj, **kw: json.dumps(obj, **dict(kw, ensure_ascii=True)))
        opened = Doors(app.url)
        yield opened
        opened.close()


def check_call(app, doors: Doors, tool: str, changed: dict) -> None:
    """One call at both doors, its properties asserted (the module's docstring)."""
    arguments = dict(MCP_CALLS[tool][0], **changed)
    before = app.log.read_text().count("Traceback")
    event, outputs = doors.http(tool, arguments)
    result = doors.mcp(tool, arguments)
    case = (tool, changed)
    assert event == "complete", (case, event, str(outputs)[:300])
    shown = " ".join(str(output) for output in outputs)
    match = re.search(r'class="demo-error"[^>]*>(.*?)</div>', shown, re.S)
    # (text JSON cannot carry from the MCP server to the page is refused before, as a tool error)
    over_http = html.unescape(match.group(1)) if match else ""
    over_mcp = result.content[0].text if result.isError else _error_sentence(result)
    assert UNEXPECTED not in over_http + over_mcp, (case, over_http)
    assert over_mcp == over_http, (case, over_mcp, over_http)
    if over_mcp:
        assert len(over_mcp) <= 300, (case, over_mcp)
        unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "''", over_mcp)  # (the values as sent may spell anything)
        assert not PYTHON_TEXT.search(unquoted) and not SCHEMA_TEXT.search(unquoted), (case, over_mcp)
        assert not PYTHON_ESCAPE.search(over_mcp), (case, over_mcp)
    elif tool in WRITERS:
        check_reproduce(case, outputs)
    assert app.log.read_text().count("Traceback") == before, (case, app.log.read_text()[-3000:])


WRITERS = ("generate_masked", "generate_any_order", "generate_causal")  # their Reproduce code's `result.text`


def check_reproduce(case, outputs: list) -> None:
    """An accepted generation's Python Reproduce code, run here, writes the text the app wrote
    (unless the app's time limit cut the run short)."""
    import contextlib
    import io
    text, python = outputs[0], next((o for o in outputs if isinstance(o, str) and "\nresult = " in o), None)
    if python is None or "stopped by: time limit" in " ".join(str(o) for o in outputs):
        return  # (a side skipped, with no model picked, has no code; a run cut short is not its answer)
    namespace = {}
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()):
        patch.setenv("DEMO_LOCAL_MODELS", os.environ.get("DEMO_LOCAL_MODELS", ""))  # (the code sets it)
        exec(python, namespace)
    assert namespace["result"].text == text, (case, namespace["result"].text, text)


@pytest.mark.parametrize("tool,changed", REGRESSIONS, ids=[f"{t}-{'-'.join(c)}" for t, c in REGRESSIONS])
def test_what_the_fuzz_found_stays_fixed(app, doors, tool, changed):
    check_call(app, doors, tool, changed)


# Values off any schema: every JSON type, numbers past any bound, NaN, numbers and flags as text,
# lone surrogates (half an emoji), lists and objects where one value belongs
OFF_SCHEMA = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2),
    st.integers(-5, 600).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["true", "false", "null", "", " ", "[1, 2]"]),
    st.lists(st.one_of(st.integers(-3, 600), st.text(max_size=4), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _values(schema: dict):
    """Values for one parameter: drawn from its published schema, or off it."""
    try:
        drawn = jsonschema_strategies.from_schema(schema)
    except Exception:  # noqa: BLE001 (a schema hypothesis-jsonschema cannot read: off-schema values only)
        return OFF_SCHEMA
    return st.one_of(drawn, OFF_SCHEMA)


@st.composite
def calls(draw, tools: dict):
    """(a tool, one to three of its arguments changed from its valid call)."""
    tool = draw(st.sampled_from(sorted(MCP_CALLS)))
    properties = tools[tool].inputSchema["properties"]
    names = draw(st.lists(st.sampled_from(sorted(properties)), min_size=1, max_size=3, unique=True))
    return tool, {name: draw(_values(properties[name])) for name in names}


def test_any_value_at_either_door_gets_an_answer_in_words(app, doors):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG_RUN, database=None,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(calls(doors.tools))
    def fuzz(call):
        check_call(app, doors, *call)

    fuzz()
