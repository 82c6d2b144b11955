"""Task registry, templates and few-shot prompts, against strings written out by hand."""

import json
import re

import pytest
from conftest import SHARED, needs_shared

from demo import tasks as T
from demo.engine.text import model_pair
from demo.tasks.fewshot import choice_items, demonstrations_text, generation_prompt, mean_std, sample_demonstrations

DATA = SHARED / "data"
LOCAL_TASKS = [t.name for t in T.all_tasks() if t.data.local]


def _example(name, which="data", index=0):
    return T.load_examples(name, which, DATA)[index]


# ---------------------------------------------------------------- golden prompts (by hand)


@needs_shared
def test_copa_golden():
    task, item, demo = T.get_task("copa"), _example("copa"), _example("copa", "demos")
    assert T.render(task, item) == "The man turned on the faucet therefore water flowed from the spout."
    assert generation_prompt(task, item, [demo]) == (
        "My body cast a shadow over the grass because the sun was rising.\n\n"
        "The man turned on the faucet therefore")
    # COPA scores the whole evaluated example (the paper's span); the demonstration conditions
    assert choice_items(task, item, [demo]) == [
        ("My body cast a shadow over the grass because the sun was rising.\n\n",
         "The man turned on the faucet therefore the toilet filled with water."),
        ("My body cast a shadow over the grass because the sun was rising.\n\n",
         "The man turned on the faucet therefore water flowed from the spout.")]
    # raw text; the scoring engine moves the junction space to the completion (demo.engine.text)
    answer_span = choice_items(task, item, [], score="answer")[0]
    assert answer_span == ("The man turned on the faucet therefore ", "the toilet filled with water.")
    assert model_pair(*answer_span, newline_survives=True) == (
        "The man turned on the faucet therefore", " the toilet filled with water.")


@needs_shared
def test_copa_generate_is_copa_written_among_its_two_alternatives():
    """Same data, converter and template as the ranked COPA; the prompt ends with the premise and
    its connector, and the model writes one of the item's alternatives."""
    copa, written = T.get_task("copa"), T.get_task("copa_generate")
    assert (written.kind, written.constrain_to_candidates, written.metrics) == ("generate", True, ("accuracy",))
    assert (written.data, written.demos, written.convert, written.template) == (
        copa.data, copa.demos, copa.convert, copa.template)
    item, demo = _example("copa_generate"), _example("copa_generate", "demos")
    assert generation_prompt(written, item, [demo]) == (
        "My body cast a shadow over the grass because the sun was rising.\n\n"
        "The man turned on the faucet therefore")
    assert item.candidates == ("the toilet filled with water.", "water flowed from the spout.")
    assert item.label == 1


def test_only_generated_tasks_write_among_their_candidates():
    fields = dict(name="t", group="g", title="T", data=T.Source("x"), demos=None, convert="copa",
                  template="{premise} {answer}", shots=0, metrics=("accuracy",))
    assert T.Task(kind="generate", constrain_to_candidates=True, **fields).constrain_to_candidates
    with pytest.raises(ValueError, match="constrain_to_candidates is for generated tasks"):
        T.Task(kind="choice", constrain_to_candidates=True, **fields)
    with pytest.raises(ValueError, match="constrain_to_candidates must be true or false, not 'yes'"):
        T.Task(kind="generate", constrain_to_candidates="yes", **fields)


@needs_shared
def test_winograd_golden_partial_scoring():
    task, item = T.get_task("winograd"), _example("winograd")
    demo = _example("winograd", index=2)
    assert T.render(task, item) == ("The city councilmen refused the demonstrators a permit "
                                    "because the city councilmen feared violence.")
    assert choice_items(task, item, []) == [
        ("The city councilmen refused the demonstrators a permit because the city councilmen",
         " feared violence."),
        ("The city councilmen refused the demonstrators a permit because the demonstrators",
         " feared violence.")]
    one_shot = choice_items(task, item, [demo])[1]
    assert one_shot == (
        "The trophy doesn't fit into the brown suitcase because the trophy is too large.\n\n"
        "The city councilmen refused the demonstrators a permit because the demonstrators",
        " feared violence.")
    # a sentence-initial pronoun gets a capitalised candidate
    assert _example("winograd", index=52).candidates == ("The painting", "An oak tree")


@needs_shared
def test_hellaswag_golden():
    task, item, demo = T.get_task("hellaswag"), _example("hellaswag"), _example("hellaswag", index=1)
    assert T.render(task, item) == ("Roof shingle removal: A man is sitting on a roof. "
                                    "He starts pulling up roofing on a roof.")
    assert choice_items(task, item, [demo])[0] == (
        "Clean and jerk: A lady walks to a barbell. She bends down and grabs the pole. "
        "The lady stands and lifts the weight over her head.\n\n",
        "Roof shingle removal: A man is sitting on a roof. He is using wrap to wrap a pair of skis.")



@needs_shared
def test_hellaswag_wikihow_markers_golden():
    """A WikiHow item (ind 1), its markers removed by hand: [title] ends a sentence (a second
    full stop where one was there already, as lm-eval writes it), [header] and [step] go."""
    task, item = T.get_task("hellaswag"), _example("hellaswag", index=3243)
    assert item.id == "1"
    assert T.render_query(task, item) == (
        "Personal Care and Style: How to become a fashion consultant. Obtain your high school "
        "diploma or ged. This job requires a high school diploma or equivalent, so make sure to "
        "apply yourself and finish school. If your high school offers these classes, take art, "
        "design, and sewing to familiarize yourself with foundational concepts in fashion.")
    assert item.candidates[0] == (
        " Many high schools have classes offered for their students who do not have a high school "
        "diploma, so be sure to register to take these classes and find a job in your field.. "
        "Search for entry-level positions in fashion industries.")


@needs_shared
def test_hellaswag_text_is_lm_evals():
    """Every HellaSwag item's query and endings are lm-eval's own preprocessing of the record
    (lm_eval/tasks/hellaswag/utils.py), with the paper's space before each ending kept."""
    lm_eval_hellaswag = pytest.importorskip(
        "lm_eval.tasks.hellaswag.utils", reason="lm-eval (requirements-dev.txt) is not installed")
    preprocess = lm_eval_hellaswag.preprocess
    task = T.get_task("hellaswag")
    records = [json.loads(line) for line in (DATA / task.data.local).read_text().splitlines()]
    items = T.load_examples(task, "data", DATA)
    assert len(items) == len(records)
    bracketed = re.compile(r"\[[^\]]*\]")  # what the rule removes: no such span may be left
    for record, item in zip(records, items):
        # lm-eval's process_docs builds the query this way, then preprocesses it whole
        query = record["activity_label"] + ": " + record["ctx_a"] + " " + record["ctx_b"].capitalize()
        assert T.render_query(task, item) == preprocess(query), item.id
        for ending, candidate in zip(record["endings"], item.candidates, strict=True):
            expected = preprocess(ending).strip()
            assert candidate == (expected if expected[:1] in ",.;:!?')]}\"" else " " + expected), item.id
            assert not bracketed.search(candidate), item.id
        assert not bracketed.search(T.render_query(task, item)), item.id
    assert sum("[title]" in r["ctx_a"] for r in records) > 1000  # there were markers to remove

@needs_shared
def test_arc_golden():
    task, item = T.get_task("arc_easy"), _example("arc_easy")
    demo = _example("arc_easy", "demos")
    assert T.render(task, item) == (
        "Question: Which statement best explains why photosynthesis is the foundation of most "
        "food webs?\nAnswer: Sunlight is the source of energy for nearly all ecosystems.")
    assert demonstrations_text(task, [demo]) + T.render(task, item) == (
        "Question: Which technology was developed most recently?\nAnswer: cellular telephone\n\n"
        "Question: Which statement best explains why photosynthesis is the foundation of most "
        "food webs?\nAnswer: Sunlight is the source of energy for nearly all ecosystems.")
    assert task.scoring == {"unconditional_context": "Answer:"}


@needs_shared
def test_instruction_induction_golden():
    task = T.get_task("ii_first_word_letter")
    item, demo = _example("ii_first_word_letter"), _example("ii_first_word_letter", "demos")
    assert generation_prompt(task, item, []) == "Input: place\nOutput:"
    assert generation_prompt(task, item, [demo]) == "Input: time\nOutput: t\n\nInput: place\nOutput:"
    assert item.answers == ("p",)
    gold = T.get_task("ii_first_word_letter_gold")
    assert generation_prompt(gold, _example("ii_first_word_letter_gold"), []) == (
        "Instruction: write the first letter of the word\nInput: place\nOutput:")
    induce = _example("ii_first_word_letter_induce")
    assert induce.fields["prompt"].startswith("I gave a friend an instruction and five inputs.")
    assert induce.fields["prompt"].endswith("Input: lacrosse\nOutput: l\n\nThe instruction was")


# ---------------------------------------------------------------- every task with local data


def _naive_render(task, example, answer):
    """Independent formatting: replace each {name} literally."""
    text = task.template.replace("{answer}", answer)
    for key, value in example.fields.items():
        text = text.replace("{" + key + "}", str(value))
    return text


@needs_shared
@pytest.mark.parametrize("name", LOCAL_TASKS)
def test_every_local_task_renders_its_template(name):
    task = T.get_task(name)
    items = T.load_examples(task, "data", DATA)
    item = items[0]
    for e in items[:50]:  # well-formed examples
        if task.kind == "choice" or task.constrain_to_candidates:  # ranked, or written among them
            assert len(e.candidates) >= 2 and 0 <= e.label < len(e.candidates)
            assert all(c.strip() for c in e.candidates)
        else:
            assert e.answers and all(isinstance(a, str) for a in e.answers)
    answer = item.candidates[0] if task.kind == "choice" else item.target
    zero = _naive_render(task, item, answer)
    assert T.render(task, item, answer) == zero
    assert "{" + "answer}" not in zero
    if task.max_shots == 0:  # zero-shot by design (instruction execution / induction prompts)
        return
    pool = T.load_examples(task, "demos", DATA)
    demo = sample_demonstrations(pool, 1, seed=0, item=item, same_split=task.demos is None)[0]
    expected = (task.prefix + task.separator if task.prefix else "") + \
        _naive_render(task, demo, demo.target) + task.separator
    if task.kind == "choice":
        context, completion = choice_items(task, item, [demo], "example")[0]
        assert context + completion == expected + zero
    else:
        assert generation_prompt(task, item, [demo]) == (expected + zero[:len(zero) - len(answer)]).rstrip(" ")


@needs_shared
def test_wsc_superglue_marks_the_pronoun_and_keeps_one_correct_candidate():
    items = T.load_examples("wsc", "data", DATA)
    assert len(items) == 36  # pronouns with exactly one correct candidate among >= 2
    first = items[0]
    assert "*his*" in first.fields["text"] and first.fields["pronoun"] == "his"
    assert first.candidates[first.label] == "Mr. Moncrieff"


@needs_shared
def test_multirc_groups_answers_by_question():
    items = T.load_examples("multirc", "data", DATA)
    first = [e for e in items if e.group == items[0].group]
    assert [e.fields["option"] for e in first] == ["No", "Yes", "Less the mass, less the force applied",
                                                   "It depends on the shape of the baseball"]
    assert [e.label for e in first] == [0, 1, 1, 0]
    assert T.render(T.get_task("multirc"), first[1]).endswith(
        "\n\nWould the mass of a baseball affect how much force you have to use to pick it up?\n- [True] Yes")


# ---------------------------------------------------------------- few-shot sampling


@needs_shared
def test_demonstrations_never_include_the_item_or_its_twin():
    pool = T.load_examples("winograd", "data", DATA)
    for item in pool[:60]:
        demos = sample_demonstrations(pool, 32, seed=1, item=item, same_split=True)
        assert len({d.index for d in demos}) == 32  # without replacement
        assert item.index not in {d.index for d in demos}
        assert item.pair not in {d.pair for d in demos}  # twin sentences stay out too
    # the twin of item 0 is item 1 (same candidates, next sentence)
    assert pool[0].pair == pool[1].pair != pool[2].pair


def test_demonstrations_are_reproducible_from_the_seed():
    pool = [T.Example(i, str(i), {"x": str(i)}, answers=[str(i)]) for i in range(50)]
    item = pool[7]
    a = sample_demonstrations(pool, 5, seed=3, repetition=1, item=item, same_split=True)
    b = sample_demonstrations(list(pool), 5, seed=3, repetition=1, item=item, same_split=True)
    assert [d.index for d in a] == [d.index for d in b]
    draws = {tuple(d.index for d in sample_demonstrations(pool, 5, seed=s, item=item, same_split=True))
             for s in range(10)}
    assert len(draws) > 5  # different seeds, different demonstrations
    # the whole pool minus the item: every other example exactly once
    everything = sample_demonstrations(pool, 49, seed=0, item=item, same_split=True)
    assert sorted(d.index for d in everything) == [i for i in range(50) if i != 7]
    with pytest.raises(ValueError, match="Asked for 50 shots, but the evaluated split minus the "
                                         "evaluated item holds only 49 examples"):
        sample_demonstrations(pool, 50, seed=0, item=item, same_split=True)
    assert sample_demonstrations(pool, 0, seed=0, item=item) == []


def test_mean_std():
    assert mean_std([0.5, 0.7]) == (pytest.approx(0.6), pytest.approx(0.1414213, rel=1e-5))
    assert mean_std([0.3]) == (0.3, 0.0)


def test_preset_examples_ship_without_the_data_root():
    copa = T.preset_examples("copa")
    assert len(copa) == 10
    assert T.render(T.get_task("copa"), copa[0]) == "My body cast a shadow over the grass because the sun was rising."
    winograd = T.preset_examples("winograd")
    assert winograd[0].pair == winograd[1].pair  # twins, as in the full set
    with pytest.raises(ValueError, match="No preset examples for 'piqa'; the app ships some for: copa, winograd"):
        T.preset_examples("piqa")


# ---------------------------------------------------------------- bad input


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"Unknown task 'copaa'. Did you mean: copa\?"):
        T.get_task("copaa")


def test_missing_local_file_says_where(tmp_path):
    with pytest.raises(ValueError, match=r"needs the local file '.*winogradversarial.jsonl', which "
                                         r"does not exist.*--data-root"):
        T.load_examples("winogradversarial", "data", tmp_path)


def test_hub_only_task_offline_is_clear(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="'aps/super_glue' config 'record' split 'validation' is "
                                         "on the Hugging Face Hub"):
        T.load_examples("record", "data", "/nonexistent")


def test_fields_that_do_not_match_the_template(tmp_path):
    folder = tmp_path / "piqa"
    folder.mkdir()
    (folder / "piqa_valid_hf.jsonl").write_text(json.dumps({"question": "q", "a": "x", "label": 0}) + "\n")
    with pytest.raises(ValueError, match=r"have no field 'goal'; their fields are \['a', 'label', "
                                         r"'question'\].*template '\{goal\} \{answer\}'"):
        T.load_examples("piqa", "data", tmp_path)


def test_template_placeholders_are_checked():
    task = T.Task("t", "g", "T", T.Source("x"), None, "piqa", "{goal} {missing} {answer}",
                  "choice", 0, ("accuracy",))
    fine, short = T.Example(0, "0", {"goal": "g", "missing": "m"}, ["a", "b"], 0), T.Example(
        1, "7", {"goal": "g"}, ["a", "b"], 0)
    T.check_template(task, [fine])
    # every example is checked, not only the first
    with pytest.raises(ValueError, match=r"template: \{missing\} is not a field of its converted "
                                         r"examples; example 1 \(id '7'\) has \{goal\}"):
        T.check_template(task, [fine, short])


def test_data_root_from_environment(monkeypatch, tmp_path, capsys):
    """DEMO_DATA_ROOT is the deployment's: the command line reads it (once) into the run's data_root."""
    from demo.cli import main
    monkeypatch.setenv("DEMO_DATA_ROOT", str(tmp_path))
    assert main(["evaluate", "--model", "unused", "--task", "copa"]) == 2  # the data is checked first
    assert str(tmp_path) in capsys.readouterr().err
    assert str(T.data_root("/elsewhere")) == "/elsewhere"
