"""lm-evaluation-harness with our model (``demo.harness.model``): lm-eval's own ``simple_evaluate``
over a task written here (YAML over a local JSONL), checked against independent references.

- per-item log-likelihoods: our engine on the same strings (1e-6) and a naive one-forward-pass-
  per-token loop (1e-4, float32 sums over differently batched passes);
- accuracy and per-candidate scores: our own evaluator on the same items and template;
- a two-process data-parallel run (torchrun, gloo, CPU): the same items, results and accuracy;
- a causal LM (SmolLM2) through lm-eval's own HFLM and through ours: the same log-likelihood per
  request (1e-4), start token and ``add_bos_token`` included, and the same generated text;
- ``generate_until``: exactly what ``demo.engine.generation.generate`` writes;
- requests longer than an absolute-position model reads (a 1,024-token generation, too-long
  prompts and contexts): cut from the left as HFLM does, counted, never ending the run;
- ``loglikelihood_rolling``: the documented windows tile the text, each fits the model;
- ``export-tasks``: the evaluator's items (its skip rule at 64 shots), options it cannot honour refused;
- bad model_args and generation kwargs: clear errors, before any request.
"""

import dataclasses
import functools
import json
import logging
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install lm-eval==0.4.13)")
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

import tests.floats as floats  # noqa: E402
from demo.engine.fitting import rolling_pairs  # noqa: E402
from demo.engine.generation import generate  # noqa: E402
from demo.engine.pll import input_length, score_batch  # noqa: E402
from demo.evaluation.evaluate import evaluate  # noqa: E402
from demo.evaluation_settings import RunSettings  # noqa: E402
from demo.harness.model import MaskedLMEval  # noqa: E402
from demo.harness.model_args import generation_settings  # noqa: E402
from demo.settings import GenerationSettings, ScoringSettings  # noqa: E402
from demo.tasks import read_task_file  # noqa: E402
from tests.conftest import HAYSTACK, STANDIN_MLM, TOKENIZERS, needs_shared  # noqa: E402
from tests.test_pll_decoder import naive_decoder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ITEMS = [
    {"country": "France", "options": ["Paris", "Lyon", "Nice"], "answer": "Paris"},
    {"country": "Italy", "options": ["Milan", "Rome", "Turin"], "answer": "Rome"},
    {"country": "Japan", "options": ["Osaka", "Kyoto", "Tokyo"], "answer": "Tokyo"},
    {"country": "Canada", "options": ["Ottawa", "Toronto", "Vancouver"], "answer": "Ottawa"},
    {"country": "Australia", "options": ["Sydney", "Canberra", "Melbourne"], "answer": "Canberra"},
    {"country": "Germany", "options": ["Munich", "Hamburg", "Berlin"], "answer": "Berlin"},
]
QUESTION = "Q: What is the capital of {country}?\nA:"
METRIC = lambda name: [{"metric": name, "aggregation": "mean", "higher_is_better": True}]  # noqa: E731


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread for this module: on a shared CI machine two threads waiting for each other
    make every forward pass 10x slower (ModelSettings.threads says the same); restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """One JSONL, read by an lm-eval YAML (ranked and generated) and by our own task YAML."""
    root = tmp_path_factory.mktemp("tasks")
    data = root / "capitals.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    source = dict(dataset_path="json", dataset_kwargs={"data_files": {"test": str(data)}},
                  test_split="test", doc_to_text=QUESTION.replace("{country}", "{{country}}"),
                  doc_to_target="answer")
    (root / "lm_eval").mkdir()
    (root / "lm_eval" / "capitals.yaml").write_text(yaml.safe_dump(dict(
        task="capitals_lm", output_type="multiple_choice", doc_to_choice="{{options}}",
        metric_list=METRIC("acc"), **source)))
    (root / "lm_eval" / "capitals_gen.yaml").write_text(yaml.safe_dump(dict(
        task="capitals_gen", output_type="generate_until", metric_list=METRIC("exact_match"),
        generation_kwargs={"until": ["\n", "."], "max_gen_toks": 6, "do_sample": False,
                           "temperature": 0.0}, **source)))
    (root / "ours").mkdir()
    (root / "ours" / "capitals.yaml").write_text(yaml.safe_dump({"tasks": [dict(
        name="capitals_ours", data={"local": str(data)}, convert="fields",
        convert_args={"candidates": "options", "label": "answer"},
        template=QUESTION + " {answer}", kind="choice", shots=0,
        metrics=["accuracy"])]}))
    return root


def run_lm_eval(model, tasks, names, limit=None):
    manager = TaskManager(include_path=str(tasks / "lm_eval"), include_defaults=False)
    return lm_eval.simple_evaluate(model=model, tasks=names, task_manager=manager, log_samples=True,
                                   bootstrap_iters=0, limit=limit)


@pytest.fixture(scope="module")
def standin(tasks):
    """The stand-in MLM under lm-eval, and its one-process run of the ranked task."""
    if not STANDIN_MLM.is_dir():
        pytest.skip("../shared/models/minilm-l6-mlm-standin is not beside this clone")
    model = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu")
    return model, run_lm_eval(model, tasks, ["capitals_lm"])


def per_item(results, task="capitals_lm"):
    """doc_id -> ([(context, continuation)], [loglikelihood], [is_greedy]) from the logged samples."""
    out = {}
    for sample in results["samples"][task]:
        out[sample["doc_id"]] = ([tuple(a) for a in sample["arguments"]],
                                 [r[0][0] for r in sample["resps"]], [r[0][1] for r in sample["resps"]])
    return out


# ---------------------------------------------------------------- independent references


@torch.no_grad()
def naive_right_masks(lm, context, continuation, right_masks=2):
    """(PLL, all top-1) with +right_masks masks, one full forward pass per scored token. The text
    as the model reads it is written out plainly: the stand-in loses newlines, so the paper's
    marker (these items have no spaces around their newline); the context's own tokens are those
    of the context tokenized alone, minus its [SEP]."""
    tok = lm.tokenizer
    context, continuation = (s.replace("\n", "\\n ") for s in (context, continuation))
    ids = tok(context + continuation)["input_ids"]
    total, greedy = 0.0, True
    for i in range(len(tok(context)["input_ids"]) - 1, len(ids) - 1):
        copy = torch.tensor(ids)
        copy[i:min(i + 1 + right_masks, len(ids) - 1)] = tok.mask_token_id
        logprobs = lm.model(input_ids=copy[None]).logits[0, i].log_softmax(-1)
        total += float(logprobs[ids[i]])
        greedy &= int(logprobs.argmax()) == ids[i]
    return total, greedy


@torch.no_grad()
def naive_causal(lm, context, continuation):
    """(log-likelihood, all argmax) of the continuation: one forward pass of context + continuation
    (a start token first only for an empty context, as HFLM does), continuation tokens = those
    beyond the context tokenized alone."""
    tok = lm.tokenizer
    start = [] if context else [tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id]
    ids = start + tok(context + continuation, add_special_tokens=False)["input_ids"]
    first = len(start) + len(tok(context, add_special_tokens=False)["input_ids"])
    logprobs = lm.model(input_ids=torch.tensor([ids])).logits[0].log_softmax(-1)
    total = sum(float(logprobs[j - 1, ids[j]]) for j in range(first, len(ids)))
    greedy = all(int(logprobs[j - 1].argmax()) == ids[j] for j in range(first, len(ids)))
    return total, greedy


def check_against_references(model, results, tasks, tmp_path, naive):
    items = per_item(results)
    assert sorted(items) == list(range(len(ITEMS)))
    pairs = [p for d in sorted(items) for p in items[d][0]]
    logliks = [x for d in sorted(items) for x in items[d][1]]
    greedy = [g for d in sorted(items) for g in items[d][2]]
    assert pairs[0] == ("Q: What is the capital of France?\nA:", " Paris")  # lm-eval's strings

    # our engine, on the same strings
    engine = score_batch(model.lm, pairs, ScoringSettings())
    n_tokens = {pair: len(s.tokens) for pair, s in zip(pairs, engine)}
    assert logliks == [floats.total(s.total, len(s.tokens), model.lm) for s in engine]
    assert greedy == [all(t.rank == 1 for t in s.tokens) for s in engine]
    # the naive loop, on the first item's candidates
    for pair, loglik, top in zip(pairs[:3], logliks, greedy):
        expected, expected_top = naive(model.lm, *pair)
        assert loglik == floats.total(expected, n_tokens[pair], model.lm) and top == expected_top

    # our evaluator, same items and template, 0 shots
    task = read_task_file(tasks / "ours" / "capitals.yaml", base=tasks / "ours")[0]
    rows = evaluate(model.lm, task, tmp_path / "runs", RunSettings(shots=0))
    lines = next((tmp_path / "runs").glob("capitals_ours__*.jsonl")).read_text().splitlines()
    records = {record["index"]: record for record in map(json.loads, lines)}
    for doc_id, (doc_pairs, scores, _) in items.items():
        assert records[doc_id]["scores"] == [floats.total(x, n_tokens[p], model.lm) for x, p in zip(scores, doc_pairs)]
    assert 100 * results["results"]["capitals_lm"]["acc,none"] == pytest.approx(rows[0]["value"], abs=0.01)


# ---------------------------------------------------------------- through simple_evaluate


@pytest.mark.floats
def test_masked_lm_matches_engine_naive_loop_and_evaluator(standin, tasks, tmp_path):
    model, results = standin
    check_against_references(model, results, tasks, tmp_path, naive_right_masks)
    info = results["config"]
    assert (info["model_kind"], info["pll_method"], info["right_masks"], info["reduction"]) == \
        ("masked", "right_masks", 2, "sum")


@pytest.mark.floats
def test_causal_lm_matches_exact_loglikelihood_and_evaluator(tasks, tmp_path, smollm2):
    model = MaskedLMEval(pretrained=smollm2.name, device="cpu")
    assert model.lm is smollm2  # load_model's cache: the fixture's model, not a second copy
    results = run_lm_eval(model, tasks, ["capitals_lm"])
    check_against_references(model, results, tasks, tmp_path, naive_causal)
    assert results["config"]["pll_method"] == "causal"


# lm-eval's request shapes: a context and " continuation", an empty context (HFLM's prefix token),
# every kind of trailing whitespace (HFLM's _encode_pair moves all of it, context.rstrip(), to the
# continuation): a newline, a blank line, CRLF, a space before a newline, a space, a tab, none;
# newlines inside, a multi-token answer. No two requests have the same whole text: HFLM reuses one
# pass for those and then answers a one-token continuation wrongly (" 6" after "...A:" read -11.8
# beside "...\n\n" + "Q: 3+3?\nA: 6", -2.5 alone).
HFLM_REQUESTS = [
    ("The capital of France is", " Paris."),
    ("Question: What do cows drink?\nAnswer:", " Water, mostly; sometimes milk when they are calves."),
    ("", "Hello there."),
    ("Hello ", "world"),
    ("Q: 2+2?\nA: 4\n\nQ: 3+3?\nA:", " 6"),
    ("Translate to French: cheese\n", "fromage"),
    ("Q: 2+2?\nA: 4\n\n", "Q: 5+5?\nA: 10"),
    ("Name a colour.\r\n", "Blue."),
    ("Name a fruit: \n", "apple"),
    ("The cat sat on the\t", "mat"),
    ("", "A whole text, scored from its first token."),
]


def hflm_and_ours(pretrained, ours_name: str, add_bos_token, **hflm_args):
    """lm-eval's HFLM loading its own tokenizer as it does (``add_bos_token`` passed to it), and our
    model on the same weights by another name (the deployment's door)."""
    from lm_eval.models.huggingface import HFLM
    hflm = HFLM(pretrained=pretrained, batch_size=4, device="cpu", add_bos_token=add_bos_token, **hflm_args)
    return hflm, MaskedLMEval(pretrained=ours_name, device="cpu", add_bos_token=add_bos_token)


def same_answers(hflm, ours) -> list[float]:
    """Each request's log-likelihood (within 1e-4, the parity asked of the plugin: float32 sums of
    one text, batched and padded differently by the two) and is_greedy agree; ours returned."""
    requests = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(HFLM_REQUESTS)]
    expected = hflm.loglikelihood(requests, disable_tqdm=True)
    got = ours.loglikelihood(requests, disable_tqdm=True)
    assert [x for x, _ in got] == pytest.approx([x for x, _ in expected], abs=1e-4)
    assert [g for _, g in got] == [g for _, g in expected]
    return [x for x, _ in got]


@pytest.mark.floats
def test_causal_lm_equals_lm_evals_own_hflm_per_request(smollm2, caplog):
    """SmolLM2 by its short name (``pretrained=smollm2``) through our model, and from its GGUF file
    through lm-eval's HFLM, on the same weights: each request's log-likelihood and is_greedy agree
    for every context ending, with add_bos_token unset (a start token only before an empty context)
    and true (which the GGUF tokenizer ignores, under HFLM too: said in a warning); and a
    1,024-token generation request writes what HFLM writes."""
    folder, gguf = str(Path(smollm2.name).parent), Path(smollm2.name).name
    answers = {}
    for add_bos_token in (None, True):
        hflm, ours = hflm_and_ours(smollm2.model, "smollm2", add_bos_token, gguf_file=gguf)
        assert ours.lm.model is smollm2.model  # the short name is the fixture's model (load_model's cache)
        assert hflm.tokenizer.name_or_path == folder  # HFLM read the GGUF's tokenizer itself
        answers[add_bos_token] = same_answers(hflm, ours)
        if add_bos_token is None:
            request = Instance("generate_until", {}, ("Q: What is the capital of France?\nA:", {
                "until": ["\n"], "max_gen_toks": 1024, "do_sample": False}), 0)
            text = ours.generate_until([request], disable_tqdm=True)
            assert text == hflm.generate_until([request], disable_tqdm=True) and text[0].strip()
    assert answers[True] == pytest.approx(answers[None], abs=1e-4)
    assert "add_bos_token=True changes nothing for SmolLM2" in caplog.text


@pytest.mark.floats
def test_add_bos_token_means_what_it_means_for_hflm(tmp_path, tiny_model):
    """A random GPT-2 saved with GPT-2's tokenizer, which obeys ``from_pretrained(add_bos_token=...)``:
    HFLM and ours agree per request with it unset, true and false, and true moves every request
    with a context (its BOS now starts them): the option reaches the tokenizer, not ignored."""
    lm = tiny_model("gpt2")
    lm.model.save_pretrained(tmp_path)
    lm.tokenizer.save_pretrained(tmp_path)
    answers = {v: same_answers(*hflm_and_ours(str(tmp_path), str(tmp_path), v)) for v in (None, True, False)}
    moved = [abs(a - b) for a, b in zip(answers[None], answers[True])]
    assert all(m > 1e-3 for m, (context, _) in zip(moved, HFLM_REQUESTS) if context)
    assert all(m < 1e-4 for m, (context, _) in zip(moved, HFLM_REQUESTS) if not context)
    assert answers[False] == pytest.approx(answers[None], abs=1e-4)  # GPT-2 adds no BOS by default


@needs_shared
@pytest.mark.floats
def test_reduction_mean_and_salazar_reach_the_engine(tasks):
    model = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", method="salazar", reduction="mean")
    items = per_item(run_lm_eval(model, tasks, ["capitals_lm"]))
    pairs = [p for d in sorted(items) for p in items[d][0]]
    expected = score_batch(model.lm, pairs, ScoringSettings(method="salazar", reduction="mean"))
    got = [x for d in sorted(items) for x in items[d][1]]
    assert got == floats.logprobs([s.mean for s in expected], model.lm)


@needs_shared
@pytest.mark.floats
def test_the_decoders_likelihood_uses_generations_padding_masks(tasks):
    """method=decoder scores each continuation in the windows generate_until writes from, with the
    same padding_masks; is_greedy is then "greedy decoding writes it", every token ranked first."""
    model = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", method="decoder", padding_masks=2)
    assert (model.scoring.method, model.scoring.padding_masks, model.settings.scoring.padding_masks) == ("decoder", 2, 2)
    results = run_lm_eval(model, tasks, ["capitals_lm"])
    assert (results["config"]["pll_method"], results["config"]["padding_masks"]) == ("decoder", 2)
    items = per_item(results)
    pairs = [p for d in sorted(items) for p in items[d][0]]
    expected = score_batch(model.lm, pairs, ScoringSettings(method="decoder", padding_masks=2))
    assert [x for d in sorted(items) for x in items[d][1]] == \
        [floats.total(s.total, len(s.tokens), model.lm) for s in expected]
    assert [g for d in sorted(items) for g in items[d][2]] == [all(t.rank == 1 for t in s.tokens) for s in expected]
    naive = naive_decoder(model.lm, *pairs[0], 2)
    assert items[0][1][0] == floats.total(sum(e[1] for e in naive), len(naive), model.lm)


def test_generate_until_is_generate(standin, tasks):
    model = standin[0]
    results = run_lm_eval(model, tasks, ["capitals_gen"], limit=3)
    for sample in results["samples"]["capitals_gen"]:
        prompt, gen_kwargs = sample["arguments"][0]
        assert gen_kwargs["until"] == ["\n", "."]
        settings = GenerationSettings(max_new_tokens=6, stop_strings=["\n", "."])
        expected = generate(model.lm, prompt, settings)
        assert sample["resps"][0][0] == expected.text
    # a prompt with newlines (the stand-in needs the marker: the engine's business), two stops
    prompt = "Q: What is the capital of France?\nA: Paris\n\nQ: What is the capital of Italy?\nA:"
    request = Instance("generate_until", {}, (prompt, {"until": ["\n\n", "Q:"], "max_gen_toks": 8}), 0)
    expected = generate(model.lm, prompt, GenerationSettings(max_new_tokens=8, stop_strings=["\n\n", "Q:"]))
    assert model.generate_until([request]) == [expected.text]


@needs_shared
def test_generate_until_writes_in_any_order_where_model_args_say():
    """window=block, order=confidence, tokens_per_step=2 in --model_args: generate_until writes as
    generate() does with those settings (the unmasking loop), not the paper's way."""
    model = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", window="block", block_length=4,
                         tokens_per_step=2, order="confidence")
    prompt = "Q: What is the capital of France?\nA: Paris\n\nQ: What is the capital of Italy?\nA:"
    request = Instance("generate_until", {}, (prompt, {"until": ["\n\n"], "max_gen_toks": 8}), 0)
    writing = dict(window="block", block_length=4, tokens_per_step=2, order="confidence")
    expected = generate(model.lm, prompt, GenerationSettings(max_new_tokens=8, stop_strings=["\n\n"], **writing))
    paper = generate(model.lm, prompt, GenerationSettings(max_new_tokens=8, stop_strings=["\n\n"]))
    assert expected.steps_run < paper.steps_run
    assert model.generate_until([request]) == [expected.text]
    with pytest.raises(ValueError, match="tokens_per_step"):
        MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", tokens_per_step=0)


@needs_shared
def test_every_writing_key_reaches_generate_through_lm_evals_registry():
    """masks_ahead and the confidence threshold, like every field of WritingSettings, are model_args:
    the model lm-eval's registry builds from its argument string writes as generate() does with
    them."""
    from lm_eval.api.registry import get_model

    from demo.settings import WritingSettings
    writing = dict(window="block", block_length=4, masks_ahead=True, order="confidence", confidence_threshold=0.3)
    assert set(writing) | {"tokens_per_step", "remask"} == {f.name for f in dataclasses.fields(WritingSettings)}
    arguments = ",".join(f"{k}={v}" for k, v in writing.items())
    model = get_model("mlm").create_from_arg_string(f"pretrained={STANDIN_MLM},{arguments}", {"device": "cpu"})
    prompt = "Q: What is the capital of France?\nA: Paris\n\nQ: What is the capital of Italy?\nA:"
    request = Instance("generate_until", {}, (prompt, {"until": ["\n\n"], "max_gen_toks": 8}), 0)
    expected = generate(model.lm, prompt, GenerationSettings(max_new_tokens=8, stop_strings=["\n\n"], **writing))
    assert model.generate_until([request]) == [expected.text]


def test_generation_kwargs_read_as_lm_eval_means_them():
    greedy = generation_settings({"until": "\n", "max_gen_toks": 5, "temperature": 0.0})
    assert (greedy.strategy, greedy.stop_strings, greedy.max_new_tokens) == ("greedy", ["\n"], 5)
    sample = generation_settings({"do_sample": True, "temperature": 0.7, "top_p": 0.9})
    assert (sample.strategy, sample.temperature, sample.top_p, sample.seed) == ("sample", 0.7, 0.9, None)
    assert generation_settings({}).max_new_tokens == 256  # HFLM's default max_gen_toks
    with pytest.raises(ValueError, match="Unsupported generation kwargs min_length"):
        generation_settings({"min_length": 3})
    with pytest.raises(ValueError, match="temperature must be a number above 0 up to 5"):
        generation_settings({"do_sample": True, "temperature": 0.0})
    # lm-eval ships configs asking for up to 32768 tokens: the model's window bounds them
    # (fit_generation); only a deployment caps them (the app's DEMO_MAX_NEW_TOKENS)
    assert generation_settings({"max_gen_toks": 32_768}).max_new_tokens == 32_768
    with pytest.raises(ValueError, match="max_new_tokens must be a whole number >= 1"):
        generation_settings({"max_gen_toks": 0})


# ---------------------------------------------------------------- loglikelihood_rolling


@pytest.fixture(scope="module")
def short_bert(tmp_path_factory, tiny_model):
    """A small random BERT that reads at most 64 tokens, saved as a model folder: long texts
    need windows after a few sentences, and scoring them is quick."""
    folder = tmp_path_factory.mktemp("bert64")
    lm = tiny_model("bert", max_position_embeddings=64)
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return MaskedLMEval(pretrained=str(folder), device="cpu")


@needs_shared
@pytest.mark.floats
def test_rolling_windows_tile_long_texts_and_fit_the_model(short_bert):
    lm = short_bert.lm
    book = sorted((HAYSTACK / "gutenberg_nltk").glob("*.txt"))[0]
    book = book.read_text(encoding="utf-8", errors="ignore")
    long_text = book[30_000:31_000]  # about 230 tokens, newlines included
    short = "The cat sat on the mat.\nIt was warm."
    assert rolling_pairs(lm, short) == [("", short)]
    pairs = rolling_pairs(lm, long_text)
    assert len(pairs) > 4 and "".join(chunk for _, chunk in pairs) == long_text
    assert all(input_length(lm, c + x) <= 64 and input_length(lm, x) <= 32 for c, x in pairs)
    starts = [sum(len(x) for _, x in pairs[:k]) for k in range(len(pairs))]
    # each chunk after the text just before it: none for the first, some for every other
    assert all(long_text[start - len(c):start] == c for (c, _), start in zip(pairs, starts))
    assert pairs[0][0] == "" and all(c for c, _ in pairs[1:])

    requests = [Instance("loglikelihood_rolling", {}, (t,), i) for i, t in enumerate([short, long_text])]
    got = short_bert.loglikelihood_rolling(requests)
    expected = score_batch(lm, [("", short)] + pairs, ScoringSettings())  # the same engine call
    assert got == [floats.total(expected[0].total, len(expected[0].tokens), lm),
                   floats.total(sum(s.total for s in expected[1:]), sum(len(s.tokens) for s in expected[1:]), lm)]
    # every token of the long text scored exactly once
    assert sum(len(s.tokens) for s in expected[1:]) == input_length(lm, long_text) - 2


@needs_shared
@pytest.mark.floats
def test_rolling_windows_leave_room_for_the_decoders_masks(short_bert, monkeypatch):
    """The decoder's last window is p + 1 tokens longer than its text: the windows are cut so that
    it fits, where the PLL's would not have."""
    lm = short_bert.lm
    decoder = ScoringSettings(method="decoder")
    fits_the_pll = " ".join(["word"] * 62)  # 62 tokens + [CLS] + [SEP]: the model's 64
    assert rolling_pairs(lm, fits_the_pll) == [("", fits_the_pll)]
    pairs = rolling_pairs(lm, fits_the_pll, decoder)
    assert len(pairs) > 1 and "".join(chunk for _, chunk in pairs) == fits_the_pll
    assert all(input_length(lm, c + x, decoder) <= 64 for c, x in pairs)
    monkeypatch.setattr(short_bert, "scoring", replace(short_bert.scoring, method="decoder"))
    [got] = short_bert.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (fits_the_pll,), 0)])
    expected = score_batch(lm, pairs, decoder)
    assert got == floats.total(sum(s.total for s in expected), sum(len(s.tokens) for s in expected), lm)


# ---------------------------------------------------------------- requests longer than the model reads


def token_starts(lm, text):
    return sorted({start for start, _ in lm.tokenizer(text, add_special_tokens=False,
                                                       return_offsets_mapping=True)["offset_mapping"]})


def accepted(check) -> bool:
    from demo.engine.models import InputTooLong
    try:
        check()
    except InputTooLong:
        return False
    return True


def naive_generation_fit(lm, prompt, max_gen_toks):
    """(prompt, max_new_tokens) by the documented rule, written as plain scans: drop the prompt's
    first token until max_gen_toks fit after it (HFLM's rule); if none does, until half the window
    does, then the most new tokens that fit."""
    from demo.engine.generation import check_prompt
    from demo.settings import GenerationSettings

    def fits(text, n):
        return accepted(lambda: check_prompt(lm, text, GenerationSettings(max_new_tokens=n)))

    ends = [prompt[start:] for start in token_starts(lm, prompt)]
    for end in ends:
        if fits(end, max_gen_toks):
            return end, max_gen_toks
    half = lm.max_length - lm.max_length // 2
    end = next(end for end in ends if fits(end, half))
    return end, max(n for n in range(half, max_gen_toks + 1) if fits(end, n))


@needs_shared
def test_long_generation_requests_finish_the_run(short_bert, tmp_path, caplog):
    """A 64-position BERT under lm-eval: a 1,024-token generation request (lm-eval ships such
    configs; HFLM refuses them on a smaller model) and prompts longer than the window finish the
    run: each output is generate() on the prompt and token limit of the documented rule, and the
    run warns with the counts and records them."""
    lm = short_bert.lm
    short, long = "The cat sat on the mat. It", "one two three four five six seven " * 12 + "and then"
    data = tmp_path / "long.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "answer": "x"}) + "\n" for p in (short, long)))
    (tmp_path / "lm_eval").mkdir()
    (tmp_path / "lm_eval" / "long.yaml").write_text(yaml.safe_dump(dict(
        task="long_gen", dataset_path="json", dataset_kwargs={"data_files": {"test": str(data)}},
        test_split="test", doc_to_text="prompt", doc_to_target="answer", output_type="generate_until",
        generation_kwargs={"until": ["\n"], "max_gen_toks": 1024, "do_sample": False},
        metric_list=METRIC("exact_match"))))
    short_bert.too_long.clear()
    with caplog.at_level(logging.WARNING, logger="demo.harness.model"):
        results = run_lm_eval(short_bert, tmp_path, ["long_gen"])
    outputs = {s["doc_id"]: s["resps"][0][0] for s in results["samples"]["long_gen"]}
    for doc_id, prompt in enumerate((short, long)):
        fitted, max_new = naive_generation_fit(lm, prompt, 1024)
        assert (fitted == prompt) == (prompt == short) and max_new < 64
        expected = generate(lm, fitted, GenerationSettings(max_new_tokens=max_new, stop_strings=["\n"]))
        assert outputs[doc_id] == expected.text
    assert results["config"]["too_long"] == {"generate_until: max_gen_toks lowered": 2,
                                             "generate_until: cut from the left": 1}
    assert "generate_until: 2 of 2 request(s) longer than" in caplog.text

    # max_gen_toks that fits the window: HFLM's rule, the prompt cut to leave it room
    caplog.clear()
    requests = [Instance("generate_until", {}, (p, {"until": ["\n"], "max_gen_toks": 8}), i)
                for i, p in enumerate((short, long))]
    with caplog.at_level(logging.WARNING, logger="demo.harness.model"):
        got = short_bert.generate_until(requests)
    fitted, max_new = naive_generation_fit(lm, long, 8)
    assert max_new == 8 and len(fitted) < len(long)
    settings = GenerationSettings(max_new_tokens=8, stop_strings=["\n"])
    assert got == [generate(lm, short, settings).text, generate(lm, fitted, settings).text]
    assert "generate_until: 1 of 2 request(s)" in caplog.text and "1 cut from the left" in caplog.text


@needs_shared
@pytest.mark.floats
def test_long_loglikelihood_requests_are_cut_or_skipped(short_bert, caplog):
    """A context too long for the window is cut from the left (the longest end that the engine
    accepts, found here by a plain scan); a continuation that cannot fit even alone is answered
    (-inf, False); the others are scored as they are; the call warns with the counts."""
    lm = short_bert.lm
    long_context = "one two three four five six seven " * 12 + "and then"
    pairs = [("The cat sat on the", " mat."), (long_context, " the end."), ("Once", " upon" * 80)]

    def scorable(context, continuation):
        from demo.engine.pll import Choice, check_choices
        return accepted(lambda: check_choices(lm, [Choice(context, continuation, continuation)]))

    cut = next(long_context[start:] for start in token_starts(lm, long_context) + [len(long_context)]
               if scorable(long_context[start:], " the end."))
    assert 0 < len(cut) < len(long_context)
    with caplog.at_level(logging.WARNING, logger="demo.harness.model"):
        got = short_bert.loglikelihood([Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)])
    expected = score_batch(lm, [pairs[0], (cut, " the end.")])
    # the same engine on the same texts, in other sub-batches: float32 rounding only
    assert [x for x, _ in got[:2]] == [floats.total(e.score, len(e.tokens), lm) for e in expected]
    assert got[2] == (float("-inf"), False)
    assert "loglikelihood: 2 of 3 request(s)" in caplog.text and "1 skipped" in caplog.text


# ---------------------------------------------------------------- data parallel

DP_SCRIPT = """
import json, sys
import lm_eval
from lm_eval.tasks import TaskManager
import demo.harness.model  # registers "mlm"
include, model, out = sys.argv[1:]
results = lm_eval.simple_evaluate(
    model="mlm", model_args=f"pretrained={model},device=cpu", tasks=["capitals_lm"],
    task_manager=TaskManager(include_path=include, include_defaults=False), log_samples=True,
    bootstrap_iters=0)
if results is not None:  # rank 0 reports
    samples = results["samples"]["capitals_lm"]
    json.dump({"acc": results["results"]["capitals_lm"]["acc,none"],
               "items": {s["doc_id"]: [r[0] for r in s["resps"]] for s in samples}}, open(out, "w"))
"""


@pytest.mark.floats
def test_two_process_data_parallel_run_equals_one_process(standin, tasks, tmp_path):
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.skip("this torch build has no gloo backend, so two CPU processes cannot talk")
    script, out = tmp_path / "dp.py", tmp_path / "dp.json"
    script.write_text(DP_SCRIPT)
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(script), str(tasks / "lm_eval"), str(STANDIN_MLM), str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    two = json.loads(out.read_text())

    one, one_lm = standin[1], standin[0].lm
    items = per_item(one)
    assert sorted(int(k) for k in two["items"]) == sorted(items)  # every document once, on rank 0
    for doc_id, (pairs, logliks, greedy) in items.items():
        # other sub-batches and one thread per process: float32 sums agree to rounding, not bits
        assert [x[0] for x in two["items"][str(doc_id)]] == [
            floats.total(x, floats.tokens_in(continuation, one_lm), one_lm) for x, (_, continuation) in zip(logliks, pairs)]
        assert [x[1] for x in two["items"][str(doc_id)]] == greedy
    assert two["acc"] == one["results"]["capitals_lm"]["acc,none"]


# ---------------------------------------------------------------- the command line


@needs_shared
def test_command_line_entry_registers_and_hands_over_to_lm_eval(tasks, tmp_path, monkeypatch):
    from lm_eval.api.registry import get_model

    from demo.harness.__main__ import main
    assert get_model("mlm") is MaskedLMEval and get_model("hf").__name__ == "HFLM"  # lm-eval's own stay
    # lm-eval's command line indexes its ~15k built-in tasks first (15 s here): only ours are needed.
    monkeypatch.setattr(lm_eval.tasks, "TaskManager",
                        functools.partial(TaskManager, include_defaults=False))
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", [
        "demo.harness", "--model", "mlm", "--model_args", f"pretrained={STANDIN_MLM},method=salazar",
        "--tasks", "capitals_lm", "--include_path", str(tasks / "lm_eval"), "--device", "cpu",
        "--output_path", str(out), "--log_samples"])  # no "run": lm-eval's legacy form, as documented
    main()
    result = json.loads(next(out.rglob("results_*.json")).read_text())
    assert result["config"]["pll_method"] == "salazar"
    assert 0 <= result["results"]["capitals_lm"]["acc,none"] <= 1


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("args, message", [
    (dict(pretrained="x", bogus=1), r"Unknown model_args bogus; valid keys: pretrained, kind, device"),
    (dict(pretrained="x", scope="full"), r"scope= is not used by the lm-eval model"),
    (dict(pretrained="x", unconditional_context="Answer:"), r"acc_mutual_info"),
    (dict(method="salazar"), r"model_args needs pretrained="),
    (dict(pretrained="x", method="l2r"), r"Unknown scoring method 'l2r'"),
    (dict(pretrained="x", right_masks=99), r"right_masks must be a whole number from 0 to 16"),
    (dict(pretrained="x", method="salazar", right_masks=3), r"right_masks only applies to method=right_ma"),
    (dict(pretrained="x", dtype="int8"), r"Unknown dtype 'int8'"),
    (dict(pretrained="x", parallelize="yes"), r"parallelize must be true or false"),
    (dict(pretrained="x", add_bos_token="yes"), r"add_bos_token must be true or false"),
])
def test_bad_model_args_fail_before_loading(args, message):
    with pytest.raises(ValueError, match=message):
        MaskedLMEval(**args)  # "x" is not a model: nothing is loaded before the check


@needs_shared
def test_options_of_the_other_kind_are_refused():
    with pytest.raises(ValueError, match="is a masked LM; method='causal' needs a causal LM"):
        MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", method="causal")
    with pytest.raises(ValueError, match="is a masked LM; add_bos_token only applies to causal LMs"):
        MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", add_bos_token=True)


def test_masked_only_options_on_a_causal_lm_are_refused(smollm2):
    for option in (dict(right_masks=3), dict(padding_masks=1)):
        with pytest.raises(ValueError, match="is a causal LM; .* only apply to masked LMs"):
            MaskedLMEval(pretrained=smollm2.name, device="cpu", **option)
    with pytest.raises(ValueError, match="is a causal LM: it is scored by exact log-likelihood"):
        MaskedLMEval(pretrained=smollm2.name, device="cpu", method="whole_word")


@needs_shared
def test_a_model_without_its_mlm_head_is_refused(tmp_path):
    from transformers import AutoTokenizer, BertConfig, BertModel
    folder = tmp_path / "encoder-only"
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "bert-base-uncased")
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
    BertModel(config).save_pretrained(folder)  # the encoder alone: no prediction head
    tokenizer.save_pretrained(folder)
    with pytest.raises(ValueError, match="has no trained masked LM head"):
        MaskedLMEval(pretrained=str(folder), device="cpu")


@needs_shared
@pytest.mark.floats
def test_model_parallel_loading_passes_the_device_map_to_transformers(standin, monkeypatch):
    """parallelize=true (model parallel through accelerate) reaches from_pretrained as
    device_map="auto" (here: every layer on the CPU); the scores are the usual model's."""
    from transformers import AutoModelForMaskedLM

    import demo.engine.models
    seen = []

    class Spy:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            seen.append(kwargs.get("device_map"))
            return AutoModelForMaskedLM.from_pretrained(*args, **kwargs)

    monkeypatch.setattr(demo.engine.models, "AutoModelForMaskedLM", Spy)
    usual = standin[0].lm
    placed = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", parallelize=True)
    assert seen == ["auto"] and placed.lm is not usual and placed.lm.device.type == "cpu"
    items = [("The capital of France is", " Paris.")]
    expected = score_batch(usual, items)[0]
    assert score_batch(placed.lm, items)[0].score == floats.total(expected.score, len(expected.tokens), usual)


# ---------------------------------------------------------------- our tasks, exported


@needs_shared
@pytest.mark.floats
def test_our_tasks_exported_for_lm_eval_give_our_evaluators_scores(standin, tmp_path):
    """`mlm-icl export-tasks` writes COPA (one context), Winograd (a context per candidate) and
    an instruction-induction task (generated) for --include_path; lm-eval then scores exactly the
    items our evaluator scores: the same per-candidate scores, accuracy and generated answers."""
    from demo.cli import main
    from tests.conftest import SHARED
    DATA = SHARED / "data"
    model = standin[0]
    names = ["copa", "winograd", "ii_first_word_letter"]
    argv = ["--model", str(STANDIN_MLM), "--shots", "1", "--limit", "4", "--data-root", str(DATA)]
    assert main(["export-tasks", *[a for n in names for a in ("--task", n)], "--output-dir",
                 str(tmp_path / "lm_eval"), *argv]) == 0
    manager = TaskManager(include_path=str(tmp_path / "lm_eval"), include_defaults=False)
    results = lm_eval.simple_evaluate(model=model, tasks=[f"mlm_icl_{n}" for n in names],
                                      task_manager=manager, log_samples=True, bootstrap_iters=0)
    settings = RunSettings(shots=1, limit=4, data_root=str(DATA))
    for name in names:
        ours = evaluate(model.lm, name, tmp_path / "ours", settings)[0]
        records = [json.loads(line) for line in next((tmp_path / "ours").glob(f"{name}__*.jsonl")).open()]
        samples = sorted(results["samples"][f"mlm_icl_{name}"], key=lambda x: x["doc_id"])
        assert len(samples) == len(records) == 4
        if name == "ii_first_word_letter":
            assert [s["filtered_resps"][0] for s in samples] == [r["text"] for r in records]
            continue
        # other items share the float32 batches: totals of about 80 nats agree to rounding
        for sample, record in zip(samples, records):
            assert [r[0][0] for r in sample["resps"]] == [
                floats.total(x, floats.tokens_in(continuation, model.lm), model.lm)
                for x, (_, continuation) in zip(record["scores"], sample["arguments"])]
        accuracy = results["results"][f"mlm_icl_{name}"]["acc,none"]
        assert 100 * accuracy == pytest.approx(ours["value"], abs=1e-6)


def test_tasks_without_an_lm_eval_form_are_refused(tmp_path, tiny_model):
    """Generation constrained to each item's candidates (copa_generate) has no lm-eval request
    type: exporting it as free generation would score a different task."""
    from demo.evaluation.harness_tasks import export_task
    with pytest.raises(ValueError, match="copa_generate.*constraint to each item's own candidates"):
        export_task(tiny_model("bert"), "copa_generate", tmp_path)
    assert not list(tmp_path.iterdir())  # refused before anything is written


@needs_shared
def test_export_copa_at_64_shots_has_the_evaluators_items(tiny_model, tmp_path):
    """COPA at 64 shots is about 1150 to 1220 tokens per item for BERT's tokenizer (newline markers
    included): on a random BERT that reads 1178, the evaluator skips about half. The exported file holds exactly the items it evaluates (same
    indices, same contexts) and says how many were left out."""
    from demo.cli import main
    from tests.conftest import SHARED
    folder = tmp_path / "bert1178"
    lm = tiny_model("bert", max_position_embeddings=1178)
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    argv = ["--shots", "64", "--limit", "24", "--data-root", str(SHARED / "data")]
    assert main(["export-tasks", "--model", str(folder), "--task", "copa", "--output-dir",
                 str(tmp_path / "lm_eval"), "--no-progress", *argv]) == 0
    docs = [json.loads(line) for line in (tmp_path / "lm_eval" / "mlm_icl_copa.jsonl").open()]
    metadata = yaml.safe_load((tmp_path / "lm_eval" / "mlm_icl_copa.yaml").read_text())["metadata"]

    from demo.engine.models import load_model
    rows = evaluate(load_model(str(folder), device="cpu"), "copa", tmp_path / "ours",
                    RunSettings(shots=64, limit=24, data_root=str(SHARED / "data")))
    records = [json.loads(line) for line in next((tmp_path / "ours").glob("copa__*.jsonl")).open()]
    assert 0 < rows[0]["skipped"] < 24 and rows[0]["n"] == len(records) == 24 - rows[0]["skipped"]
    assert [d["index"] for d in docs] == [r["index"] for r in records]
    assert [d["context"] for d in docs] == [r["context"] for r in records]  # one context per item
    assert (metadata["skipped"], metadata["max_tokens"], metadata["shots"]) == (rows[0]["skipped"], 1178, 64)


def test_export_refuses_options_it_cannot_honour(tmp_path, capsys):
    """Evaluation-only options have no lm-eval form: refused by name, before a model loads (the
    folder has a config and no weights) and before anything is written."""
    from demo.cli import main
    out, folder = tmp_path / "lm_eval", tmp_path / "no_weights"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert main(["export-tasks", "--model", str(folder), "--task", "copa", "--output-dir", str(out),
                 "--repetitions", "3", "--cache", "prefix", "--chunk-size", "4"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: export-tasks cannot honour --repetitions 3 (lm-eval evaluates")
    assert "--chunk-size 4 (" in error and "--cache prefix (" in error and "Traceback" not in error
    assert not out.exists()


@needs_shared
def test_readme_recipe_runs_lm_evals_builtin_task_offline(standin, tmp_path):
    """The README's YAML for lm-eval's built-in COPA on local files, run as written (its two
    placeholder folders filled in): the documents are the local file's, and each context is the
    built-in template's (its own utils.doc_to_text, loaded from lm-eval's folder)."""
    import importlib.util
    import re

    from tests.conftest import SHARED
    readme = (ROOT / "README.md").read_text()
    recipe = re.search(r"\*\*lm-eval's built-in tasks offline\.\*\*.*?```yaml\n(.*?)```", readme, re.S).group(1)
    builtin = Path(lm_eval.__file__).parent
    recipe = recipe.replace("/path/to/site-packages/lm_eval", str(builtin))
    recipe = recipe.replace("/data/superglue", str(SHARED / "data" / "superglue"))
    (tmp_path / "copa_local.yaml").write_text(recipe)
    manager = TaskManager(include_path=str(tmp_path), include_defaults=False)
    results = lm_eval.simple_evaluate(model=standin[0], tasks=["copa_local"], task_manager=manager,
                                      log_samples=True, bootstrap_iters=0, limit=3)
    spec = importlib.util.spec_from_file_location("copa_utils", builtin / "tasks/super_glue/copa/utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    local = [json.loads(line) for line in (SHARED / "data/superglue/COPA/val.jsonl").open()][:3]
    samples = sorted(results["samples"]["copa_local"], key=lambda s: s["doc_id"])
    assert [s["doc"] for s in samples] == local
    for sample, doc in zip(samples, local):
        assert {context for context, _ in sample["arguments"]} == {utils.doc_to_text(doc)}
    assert 0 <= results["results"]["copa_local"]["acc,none"] <= 1


@needs_shared
def test_generate_until_writes_a_batch_together_as_each_alone(monkeypatch):
    """batch_size=4 with any-order writing: the requests with the same settings are written four
    at a time (one forward pass a step for the four), each answer the one it gets alone."""
    import demo.engine.generation as generation
    calls = []
    real = generation.generate_together
    monkeypatch.setattr("demo.engine.generation.generate_together",
                        lambda lm, prompts, settings: calls.append(len(prompts)) or real(lm, prompts, settings))
    model = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", window="block", block_length=4,
                         tokens_per_step=2, order="confidence", batch_size=4)
    prompts = [f"Q: What is the capital of {c}?\nA:" for c in ("France", "Italy", "Spain", "Peru", "Chad")]
    requests = [Instance("generate_until", {}, (p, {"until": ["\n"], "max_gen_toks": 6}), i)
                for i, p in enumerate(prompts)]
    requests.append(Instance("generate_until", {}, (prompts[0], {"until": ["\n"], "max_gen_toks": 3}), 5))
    answers = model.generate_until(requests)
    assert sorted(calls) == [1, 1, 4]  # 4 + 1 of one setting, 1 of another
    for request, answer in zip(requests, answers):
        context, kwargs = request.args
        settings = GenerationSettings(max_new_tokens=kwargs["max_gen_toks"], stop_strings=["\n"], window="block",
                                      block_length=4, tokens_per_step=2, order="confidence")
        assert answer == generate(model.lm, context, settings).text
    with pytest.raises(ValueError, match="batch_size must be a whole number >= 1 or 'auto'"):
        MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", batch_size=0)
