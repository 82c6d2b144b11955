"""Causal LMs go through the same generate() and give the same result type (real SmolLM2)."""

import re

import pytest
import torch

from demo.engine.generation import GenerationResult, StepTrace, generate

PROMPT = "The capital of France is Paris. The capital of Germany is"


def naive_causal_greedy(lm, prompt: str, max_new_tokens: int) -> list[int]:
    """Full forward pass each step (no cache), argmax at the last position, stop at EOS."""
    ids = lm.tokenizer(prompt)["input_ids"]
    out = []
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([ids + out])).logits[0, -1]
        nxt = int(logits.argmax())
        if nxt == lm.tokenizer.eos_token_id:
            break
        out.append(nxt)
    return out


def test_smollm2_greedy_matches_naive_loop_and_result_type(smollm2):
    result = generate(smollm2, PROMPT, max_new_tokens=4, trace=True)
    assert type(result) is GenerationResult
    assert result.token_ids == naive_causal_greedy(smollm2, PROMPT, 4)
    assert "Berlin" in result.text
    assert result.prompt_tokens == len(smollm2.tokenizer(PROMPT)["input_ids"])
    assert all(type(s) is StepTrace for s in result.steps)
    assert "".join(s.chosen for s in result.steps[:len(result.tokens)]) == result.text
    assert result.steps[0].mask_positions == [] and result.steps[0].top[0][0] == result.steps[0].chosen
    assert result.seconds_per_step > 0


def test_smollm2_beam_digits_choices_and_stops(smollm2):
    beam = generate(smollm2, PROMPT, max_new_tokens=3, strategy="beam", trace=True)
    assert beam.steps[-1].beams and beam.text.strip()
    needle = generate(smollm2, "The magic number is 482913. Remember it. The magic number is",
                      digits=6)
    assert re.fullmatch(r" ?[0-9]{6}", needle.text) and needle.stop_reason == "digits"
    choice = generate(smollm2, PROMPT, choices=("Munich", "Berlin", "Hamburg"))
    assert choice.text == "Berlin" and choice.stop_reason == "choice"
    lines = generate(smollm2, "Fruits, one per line:\napple\nbanana\npear\n", max_new_tokens=8,
                     stop_at_newline=True)
    assert "\n" not in lines.text and lines.stop_reason == "newline", lines


def test_masked_only_option_refused_for_causal(smollm2):
    with pytest.raises(ValueError, match="only applies to masked"):
        generate(smollm2, PROMPT, padding_masks=1)
