"""Model loading: sources, family facts, refusals."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, DebertaV2Config, DebertaV2ForMaskedLM

import tests.floats as floats
from demo.engine.families import family_of, max_positions, pretrained_length
from demo.engine.heads import mlm_head
from demo.engine.models import load_model
from demo.engine.reading import hidden_at
from tests.conftest import MASKED_FAMILIES, STANDIN_MLM, TOKENIZERS, needs_shared, padded_batch
from tests.test_emd import VERSIONS, perturb


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
def test_masked_families_build_with_their_facts(tiny_model, family):
    lm = tiny_model(family)
    assert lm.kind == "masked"
    assert lm.tokenizer.mask_token_id is not None
    relative = family in ("deberta-v2", "modernbert")
    assert (lm.max_length is None) == relative
    if family == "roberta":
        assert lm.max_length == 512  # 514 embeddings minus RoBERTa's padding offset
    assert lm.padding_masks == (2 if family in ("albert", "deberta-v2") else 1)
    # measured, not assumed: WordPiece and SentencePiece lose "\n", byte-level BPE keeps it
    assert lm.newline_survives == (family in ("roberta", "modernbert"))


def test_the_family_table_loads_no_torch_and_names_block_encoders_that_exist():
    """The table is plain data (importing it loads no torch); every family it marks for the prefix
    cache names a module of demo.engine.families with an ``encode_block``."""
    code = ("import sys, importlib; from demo.engine import families as f\n"
            "print('torch' in sys.modules)\n"
            "print(all(callable(importlib.import_module(f'{f.__name__}.{family.prefix_cache}').encode_block)"
            " for family in f.FAMILIES.values() if family.prefix_cache))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert out.split() == ["False", "True"]


def test_an_absolute_position_deberta_keeps_its_family_facts():
    config = DebertaV2Config(position_biased_input=True, max_position_embeddings=512)
    family = family_of(config)
    assert not family.relative_positions and max_positions(config, family) == 512
    assert family.legacy is False and family.prefix_cache == "deberta_v2" and family.padding_masks == 2
    assert pretrained_length(config, family) == 512


def test_gpt2_is_causal(tiny_model):
    lm = tiny_model("gpt2")
    assert lm.kind == "causal" and lm.max_length == 1024 and lm.newline_survives


def _deberta_checkpoint(tmp_path, family_folder, legacy: bool, version: str = "v2",
                       storage: str = "safetensors"):
    """A small random DeBERTa MLM (Microsoft's architecture, noise on every weight) saved by
    transformers with ``legacy``'s head layout, as ``storage``: safetensors, sharded safetensors
    (an index and several files) or PyTorch .bin."""
    config_class, model_class, architecture = VERSIONS[version]
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "roberta-base" if version == "v1"
                                              else family_folder("deberta-v2"))
    config = config_class(**architecture, num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                          intermediate_size=64, vocab_size=len(tokenizer), legacy=legacy)
    torch.manual_seed(0)
    model = model_class(config)
    perturb(model)
    folder = tmp_path / f"{version}_legacy_{legacy}_{storage}"
    model.save_pretrained(folder, **({"max_shard_size": "20KB"} if storage == "sharded" else {}))
    tokenizer.save_pretrained(folder)
    if storage == "bin":
        torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    return folder


def _assert_logits_equal_transformers(lm, reference):
    """The engine's reading of the loaded model (every non-padding row of a padded batch) against
    transformers' own class loaded from the same folder."""
    ids, mask = padded_batch(reference.config.vocab_size, [11, 6])
    rows, cols = mask.nonzero(as_tuple=True)
    with torch.no_grad():
        got = mlm_head(lm.model)(hidden_at(lm.model, ids, mask, rows, cols))
        expected = reference(input_ids=ids, attention_mask=mask).logits[rows, cols]
    torch.testing.assert_close(got, expected, **floats.states(lm, expected))


@pytest.mark.floats
@pytest.mark.parametrize("legacy", [True, False], ids=["cls.predictions", "lm_predictions"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_either_emd_layout_loads_with_its_trained_head(tmp_path, family_folder, version, legacy):
    """transformers' default layout (cls.predictions.*, how fine-tuned DeBERTas are saved) and
    Microsoft's (lm_predictions.lm_head.*) both load, with the head their weights hold."""
    folder = _deberta_checkpoint(tmp_path, family_folder, legacy, version)
    lm = load_model(str(folder), device="cpu", emd="off")
    assert hasattr(lm.model, "cls") == legacy and hasattr(lm.model, "lm_predictions") != legacy
    _assert_logits_equal_transformers(lm, VERSIONS[version][1].from_pretrained(folder))


@pytest.mark.floats
@pytest.mark.parametrize("storage", ["sharded", "bin"])
@pytest.mark.parametrize("legacy", [True, False], ids=["cls.predictions", "lm_predictions"])
def test_the_head_layout_is_read_from_the_weight_names_not_the_config(tmp_path, family_folder, storage, legacy):
    """A config.json that says the other layout (Microsoft's own configs say none, which
    transformers reads as legacy=True) does not decide: the weights' names, through a shard index
    or in a .bin file, do."""
    folder = _deberta_checkpoint(tmp_path, family_folder, legacy, storage=storage)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "legacy": not legacy}))
    lm = load_model(str(folder), device="cpu", emd="off")
    assert hasattr(lm.model, "cls") == legacy
    _assert_logits_equal_transformers(lm, DebertaV2ForMaskedLM.from_pretrained(folder, legacy=legacy))


@pytest.mark.floats
def test_a_hub_models_head_layout_is_read_once_its_files_are_on_disk(tmp_path, family_folder, monkeypatch):
    """A Hub model's weights reach the local cache during its first load: the names read before
    are none, and the legacy head the family's layout leaves missing is loaded after them."""
    from demo.engine.families import deberta
    folder = _deberta_checkpoint(tmp_path, family_folder, legacy=True)
    real, calls = deberta.weight_names, []

    def not_downloaded_yet(*args, **kwargs):
        calls.append(args)
        return [] if len(calls) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(deberta, "weight_names", not_downloaded_yet)
    lm = load_model(str(folder), device="cpu", emd="off")
    assert len(calls) == 2 and hasattr(lm.model, "cls")
    _assert_logits_equal_transformers(lm, DebertaV2ForMaskedLM.from_pretrained(folder))


def test_a_deberta_without_either_head_is_refused_naming_microsofts(tmp_path, family_folder):
    from transformers import DebertaV2Model
    folder = _deberta_checkpoint(tmp_path, family_folder, legacy=False)
    DebertaV2Model.from_pretrained(folder).save_pretrained(tmp_path / "encoder")
    AutoTokenizer.from_pretrained(folder).save_pretrained(tmp_path / "encoder")
    with pytest.raises(ValueError, match="no trained masked LM head: .*lm_predictions.lm_head"):
        load_model(str(tmp_path / "encoder"), device="cpu")


def test_encoder_without_head_refused(tmp_path, family_folder):
    from transformers import AutoConfig, AutoModel
    config = AutoConfig.from_pretrained(family_folder("bert"), num_hidden_layers=1, hidden_size=32,
                                        num_attention_heads=2, intermediate_size=64)
    AutoModel.from_config(config).save_pretrained(tmp_path / "enc")
    with pytest.raises(ValueError, match="cls.predictions"):
        load_model(str(tmp_path / "enc"), device="cpu")


@pytest.mark.parametrize("name, message", [
    ("", "No model given"),
    ("/no/such/folder", "does not exist"),
    ("not a model id!", "valid Hugging Face"),
])
def test_bad_names(name, message):
    with pytest.raises(ValueError, match=message):
        load_model(name)


def test_folder_that_is_not_a_model(tmp_path):
    with pytest.raises(ValueError, match="not a model"):
        load_model(str(tmp_path))


LOAD_TWO_UNKNOWN_IDS = textwrap.dedent("""
    import json, time
    from demo.engine.models import load_model
    times, messages = [], []
    for name in ("no-such-owner/model-a", "no-such-owner/model-b"):
        began = time.perf_counter()
        try:
            load_model(name)
        except ValueError as err:
            messages.append(str(err))
        times.append(time.perf_counter() - began)
    print(json.dumps({"times": times, "messages": messages}))
""")


def load_two_unknown_ids(tmp_path, **variables) -> dict:
    """Load two ids the Hub does not have, in a fresh process whose Hub settings are exactly
    ``variables`` (huggingface_hub reads them once, at import)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_HOME=str(tmp_path), **variables)  # an empty cache
    run = subprocess.run([sys.executable, "-c", LOAD_TWO_UNKNOWN_IDS], env=env, capture_output=True,
                         text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(result["messages"]) == 2
    return result


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_mode_is_said_at_once_naming_its_variable(tmp_path, variable):
    """Either offline variable of Hugging Face's offline guide: the message names the one set and
    how to undo it."""
    result = load_two_unknown_ids(tmp_path, **{variable: "1"})
    for message in result["messages"]:
        assert f"Hub access is switched off here ({variable} is set)" in message
        assert f"unset {variable} to let it download" in message
    assert max(result["times"]) < 2, result["times"]


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9",  # a closed port: refused at once
                                      "https://192.0.2.1"])  # TEST-NET-1: packets go nowhere
def test_unreachable_hub_is_said_within_3_s_then_at_once(tmp_path, endpoint):
    """Without HF_HUB_OFFLINE and with the Hub's endpoint blocked, the first unknown id is refused
    in words within 3 s (transformers alone retries for half a minute), the next one at once."""
    result = load_two_unknown_ids(tmp_path, HF_ENDPOINT=endpoint)
    assert all("cannot be reached from this machine" in m for m in result["messages"])
    first, second = result["times"]
    assert first < 3 and second < 0.5, result["times"]


def test_a_model_of_the_other_kind_is_refused_by_name(standin_mlm):
    """BERT as a causal LM would read the text in both directions: refused, naming the folder."""
    from tests.conftest import STANDIN_MLM
    with pytest.raises(ValueError, match="'minilm-l6-mlm-standin' is a masked LM \\(bert\\), not a causal one") as err:
        load_model(str(STANDIN_MLM), kind="causal")
    assert str(STANDIN_MLM.parent) not in str(err.value)


def test_remote_code_only_for_allowlist():
    with pytest.raises(ValueError, match="allowlist"):
        load_model("someone/evil-model", trust_remote_code=True)


def test_cache_is_bounded(tmp_path, family_folder):
    from demo.engine.models import _ModelCache
    cache = _ModelCache(max_models=2, max_bytes=10**12)
    loads, announced = [], []
    for key in ["a", "b", "a", "c", "a", "b"]:
        cache.get(key, lambda k=key: loads.append(k) or _Fake(), lambda k=key: announced.append((k, list(loads))))
    assert loads == ["a", "b", "c", "b"] and list(cache._models) == ["a", "b"]
    # "loading" is said before each load (b again: evicted by c), never for a model in memory
    assert announced == [("a", []), ("b", ["a"]), ("c", ["a", "b"]), ("b", ["a", "b", "c"])]


class _Fake:
    nbytes = 1


def test_standin_and_smollm2_load(standin_mlm, smollm2):
    assert standin_mlm.kind == "masked" and standin_mlm.max_length == 512
    assert smollm2.kind == "causal" and smollm2.newline_survives
    with torch.inference_mode():
        ids = smollm2.tokenizer("Hello", return_tensors="pt").input_ids
        assert smollm2.model(ids).logits.shape[-1] >= len(smollm2.tokenizer) - 1


def test_the_app_bounds_the_model_cache_with_its_settings():
    """The engine reads no environment: the app, starting, hands its deployment's bounds over."""
    from demo.app_settings import AppSettings
    from demo.engine import models
    from demo.ui.handlers import import_core_in_background
    before = models.CACHE.max_models, models.CACHE.max_bytes
    assert before == (AppSettings().max_models, int(AppSettings().max_model_gb * 2**30))
    try:
        import_core_in_background(AppSettings(max_models=1, max_model_gb=2.0)).join()
        assert (models.CACHE.max_models, models.CACHE.max_bytes) == (1, 2 * 2**30)
    finally:
        models.CACHE.max_models, models.CACHE.max_bytes = before


@needs_shared
def test_a_revision_for_a_local_model_is_refused_in_words():
    """A local folder has only its files: a revision (which names a Hub commit) is refused, not ignored."""
    from demo.engine.models import load_model
    with pytest.raises(ValueError, match=r"'minilm-l6-mlm-standin' is a local model, which has only the files in "
                                         r"its folder: a revision \('no-such-branch'\) names a Hub branch"):
        load_model(str(STANDIN_MLM), device="cpu", revision="no-such-branch")
