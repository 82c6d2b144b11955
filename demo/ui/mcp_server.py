"""The app's MCP server is Gradio's, with one mend so that a plain tool call gets every output.

Gradio 6.31 (``gradio/mcp.py``, ``GradioMCPServer._execute_tool_without_progress``) answers a
queued tool call made without a progress token, as most agent frameworks make them, with
``[job.result()]``. For an event with several outputs, ``job.result()`` is the tuple of all of
them, so the client gets one text block holding a Python tuple; and where an output is a
``gr.State``, dropping it by its position then fails ("pop index out of range"). A call with a
progress token gets the list of outputs, one content part each. Gradio's documented way to skip
that path, ``queue=False``, would run models outside the queue and its concurrency limits, so the
plain call is mended here instead: the tuple becomes the list of outputs it stands for.
"""

import gradio as gr
from anyio.to_thread import run_sync


async def _outputs_as_a_list(job) -> list:
    result = await run_sync(job.result)
    # gradio_client returns one output as itself and several as a tuple (JSON never decodes to one)
    return list(result) if isinstance(result, tuple) else [result]


def mend_plain_tool_calls(app: gr.Blocks) -> None:
    """Give the launched app's MCP server (if it has one) the list of outputs for plain calls."""
    if app.mcp_server_obj is not None:
        app.mcp_server_obj._execute_tool_without_progress = _outputs_as_a_list
