"""A fine-tuned model that gives every dev example one answer is named as such (finetune/constant_predictions.py):
the first GPU window's collapsed pretraining fine-tuned to majority scores without a word."""
import numpy as np
import pytest

from finetune.constant_predictions import constant_answer, warning
from finetune.registry import get_task


def test_a_classifier_with_one_label_for_every_example_is_named_with_that_label():
    rte = get_task("rte")
    outputs = np.tile([[0.2, -0.1]], (277, 1)) + np.random.default_rng(0).normal(0, 1e-3, (277, 2))
    assert constant_answer(rte, outputs) == repr(rte.label_names[0])
    outputs[5] = [-1.0, 1.0]  # one example answered otherwise: the answers vary
    assert constant_answer(rte, outputs) is None


def test_a_regression_head_with_one_score_for_every_pair_is_named_with_that_score():
    sts = get_task("sts")
    constant = np.full((1500, 1), 0.51) + np.random.default_rng(0).normal(0, 1e-7, (1500, 1))
    answer = constant_answer(sts, constant)
    low, high = sts.score_range
    assert answer is not None and float(answer) == pytest.approx(0.51 * high + low, abs=1e-3)
    varied = np.random.default_rng(1).uniform(0, 1, (1500, 1))
    assert constant_answer(sts, varied) is None


def test_one_example_or_a_span_task_is_never_called_constant():
    assert constant_answer(get_task("rte"), np.array([[1.0, 0.0]])) is None
    assert constant_answer(get_task("squad"), np.zeros((4, 8, 2))) is None


def test_the_warning_says_what_the_scores_are_and_where_to_look():
    line = warning("cola", 1, "dev", "'0'")
    assert line.startswith("cola trial 1: warning: every dev example got the same answer ('0')")
    assert "disc_auc" in line and "metrics.jsonl" in line


def test_a_trial_says_it_after_its_scores(tmp_path):
    """TrialRunner.score_trial, with a trainer whose model answers 'entailment' to every RTE pair."""
    from configs.finetuning_config import FinetuningConfig
    from finetune.tasks import Example
    from finetune.trials import StartedTrial, TaskData, TrialRunner

    rte = get_task("rte")
    labels = ["entailment", "not_entailment"] * 5
    examples = [Example(str(i), "a", "b", label) for i, label in enumerate(labels)]

    class OneAnswer:
        def predict(self, task, features):
            return np.tile([[2.0, -2.0]], (features["count"], 1))

    said = []
    data = TaskData(rte, None, {"": {"examples": examples, "count": len(examples)}}, {}, {})
    runner = TrialRunner(None, FinetuningConfig.create({"save_finetuned_models": False}),
                         [data], tmp_path, say=said.append, trainer_class=object)
    results = runner.score_trial(StartedTrial(0, 0, None, None, OneAnswer()), 0.0)
    assert results["rte"]["metrics"]["accuracy"] == 50.0
    assert said == [warning("rte", 1, "dev", "'entailment'")]
