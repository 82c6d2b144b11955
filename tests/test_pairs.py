"""Fair pairs: ModernBERT encoders and ModernBERT-decoders (Ettin), pinned remote code, pairs in the app.

Random-weight models from the real ModernBERT tokenizer and an Ettin-sized decoder config, checked
against naive loops; the remote-code pin checked with the Hub calls replaced by a recorder.
"""

import json

import pytest
import torch

import tests.floats as floats
from demo.app_settings import AppSettings
from demo.engine.generation import generate
from demo.engine.mlm_decoder import WindowSpecials, build_windows
from demo.engine.pll import score_batch
from demo.settings import ScoringSettings
from tests.conftest import needs_shared
from tests.test_pll import rank_range

pytestmark = needs_shared


@pytest.fixture(scope="module")
def decoder(tiny_model):
    return tiny_model("modernbert-decoder")


def test_modernbert_mask_strips_the_space_before_it_and_the_window_is_the_same(tiny_model):
    """ModernBERT's [MASK] has lstrip=True: "cat [MASK]" and "cat[MASK]" tokenize alike. Windows are
    built from ids, never by writing "[MASK]" into text, so both spellings give our window."""
    lm = tiny_model("modernbert")
    tok = lm.tokenizer
    plain = tok("The cat sat", add_special_tokens=False)["input_ids"]
    spaced = tok("The cat sat [MASK] [MASK]", add_special_tokens=False)["input_ids"]
    joined = tok("The cat sat[MASK][MASK]", add_special_tokens=False)["input_ids"]
    assert spaced == joined == plain + [tok.mask_token_id] * 2
    window = build_windows(torch.tensor([plain]), WindowSpecials.of(tok), padding_masks=1)[0].tolist()
    assert window == [tok.cls_token_id] + spaced + [tok.sep_token_id]


ITEMS = [("The capital of France is", " Paris."), ("Question: What do cows drink?\nAnswer:", " Water."),
         ("", "Hello there.")]


@pytest.mark.floats
@torch.no_grad()
def test_modernbert_decoder_loglikelihood_equals_a_hand_loop(decoder):
    """Its tokenizer wraps text in [CLS] ... [SEP]: token t is predicted from [CLS] and all before."""
    tok = decoder.tokenizer
    for (context, completion), result in zip(ITEMS, score_batch(decoder, ITEMS, ScoringSettings())):
        text = context + completion  # newlines survive this tokenizer: no marker
        ids = [tok.cls_token_id] + tok(text, add_special_tokens=False)["input_ids"]
        first = 1 + (len(tok(context, add_special_tokens=False)["input_ids"]) if context else 0)
        logprobs = decoder.model(input_ids=torch.tensor([ids])).logits[0].float().log_softmax(-1)
        expected = [float(logprobs[t - 1, ids[t]]) for t in range(first, len(ids))]
        assert [t.logprob for t in result.tokens] == floats.logprobs(expected, decoder)
        assert all(lo <= t.rank <= hi for t, (lo, hi) in zip(
            result.tokens, (rank_range(logprobs[t - 1], ids[t], decoder) for t in range(first, len(ids)))))


@torch.no_grad()
def test_modernbert_decoder_greedy_equals_a_naive_loop(decoder):
    tok = decoder.tokenizer
    ids = [tok.cls_token_id] + tok("The cat sat on the", add_special_tokens=False)["input_ids"]
    for _ in range(6):  # argmax of the full model, one token at a time, no cache ([SEP] never read)
        logits = decoder.model(input_ids=torch.tensor([ids])).logits[0, -1]
        logits[len(tok):] = -float("inf")
        ids.append(int(logits.argmax()))
    ours = generate(decoder, "The cat sat on the", max_new_tokens=6, stop_at_newline=False)
    expected = ids[-6:]
    end = next((i for i, t in enumerate(expected) if t in (tok.sep_token_id, tok.eos_token_id)), 6)
    assert ours.token_ids == expected[:end]


def test_needle_probe_runs_on_both_sides_of_a_pair(tiny_model, decoder):
    from demo.evaluation.haystack import run_grid
    from demo.evaluation_settings import GridSettings
    grid = GridSettings(lengths=[160], depths=[0.5], repetitions=1)
    for lm in (tiny_model("modernbert"), decoder):
        table = run_grid(lm, grid)
        assert table["status"].tolist() == ["ok"] and table["answer"].str.fullmatch(r"\d{6}").all()


# ---------------------------------------------------------------- remote code, pinned


class Recorded(Exception):
    pass


@pytest.fixture
def hub_recorder(monkeypatch):
    """AutoConfig.from_pretrained replaced: records its arguments, then stops the load."""
    import demo.engine.models as models
    calls = []

    def record(location, **kwargs):
        calls.append(dict(kwargs, location=location))
        raise Recorded

    monkeypatch.setattr(models.AutoConfig, "from_pretrained", record)
    monkeypatch.setattr("demo.engine.sources.check_hub_model", lambda name, revision: None)  # "the Hub answers"
    monkeypatch.setitem(models.REMOTE_CODE_ALLOWLIST, "ltg/pinned-model", "a" * 40)
    models.CACHE.clear()
    return calls


def test_remote_code_loads_only_at_its_pinned_commit(hub_recorder):
    from demo.engine.models import load_model
    with pytest.raises(Recorded):
        load_model("ltg/pinned-model", trust_remote_code=True)
    assert hub_recorder[-1]["revision"] == "a" * 40 and hub_recorder[-1]["trust_remote_code"] is True
    with pytest.raises(Recorded):
        load_model("ltg/pinned-model", trust_remote_code=True, revision="a" * 40)
    with pytest.raises(ValueError, match="only at its reviewed commit"):
        load_model("ltg/pinned-model", trust_remote_code=True, revision="main")
    with pytest.raises(ValueError, match="not on the remote-code allowlist"):
        load_model("someone/else", trust_remote_code=True)
    assert len(hub_recorder) == 2  # the refused ones never reached the Hub


# ---------------------------------------------------------------- pairs in the catalog and the app


@pytest.fixture(scope="module")
def local_pair(tiny_model, decoder, tmp_path_factory):
    """A random-weight Ettin-like pair saved as two local folders, and the pairs file naming it."""
    root = tmp_path_factory.mktemp("pair")
    folders = []
    for lm, name in ((tiny_model("modernbert"), "encoder"), (decoder, "decoder")):
        lm.model.save_pretrained(root / name)
        lm.tokenizer.save_pretrained(root / name)
        folders.append(str(root / name))
    pairs = root / "pairs.json"
    pairs.write_text(json.dumps([{"name": "Tiny pair", "masked": folders[0], "causal": folders[1],
                                  "why": "Both random, same tokenizer, same size."}]))
    return pairs, folders


def _loaded_parameters(folder: str) -> int:
    from demo.engine.models import load_model
    return load_model(folder).n_parameters


def test_catalog_pairs_are_data_and_fill_both_sides(local_pair, monkeypatch):
    from demo.app.catalog import DEFAULT_PAIR, build_catalog
    pairs_file, (encoder, decoder) = local_pair
    catalog = build_catalog(AppSettings(local_pairs=str(pairs_file), local_models=""))
    assert catalog.pairs[0].name == "Tiny pair" and not catalog.problems
    # members go by their short names (folder names), which location() turns into their paths
    assert catalog.entry("encoder").kind == "masked" and catalog.entry("decoder").kind == "causal"
    assert [catalog.location(m) for m in ("encoder", "decoder")] == [encoder, decoder]
    assert catalog.default("masked").name == "encoder"  # local models first
    assert "same tokenizer" in catalog.pair_note(catalog.pairs[0])
    # a local folder's size and family come from its files, no weights loaded; sizes as the models count them
    entry = catalog.entry("encoder")
    assert entry.family == "modernbert" and entry.size == f"{_loaded_parameters(encoder) / 1e6:.0f}M"
    free = catalog.free_pair_note("encoder", "decoder")  # the same two, chosen apart: nothing is claimed
    assert free.startswith("Not a matched pair: encoder") and "trained alike" in free and "same tokenizer" not in free
    monkeypatch.setattr("demo.app.catalog.smollm2_gguf", lambda: None)  # a Space: no local models
    hub = build_catalog(AppSettings(local_models=""))
    ettin = hub.pair(DEFAULT_PAIR)
    assert (hub.default("masked").name, hub.default("causal").name) == (ettin.masked, ettin.causal)
    assert "same 2T tokens" in hub.pair_note(ettin) and "150M" in hub.pair_note(ettin)
    assert {p.name for p in hub.pairs} >= {"Ettin 17M", "Ettin 1B"}
    broken = pairs_file.with_name("broken.json")
    broken.write_text(json.dumps([{"name": "x", "masked": decoder, "causal": encoder}]))
    assert "needs a masked LM folder then a causal LM" in build_catalog(AppSettings(local_pairs=str(broken))).problems[0]


def test_the_command_line_takes_a_pair_for_a_model(local_pair, monkeypatch, tmp_path, capsys):
    from demo.cli import main
    pairs_file, (encoder, decoder) = local_pair
    monkeypatch.setenv("DEMO_LOCAL_PAIRS", str(pairs_file))
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"context": "The cat sat on the", "candidates": ["mat.", "moon."]}) + "\n")
    assert main(["score", "--model", "Tiny pair", "--input", str(items), "--output",
                 str(tmp_path / "out.json"), "--no-progress"]) == 0
    runs = json.loads((tmp_path / "out.json").read_text())["runs"]
    assert [r["model"]["model"] for r in runs] == ["encoder", "decoder"]
    assert main(["generate", "--model", "Tiny pair", "--prompt", "The cat", "--max-new-tokens", "2",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "== masked LM: encoder" in out and "== causal LM: decoder" in out


def test_a_pair_ranks_and_generates_in_the_apps_handlers(local_pair, monkeypatch):
    from demo.ui.prompting import generate_causal, generate_masked
    from demo.ui.ranking import rank_causal, rank_masked
    pairs_file, (encoder, decoder) = local_pair
    monkeypatch.setenv("DEMO_LOCAL_PAIRS", str(pairs_file))  # the app offers the pair's folders
    ranking = dict(context="The cat sat on the", candidates="mat.\nmoon.", normalize=False,
                   scope="completion", unconditional="", answer="mat.")
    masked = rank_masked(model_name=encoder, method="right_masks", right_masks=2, **ranking)
    causal = rank_causal(model_name=decoder, **ranking)
    for ranking in (masked, causal):
        assert "demo-error" not in ranking.summary and len(ranking.scores) == 2
        assert "correct answer" in ranking.summary
    settings = dict(prompt="The cat sat on the", strategy="greedy", max_new_tokens=3, num_beams=2,
                    temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0,
                    padding_masks="default", stop_at_newline=True, seed=0)
    masked = generate_masked(model_name=encoder, **settings)
    assert "demo-error" not in masked.stats and "demo-step" in masked.trace
    causal = generate_causal(model_name=decoder, **settings)
    assert "demo-error" not in causal.stats and "modernbert-decoder" in causal.stats
