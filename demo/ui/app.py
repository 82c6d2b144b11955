"""The Gradio app: five tabs that make masked vs causal LMs visible, and a lesson above them that
walks a class through them, assembled from demo/ui/*.

``build_app()`` only builds components (no model, no torch import), so the page is served within
seconds; ``launch()`` adds the queue (a concurrency limit shared by every model-running event,
and a bounded queue length) and then imports the torch-heavy core in the background, so the
first request does not pay for it, and then, where the deployment asks, checks its default models
(``demo.app.self_check``; the result opens above the tabs). Both serve one ``Deployment`` (``demo.app.deployment``): the
settings read once at start, and the models offered.
"""

import os

import gradio as gr

from ..app import self_check
from ..app.catalog import LOCAL_MODELS_VAR
from ..app.deployment import Deployment
from ..app.downloads import KEEP_SECONDS
from ..paths import STYLE
from . import (
    common,
    dropdown_taps,
    infill_tab,
    length_probe,
    lesson,
    loading,
    playback,
    prompting,
    ranking,
    results_tab,
    sharing,
    startup_check,
    warm_up,
)
from .common import message, use
from .gradio_mends import mend
from .handlers import import_core_in_background
from .run_marker import run_ends, run_starts
from .scroll_hint import scroll_hints
from .turns import on_zerogpu

TITLE = "Masked language models are generative in-context learners"

INTRO = f"""
# {TITLE}
BERT-style **masked** LMs (BERT, RoBERTa, ALBERT, DeBERTa, ModernBERT) were trained to fill in
blanks, yet they can **generate** text from a few-shot prompt and **rank** answers in context,
like GPT-style **causal** LMs (Samuel 2024, *BERTs are Generative In-Context Learners*). Each tab
puts one masked LM and one causal LM side by side on the same input. Models load on first use
(local ones offline; Hub ones download), so the first request with a model takes longer.
"""


def build_app(deployment: Deployment | None = None) -> gr.Blocks:
    """The page for ``deployment`` (default: this machine's, read now), which every handler then
    serves."""
    use(deployment)
    catalog = common.deployment().catalog
    # Gradio's copies of downloads and figures: swept hourly, kept a day (downloads.KEEP_SECONDS)
    with gr.Blocks(title=TITLE, delete_cache=(3600, KEEP_SECONDS)) as app:
        gr.Markdown(INTRO)
        if catalog.problems:
            gr.HTML("".join(message(problem) for problem in catalog.problems), elem_id="catalog-problems")
        for notice in catalog.notices():  # offline: what is hidden, and a kind with nothing to pick
            gr.HTML(message(notice.text, "error" if notice.error else "note"), elem_id=f"catalog-{notice.key}")
        if not catalog.offline and not any(m.local for m in catalog.models):
            gr.Markdown(f"<sub>No local models configured: set `{LOCAL_MODELS_VAR}` to model folders "
                        f"or .gguf files (separated by `{os.pathsep}`) to use models offline.</sub>")
        if common.deployment().settings.self_check:
            checked = startup_check.build()
            app.load(*checked, concurrency_limit=None, show_progress="hidden", api_visibility="private")
        guide = lesson.build()
        tabs = {}
        with gr.Tabs() as tab_bar:
            with gr.Tab("Prompting", id="prompting"):
                tabs["prompting"] = prompting.build(catalog)
            with gr.Tab("Infill", id="infill"):
                tabs["infill"] = infill_tab.build(catalog)
            with gr.Tab("Ranking", id="ranking"):
                tabs["ranking"] = ranking.build(catalog)
            with gr.Tab("Length probe", id="length"):
                tabs["length"] = length_probe.build(catalog)
            with gr.Tab("Results", id="results"):
                tabs["results"] = results_tab.build()
        lesson.wire(guide, tab_bar, tabs)
        warm_up.prepare(app, guide.steps if guide else [], tabs)
        # A link to this page as it is now (the tab in use, its inputs, settings and results, the
        # playback's steps), kept by the server: the link holds each component as the server last
        # saw it, so the tab a person picks and the players' steps are told to the server as they
        # change. Someone who opens it sees the same view, and a run checks its inputs as usual.
        keep_tab_in_use(tab_bar, list(tabs))
        playback.link_keeper()
        scroll_hints()
        dropdown_taps.dropdown_taps()
        gr.DeepLinkButton("Copy a link to this view", copied_value="Link copied", variant="secondary",
                          size="sm")
        # what a page shows when it opens: not an API; the page marks when all of it is shown
        run_ends("first-view", *(app.load(*part.first_view, api_visibility="private", js=run_starts("first-view"))
                                 for part in tabs.values() if part.first_view))
    return app


def keep_tab_in_use(tab_bar: gr.Tabs, tab_ids: list[str]) -> None:
    """Tell the server each tab a person opens (a lesson step tells it through its own update)."""
    def in_use(event: gr.SelectData):
        if isinstance(event.index, int) and 0 <= event.index < len(tab_ids):
            return gr.Tabs(selected=tab_ids[event.index])
        return gr.skip()

    # the update names the tab already shown, so the page does not move; the last pick wins (sent
    # in order, one at a time); it runs no model, so not queued
    run_ends("tab", tab_bar.select(in_use, None, tab_bar, api_visibility="private", queue=False,
                                   show_progress="hidden", trigger_mode="always_last", js=run_starts("tab")))


def preload(progress: warm_up.Progress | None = None) -> None:
    """Load the served deployment's default masked and causal LMs now, at start-up (``progress``
    says which is loading): on ZeroGPU, weights must be put on the GPU outside the requests
    (``spaces`` moves them when a request gets a GPU), or every first request would spend its GPU
    time loading; elsewhere the lesson's warm-up loads them first."""
    for kind in ("masked", "causal"):
        entry = common.deployment().catalog.default(kind)
        if entry is not None:
            if progress is not None:
                progress.loading = loading.loading_words(entry.name)
            loading.load(entry.name, kind)


# The footer's links a finger's size on a phone, as every control of the page (style.css): Gradio
# scopes the page's style sheet to its container, which the footer is outside of
FOOTER_STYLE = ("<style>@media (max-width: 640px) { footer a { min-height: 44px; display: inline-flex !important; "
                "align-items: center; } }</style>")


def launch(app: gr.Blocks, **kwargs) -> None:
    """Serve ``app`` (built by :func:`build_app`) with its deployment's queue and bounds, until the
    process stops."""
    serve(app, **kwargs)
    app.block_thread()


def serve(app: gr.Blocks, **kwargs) -> None:
    """Start serving ``app`` (``kwargs`` go to Gradio's ``launch``) and its background work: the
    core's import, the lesson's warm-up, the start-up check. Returns once the page is served."""
    settings, catalog = common.deployment().settings, common.deployment().catalog
    print("demo: " + catalog.summary().replace("\n", "\ndemo: "), flush=True)
    if settings.public:
        print("demo: public mode (typed names must be Hub ids; size cap "
              f"{settings.max_hub_gb:g} GB; {settings.runs_per_minute} runs per visitor a minute)")
    app.queue(default_concurrency_limit=max(settings.concurrency, settings.answers_at_once),
              max_size=settings.queue_size)
    sharing.RESULTS.max_entries = settings.shared_results
    # a thread for every request let in of each kind (generating, scoring, probing), most of them
    # waiting for their turn, and more for the page's quick events (Gradio's default is 40)
    options = dict(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                   max_threads=max(40, 3 * settings.answers_at_once + 16),
                   ssr_mode=False, show_error=False, footer_links=["api", "gradio"], head=FOOTER_STYLE,
                   prevent_thread_lock=True, css_paths=[STYLE], mcp_server=settings.mcp)
    options.update(kwargs)
    app.launch(**options)
    mend(app)
    core = import_core_in_background(settings)
    if settings.warm_lesson and not on_zerogpu():  # (ZeroGPU lends its GPU to visitors' requests only)
        warm_up.start(preload, after=core)
    self_check.start(common.deployment(), after=core, on_zerogpu=on_zerogpu())
