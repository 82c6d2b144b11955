"""Metrics against hand-computed cases (the arithmetic is written out in the comments)."""

import math

import pytest

from demo.tasks import metrics as M


def test_accuracy_and_macro_f1():
    accuracy = M.METRICS["accuracy"].fn
    assert [accuracy({"pred": p, "label": y}) for p, y in [(0, 0), (1, 0)]] == [1.0, 0.0]
    # class 0: P 1/2 R 1 -> 2/3; class 1: P 1 R 1/2 -> 2/3; class 2: 1 -> mean 7/9
    assert M.f1_macro([0, 0, 1, 2], [0, 1, 1, 2]) == pytest.approx(7 / 9)
    # a class that is never predicted counts with F1 = 0 (CB's three classes)
    assert M.f1_macro([0, 0], [0, 1], labels=[0, 1, 2]) == pytest.approx((2 / 3 + 0 + 0) / 3)
    with pytest.raises(ValueError, match="differ in length"):
        M.f1_macro([0, 1], [0])


def test_multirc_exact_match_and_f1a():
    # q1: both options right; q2: one wrong -> EM 1/2
    assert M.multirc_exact_match([1, 0, 1, 1], [1, 0, 0, 1], ["q1", "q1", "q2", "q2"]) == 0.5
    # true class: tp 2, fp 1, fn 0 -> P 2/3, R 1, F1 0.8
    assert M.multirc_f1a([1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(0.8)


def test_squad_style_exact_match_and_token_f1():
    assert M.normalize_answer("  The  Beatles!") == "beatles"
    assert M.exact_match("The Beatles!", ["beatles", "John"]) == 1.0
    assert M.exact_match("Beatles band", ["beatles"]) == 0.0
    # pred {big, red, dog} vs gold {red, dog, barks}: 2 common, P = R = 2/3
    assert M.token_f1("the big red dog", ["red dog barks", "cat"]) == pytest.approx(2 / 3)
    assert M.token_f1("nothing shared", ["red dog"]) == 0.0
    with pytest.raises(ValueError, match="non-empty list"):
        M.exact_match("x", "x")


def test_bleu_hand_computed():
    # one sentence, same length (BP = 1); n-gram precisions 4/5, 3/4, 2/3, 1/2
    expected = (0.8 * 0.75 * (2 / 3) * 0.5) ** 0.25
    assert M.bleu(["a b c d e"], ["a b c d f"]) == pytest.approx(expected, abs=1e-4)
    assert M.bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(1.0)


def test_instruction_induction_normalisation():
    # first line, first sentence, lower case, hyphens to spaces, punctuation gone, " and " dropped
    assert M.normalize_instruction_output("  Twenty-Six.\nmore") == "twenty six"
    assert M.normalize_instruction_output("cats and dogs!") == "cats dogs"
    assert M.normalize_instruction_output("Sentence 1: yes") == "yes"


def test_instruction_induction_metrics():
    assert M.ii_exact_match(" Cats.\nsecond line", ["cats"]) == 1.0
    assert M.ii_exact_match("twenty-six", ["twenty six"]) == 1.0
    assert M.ii_exact_match("cat", ["cats", "kitten"]) == 0.0
    assert M.ii_exact_set("man, me", ["me man"]) == 1.0  # order and commas ignored
    assert M.ii_exact_set("man", ["man, me"]) == 0.0
    assert M.ii_contains("aid, help, assist", ["help"]) == 1.0
    assert M.ii_contains("helpful", ["help"]) == 0.0  # whole words only
    # {involve, going, up} vs {involve, vertical, movement}: 1 common, P = R = 1/3
    assert M.ii_f1("involve going up", ["involve vertical movement."]) == pytest.approx(1 / 3)
    assert M.ii_f1("involve going up", ["x", "involve going up"]) == 1.0


def test_compute_value_and_stderr():
    records = [{"pred": p, "label": 1} for p in (1, 0, 1, 1)]
    value, stderr = M.compute("accuracy", records)
    # mean 3/4; sample sd of (1,0,1,1) = 0.5 -> stderr 0.5 / 2
    assert value == 0.75 and stderr == pytest.approx(0.25)
    value, stderr = M.compute("f1_macro", [{"pred": p, "label": gold} for p, gold in
                                            [(0, 0), (0, 1), (1, 1), (2, 2)]])
    assert value == pytest.approx(7 / 9) and stderr > 0  # bootstrap spread
    assert math.isnan(M.compute("accuracy", records[:1])[1])
    with pytest.raises(ValueError, match="Unknown metric 'nope'; known metrics: accuracy"):
        M.compute("nope", records)
    with pytest.raises(ValueError, match="No evaluated examples"):
        M.compute("accuracy", [])


def test_k_best_by_hand():
    # TimeDial's shape: options 0 and 1 correct, 2 and 3 not
    assert M.k_best_correct([-1.0, -2.0, -3.0, -4.0], [0, 1])  # -2 > -3: both above
    assert not M.k_best_correct([-1.0, -3.0, -2.0, -4.0], [0, 1])  # -3 < -2: one below
    assert not M.k_best_correct([-1.0, -2.0, -2.0, -4.0], [0, 1])  # a tie is not above
    assert M.k_best_correct([-5.0, -1.0, -9.0, -2.0], [3, 1])  # order of the correct ones is free
    assert M.k_best_correct([-1.0, -2.0], [0, 1])  # nothing incorrect to beat
    # one correct option: k-best is top-1 accuracy
    assert M.k_best_correct([-1.0, -2.0, -3.0], [0]) and not M.k_best_correct([-2.0, -1.0, -3.0], [0])
    record = {"scores": [-1.0, -3.0, -2.0, -4.0], "pred": 0, "label": 0, "labels": [0, 1]}
    assert M.METRICS["k_best"].fn(record) == 0.0 and M.METRICS["accuracy"].fn(record) == 1.0
    # accuracy counts the top option right when it is any correct one
    assert M.METRICS["accuracy"].fn({"pred": 1, "label": 0, "labels": [0, 1]}) == 1.0
    assert M.METRICS["accuracy"].fn({"pred": 1, "label": 0}) == 0.0  # only its label is correct
    with pytest.raises(ValueError, match="not indices of 2 scores"):
        M.k_best_correct([-1.0, -2.0], [0, 2])


def test_k_best_agrees_with_scikit_learns_ranking_loss():
    """Independent reference: an item is k-best right exactly when none of its (correct,
    incorrect) pairs is misordered, i.e. its label-ranking loss is 0 (distinct scores)."""
    import numpy as np
    from sklearn.metrics import label_ranking_loss
    rng = np.random.default_rng(0)
    hits = []
    for _ in range(200):
        scores = rng.normal(size=4)
        correct = sorted(rng.choice(4, size=2, replace=False).tolist())
        truth = np.isin(np.arange(4), correct).astype(int)
        expected = label_ranking_loss([truth], [scores]) == 0
        assert M.k_best_correct(scores.tolist(), correct) == expected
        hits.append(expected)
    assert 0 < sum(hits) < 200  # both outcomes occur (1/6 of random rankings are right)
    records = [{"scores": [0.0, -1.0, -2.0], "labels": [0, 1], "label": 0},
               {"scores": [0.0, -2.0, -1.0], "labels": [0, 1], "label": 0}]
    assert M.compute("k_best", records)[0] == 0.5


def test_a_metric_of_your_own_is_registered_by_name(monkeypatch, tmp_path):
    from demo.tasks import read_task_file
    monkeypatch.setattr(M, "METRICS", dict(M.METRICS))  # registered for this test only

    @M.metric("top_score", "top score", "example", reads="scores")
    def top_score(record):
        return max(record["scores"])

    assert M.compute("top_score", [{"scores": [-1.0, -3.0]}, {"scores": [-2.0, -0.5]}])[0] == -0.75
    (tmp_path / "t.yaml").write_text(
        "tasks:\n  - {name: t, data: {local: x.jsonl}, convert: fields, template: '{answer}',\n"
        "     kind: choice, shots: 0, metrics: [accuracy, top_score]}\n")
    assert read_task_file(tmp_path / "t.yaml")[0].metrics == ("accuracy", "top_score")
    with pytest.raises(ValueError, match="Two metrics are named 'top_score'"):
        M.metric("top_score", "again", "example", reads="scores")(top_score)
    with pytest.raises(ValueError, match="reads must be one of choice, scores, text, execution"):
        M.metric("other", "other", "example", reads="logits")
    with pytest.raises(ValueError, match="level must be one of example, corpus"):
        M.metric("other", "other", "item", reads="text")
