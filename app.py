"""Hugging Face Space entry point: `python app.py` serves the Gradio app."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from demo.ui.app import build_app, launch, on_zerogpu, preload  # noqa: E402

demo = build_app()
if on_zerogpu():  # ZeroGPU moves weights to the GPU only when they are loaded at start-up
    preload()

if __name__ == "__main__":
    launch(demo)
