"""Placeholder page until the app issue lands: the Space must serve something."""

import os

import gradio as gr


def build_app() -> gr.Blocks:
    with gr.Blocks(title="MLMs are generative in-context learners") as app:
        gr.Markdown("# Masked language models are generative in-context learners\n"
                    "The interactive tabs are being built.")
    return app


def launch(app: gr.Blocks) -> None:
    app.queue(default_concurrency_limit=2).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
