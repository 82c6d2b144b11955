"""Generation engine: window layout, decoding against a naive loop, constraints, stops, trace."""

import dataclasses
import random
import re
from types import SimpleNamespace

import pytest
import torch

import tests.floats as floats
from demo.engine.generation import GenerationResult, generate
from demo.engine.models import random_model
from tests.conftest import HAYSTACK, MASKED_FAMILIES

PROMPT = "The capital of France is Paris. The capital of Germany is"

# Special tokens spelled out by hand per family (not read from the code under test).
SPECIALS = {"bert": ("[CLS]", "[SEP]", "[MASK]"), "roberta": ("<s>", "</s>", "<mask>"),
            "albert": ("[CLS]", "[SEP]", "[MASK]"), "deberta-v2": ("[CLS]", "[SEP]", "[MASK]")}


@pytest.fixture(scope="module")
def deberta_digits(tmp_path_factory):
    """Random DeBERTa-v2 whose SentencePiece vocabulary, like deberta-v3's, has digits and "\\".

    (The shared test tokenizers are trained on books only, so they lack both.)
    """
    if not HAYSTACK.is_dir():
        pytest.skip("../shared (offline test material) is not beside this clone")
    import sentencepiece as spm
    from transformers import DebertaV2Config, DebertaV2Tokenizer

    folder = tmp_path_factory.mktemp("deberta_digits")
    rng = random.Random(0)
    books = sorted((HAYSTACK / "gutenberg_nltk").glob("*.txt"))[:2]
    text = "".join(b.read_text(encoding="utf-8", errors="ignore")[:150_000] for b in books)
    text += "".join(f"Q: what is {rng.randint(0, 999)} plus {rng.randint(0, 10**6)}?\\n A: "
                    f"{rng.randint(0, 10**6)}.\\n \n" for _ in range(3000))
    (folder / "corpus.txt").write_text(text)
    spm.SentencePieceTrainer.train(
        input=str(folder / "corpus.txt"), model_prefix=str(folder / "spm"), vocab_size=3000,
        pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]",
        eos_piece="[SEP]", unk_piece="[UNK]", control_symbols=["[MASK]"], character_coverage=1.0,
        minloglevel=2)
    DebertaV2Tokenizer.from_pretrained(folder).save_pretrained(folder)
    DebertaV2Config(vocab_size=3000, relative_attention=True, position_buckets=256,
                    norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"],
                    max_position_embeddings=512, position_biased_input=False,
                    legacy=False).save_pretrained(folder)
    return random_model(folder)


class WindowSpy:
    """Records the input_ids every call of the wrapped MLM's embeddings receives."""

    def __init__(self, model):
        self.windows = []
        # the encoder's embeddings: every step's window goes through them (the layers after them
        # run by the model's forward pass or, the last at the predicted mask only, by the engine);
        # a scripted encoder has none: itself
        embeddings = getattr(model.base_model, "embeddings", model.base_model)
        self.handle = embeddings.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.windows.append(ids.tolist())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


@pytest.mark.parametrize("family", MASKED_FAMILIES)
@pytest.mark.parametrize("p", [0, 1, 2])
def test_window_layout_is_cls_text_masks_sep(tiny_model, family, p):
    lm = tiny_model(family)
    tok = lm.tokenizer
    cls, sep, mask = tok.convert_tokens_to_ids(list(SPECIALS[family]))
    text = tok("Hello world, this is a test", add_special_tokens=False)["input_ids"]
    with WindowSpy(lm.model) as spy:
        result = generate(lm, "Hello world, this is a test", max_new_tokens=2, padding_masks=p)
    assert spy.windows[0] == [[cls] + text + [mask] * (1 + p) + [sep]]
    first = result.token_ids[0]
    assert spy.windows[1] == [[cls] + text + [first] + [mask] * (1 + p) + [sep]]


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
def test_vocabulary_projection_runs_at_the_predicted_mask_only(tiny_model, family):
    lm = tiny_model(family)
    seen = []
    handle = lm.model.get_output_embeddings().register_forward_hook(
        lambda module, args, output: seen.append(output.numel() // output.shape[-1]))
    try:
        generate(lm, "Hello world, this is a test", max_new_tokens=2)
    finally:
        handle.remove()
    assert seen == [1, 1], seen  # one projected position per step (greedy: one row)
    with torch.no_grad():  # and the model itself is left as it was
        full = lm.model(input_ids=torch.tensor([[lm.tokenizer.cls_token_id] * 5])).logits
    assert full.shape[1] == 5


# ---------------------------------------------------------------- greedy against a naive loop


def naive_greedy(lm, prompt: str, max_new_tokens: int, p: int) -> list[int]:
    """Argmax at the first mask, append, repeat; never [CLS]/[MASK]/[PAD]/[UNK]; stop at [SEP]."""
    tok = lm.tokenizer
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    banned = [i for i in tok.all_special_ids if i != tok.sep_token_id]
    out = []
    for _ in range(max_new_tokens):
        window = [tok.cls_token_id] + ids + out + [tok.mask_token_id] * (1 + p) + [tok.sep_token_id]
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([window])).logits[0, len(ids) + len(out) + 1]
        logits[banned] = float("-inf")
        logits[len(tok):] = float("-inf")
        nxt = int(logits.argmax())
        if nxt == tok.sep_token_id:
            break
        out.append(nxt)
    return out


@pytest.mark.parametrize("family", MASKED_FAMILIES + ["modernbert"])
def test_greedy_equals_naive_loop_random_weights(tiny_model, family):
    lm = tiny_model(family)
    result = generate(lm, PROMPT, max_new_tokens=8)
    assert isinstance(result, GenerationResult)
    assert result.token_ids == naive_greedy(lm, PROMPT, 8, lm.padding_masks)
    assert result.prompt_tokens == len(lm.tokenizer(PROMPT, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("p", [0, 2])
def test_greedy_equals_naive_loop_standin(standin_mlm, p):
    result = generate(standin_mlm, PROMPT, max_new_tokens=8, padding_masks=p)
    assert result.token_ids == naive_greedy(standin_mlm, PROMPT, 8, p)
    assert result.text.startswith(" ") and len(result.tokens) == len(result.token_ids)


def test_beam_with_one_beam_equals_greedy(standin_mlm):
    greedy = generate(standin_mlm, PROMPT, max_new_tokens=8)
    beam1 = generate(standin_mlm, PROMPT, max_new_tokens=8, strategy="beam", num_beams=1)
    assert beam1.token_ids == greedy.token_ids and beam1.text == greedy.text


@pytest.mark.floats
def test_beam_scores_are_log_probs_of_the_hypotheses(standin_mlm):
    """The trace's beam scores equal the naive sum of log-probs of each hypothesis."""
    lm = standin_mlm
    result = generate(lm, PROMPT, max_new_tokens=4, strategy="beam", num_beams=3, trace=True)
    last = result.steps[-1]
    assert last.beams and len(last.beams) <= 3
    tok = lm.tokenizer
    ids = tok(PROMPT, add_special_tokens=False)["input_ids"]
    banned = [i for i in tok.all_special_ids if i != tok.sep_token_id]
    prefix = result.token_ids[:-1]
    text = "".join(result.tokens[:-1])
    score = dict(last.beams)[text]
    total = 0.0
    for i, t in enumerate(prefix):
        window = [tok.cls_token_id] + ids + prefix[:i] + [tok.mask_token_id] * 2 + [tok.sep_token_id]
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([window])).logits[0, len(ids) + i + 1]
        logprobs = logits.log_softmax(-1)  # beam search normalises before suppressing specials
        logprobs[banned] = float("-inf")
        total += float(logprobs[t])
    assert score == floats.total(total, len(prefix), lm)


def test_sampling_is_seeded_and_batched_once_per_step(standin_mlm):
    a = generate(standin_mlm, PROMPT, strategy="sample", top_k=64, top_p=0.9, temperature=0.7,
                 max_new_tokens=8, seed=3)
    b = generate(standin_mlm, PROMPT, strategy="sample", top_k=64, top_p=0.9, temperature=0.7,
                 max_new_tokens=8, seed=3)
    assert a.token_ids == b.token_ids
    with WindowSpy(standin_mlm.model) as spy:
        beams = generate(standin_mlm, PROMPT, strategy="beam", num_beams=4, max_new_tokens=3)
    # one forward pass per step, all four beams in it
    assert len(spy.windows) <= 3 and all(len(w) == 4 for w in spy.windows)
    assert beams.seconds_per_step > 0


# ---------------------------------------------------------------- constraints


@pytest.mark.parametrize("family", ["bert", "roberta", "deberta-v2", "gpt2"])
@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_digits_only_gives_exactly_six_digits(tiny_model, deberta_digits, family, strategy):
    lm = deberta_digits if family == "deberta-v2" else tiny_model(family)
    prompt = "The magic number is 123456. The magic number is"
    result = generate(lm, prompt, digits=6, strategy=strategy, seed=1, temperature=2.0)
    assert re.fullmatch(r"\s?[0-9]{6}", result.text), result.text
    assert result.stop_reason == "digits"
    body = "".join(result.tokens).strip()
    assert body == result.text.strip()
    for piece in result.tokens:
        assert re.fullmatch(r"\s?[0-9]*", piece), piece  # every token is digits (one may open a space)


def test_digits_refused_when_the_vocabulary_has_no_digits(tiny_model):
    lm = tiny_model("albert")  # the SentencePiece model trained for the tests has no digit pieces
    if any(ch.isdigit() for ch in "".join(lm.tokenizer.convert_ids_to_tokens(range(len(lm.tokenizer))))):
        pytest.skip("this ALBERT vocabulary has digits")
    with pytest.raises(ValueError, match="cannot spell a 6-digit number"):
        generate(lm, "The number is", digits=6)


def test_digits_on_the_standin_mlm(standin_mlm):
    result = generate(standin_mlm, "Remember the number 482913. The number to remember is",
                      digits=6, strategy="beam")
    assert re.fullmatch(r" [0-9]{6}", result.text), result.text


def test_choices_constrain_the_output_and_follow_the_model(standin_mlm):
    lm, tok = standin_mlm, standin_mlm.tokenizer
    choices = ("paris", "berlin", "london")
    result = generate(lm, PROMPT, choices=choices)
    assert result.text in choices and result.stop_reason == "choice"
    # single-token choices: greedy must take the one the model scores highest at the mask
    ids = tok(PROMPT, add_special_tokens=False)["input_ids"]
    window = [tok.cls_token_id] + ids + [tok.mask_token_id] * 2 + [tok.sep_token_id]
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([window])).logits[0, len(ids) + 1]
    best = max(choices, key=lambda c: float(logits[tok.convert_tokens_to_ids(c)]))
    assert result.text == best
    multi = generate(lm, PROMPT, choices=("the city of berlin", "the capital", "munich"),
                     strategy="beam")
    assert multi.text in ("the city of berlin", "the capital", "munich")


# ---------------------------------------------------------------- scripted model: stops, newlines


class ScriptedEncoder(torch.nn.Module):
    """At the first mask, a hidden state that is one-hot on script[k] (k = tokens generated)."""

    def __init__(self, tokenizer, n_prompt: int, script: list[int]):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.tokenizer, self.n_prompt, self.script = tokenizer, n_prompt, script
        self.calls = 0

    def forward(self, input_ids, **kwargs):
        self.calls += 1
        rows, length = input_ids.shape
        hidden = torch.zeros(rows, length, len(self.tokenizer))
        for r in range(rows):
            first = int((input_ids[r] == self.tokenizer.mask_token_id).nonzero()[0])
            k = first - 1 - self.n_prompt
            nxt = self.script[k] if k < len(self.script) else self.tokenizer.sep_token_id
            hidden[r, :, nxt] = 20.0
        return SimpleNamespace(last_hidden_state=hidden)


class ScriptedMLM(torch.nn.Module):
    """A fake MLM shaped like transformers' (encoder + head): it predicts a fixed script."""

    def __init__(self, tokenizer, n_prompt: int, script: list[int]):
        super().__init__()
        self.config = SimpleNamespace(vocab_size=len(tokenizer))
        self.base_model = ScriptedEncoder(tokenizer, n_prompt, script)
        self.lm_head = torch.nn.Identity()  # hidden states already are the logits

    @property
    def calls(self):
        return self.base_model.calls


def scripted(lm, prompt_for_model: str, continuation_for_model: str):
    tok = lm.tokenizer
    n = len(tok(prompt_for_model, add_special_tokens=False)["input_ids"])
    full = tok(prompt_for_model + continuation_for_model, add_special_tokens=False)["input_ids"]
    return dataclasses.replace(lm, model=ScriptedMLM(tok, n, full[n:]))


def test_newline_round_trip_deberta(deberta_digits):
    lm = deberta_digits
    assert not lm.newline_survives
    prompt = "Q: two plus two\nA:"
    # what the model reads and writes: the paper's marker, backslash-n then a space
    fake = scripted(lm, "Q: two plus two\\n A:", " four\\n Q: three")
    with WindowSpy(fake.model) as spy:
        result = generate(fake, prompt, max_new_tokens=12)
    seen = lm.tokenizer.convert_ids_to_tokens(spy.windows[0][0])
    assert "".join(seen).count("\\n") == 1  # the prompt's newline reached the model as the marker
    assert result.text == " four\nQ: three" and result.stop_reason == "eos"
    stopped = generate(fake, prompt, max_new_tokens=12, stop_at_newline=True)
    assert stopped.text == " four" and stopped.stop_reason == "newline"
    assert fake.model.calls < len(spy.windows) + 6  # stopped early, not at max_new_tokens


def test_stop_strings_stop_and_are_removed(tiny_model):
    lm = tiny_model("roberta")  # byte-level BPE keeps "\n": stop at newline without a marker
    fake = scripted(lm, PROMPT, " Berlin. The capital of Spain is Madrid.\nNext")
    result = generate(fake, PROMPT, max_new_tokens=20, stop_strings=(". The",))
    assert result.text == " Berlin" and result.stop_reason == "stop_string"
    calls = fake.model.calls
    assert calls <= 5  # " Berlin", ".", " The" (+ the check step), not 20
    nl = generate(fake, PROMPT, max_new_tokens=20, stop_at_newline=True, stop_strings=("Next",))
    assert nl.text == " Berlin. The capital of Spain is Madrid." and nl.stop_reason == "newline"
    beam = generate(fake, PROMPT, max_new_tokens=20, stop_strings=("Spain",), strategy="beam")
    assert beam.text == " Berlin. The capital of " and beam.stop_reason == "stop_string"


def test_stop_string_on_real_weights(standin_mlm):
    result = generate(standin_mlm, PROMPT, max_new_tokens=20, stop_strings=("capital",))
    assert "capital" not in result.text and result.stop_reason == "stop_string"


# ---------------------------------------------------------------- trace


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_trace_chosen_tokens_reproduce_the_text(standin_mlm, strategy):
    lm, tok = standin_mlm, standin_mlm.tokenizer
    result = generate(lm, PROMPT, max_new_tokens=6, strategy=strategy, trace=True, trace_top_k=3)
    text_steps = result.steps[:len(result.tokens)]
    assert "".join(s.chosen for s in text_steps) == result.text
    ids = tok(PROMPT, add_special_tokens=False)["input_ids"]
    for t, step in enumerate(result.steps):
        expected = (["[CLS]"] + tok.convert_ids_to_tokens(ids + result.token_ids[:t])
                    + ["[MASK]", "[MASK]", "[SEP]"])
        assert step.window == expected
        assert [step.window[i] for i in step.mask_positions] == ["[MASK]", "[MASK]"]
        assert step.mask_positions[0] == len(ids) + t + 1
        assert len(step.top) == 3 and all(0 <= p <= 1 for _, p in step.top)
        if strategy == "greedy":
            assert step.top[0][0] == step.chosen
        assert (step.beams is not None) == (strategy == "beam")


# ---------------------------------------------------------------- bad input


def test_bad_input_is_refused_clearly(tiny_model):
    bert, gpt2 = tiny_model("bert"), tiny_model("gpt2")
    cases = [
        (bert, "", {}, "prompt is empty"),
        (bert, "   ", {}, "prompt is empty"),
        (bert, PROMPT, {"max_new_tokens": 0}, "max_new_tokens"),
        (bert, PROMPT, {"max_new_tokens": 100_000}, "max_new_tokens"),
        (bert, PROMPT, {"strategy": "nucleus"}, "Unknown strategy"),
        (bert, PROMPT, {"num_beams": 0, "strategy": "beam"}, "num_beams"),
        (bert, PROMPT, {"top_p": 0.0, "strategy": "sample"}, "top_p"),
        (bert, PROMPT, {"top_p": 1.5, "strategy": "sample"}, "top_p"),
        (bert, PROMPT, {"temperature": 0.0, "strategy": "sample"}, "temperature"),
        (bert, PROMPT, {"beams": 4}, "Unknown generation setting"),
        (bert, PROMPT, {"digits": 6, "max_new_tokens": 3}, "max_new_tokens"),
        (bert, PROMPT, {"digits": 6, "choices": ("a",)}, "either digits or choices"),
        (bert, PROMPT, {"choices": ("a", " ")}, "choices"),
        (gpt2, PROMPT, {"padding_masks": 2}, "only applies to masked"),
        (bert, PROMPT, {"padding_masks": -1}, "padding_masks"),
        (bert, PROMPT + "\ud800", {}, r"The prompt holds a broken character \(U\+D800"),
        (gpt2, "\u200b\u2060", {}, "The prompt is only invisible characters"),
    ]
    for lm, prompt, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            generate(lm, prompt, **kwargs)


def test_length_limit_says_how_many_tokens_fit(tiny_model):
    lm = tiny_model("bert")  # 512 absolute positions, 1 padding mask by default
    prompt = " ".join(["word"] * 500)  # 500 tokens: 512 - 500 - 1 - 2 = 9 new tokens fit
    with pytest.raises(ValueError, match=r"room for 9 new token"):
        generate(lm, prompt, max_new_tokens=10)
    with WindowSpy(lm.model) as spy:
        result = generate(lm, prompt, max_new_tokens=9)  # exactly fits: last window is 512 long
    assert len(spy.windows[-1][0]) <= 512 and len(result.token_ids) <= 9
    with pytest.raises(ValueError, match="already fills"):
        generate(lm, " ".join(["word"] * 509))
    # blocks have no padding masks: [CLS] + 500 + the blocks' 10 tokens + [SEP] is 512 long
    block = dict(window="block", block_length=4, tokens_per_step=4)
    with pytest.raises(ValueError, match=r"room for 10 new token\(s\), not 11"):
        generate(lm, prompt, max_new_tokens=11, **block)
    with WindowSpy(lm.model) as spy:
        generate(lm, prompt, max_new_tokens=10, **block)
    assert max(len(window[0]) for window in spy.windows) <= 512
    long_gpt2 = tiny_model("gpt2")
    with pytest.raises(ValueError, match="room for 24 new token"):
        generate(long_gpt2, " hello" * 1000, max_new_tokens=32)
