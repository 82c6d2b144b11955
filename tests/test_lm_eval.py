"""lm-evaluation-harness with our model (``demo.lm_eval_model``): lm-eval's own ``simple_evaluate``
over a task written here (YAML over a local JSONL), checked against independent references.

- per-item log-likelihoods: our engine on the same strings (1e-6) and a naive one-forward-pass-
  per-token loop (1e-4, float32 sums over differently batched passes);
- accuracy and per-candidate scores: our own evaluator on the same items and template;
- a two-process data-parallel run (torchrun, gloo, CPU): the same items, results and accuracy;
- ``generate_until``: exactly what ``demo.generation.generate`` writes;
- ``loglikelihood_rolling``: the documented windows tile the text, each fits the model;
- bad model_args and generation kwargs: clear errors, before any request.
"""

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install lm-eval==0.4.13)")
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from demo.evaluate import evaluate  # noqa: E402
from demo.generation import generate  # noqa: E402
from demo.lm_eval_model import MaskedLMEval, generation_settings, model_length, rolling_pairs  # noqa: E402
from demo.pll import score_batch  # noqa: E402
from demo.settings import GenerationSettings, RunSettings, ScoringSettings  # noqa: E402
from demo.tasks import read_task_file  # noqa: E402
from tests.conftest import HAYSTACK, STANDIN_MLM, TOKENIZERS, needs_shared  # noqa: E402

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
    """(log-likelihood, all argmax) of the continuation: one forward pass of context + continuation,
    after the start token, continuation tokens = those beyond the context tokenized alone."""
    tok = lm.tokenizer
    start = [tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id]
    ids = start + tok(context + continuation, add_special_tokens=False)["input_ids"]
    first = 1 + len(tok(context, add_special_tokens=False)["input_ids"])
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
    assert logliks == pytest.approx([s.total for s in engine], abs=1e-6)
    assert greedy == [all(t.rank == 1 for t in s.tokens) for s in engine]
    # the naive loop, on the first item's candidates
    for pair, loglik, top in zip(pairs[:3], logliks, greedy):
        expected, expected_top = naive(model.lm, *pair)
        assert loglik == pytest.approx(expected, abs=1e-4) and top == expected_top

    # our evaluator, same items and template, 0 shots
    task = read_task_file(tasks / "ours" / "capitals.yaml", base=tasks / "ours")[0]
    rows = evaluate(model.lm, task, tmp_path / "runs", RunSettings(shots=0))
    lines = next((tmp_path / "runs").glob("capitals_ours__*.jsonl")).read_text().splitlines()
    records = {record["index"]: record for record in map(json.loads, lines)}
    for doc_id, (_, scores, _) in items.items():
        assert records[doc_id]["scores"] == pytest.approx(scores, abs=1e-6)
    assert 100 * results["results"]["capitals_lm"]["acc,none"] == pytest.approx(rows[0]["value"], abs=0.01)


# ---------------------------------------------------------------- through simple_evaluate


def test_masked_lm_matches_engine_naive_loop_and_evaluator(standin, tasks, tmp_path):
    model, results = standin
    check_against_references(model, results, tasks, tmp_path, naive_right_masks)
    info = results["config"]
    assert (info["model_kind"], info["pll_method"], info["right_masks"], info["reduction"]) == \
        ("masked", "right_masks", 2, "sum")


def test_causal_lm_matches_exact_loglikelihood_and_evaluator(tasks, tmp_path, smollm2):
    model = MaskedLMEval(pretrained=smollm2.name, device="cpu")
    assert model.lm is smollm2  # load_model's cache: the fixture's model, not a second copy
    results = run_lm_eval(model, tasks, ["capitals_lm"])
    check_against_references(model, results, tasks, tmp_path, naive_causal)
    assert results["config"]["pll_method"] == "causal"


@needs_shared
def test_reduction_mean_and_salazar_reach_the_engine(tasks):
    model = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", method="salazar", reduction="mean")
    items = per_item(run_lm_eval(model, tasks, ["capitals_lm"]))
    pairs = [p for d in sorted(items) for p in items[d][0]]
    expected = score_batch(model.lm, pairs, ScoringSettings(method="salazar", reduction="mean"))
    got = [x for d in sorted(items) for x in items[d][1]]
    assert got == pytest.approx([s.mean for s in expected], abs=1e-6)


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


def test_generation_kwargs_read_as_lm_eval_means_them():
    greedy = generation_settings({"until": "\n", "max_gen_toks": 5, "temperature": 0.0})
    assert (greedy.strategy, greedy.stop_strings, greedy.max_new_tokens) == ("greedy", ["\n"], 5)
    sample = generation_settings({"do_sample": True, "temperature": 0.7, "top_p": 0.9})
    assert (sample.strategy, sample.temperature, sample.top_p, sample.seed) == ("sample", 0.7, 0.9, None)
    assert generation_settings({}).max_new_tokens == 256  # HFLM's default max_gen_toks
    with pytest.raises(ValueError, match="Unsupported generation kwargs min_length"):
        generation_settings({"min_length": 3})
    with pytest.raises(ValueError, match="temperature must be > 0"):
        generation_settings({"do_sample": True, "temperature": 0.0})
    with pytest.raises(ValueError, match="max_new_tokens must be a whole number from 1 to 512"):
        generation_settings({"max_gen_toks": 100_000})


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
def test_rolling_windows_tile_long_texts_and_fit_the_model(short_bert):
    lm = short_bert.lm
    book = sorted((HAYSTACK / "gutenberg_nltk").glob("*.txt"))[0]
    book = book.read_text(encoding="utf-8", errors="ignore")
    long_text = book[30_000:31_000]  # about 230 tokens, newlines included
    short = "The cat sat on the mat.\nIt was warm."
    assert rolling_pairs(lm, short) == [("", short)]
    pairs = rolling_pairs(lm, long_text)
    assert len(pairs) > 4 and "".join(chunk for _, chunk in pairs) == long_text
    assert all(model_length(lm, c + x) <= 64 and model_length(lm, x) <= 32 for c, x in pairs)
    starts = [sum(len(x) for _, x in pairs[:k]) for k in range(len(pairs))]
    # each chunk after the text just before it: none for the first, some for every other
    assert all(long_text[start - len(c):start] == c for (c, _), start in zip(pairs, starts))
    assert pairs[0][0] == "" and all(c for c, _ in pairs[1:])

    requests = [Instance("loglikelihood_rolling", {}, (t,), i) for i, t in enumerate([short, long_text])]
    got = short_bert.loglikelihood_rolling(requests)
    expected = score_batch(lm, [("", short)] + pairs, ScoringSettings())  # the same engine call
    assert got == pytest.approx([expected[0].total, sum(s.total for s in expected[1:])], abs=1e-6)
    # every token of the long text scored exactly once
    assert sum(len(s.tokens) for s in expected[1:]) == model_length(lm, long_text) - 2


# ---------------------------------------------------------------- data parallel

DP_SCRIPT = """
import json, sys
import lm_eval
from lm_eval.tasks import TaskManager
import demo.lm_eval_model  # registers "mlm"
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

    one = standin[1]
    items = per_item(one)
    assert sorted(int(k) for k in two["items"]) == sorted(items)  # every document once, on rank 0
    for doc_id, (_, logliks, greedy) in items.items():
        # other sub-batches and one thread per process: float32 sums agree to rounding, not bits
        assert [x[0] for x in two["items"][str(doc_id)]] == pytest.approx(logliks, abs=1e-4)
        assert [x[1] for x in two["items"][str(doc_id)]] == greedy
    assert two["acc"] == one["results"]["capitals_lm"]["acc,none"]


# ---------------------------------------------------------------- the command line


@needs_shared
def test_command_line_entry_registers_and_hands_over_to_lm_eval(tasks, tmp_path, monkeypatch):
    from lm_eval.api.registry import get_model

    from demo.lm_eval import main
    assert get_model("mlm") is MaskedLMEval and get_model("hf").__name__ == "HFLM"  # lm-eval's own stay
    # lm-eval's command line indexes its ~15k built-in tasks first (15 s here): only ours are needed.
    monkeypatch.setattr(lm_eval.tasks, "TaskManager",
                        functools.partial(TaskManager, include_defaults=False))
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", [
        "demo.lm_eval", "--model", "mlm", "--model_args", f"pretrained={STANDIN_MLM},method=salazar",
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
])
def test_bad_model_args_fail_before_loading(args, message):
    with pytest.raises(ValueError, match=message):
        MaskedLMEval(**args)  # "x" is not a model: nothing is loaded before the check


@needs_shared
def test_options_of_the_other_kind_are_refused():
    with pytest.raises(ValueError, match="is a masked LM; method='causal' needs a causal LM"):
        MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", method="causal")


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
def test_model_parallel_loading_passes_the_device_map_to_transformers(standin, monkeypatch):
    """parallelize=true (model parallel through accelerate) reaches from_pretrained as
    device_map="auto" (here: every layer on the CPU); the scores are the usual model's."""
    import demo.models
    from transformers import AutoModelForMaskedLM
    seen = []

    class Spy:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            seen.append(kwargs.get("device_map"))
            return AutoModelForMaskedLM.from_pretrained(*args, **kwargs)

    monkeypatch.setattr(demo.models, "AutoModelForMaskedLM", Spy)
    usual = standin[0].lm
    placed = MaskedLMEval(pretrained=str(STANDIN_MLM), device="cpu", parallelize=True)
    assert seen == ["auto"] and placed.lm is not usual and placed.lm.device.type == "cpu"
    items = [("The capital of France is", " Paris.")]
    assert score_batch(placed.lm, items)[0].score == pytest.approx(score_batch(usual, items)[0].score, abs=1e-6)


# ---------------------------------------------------------------- our tasks, exported


@needs_shared
def test_our_tasks_exported_for_lm_eval_give_our_evaluators_scores(standin, tmp_path):
    """`mlm-icl export-tasks` writes COPA (one context), Winograd (a context per candidate) and
    an instruction-induction task (generated) for --include_path; lm-eval then scores exactly the
    items our evaluator scores: the same per-candidate scores, accuracy and generated answers."""
    from demo.cli import main
    from tests.conftest import SHARED
    DATA = SHARED / "data"
    model = standin[0]
    names = ["copa", "winograd", "ii_first_word_letter"]
    argv = ["--shots", "1", "--limit", "4", "--data-root", str(DATA)]
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
        for sample, record in zip(samples, records):  # (other items share the float32 batches: 1e-5)
            assert [r[0][0] for r in sample["resps"]] == pytest.approx(record["scores"], abs=1e-5)
        accuracy = results["results"][f"mlm_icl_{name}"]["acc,none"]
        assert 100 * accuracy == pytest.approx(ours["value"], abs=1e-6)


def test_tasks_without_an_lm_eval_form_are_refused(tmp_path):
    """Generation constrained to each item's candidates (copa_generate) has no lm-eval request
    type: exporting it as free generation would score a different task."""
    from demo.lm_eval_tasks import export_task
    with pytest.raises(ValueError, match="copa_generate.*constraint to each item's own candidates"):
        export_task("copa_generate", tmp_path)
    assert not list(tmp_path.iterdir())  # refused before anything is written
