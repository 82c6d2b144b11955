"""Random-weight models at real sizes, for the benchmarks' speed rows (random weights cost what
trained ones do): DeBERTa-base with and without its enhanced mask decoder (EMD), and the
DeBERTa-v3-base and ModernBERT-base shapes.

microsoft/deberta-base's architecture (12 layers, hidden 768; its config.json's keys) beside
roberta-base's tokenizer, which is the GPT-2 BPE vocabulary deberta-base uses too. Both models have
the same weights (same seed); the EMD one also gets a random position table, as
``demo.engine.models.random_model(emd=True)`` gives it.
"""

import tempfile
from functools import cache
from pathlib import Path

from transformers import AutoTokenizer, DebertaConfig, DebertaV2Config

from demo.engine.models import random_model

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "roberta-base"
MODERNBERT = ROOT.parent / "shared" / "tokenizers" / "answerdotai-ModernBERT-large"
DEBERTA_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                    hidden_act="gelu", layer_norm_eps=1e-7, max_position_embeddings=512,
                    relative_attention=True, pos_att_type="c2p|p2c", max_relative_positions=-1,
                    position_biased_input=False, type_vocab_size=0, vocab_size=50265)
# microsoft/deberta-v3-base's config.json values (its 128k SentencePiece vocabulary is not in
# ../shared: roberta-base's 50k BPE stands in, so its head is smaller than the real one's)
DEBERTA_V3_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                       hidden_act="gelu", layer_norm_eps=1e-7, max_position_embeddings=512,
                       relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm",
                       share_att_key=True, pos_att_type="p2c|c2p", max_relative_positions=-1,
                       position_biased_input=False, type_vocab_size=0, vocab_size=50265)


@cache
def _folder(version: int = 1) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"deberta-v{version}-base-random-"))
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    tokenizer.save_pretrained(folder)
    # the tokenizer's padding id (DebertaConfig's default, 0, is this vocabulary's <s>)
    config = DebertaConfig(**DEBERTA_BASE) if version == 1 else DebertaV2Config(**DEBERTA_V3_BASE)
    config.pad_token_id = tokenizer.pad_token_id
    config.save_pretrained(folder)
    return folder


def deberta_base(emd: bool):
    """A LoadedModel: random DeBERTa-base (v1), reading its enhanced mask decoder if ``emd``."""
    return random_model(_folder(), shrink=False, seed=0, emd=emd)


def deberta_v3_base():
    """A LoadedModel: random DeBERTa-v3-base shape (DeBERTa-v2 code), reading its last layer."""
    return random_model(_folder(version=3), shrink=False, seed=0)


def modernbert_base():
    """A LoadedModel: random ModernBERT-base shape (22 layers, hidden 768, a global layer every
    third, the others a 128-token local window) on ModernBERT-large's config and tokenizer (the base
    one is not in ../shared)."""
    layers = 22
    return random_model(MODERNBERT, shrink=False, seed=0, num_hidden_layers=layers, hidden_size=768,
                        num_attention_heads=12, intermediate_size=1152,
                        layer_types=["full_attention" if i % 3 == 0 else "sliding_attention" for i in range(layers)])


def speed_shapes() -> dict:
    """label -> LoadedModel: the two shapes the benchmarks time the field's checkpoints by."""
    return {"ModernBERT-base (random)": modernbert_base(), "DeBERTa-v3-base (random)": deberta_v3_base()}
