"""Masked LMs trained to write (dLLM's BERT-Chat checkpoints): the prompt as one chat turn, the
answer ending at the end token their training wrote, and every block's masks after the prompt
from the first step, against references written out here (the template's ids, naive loops)."""

import copy
import dataclasses
import json

import pytest
import torch
from transformers import AutoTokenizer

from demo.app.budget import generation_work
from demo.engine.decoding import end_ids, suppressed_ids
from demo.engine.generation import generate
from demo.engine.models import random_model
from demo.engine.text import model_prompt, prompt_ids_of
from demo.settings import GenerationSettings
from tests.conftest import TOKENIZERS, needs_shared

MODERNBERT = TOKENIZERS / "answerdotai-ModernBERT-large"
QUESTION = "What is 2+2?"
# dLLM's chat format for BERTs (dllm/utils/models.py, get_tokenizer), written as a template here
TEMPLATE = ("{% for m in messages %}"
            "{% if m['role'] == 'system' %}{{ '[SYS]\\n' + m['content'] | trim + '\\n[/SYS]\\n\\n' }}"
            "{% elif m['role'] == 'user' %}{{ '[Question]\\n' + m['content'] | trim + '\\n[/Question]\\n\\n' }}"
            "{% else %}{{ '[Answer]\\n' + m['content'] | trim + '\\n[/Answer]\\n\\n' }}{% endif %}"
            "{% endfor %}{% if add_generation_prompt %}{{ '[Answer]\\n' }}{% endif %}")
# "[Question]\nWhat is 2+2?\n[/Question]\n\n[Answer]\n" through ModernBERT's tokenizer, as
# dLLM's own template gives it (apply_chat_template, tokenize=True): no [CLS], no [SEP]
CHAT_IDS = [60, 23433, 62, 187, 1276, 310, 374, 12, 19, 32, 187, 32871, 23433, 62, 187, 187, 60, 32869, 62, 187]
PAD = 50283  # ModernBERT's [PAD]: its tokenizer has no end-of-sequence token


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    """A random ModernBERT whose tokenizer carries the chat template in its tokenizer_config."""
    if not MODERNBERT.is_dir():
        pytest.skip("../shared/tokenizers is not beside this clone")
    folder = tmp_path_factory.mktemp("chat-tokenizer")
    for name in ("config.json", "special_tokens_map.json", "tokenizer.json"):
        (folder / name).write_bytes((MODERNBERT / name).read_bytes())
    config = json.loads((MODERNBERT / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": TEMPLATE}))
    return random_model(folder, tokenizer=AutoTokenizer.from_pretrained(folder))


@needs_shared
def test_the_prompt_is_one_user_turn_of_the_chat_template(chat_model):
    lm = chat_model
    assert model_prompt(lm, QUESTION, chat=True) == "[Question]\nWhat is 2+2?\n[/Question]\n\n[Answer]\n"
    assert prompt_ids_of(lm, QUESTION, chat=True) == CHAT_IDS
    assert prompt_ids_of(lm, QUESTION) == lm.tokenizer(QUESTION, add_special_tokens=False)["input_ids"]


@needs_shared
def test_a_tokenizer_without_a_chat_template_is_refused_in_words(tiny_model):
    with pytest.raises(ValueError, match="no chat template"):
        generate(tiny_model("modernbert"), QUESTION, max_new_tokens=2, chat=True)


@needs_shared
def test_a_chat_answer_ends_at_the_end_of_sequence_token_else_padding(chat_model, tiny_model):
    assert end_ids(chat_model, chat=True) == [PAD] and end_ids(chat_model) == [chat_model.tokenizer.sep_token_id]
    roberta = tiny_model("roberta")  # its end-of-sequence token is </s>
    assert end_ids(roberta, chat=True) == [roberta.tokenizer.eos_token_id]


def naive_ahead(lm, prompt_ids, block, new, end):
    """[CLS] prompt, ``new`` masks, then ``end``; each step: the whole window through the model,
    the argmax at every mask of the first block that has one, the surest written (ties: leftmost);
    an end token written ends the text there (what follows is dropped). -> the text's ids."""
    tok = lm.tokenizer
    mask = tok.mask_token_id
    window = [tok.cls_token_id, *prompt_ids, *[mask] * new, end]
    begin = len(prompt_ids) + 1
    banned = suppressed_ids(lm, [end])
    ended = False
    while mask in window:
        first = window.index(mask)
        start = begin + (first - begin) // block * block
        with torch.no_grad():
            logits = lm.model(torch.tensor([window])).logits[0].float()
        logits[:, banned] = float("-inf")
        logp = logits.log_softmax(-1)
        open_masks = [i for i in range(start, min(start + block, len(window) - 1)) if window[i] == mask]
        best = max(open_masks, key=lambda i: (float(logp[i].max()), -i))
        window[best] = int(logp[best].argmax())
        if window[best] == end:
            window, ended = window[:best + 1], True
    return window[begin:] if ended else window[begin:-1]


@needs_shared
@pytest.mark.parametrize("chat, pad_bias", [(False, 0.0), (True, 0.0), (True, 0.5)])
def test_masks_ahead_fill_the_first_open_block_reading_all_of_them(chat_model, chat, pad_bias):
    """Every block's masks after the prompt from the first step, one block written at a time,
    most confident first: a naive loop over the whole window; with chat, the chat turn's ids
    and the padding token close the window and end the text (a bias on [PAD] has the random
    model write it)."""
    lm = chat_model
    if pad_bias:
        lm = dataclasses.replace(lm, model=copy.deepcopy(lm.model))
        with torch.no_grad():
            lm.model.decoder.bias[PAD] += pad_bias
    settings = GenerationSettings(max_new_tokens=8, window="block", block_length=3, masks_ahead=True,
                                  order="confidence", chat=chat, trace=True)
    result = generate(lm, QUESTION, settings)
    ends = end_ids(lm, chat)
    expected = naive_ahead(lm, prompt_ids_of(lm, QUESTION, chat), 3, 8, ends[0])
    assert result.token_ids + ([ends[0]] if result.stop_reason == "eos" else []) == expected
    assert result.steps[0].window.count(lm.tokenizer.mask_token) == 8
    assert result.steps[0].window[-1] == lm.tokenizer.convert_ids_to_tokens(ends[0])
    assert (result.stop_reason == "eos") == bool(pad_bias)


@needs_shared
def test_masks_ahead_in_a_random_order_stay_in_their_block(tiny_model):
    lm = tiny_model("bert")
    result = generate(lm, "The capital of France is", max_new_tokens=8, window="block", block_length=4,
                      masks_ahead=True, order="random", tokens_per_step=2, trace=True)
    begin = result.prompt_tokens + 1
    blocks = [{(p - begin) // 4 for p in step.written} for step in result.steps if step.written]
    assert all(len(b) == 1 for b in blocks) and [min(b) for b in blocks] == sorted(min(b) for b in blocks)


def test_masks_ahead_needs_blocks_and_chat_is_a_flag():
    with pytest.raises(ValueError, match="All masks ahead .* needs writing in blocks"):
        GenerationSettings(masks_ahead=True)
    with pytest.raises(ValueError, match="chat must be true or false"):
        GenerationSettings(chat="yes")


@needs_shared
def test_the_work_budget_counts_the_chat_turns_tokens(chat_model):
    plain, chat = (generation_work(chat_model, QUESTION, GenerationSettings(max_new_tokens=4, chat=c))
                   for c in (False, True))
    assert f"{len(CHAT_IDS)}+ tokens" in chat.what and f"{len(prompt_ids_of(chat_model, QUESTION))}+" in plain.what


@needs_shared
def test_the_work_budget_counts_every_mask_ahead_at_every_step(chat_model):
    """[CLS] prompt, all 4 masks, [SEP]: n + 6 tokens read at each of 4 steps (counted by hand),
    more than the sliding window's, whose masks come one at a time."""
    n = len(prompt_ids_of(chat_model, QUESTION))
    ahead = generation_work(chat_model, QUESTION, GenerationSettings(max_new_tokens=4, window="block", block_length=2,
                                                                     masks_ahead=True))
    assert ahead.tokens == 4 * (n + 6)
    sliding = generation_work(chat_model, QUESTION, GenerationSettings(max_new_tokens=4, padding_masks=0))
    assert sliding.tokens == sum(n + 3 + t for t in range(4)) < ahead.tokens
