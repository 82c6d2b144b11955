"""The Reproduce block under a result: its Python call and its command line, from the settings
object its handler ran with (``demo.app.reproduce`` writes them)."""

import gradio as gr

from .common import deployment


def reproduce_block(elem_id: str) -> list:
    """A collapsed "Reproduce" block under a result: its Python call and its command line, each
    with a copy button (fill with :func:`reproduction`)."""
    with gr.Accordion("Reproduce: the Python call and the command line", open=False, elem_id=elem_id):
        python = gr.Code(language="python", label="Python", interactive=False, elem_id=f"{elem_id}-python")
        shell = gr.Code(language="shell", label="Command line", interactive=False, elem_id=f"{elem_id}-shell")
    return [python, shell]


def reproduction(command: str, model_name: str, kind: str | None, settings, emd: str = "auto",
                 **inputs) -> tuple[str, str]:
    """(Python, command line) for a result, from the settings object its handler ran with; for a
    local model they say what a shell or notebook without this app's settings needs to find it
    (a public app's paths stay unshown); both load the model in the precision it ran in here."""
    from ..app.reproduce import command_line, local_setup, python_call
    entry = deployment().catalog.local_entry(model_name) if model_name else None
    local = local_setup(entry, show_path=not deployment().settings.public) if entry else None
    dtype = deployment().precision() if model_name else "float32"
    return (python_call(command, model_name, kind, settings, emd, local, dtype, **inputs),
            command_line(command, model_name, kind, settings, emd, local, dtype, **inputs))
