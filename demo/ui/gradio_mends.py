"""Seven mends to Gradio 6.31's internals, each for an upstream behaviour named below, and one
question Gradio has no public answer to (:func:`still_wanted`); the one place the app reaches
inside Gradio. :func:`mend` applies the mends to a launched app.

**A link to this view loses values** once an update has changed a component's other properties.
The server keeps a copy of each session's components, and "Copy a link to this view" saves that
copy. An update without a value (the Results filters narrowing each other's choices) replaces
the session's component by a new one (``Blocks.postprocess_data``), which has a new id and the
built value; from then on the person's values are written under the new id, which no page
knows, and the link reopens with the built value. The mend gives the new component the id it
stands for and keeps the value the copy held; an update with a value sets it afterwards, as
before.

**An API call with fewer inputs than the event has** (``{"data": []}`` over HTTP; gradio_client
fills the defaults itself, raw HTTP callers do not): ``Blocks.validate_inputs`` raises a
ValueError that the client receives as ``{"error": null}``, with a traceback in the log. The
mend gives each missing input its component's default, as gradio_client would, so the handler
runs and answers in words (an empty text is said to be empty). JSON has no NaN or infinity, but
Python's JSON reader takes them over HTTP, where the MCP SDK reads them as null (its messages pass
through pydantic's JSON mode) and a browser's ``JSON.stringify`` writes null: the mend reads them
as null too, so a value means one thing at both doors.

**The app's MCP server** gets two mends so that a tool call gets every output. Gradio 6.31 (``gradio/mcp.py``, ``GradioMCPServer._execute_tool_without_progress``) answers a
queued tool call made without a progress token, as most agent frameworks make them, with
``[job.result()]``. For an event with several outputs, ``job.result()`` is the tuple of all of
them, so the client gets one text block holding a Python tuple; and where an output is a
``gr.State``, dropping it by its position then fails ("pop index out of range"). A call with a
progress token gets the list of outputs, one content part each. Gradio's documented way to skip
that path, ``queue=False``, would run models outside the queue and its concurrency limits, so the
plain call is mended here instead: the tuple becomes the list of outputs it stands for.

Gradio then drops the outputs of ``gr.State`` components (not in a tool's schema) by popping
their positions in order (``GradioMCPServer.pop_returned_state``), so every State after the first
is looked for one place too far: an event with two States (a ranking's scores and their variant)
fails. The mend drops them all at once, and writes an output that is empty (a refused request's
figure) as empty text, not "None".

**MCP's own input check**: the MCP SDK (``mcp.server.lowlevel.Server.call_tool``, which Gradio
registers with its default ``validate_input=True``) checks a call against the tool's JSON schema
and refuses in the schema's notation, before the app's own words are reached, so a value was
refused over MCP in other words than over HTTP, or refused there and taken here. The mend lets the
SDK see each tool as taking any object of arguments, so the app checks every value, at both doors
alike; an argument the tool does not take is refused in a sentence naming the nearest one.

**MCP and broken text**: a queued tool call goes on through Gradio's own client, whose JSON
encoder cannot write a lone surrogate, so a text holding one got Python's codec message. The
mend refuses it first, in the sentence the page gives.

**Gradio's wait estimate** ("processing | 3.4/0.5s") is the mean time of every past run of the
event (``Queue.process_time_per_fn``): shared answers in milliseconds and own runs in seconds
alike, so a student waiting for a turn is promised a fraction of the wait. The app tells a waiting
request its own place and wait (``demo.ui.turns``); the mend keeps Gradio from estimating at all,
so the page shows the time waited so far and that line.
"""

import math

import gradio as gr
from anyio.to_thread import run_sync
from gradio.context import LocalContext
from gradio.state_holder import SessionState

from ..user_text import as_said, check_readable, nearest


class _NoEstimates(dict):
    """Run times Gradio keeps to estimate waits, kept by none: every estimate is "unknown"."""

    def __contains__(self, fn) -> bool:
        return False

    def __missing__(self, fn):
        return _Untimed()


class _Untimed:
    def add(self, seconds: float) -> None:
        pass

_replace = SessionState.__setitem__
_refresh = SessionState._update_config


def _keeping_value(change):
    """``change`` to the session's copy of a component, keeping the value the copy held."""
    def change_keeping_value(self: SessionState, key: int, *args) -> None:
        props = self.config_values.get(key, {}).get("props", {})
        keep = "value" in props and not isinstance(self.blocks_config.blocks.get(key), gr.State)
        value = props.get("value")
        change(self, key, *args)
        if keep:
            self.config_values[key]["props"]["value"] = value
    return change_keeping_value


def _replace_keeping_id(self: SessionState, key: int, block) -> None:
    if isinstance(block, gr.blocks.Block) and not isinstance(block, gr.State):
        block._id = key  # the session's version of component ``key``: values are written under it
    _replace(self, key, block)


async def _outputs_as_a_list(job) -> list:
    result = await run_sync(job.result)
    # gradio_client returns one output as itself and several as a tuple (JSON never decodes to one)
    return list(result) if isinstance(result, tuple) else [result]


def _without_states(components, outputs):
    """The outputs of every component that is not a ``gr.State``; an empty one (a figure not drawn
    because the request was refused) as empty text, where Gradio would write "None"."""
    if not isinstance(outputs, (list, tuple)):
        return outputs
    return ["" if value is None else value
            for component, value in zip(components, outputs) if not isinstance(component, gr.State)]


def _travels(text: str) -> bool:
    """Whether JSON written by Python's own encoder can carry ``text`` (no lone surrogate)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _checking_arguments(server):
    """The MCP server's argument preparation, after a check of every argument's name and text: an
    argument the tool does not take is refused in a sentence naming the nearest one (Gradio's
    client would send the agent to a page's footer); Gradio sends a queued tool call on through
    its own client, whose JSON cannot carry a lone surrogate (half of an emoji; a browser's JSON
    escapes it), so the caller would get Python's codec message: it gets the sentence the page's
    check of the endpoint's arguments says (``settings_form.endpoint``), as the HTTP door does."""
    prepare = server._prepare_tool_call_args

    def prepare_checked(name, arguments):
        endpoint = server.api_info["named_endpoints"].get(server.tool_to_endpoint.get(name), {})
        takes = [p["parameter_name"] for p in endpoint.get("parameters", [])]
        for key in arguments:
            if takes and key not in takes:
                near = nearest(key, takes)
                raise ValueError(f"The tool {name} takes no argument {as_said(key)}"
                                 + (f": did you mean {near}?" if near else "; the tool's description lists those it takes."))
        texts = [text for value in arguments.values() for text in (value if isinstance(value, list) else [value])]
        if any(isinstance(text, str) and not _travels(text) for text in texts):
            block_fn = server.get_block_fn_from_endpoint_name(server.tool_to_endpoint.get(name))
            getattr(block_fn.fn, "check", lambda arguments: None)(arguments)  # the page's own sentence
            for key, value in arguments.items():
                for text in value if isinstance(value, list) else [value]:
                    if isinstance(text, str):
                        check_readable(text, key.replace("_", " ") + " argument")
        return prepare(name, arguments)
    return prepare_checked


def _checked_by_the_app(cached_tool):
    """The MCP server's tool definitions as its input check reads them: any object of arguments.
    The SDK checks a call against the tool's JSON schema before the tool runs and answers in the
    schema's notation ("'Greedy' is not one of [...]"); the app checks every value itself, in the
    page's words, as it does over HTTP. Clients still list the full schema."""
    async def definition(name):
        tool = await cached_tool(name)
        return None if tool is None else tool.model_copy(update={"inputSchema": {"type": "object"}})
    return definition


def _with_defaults(block_fn, inputs: list) -> None:
    """Gradio's input check, replaced: missing inputs get their components' default values; a NaN
    or an infinity is null (see the module's words)."""
    inputs[:] = [_as_json(value) for value in inputs]
    inputs.extend(getattr(block, "value", None) for block in block_fn.inputs[len(inputs):])


def _as_json(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return [_as_json(item) for item in value] if isinstance(value, list) else value


def mend(app: gr.Blocks) -> None:
    """All seven mends, on the launched app: a session's copy keeps values that updates leave out
    (for every app of this process: the copy's class is Gradio's); missing API inputs take their
    defaults; the MCP server (if it runs) leaves checking values to the app, gives plain calls the
    list of outputs, less every State's, and refuses unknown arguments and broken text in words;
    Gradio estimates no wait."""
    app._queue.process_time_per_fn = _NoEstimates()
    SessionState.__setitem__ = _keeping_value(_replace_keeping_id)
    SessionState._update_config = _keeping_value(_refresh)
    app.validate_inputs = _with_defaults
    if app.mcp_server_obj is not None:
        app.mcp_server_obj._execute_tool_without_progress = _outputs_as_a_list
        app.mcp_server_obj.pop_returned_state = _without_states
        app.mcp_server_obj._prepare_tool_call_args = _checking_arguments(app.mcp_server_obj)
        sdk_server = app.mcp_server_obj.mcp_server
        sdk_server._get_cached_tool_definition = _checked_by_the_app(sdk_server._get_cached_tool_definition)


def still_wanted() -> bool:
    """Whether someone still waits for the request being served (True outside a request).

    Gradio drops a cancelled or abandoned request only while it waits in its queue; one already
    let in (``AppSettings.answers_at_once``) runs to its end, with no public way to ask. A
    cancelled one is no longer among its session's pending events (``/cancel`` completes it), and
    one whose client left is marked not ``alive`` among the queue's active jobs."""
    event_id, request, blocks = (LocalContext.event_id.get(None), LocalContext.request.get(None),
                                 LocalContext.blocks.get(None))
    queue = getattr(blocks, "_queue", None)
    if not (event_id and request is not None and queue is not None):
        return True
    if event_id not in queue.pending_event_ids_session.get(request.session_hash, ()):
        return False
    return all(event.alive for jobs in queue.active_jobs if jobs for event in jobs if event._id == event_id)
