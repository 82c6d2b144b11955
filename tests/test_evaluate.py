"""The evaluator: wiring to the engines, resume after an interruption, masked and causal LMs,
clear errors for bad input."""

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SHARED, STANDIN_MLM, needs_shared

import demo.engine.pll as pll
import tests.floats as floats
from demo import tasks as T
from demo.evaluation import evaluate as E
from demo.evaluation_settings import RunSettings
from demo.settings import ScoringSettings

DATA = str(SHARED / "data")


@pytest.fixture(scope="module")
def bert(tiny_model):
    return tiny_model("bert")


def _named(run: str) -> str:
    """A run id less its identity's digest (8 hex digits, always there): what the run id spells out."""
    named, digest = run.rsplit("__", 1)
    assert re.fullmatch(r"[0-9a-f]{8}", digest), run
    return named


def _records(folder, pattern="*.jsonl"):
    files = sorted(folder.glob(pattern))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@needs_shared
@pytest.mark.floats
def test_scores_are_the_engine_scores_of_the_hand_written_spans(bert, tmp_path):
    """Winograd 0-shot, partial scoring: the evaluator's scores must be the PLL of exactly
    (sentence up to and with the candidate, the words after it)."""
    rows = E.evaluate(bert, "winograd", tmp_path, RunSettings(shots=0, limit=3, data_root=DATA))
    by_index = {r["index"]: r for r in _records(tmp_path)}
    record = next(iter(by_index.values()))
    item = T.load_examples("winograd", "data", DATA)[record["index"]]
    head = item.fields["context_prefix"]
    expected = pll.score_batch(bert, [(head + c, item.fields["context_suffix"]) for c in item.candidates],
                               ScoringSettings(method="right_masks"))
    assert record["scores"] == [floats.total(x.total, len(x.tokens), bert) for x in expected]
    assert record["pred"] == max(range(2), key=lambda i: expected[i].total)
    assert rows[0]["n"] == 3 and rows[0]["method"] == "right_masks" and rows[0]["score"] == "suffix"
    assert rows[0]["value"] == pytest.approx(100 * sum(r["correct"] for r in by_index.values()) / 3, abs=0.01)


@needs_shared
@pytest.mark.floats
def test_unconditional_normalisation_subtracts_the_answer_context_score(bert, tmp_path):
    E.evaluate(bert, "arc_easy", tmp_path, RunSettings(shots=0, limit=1, data_root=DATA))
    record = _records(tmp_path)[0]
    item = T.load_examples("arc_easy", "data", DATA)[record["index"]]
    q = "Question: " + item.fields["question"] + "\nAnswer: "  # raw text: the engine writes the marker
    assert not bert.newline_survives
    conditional = pll.score_batch(bert, [("", q + c) for c in item.candidates])
    unconditional = pll.score_batch(bert, [("Answer:", " " + c) for c in item.candidates])
    assert record["scores"] == [floats.difference(c.total, len(c.tokens), u.total, len(u.tokens), bert)
                                for c, u in zip(conditional, unconditional)]


@needs_shared
def test_interrupted_run_resumes_where_it_stopped(bert, tmp_path, monkeypatch):
    settings = RunSettings(shots=1, limit=6, chunk_size=2, repetitions=2, seed=5, data_root=DATA)
    reference = E.evaluate(bert, "copa", tmp_path / "whole", settings)

    calls = []
    real = pll.score_batch

    def interrupted(lm, items, *args, **kw):
        calls.append(len(items))
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the third chunk
        return real(lm, items, *args, **kw)

    monkeypatch.setattr(pll, "score_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        E.evaluate(bert, "copa", tmp_path / "cut", settings)
    (path,) = (tmp_path / "cut").glob("*.jsonl.parts/*.jsonl")  # the chunks saved as they finished
    partial = [record for line in path.read_text().splitlines()[1:] for record in json.loads(line)["results"]]
    assert len(partial) == 4  # two chunks of two examples reached the disk
    # a half-written line (the process died while writing) is ignored and redone
    path.write_text(path.read_text() + '{"chunk": [0, [7, 8]], "results": [{"repetition": 0, "ind')

    calls.clear()
    monkeypatch.setattr(pll, "score_batch", lambda lm, items, *a, **kw: calls.append(len(items)) or real(lm, items, *a, **kw))
    resumed = E.evaluate(bert, "copa", tmp_path / "cut", settings)
    assert len(calls) == 4  # 12 (repetition, example) pairs - 4 done = 8 = 4 chunks of 2
    records = _records(tmp_path / "cut")  # every line is whole JSON again
    assert sorted((r["repetition"], r["index"]) for r in records) == sorted(
        (r["repetition"], r["index"]) for r in _records(tmp_path / "whole"))
    for key in ("value", "std", "n", "repetitions"):
        assert resumed[0][key] == reference[0][key]
    # the same demonstrations were drawn as in the uninterrupted run
    whole = {(r["repetition"], r["index"]): r["demos"] for r in _records(tmp_path / "whole")}
    assert all(whole[(r["repetition"], r["index"])] == r["demos"] for r in records)


@needs_shared
def test_summary_files(bert, tmp_path):
    rows = E.evaluate(bert, "cb", tmp_path, RunSettings(shots=1, limit=4, data_root=DATA), command="mlm-icl evaluate --task cb")
    assert [r["metric"] for r in rows] == ["accuracy", "f1_macro"]
    import pandas as pd
    table = pd.read_csv(tmp_path / "summary.csv")
    for column in ("task", "model", "shots", "metric", "value", "stderr", "n", "seconds", "date", "command"):
        assert column in table.columns
    assert list(table["metric"]) == ["accuracy", "f1_macro"]
    summary = json.loads(next(tmp_path.glob("*.summary.json")).read_text())
    assert summary[0]["command"] == "mlm-icl evaluate --task cb"
    assert summary[0]["value"] == rows[0]["value"] and summary[0]["n"] == 4
    E.evaluate(bert, "cb", tmp_path, RunSettings(shots=1, limit=4, data_root=DATA))
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 2  # a rerun replaces its rows


@needs_shared
@pytest.mark.floats
def test_causal_lm_goes_through_the_same_evaluator(tiny_model, tmp_path):
    gpt2 = tiny_model("gpt2")
    rows = E.evaluate(gpt2, "copa", tmp_path, RunSettings(shots=1, limit=2, data_root=DATA))
    assert rows[0]["method"] == "causal" and rows[0]["model_kind"] == "causal"
    record = _records(tmp_path)[0]
    item = T.load_examples("copa", "data", DATA)[record["index"]]
    demo = T.load_examples("copa", "demos", DATA)[record["demos"][0]]
    context = T.render(T.get_task("copa"), demo) + "\n\n"
    expected = pll.score_batch(gpt2, [(context, T.render(T.get_task("copa"), item, c))
                                      for c in item.candidates], ScoringSettings(method="causal"))
    assert record["scores"] == [floats.total(x.total, len(x.tokens), gpt2) for x in expected]
    with pytest.raises(ValueError, match="causal LM.*'salazar' is a masked-LM method"):
        E.evaluate(gpt2, "copa", tmp_path, RunSettings(shots=0, limit=1, data_root=DATA), ScoringSettings(method="salazar"))


@needs_shared
@pytest.mark.floats
def test_the_decoders_likelihood_goes_through_the_same_evaluator(bert, tmp_path):
    """method=decoder reaches the engine with its padding masks, which the run id names."""
    settings = RunSettings(shots=1, limit=2, data_root=DATA)
    rows = E.evaluate(bert, "copa", tmp_path, settings, ScoringSettings(method="decoder"))
    assert rows[0]["method"] == "decoder"
    assert _named(rows[0]["run"]) == f"copa__{E.model_slug(bert)}__1shot__decoder{bert.padding_masks}__example__seed0"
    record = _records(tmp_path)[0]
    item = T.load_examples("copa", "data", DATA)[record["index"]]
    demo = T.load_examples("copa", "demos", DATA)[record["demos"][0]]
    context = T.render(T.get_task("copa"), demo) + "\n\n"
    expected = pll.score_batch(bert, [(context, T.render(T.get_task("copa"), item, c)) for c in item.candidates],
                               ScoringSettings(method="decoder"))
    assert record["scores"] == [floats.total(x.total, len(x.tokens), bert) for x in expected]
    three = E.evaluate(bert, "copa", tmp_path / "p3", settings, ScoringSettings(method="decoder", padding_masks=3))
    assert _named(three[0]["run"]) == _named(rows[0]["run"]).replace(f"decoder{bert.padding_masks}", "decoder3")


@needs_shared
def test_fast_scoring_runs_each_ranking_as_its_band_says_and_the_run_id_names_the_table(
        bert, tmp_path, monkeypatch):
    from demo.engine import pll_approx
    table = tmp_path / "fast_pll.csv"
    table.write_text("span_min,span_max,stride,rescore_band,rankings,agreement,low,high,speedup,model\n"
                     "1,1000000000,2,0,100,0.99,0.95,1.0,2.0,a model\n")
    monkeypatch.setattr(pll_approx, "FAST_PLL", table)
    pll_approx.fast_bands.cache_clear()
    settings = RunSettings(shots=0, limit=2, data_root=DATA)
    fast = E.evaluate(bert, "copa", tmp_path / "fast", settings, ScoringSettings(fast=True))
    E.evaluate(bert, "copa", tmp_path / "strided", settings, ScoringSettings(stride=2))
    exact = E.evaluate(bert, "copa", tmp_path / "exact", settings)
    pll_approx.fast_bands.cache_clear()
    assert _named(fast[0]["run"]) == _named(exact[0]["run"]).replace(
        "right_masks2", f"right_masks2-fast{pll_approx.fast_table_id()}")
    assert [r["scores"] for r in _records(tmp_path / "fast")] == [r["scores"] for r in _records(tmp_path / "strided")]
    assert [r["scores"] for r in _records(tmp_path / "fast")] != [r["scores"] for r in _records(tmp_path / "exact")]


@needs_shared
def test_generation_task_scores_the_generated_text(bert, tmp_path):
    rows = E.evaluate(bert, "ii_sum", tmp_path, RunSettings(shots=2, limit=2, max_new_tokens=3, data_root=DATA))
    for r in _records(tmp_path):
        assert r["query"].startswith("Input: ") and r["query"].endswith("\nOutput:")
        assert r["ii_exact_match"] == float(r["text"].strip().split(".")[0].lower() in
                                            [a.lower() for a in r["answers"]])
    assert rows[0]["metric"] == "ii_exact_match" and rows[0]["n"] == 2


@needs_shared
def test_induced_instruction_is_executed(bert, tmp_path):
    rows = E.evaluate(bert, "ii_antonyms_induce", tmp_path, RunSettings(shots=0, limit=1, execute_limit=2, max_new_tokens=3, data_root=DATA))
    record = _records(tmp_path)[0]
    assert record["executed"] == 2 and len(record["outputs"]) == 2
    assert rows[0]["metric"] == "execution_accuracy" and rows[0]["value"] == 100 * record["execution"]


# ---------------------------------------------------------------- the masked LM's fast decoding


@needs_shared
def test_prefix_cache_run_is_generate_with_the_prefix_cache_item_by_item(standin_mlm, tmp_path, monkeypatch):
    """COPA written, not ranked, with the prefix cache: each record is what generate() gives with
    cache="prefix" (refresh and margin at their defaults) on the prompt written out by hand,
    constrained to the item's two alternatives; the output is always one of them."""
    import demo.engine.generation
    from demo.settings import GenerationSettings
    real = demo.engine.generation.generate_together
    asked = []
    monkeypatch.setattr(demo.engine.generation, "generate_together",
                        lambda lm, prompts, settings, **kw: asked.extend([settings] * len(prompts))
                        or real(lm, prompts, settings, **kw))
    rows = E.evaluate(standin_mlm, "copa_generate", tmp_path,
                      RunSettings(shots=2, limit=4, cache="prefix", data_root=DATA))
    defaults = GenerationSettings()
    assert len(asked) == 4 and all((s.cache, s.cache_refresh, s.cache_margin) == (
        "prefix", defaults.cache_refresh, defaults.cache_margin) for s in asked)

    items, pool = T.load_examples("copa", "data", DATA), T.load_examples("copa", "demos", DATA)
    records = _records(tmp_path)
    for record in records:
        item = items[record["index"]]
        shown = [pool[i] for i in record["demos"]]
        prompt = "".join(f"{d.fields['premise']} {d.fields['connector']} {d.candidates[d.label]}\n\n"
                         for d in shown) + f"{item.fields['premise']} {item.fields['connector']}"
        [by_hand] = real(standin_mlm, [prompt], GenerationSettings(
            max_new_tokens=24, choices=list(item.candidates), cache="prefix"))
        assert record["text"] == by_hand.text.strip() and record["stop_reason"] == "choice"
        assert record["text"] in item.candidates
        assert record["pred"] == item.candidates.index(record["text"]) and record["label"] == item.label
        assert record["accuracy"] == float(record["pred"] == item.label)
    assert rows[0]["cache"] == "prefix" and rows[0]["n"] == 4
    assert rows[0]["value"] == pytest.approx(100 * sum(r["accuracy"] for r in records) / 4)


@needs_shared
def test_cache_mode_is_part_of_a_run_where_it_applies(bert, tiny_model, tmp_path, caplog):
    """Exact and fast runs of a generated task get their own ids and files and say their mode in
    the summary; where the mode does not apply (a ranked task, a causal LM) the run is the exact
    one, with a warning; the results table tells a fast run from an exact one."""
    import pandas as pd

    from demo.evaluation.results import add_runs, load_ours
    settings = RunSettings(shots=1, limit=2, data_root=DATA)
    exact = E.evaluate(bert, "copa_generate", tmp_path, settings)[0]
    fast = E.evaluate(bert, "copa_generate", tmp_path, replace(settings, cache="prefix"))[0]
    slug = E.model_slug(bert)
    assert _named(exact["run"]) == f"copa_generate__{slug}__1shot__generate__seed0"
    assert _named(fast["run"]) == f"copa_generate__{slug}__1shot__generate-prefix-r32-m0.1__seed0"
    assert len(list(tmp_path.glob("copa_generate*.jsonl"))) == 2  # never one resume file
    assert list(pd.read_csv(tmp_path / "summary.csv")["cache"]) == ["exact", "prefix"]

    ranked = E.evaluate(bert, "copa", tmp_path, settings)[0]
    with caplog.at_level("WARNING", logger="demo.evaluation.evaluate"):
        asked_fast = E.evaluate(bert, "copa", tmp_path, replace(settings, cache="prefix"))[0]
    assert (asked_fast["run"], asked_fast["cache"]) == (ranked["run"], "exact")
    assert "copa: --cache prefix does not apply (it is ranked by scoring its candidates" in caplog.text
    gpt2 = tiny_model("gpt2")
    with caplog.at_level("WARNING", logger="demo.evaluation.evaluate"):
        causal = E.evaluate(gpt2, "copa_generate", tmp_path, replace(settings, cache="prefix"))[0]
    assert causal["cache"] == "exact" and _named(causal["run"]).endswith("__generate__seed0")
    assert "is a causal LM, which decodes with its own exact KV cache" in caplog.text

    add_runs(tmp_path / "summary.csv", tmp_path / "ours.csv")
    ours = load_ours(tmp_path / "ours.csv")
    variants = dict(zip(zip(ours["model"], ours["task"], ours["variant"]), ours["value"]))
    assert (slug, "copa_generate", "generate / prefix cache") in variants
    assert (slug, "copa_generate", "generate") in variants


# ---------------------------------------------------------------- bad input


@needs_shared
def test_bad_requests_are_explained(bert, tmp_path):
    with pytest.raises(ValueError, match="--shots 25 is more than its demonstration pool holds "
                                         r"\(19 examples, the evaluated split minus"):
        E.evaluate(bert, "winogradversarial", tmp_path, RunSettings(shots=25, data_root=DATA))
    with pytest.raises(ValueError, match="zero-shot by design"):
        E.evaluate(bert, "ii_sum_gold", tmp_path, RunSettings(shots=1, data_root=DATA))
    with pytest.raises(ValueError, match="needs the local file '.*winogradversarial.jsonl'"):
        E.evaluate(bert, "winogradversarial", tmp_path, RunSettings(shots=0, data_root=str(tmp_path)))


# ---------------------------------------------------------------- items too long for the model


def _task_file(folder, records, kind="choice", demos=None, **fields):
    """A task of your own (YAML + JSONL, as the README shows) holding ``records``; its
    demonstrations come from ``demos`` if given, else from the records minus the item;
    ``fields`` override the task's own."""
    import yaml
    folder.mkdir(parents=True)
    spec = dict(name="long_items", data={"local": "items.jsonl"}, convert="fields", kind=kind,
                shots=0)
    if kind == "choice":
        spec.update(convert_args={"candidates": "options", "label": "answer"},
                    template="{text} A: {answer}", metrics=["accuracy"])
    else:
        spec.update(convert_args={"answers": "answer"}, template="{text} => {answer}",
                    metrics=["exact_match"], generation={"max_new_tokens": 4})
    for split, rows in (("items", records), ("demos", demos)):
        if rows:
            (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if demos:
        spec["demos"] = {"local": "demos.jsonl"}
    spec.update(fields)
    (folder / "long_items.yaml").write_text(yaml.safe_dump({"tasks": [spec]}))
    return T.read_task_file(folder / "long_items.yaml", base=folder)[0]


CAPITALS = [("France", ["Paris", "Lyon"], "Paris"), ("Italy", ["Milan", "Rome"], "Rome"),
            ("Japan", ["Osaka", "Tokyo"], "Tokyo"), ("Canada", ["Ottawa", "Toronto"], "Ottawa"),
            ("Germany", ["Munich", "Berlin"], "Berlin"), ("Spain", ["Madrid", "Seville"], "Madrid"),
            ("Egypt", ["Cairo", "Giza"], "Cairo"), ("Peru", ["Cusco", "Lima"], "Lima")]


@needs_shared
def test_items_too_long_for_the_model_are_skipped_and_counted(standin_mlm, tmp_path, caplog):
    """The stand-in reads 512 tokens: items padded to 512 tokens are kept, to 513 and 700
    skipped (lengths counted here with the tokenizer alone); the accuracy is that of a run on
    the kept items only; with skip_too_long=False the run stops, naming the item."""
    def tokens(record):  # the longest text the model would read: the template, filled
        return max(len(standin_mlm.tokenizer(f"{record['text']} A: {o}")["input_ids"])
                   for o in record["options"])

    def padded(country, options, answer, length=None):
        record = dict(text=f"What is the capital of {country}?", options=options, answer=answer)
        if length is not None:  # every "one" is one more token
            record["text"] = "one " * (length - tokens(record)) + record["text"]
        return record

    targets = {"Japan": 512, "Canada": 513, "Spain": 700}
    records = [padded(c, o, a, targets.get(c)) for c, o, a in CAPITALS]
    lengths = [tokens(r) for r in records]
    assert sorted(n for n in lengths if n >= 512) == [512, 513, 700]
    fits = [i for i, n in enumerate(lengths) if n <= 512]

    task = _task_file(tmp_path / "all", records)
    with caplog.at_level("WARNING", logger="demo.evaluation.evaluate"):
        rows = E.evaluate(standin_mlm, task, tmp_path / "runs", RunSettings(shots=0))
    assert (rows[0]["skipped"], rows[0]["max_tokens"], rows[0]["n"]) == (2, 512, len(fits))
    assert sorted(r["index"] for r in _records(tmp_path / "runs")) == fits
    assert "long_items 0-shot: skipped 2 of 8 items longer than minilm-l6-mlm-standin reads " \
           "(512 tokens" in caplog.text
    short = _task_file(tmp_path / "short", [records[i] for i in fits])
    short_rows = E.evaluate(standin_mlm, short, tmp_path / "short_runs", RunSettings(shots=0))
    assert short_rows[0]["skipped"] == 0 and short_rows[0]["n"] == rows[0]["n"]
    assert short_rows[0]["value"] == rows[0]["value"]
    # the engine agrees: 513 tokens are refused, and the 512-token item above was scored
    with pytest.raises(ValueError, match="513 tokens long.*at most 512"):
        pll.score_batch(standin_mlm, [(records[3]["text"] + " A:", " Ottawa")])

    with pytest.raises(ValueError, match=r"Task 'long_items' \(0-shot\), item 3 \(id '3', 0 "
                                         r"demonstration\(s\)\): The text is 513 tokens long.*at most 512"):
        E.evaluate(standin_mlm, task, tmp_path / "strict", RunSettings(shots=0, skip_too_long=False))
    assert not list((tmp_path / "strict").glob("*.jsonl"))  # refused before anything was scored


@needs_shared
@pytest.mark.parametrize("kind", ["choice", "generate"])
@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_skipped_items_are_exactly_those_the_engines_refuse(tiny_model, tmp_path, kind, family):
    """A 64-position model, items of every length around its limit, 1-shot, two repetitions,
    demonstrations 0, 1 and 5 tokens longer than the shortest: an item is skipped exactly when
    the scoring (or generation) engine refuses its input with the demonstration of some
    repetition. The engines' own refusals decide here, so special and start tokens, right masks
    and padding masks all count as the engines build their inputs."""
    from demo.engine.generation import generate
    from demo.settings import GenerationSettings
    from demo.tasks.fewshot import choice_items, generation_prompt, sample_demonstrations
    lm = tiny_model(family, **{"max_position_embeddings" if family == "bert" else "n_positions": 64})

    def record(k):
        options = {"options": ["two", "three"]} if kind == "choice" else {}
        return dict(text="one " * k + "go", answer="two", **options)

    task = _task_file(tmp_path / "task", [record(k) for k in range(40, 56)], kind,
                      demos=[record(k) for k in (0, 1, 5)])
    items, pool = T.load_examples(task), T.load_examples(task, "demos")

    def refused(item, repetition):
        shown = sample_demonstrations(pool, 1, seed=0, repetition=repetition, item=item)
        try:
            if kind == "choice":
                pll.score_batch(lm, choice_items(task, item, shown))
            else:
                generate(lm, generation_prompt(task, item, shown),
                         GenerationSettings(**task.generation))
        except ValueError as err:
            assert re.search("64 (tokens|positions)", str(err)), err
            return True
        return False

    refusals = [(refused(e, 0), refused(e, 1)) for e in items]
    assert any(a != b for a, b in refusals)  # too long in one repetition only: skipped in both
    rows = E.evaluate(lm, task, tmp_path / "runs", RunSettings(shots=1, repetitions=2))
    kept = [e.index for e, (a, b) in zip(items, refusals) if not (a or b)]
    assert 0 < len(kept) < len(items)
    assert (rows[0]["skipped"], rows[0]["n"], rows[0]["max_tokens"]) == (
        len(items) - len(kept), len(kept), 64)
    records = _records(tmp_path / "runs")
    for repetition in (0, 1):
        assert sorted(r["index"] for r in records if r["repetition"] == repetition) == kept


@needs_shared
def test_the_unconditional_text_counts_too(tiny_model, tmp_path):
    """With GPT-3's unconditional normalisation the engine also reads "Answer: <candidate>",
    longer than the item itself when the template is the bare candidate."""
    from demo.tasks.fewshot import choice_items
    lm = tiny_model("bert", max_position_embeddings=64)
    records = [dict(options=["one " * k + "go", "go"], answer="go") for k in range(58, 63)]
    task = _task_file(tmp_path / "task", records, template="{answer}",
                      scoring={"unconditional_context": "Answer:"})
    items = T.load_examples(task)

    def refused(item, neutral):
        choices = [pll.Choice(context, completion, candidate) for (context, completion), candidate
                   in zip(choice_items(task, item, []), item.candidates)]
        try:
            pll.score_choices(lm, [choices], ScoringSettings(unconditional_context=neutral))
        except ValueError:
            return True
        return False

    assert any(refused(e, "Answer:") and not refused(e, None) for e in items)
    rows = E.evaluate(lm, task, tmp_path / "runs", RunSettings(shots=0))
    kept = [e.index for e in items if not refused(e, "Answer:")]
    assert rows[0]["skipped"] == len(items) - len(kept) and 0 < len(kept) < len(items)
    assert sorted(r["index"] for r in _records(tmp_path / "runs")) == kept


@needs_shared
def test_relative_position_models_skip_nothing(tiny_model, tmp_path):
    """DeBERTa-v2 has no position limit (relative attention): items far past the 64 positions its
    config names are all scored."""
    lm = tiny_model("deberta-v2", max_position_embeddings=64)
    assert lm.max_length is None
    records = [dict(text="one " * k + "go", options=["two", "three"], answer="two")
               for k in (10, 100)]
    task = _task_file(tmp_path / "task", records)
    rows = E.evaluate(lm, task, tmp_path / "runs", RunSettings(shots=0))
    assert (rows[0]["skipped"], rows[0]["max_tokens"], rows[0]["n"]) == (0, None, 2)


@needs_shared
def test_skip_setting_on_the_command_line(standin_mlm, tmp_path, capsys):
    from demo.cli import main
    _task_file(tmp_path / "tasks", [dict(text="one " * 600 + "go", options=["a", "b"], answer="a"),
                                    dict(text="go", options=["a", "b"], answer="b")])
    argv = ["evaluate", "--model", str(STANDIN_MLM), "--tasks-dir", str(tmp_path / "tasks"),
            "--task", "long_items", "--shots", "0", "--output-dir", str(tmp_path / "runs"),
            "--no-progress"]
    assert main(argv + ["--no-skip-too-long"]) == 2
    assert "error: Task 'long_items' (0-shot), item 0 (id '0', 0 demonstration(s)): " in capsys.readouterr().err
    assert main(argv) == 0
    import pandas as pd

    from demo.evaluation.results import add_runs, load_ours
    summary = pd.read_csv(tmp_path / "runs" / "summary.csv")
    assert (summary["n"][0], summary["skipped"][0], summary["max_tokens"][0]) == (1, 1, 512)
    # our results table takes the new columns beside rows written before they existed
    shipped = Path(__file__).resolve().parents[1] / "assets" / "results" / "ours.csv"
    older = pd.read_csv(shipped).drop(columns=["skipped", "max_tokens"], errors="ignore")
    older.to_csv(tmp_path / "ours.csv", index=False)
    merged = add_runs(tmp_path / "runs" / "summary.csv", tmp_path / "ours.csv")
    assert len(merged) == len(older) + 1
    assert len(load_ours(tmp_path / "ours.csv")) == len(older) + 1


# ---------------------------------------------------------------- result tables


def test_published_tables_are_tidy_and_labelled():
    from demo.evaluation.results import load_published
    table = load_published()
    assert set(table["source"]) == {"published"}
    assert table["paper"].str.len().min() > 0 and table["table"].str.len().min() > 0
    # spot checks against the papers (BERTs paper table 6 and table 1; ALBERT table 3)
    copa = table[(table.table == "Table 6") & (table.task == "copa") & (table.model == "DeBERTa 1.4B")]
    assert dict(zip(copa.shots_label, copa.value)) == {"0-shot": 78.9, "1-shot": 84.2, "few-shot": 90.4}
    assert set(copa[copa.shots_label == "few-shot"].shots) == {64}
    gpt3 = table[(table.table == "Table 1") & (table.task == "copa") & (table.shots == 1)
                 & (table.model == "GPT-3 1.3B")]
    assert list(gpt3.value) == [74.0]
    albert = table[(table.table == "Table 3") & (table.model == "albert-xxlarge-v2")]
    assert dict(zip(albert.task, albert.value)) == {"winograd": 81.05, "winogrande": 76.71}
    ii = table[(table.task == "ii_first_word_letter") & (table.model == "GPT-3 DaVinci")]
    assert list(ii.value) == [97] and list(ii.metric) == ["ii_exact_match"]


@needs_shared
def test_our_runs_join_the_published_ones(bert, tmp_path):
    from demo.evaluation.results import add_runs, load_ours
    E.evaluate(bert, "copa", tmp_path / "run", RunSettings(shots=0, limit=2, data_root=DATA), command="mlm-icl evaluate --task copa")
    add_runs(tmp_path / "run" / "summary.csv", tmp_path / "ours.csv")
    add_runs(tmp_path / "run" / "summary.csv", tmp_path / "ours.csv")  # idempotent
    ours = load_ours(tmp_path / "ours.csv")
    assert len(ours) == 1
    row = ours.iloc[0]
    assert (row.source, row.task, row.shots, row.n, row.metric) == ("ours", "copa", 0, 2, "accuracy")
    assert row.command == "mlm-icl evaluate --task copa" and row.model_size > 0
