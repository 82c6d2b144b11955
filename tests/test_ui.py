"""The app without a browser: model catalog, input caps, error wiring, every control labelled.

The browser test (tests/test_browser.py) drives the served page; these check the pieces it
cannot see cheaply.
"""

import json
import os
from pathlib import Path

import gradio as gr
import pytest

from demo.catalog import HUB_MODELS, LOCAL_MODELS_VAR, build_catalog
from demo.ui.common import shows_errors
from demo.settings import AppSettings, GridSettings
from demo.ui.limits import check_grid, check_text, parse_candidates, parse_numbers
from tests.conftest import STANDIN_MLM, needs_shared


def _model_folder(root, name, architecture):
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    return folder


# ---------------------------------------------------------------- catalog


def test_catalog_reads_local_models_and_prefers_them(tmp_path, monkeypatch):
    monkeypatch.setattr("demo.catalog.smollm2_gguf", lambda: None)
    mlm = _model_folder(tmp_path, "my-mlm", "BertForMaskedLM")
    clm = _model_folder(tmp_path, "my-clm", "GPT2LMHeadModel")
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    env = {LOCAL_MODELS_VAR: os.pathsep.join([str(mlm), str(tmp_path / "missing"), str(clm), str(gguf)])}

    catalog = build_catalog(env)

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
    monkeypatch.setattr("demo.catalog.smollm2_gguf", lambda: gguf)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _model_folder(tmp_path / "a", "mlm", "BertForMaskedLM"), _model_folder(tmp_path / "b", "mlm", "BertForMaskedLM")
    catalog = build_catalog({LOCAL_MODELS_VAR: os.pathsep.join([str(first), str(second), str(first)])})
    local = [(m.name, m.path) for m in catalog.models if m.local]
    assert local == [("mlm", str(first)), ("mlm-2", str(second)), ("smollm2", str(gguf))]


def test_offline_without_local_models_defaults_to_nothing(monkeypatch):
    """Offline, a picker must not default to a Hub model that cannot load."""
    from dataclasses import replace
    monkeypatch.setattr("demo.catalog.smollm2_gguf", lambda: None)
    catalog = replace(build_catalog({}), offline=True)
    assert catalog.default("masked") is None and catalog.default("causal") is None
    assert "cannot be reached" in catalog.summary() and "no local models" in catalog.summary()


def test_catalog_without_local_models_defaults_to_hub_models(monkeypatch):
    monkeypatch.setattr("demo.catalog.smollm2_gguf", lambda: None)
    catalog = build_catalog({})
    masked, causal = catalog.default("masked"), catalog.default("causal")
    assert not masked.local and masked.kind == "masked" and "/" in masked.name
    assert not causal.local and causal.kind == "causal"
    assert "standin" not in masked.name and "shared" not in masked.name
    kinds = {m.kind for m in HUB_MODELS}
    assert kinds == {"masked", "causal"}
    assert {"microsoft/deberta-v2-xxlarge", "ltg/deberta-xxlarge-fixed", "albert/albert-xxlarge-v2",
            "facebook/opt-1.3b"} <= {m.name for m in HUB_MODELS}


def test_remote_code_models_in_the_catalog_are_allowlisted():
    from demo.models import REMOTE_CODE_ALLOWLIST
    ltg = {m.name for m in HUB_MODELS if m.name.startswith("ltg/")}
    assert ltg and ltg <= set(REMOTE_CODE_ALLOWLIST)
    for name, pinned in REMOTE_CODE_ALLOWLIST.items():  # a pin is a full commit id, or not there yet
        assert pinned is None or (len(pinned) == 40 and int(pinned, 16) >= 0), name


# ---------------------------------------------------------------- input caps


def test_candidates_are_parsed_one_per_line_within_caps():
    assert parse_candidates("  a cat \n\n dog\n") == ["a cat", "dog"]
    with pytest.raises(ValueError, match="at least 2"):
        parse_candidates("only one\n   \n")
    with pytest.raises(ValueError, match="at most 8"):
        parse_candidates("\n".join(f"c{i}" for i in range(9)))
    with pytest.raises(ValueError, match="characters"):
        parse_candidates("short\n" + "x" * 401)


def test_text_and_grid_caps():
    limits = AppSettings(max_prompt_chars=10, max_grid_cells=4, max_grid_tokens=1000)
    assert check_text("0123456789", "prompt", limits.max_prompt_chars) == "0123456789"
    with pytest.raises(ValueError, match="11 characters"):
        check_text("01234567890", "prompt", limits.max_prompt_chars)
    with pytest.raises(ValueError, match="empty"):
        check_text("  \n", "prompt")
    assert parse_numbers("512, 256 256", "length") == [256, 512]
    with pytest.raises(ValueError, match="numbers"):
        parse_numbers("256, lots", "length")
    with pytest.raises(ValueError, match="between 0.0 and 1.0"):
        parse_numbers("0.5, 1.5", "depth", float, 0.0, 1.0)
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
    from demo.ui.ranking import rank_masked
    summary, table, plot, scores, *_ = rank_masked("ctx", "a\nb", "/no/such/model/folder", "right_masks",
                                               2, False, "completion", "")
    assert "not one of this app&#x27;s models" in summary and table is None and plot is None and scores is None
    # an existing folder and a missing one get the same words: the page tells nothing about disks
    for path in ("/etc", "/etc/passwd", "/no/such/folder", "assets"):
        shown = rank_masked("ctx", "a\nb", path, "right_masks", 2, False, "completion", "")[0]
        assert shown.replace(path, "PATH") == summary.replace("/no/such/model/folder", "PATH")


# ---------------------------------------------------------------- the page


INPUTS = (gr.Textbox, gr.Dropdown, gr.Slider, gr.Radio, gr.Checkbox, gr.Number, gr.CheckboxGroup)


@needs_shared
def test_every_control_has_a_label_and_help_and_defaults_pick_local_models(monkeypatch):
    from demo.ui.app import build_app
    monkeypatch.setenv(LOCAL_MODELS_VAR, str(STANDIN_MLM))
    catalog = build_catalog()
    app = build_app(catalog)
    controls = [b for b in app.blocks.values() if isinstance(b, INPUTS) and b.interactive is not False]
    assert len(controls) >= 30
    unlabelled = [(type(c).__name__, c.elem_id) for c in controls if not c.label or not c.info]
    assert unlabelled == []
    pickers = {c.elem_id: c.value for c in controls if isinstance(c, gr.Dropdown) and c.elem_id
               and c.elem_id.endswith(("-mlm", "-causal"))}
    assert pickers["gen-mlm"] == pickers["rank-mlm"] == pickers["probe-mlm"] == STANDIN_MLM.name
    smollm2 = catalog.default("causal")
    assert pickers["gen-causal"] == pickers["rank-causal"] == smollm2.name


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
    import demo.catalog
    monkeypatch.setattr(demo.catalog, "smollm2_gguf", lambda: None)  # a Space has no local models
    hub = build_catalog({})
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
