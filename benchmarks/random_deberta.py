"""A random-weight DeBERTa at real size, with and without its enhanced mask decoder (EMD), for the
benchmarks' "what does the EMD cost" rows.

microsoft/deberta-base's architecture (12 layers, hidden 768; its config.json's keys) beside
roberta-base's tokenizer, which is the GPT-2 BPE vocabulary deberta-base uses too. Both models have
the same weights (same seed); the EMD one also gets a random position table, as
``demo.engine.models.random_model(emd=True)`` gives it. Random weights cost what trained ones do.
"""

import tempfile
from functools import cache
from pathlib import Path

from transformers import AutoTokenizer, DebertaConfig

from demo.engine.models import random_model

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "roberta-base"
DEBERTA_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                    hidden_act="gelu", layer_norm_eps=1e-7, max_position_embeddings=512,
                    relative_attention=True, pos_att_type="c2p|p2c", max_relative_positions=-1,
                    position_biased_input=False, type_vocab_size=0, vocab_size=50265)


@cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="deberta-base-random-"))
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    tokenizer.save_pretrained(folder)
    # the tokenizer's padding id (DebertaConfig's default, 0, is this vocabulary's <s>)
    DebertaConfig(**DEBERTA_BASE, pad_token_id=tokenizer.pad_token_id).save_pretrained(folder)
    return folder


def deberta_base(emd: bool):
    """A LoadedModel: random DeBERTa-base (v1), reading its enhanced mask decoder if ``emd``."""
    return random_model(_folder(), shrink=False, seed=0, emd=emd)
