"""Gradio wiring only: every computation lives in the core modules of ``demo``."""
