"""Public mode (a Hugging Face Space): typed names are Hub ids only, Hub models are size-checked
before they download, and each visitor gets a share of the model runs.

The checks run in-process on ``demo.ui.loading.load`` and ``demo.ui.handlers.handler`` (what every tab calls; the
app reads its settings once, so a test that changes a DEMO_* variable restarts it: ``common.use``);
test_app_api.py checks the served API schema for server paths.
"""

import types

import pytest

from demo.app.limits import RunsPerVisitor
from demo.ui import common, handlers, infill_tab, loading, prompting
from demo.ui import ranking as ranking_tab
from tests.conftest import STANDIN_MLM, needs_shared

PATH_LIKE = [
    "/", "/etc", "/etc/passwd", "/nonexistent/model", "~", "~/.ssh/id_rsa", "~root", "..", "../..",
    "../../etc/passwd", "./assets", "assets", "demo", "tests/../assets", "a/../../etc",
    "%2Fetc%2Fpasswd", "..%2F..%2Fetc%2Fpasswd", "file:///etc/passwd", "C:\\Windows\\win.ini",
    "\\\\server\\share", str(STANDIN_MLM), str(STANDIN_MLM.resolve()),  # the listed model's own paths
]


@pytest.fixture
def public(monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/mlm-icl")  # what a Space sets
    monkeypatch.setenv("DEMO_LOCAL_MODELS", str(STANDIN_MLM))
    loads = []
    monkeypatch.setattr("demo.engine.models.load_model", lambda name, **kw: loads.append(name) or name)
    return loads


def test_every_path_like_name_gets_the_same_refusal(public):
    messages = set()
    for name in PATH_LIKE:
        with pytest.raises(ValueError) as refused:
            loading.load(name, "masked")
        messages.add(str(refused.value).replace(f"'{name}'", "'NAME'", 1))
    assert len(PATH_LIKE) >= 20 and public == []  # nothing was loaded
    assert messages == {"'NAME' is none of this app's models: pick a model from the list, or type "
                        "a Hugging Face Hub id (owner/name)."}


@needs_shared
def test_listed_local_models_load_by_short_name_only(public, monkeypatch):
    assert loading.load(STANDIN_MLM.name, "masked") == str(STANDIN_MLM.resolve())
    monkeypatch.delenv("SPACE_ID")  # on your own machine the listed path works too
    common.use(None)
    assert loading.load(str(STANDIN_MLM), "masked") == str(STANDIN_MLM.resolve())


def _hub_record(monkeypatch, files: dict[str, float]):
    """The Hub's metadata, mocked: a repository holding ``files`` (name -> bytes)."""
    siblings = [types.SimpleNamespace(rfilename=name, size=size) for name, size in files.items()]
    monkeypatch.setattr("demo.engine.sources.in_hub_cache", lambda name, revision: False)
    monkeypatch.setattr("demo.engine.sources.hub_unreachable", lambda: None)
    monkeypatch.setattr("huggingface_hub.HfApi.model_info",
                        lambda self, name, revision=None, files_metadata=False: types.SimpleNamespace(siblings=siblings))


def test_a_hub_model_over_the_size_cap_is_refused_before_download(public, monkeypatch):
    monkeypatch.setenv("DEMO_MAX_HUB_GB", "6")
    _hub_record(monkeypatch, {"config.json": 1e3, "model-00001.safetensors": 5e9,
                              "model-00002.safetensors": 2e9, "tokenizer.json": 2e6})
    with pytest.raises(ValueError, match=r"'big/model' has 7\.0 GB of weights; this app downloads "
                                         r"Hub models of up to 6 GB"):
        loading.load("big/model", "masked")
    assert public == []
    # safetensors are what loads: a repository's extra .bin copy does not count against it
    _hub_record(monkeypatch, {"model.safetensors": 3e9, "pytorch_model.bin": 3e9})
    assert loading.load("small/model", "masked") == "small/model"
    _hub_record(monkeypatch, {"pytorch_model.bin": 6.5e9})  # no safetensors: its .bin files count
    with pytest.raises(ValueError, match="6.5 GB"):
        loading.load("old/model", "masked")
    monkeypatch.delenv("SPACE_ID")  # not public: no check, it loads
    common.use(None)
    assert loading.load("old/model", "masked") == "old/model"


def _request(address, forwarded=""):
    return types.SimpleNamespace(headers={"x-forwarded-for": forwarded} if forwarded else {},
                                 client=types.SimpleNamespace(host=address), session_hash="s")


def test_each_visitor_gets_a_share_of_the_runs(monkeypatch):
    runs, clock = RunsPerVisitor(), [1000.0]
    monkeypatch.setattr("demo.app.limits.time.monotonic", lambda: clock[0])
    proxy = "10.0.0.1"  # a Space's proxy: visitors are told apart by X-Forwarded-For
    for _ in range(3):
        runs.check(_request(proxy, "1.1.1.1"), 3)
    with pytest.raises(ValueError, match="3 model runs in the last minute.*Try again in 60 s"):
        runs.check(_request(proxy, "1.1.1.1, 10.0.0.1"), 3)
    runs.check(_request(proxy, "2.2.2.2"), 3)  # someone else is not held up
    clock[0] += 61
    runs.check(_request(proxy, "1.1.1.1"), 3)  # a minute later: a new share


def test_the_share_is_applied_to_every_model_running_handler(monkeypatch):
    from gradio.context import LocalContext
    monkeypatch.setenv("SPACE_ID", "someone/mlm-icl")
    monkeypatch.setenv("DEMO_RUNS_PER_MINUTE", "2")
    monkeypatch.setattr(handlers, "RUNS", RunsPerVisitor())
    ran = []
    run = handlers.handler("score", lambda error: error)(lambda x: ran.append(x) or "ok")
    LocalContext.request.set(_request("3.3.3.3"))
    try:
        answers = [run(k) for k in range(3)]
    finally:
        LocalContext.request.set(None)
    assert answers[:2] == ["ok", "ok"] and ran == [0, 1]
    assert "2 model runs in the last minute" in answers[2] and 'role="alert"' in answers[2]


def test_zerogpu_asks_for_as_long_as_the_request_needs(monkeypatch):
    """On ZeroGPU (the `spaces` package) each model-running handler asks for a GPU for a duration
    computed from its own arguments: more tokens or a bigger model ask for longer, within bounds."""
    import sys

    asked = {}

    class FakeSpaces:
        @staticmethod
        def GPU(duration):
            return lambda fn: asked.setdefault(fn.__name__, duration) and fn

    monkeypatch.setitem(sys.modules, "spaces", FakeSpaces)
    monkeypatch.setattr("demo.app.deployment.hub_unreachable", lambda: None)  # a Space reaches the Hub

    # the page's handlers, whose endpoints build the settings their estimates read
    handlers.on_gpu(prompting.generate_masked, estimate=prompting.generation_estimate)
    handlers.on_gpu(ranking_tab.rank_masked, estimate=ranking_tab.ranking_estimate)
    generation, ranking = asked["generate_masked"], asked["rank_masked"]
    small, large = "jhu-clsp/ettin-encoder-17m", "microsoft/deberta-v2-xxlarge"
    assert generation("Hi", small, "greedy", 8, 4) == 15  # a small request: the least
    assert 15 < generation("Hi " * 500, large, "greedy", 128, 4) < 120
    assert generation("Hi " * 500, large, "greedy", 32, 4) < generation("Hi " * 500, large, "greedy", 128, 4)
    assert generation("Hi " * 900, small, "greedy", 128, 4) < generation("Hi " * 900, large, "greedy", 128, 4)
    assert generation("Hi " * 500, large, "beam", 64, 8) > generation("Hi " * 500, large, "greedy", 64, 8)
    assert generation("x" * 6000, large, "beam", 128, 8) == 120  # capped: the per-request time
    assert 15 == ranking("ctx", "a\nb", small) < ranking("ctx " * 1500, "long answer " * 30 + "\nb", large)

    def undeclared(prompt, model_name):
        return prompt

    handlers.on_gpu(infill_tab.infill_masked, estimate=infill_tab.infill_estimate)
    handlers.on_gpu(undeclared)
    infill, least = asked["infill_masked"], asked["undeclared"]
    text = "word " * 1500
    assert infill(text + "[blank]", large, "left_to_right", 1) < infill(text + "[blank] [blank:8]", large, "left_to_right", 8)
    assert least("Hi " * 1500, large) == 15  # a handler that declares no work asks for the least
