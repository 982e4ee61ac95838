"""The original's fine-tuning objective: per-example losses summed over the batch, STS-B regressing the
normalised score (score − 0) / 5 (run_finetuning.py FinetuningModel; classification_tasks.py
RegressionTask)."""
import numpy as np
import pytest

from configs.finetuning_config import FinetuningConfig
from common.errors import InputError
from finetune.registry import get_task
from finetune.tasks import Example


def test_example_losses_and_both_reductions():
    from finetune.losses import example_losses, task_loss

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 1, 0], np.int32)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -log_probs[np.arange(5), labels]
    task = get_task("mnli")
    np.testing.assert_allclose(np.asarray(example_losses(task, logits, {"labels": labels})), expected, rtol=1e-5)
    np.testing.assert_allclose(float(task_loss(task, logits, {"labels": labels})), expected.sum(), rtol=1e-5)
    np.testing.assert_allclose(float(task_loss(task, logits, {"labels": labels}, reduction="mean")),
                               expected.mean(), rtol=1e-5)
    outputs = rng.uniform(0, 1, (5, 1)).astype(np.float32)
    targets = rng.uniform(0, 1, 5).astype(np.float32)
    np.testing.assert_allclose(float(task_loss(get_task("sts"), outputs, {"labels": targets})),
                               np.sum((outputs[:, 0] - targets) ** 2), rtol=1e-5)


def test_the_original_sums_over_the_batch_by_default_and_the_name_is_checked():
    assert FinetuningConfig.create({}, "small", ["rte"]).loss_reduction == "sum"
    assert FinetuningConfig.create({"loss_reduction": "mean"}, "small", ["rte"]).loss_reduction == "mean"
    with pytest.raises(InputError, match="loss_reduction 'avg'"):
        FinetuningConfig.create({"loss_reduction": "avg"}, "small", ["rte"])


def test_sts_trains_on_score_over_5_and_reports_scores():
    task = get_task("sts")
    scores = [0.0, 1.2, 2.5, 3.8, 5.0, 4.4]
    examples = [Example(str(i), "a", "b", s) for i, s in enumerate(scores)]
    np.testing.assert_allclose(task.targets(examples), np.array(scores) / 5.0, rtol=1e-6)
    outputs = task.targets(examples)[:, None]  # a head that regresses the targets exactly
    np.testing.assert_allclose(task.predictions(outputs), scores, rtol=1e-6)
    assert task.score(examples, outputs) == {"spearman": pytest.approx(100.0), "pearson": pytest.approx(100.0)}
    lines = task.submission_lines(examples, outputs * 1.1)  # beyond 5 is clipped to the range
    assert lines[1:] == ["0\t0.000", "1\t1.320", "2\t2.750", "3\t4.180", "4\t5.000", "5\t4.840"]
    from finetune.features import featurize
    from tests.finetune_fixtures import _CharTokenizer

    train = featurize(task, examples, _CharTokenizer(), 16, training=True)  # pairs doubled (double_unordered)
    np.testing.assert_allclose(train.labels, np.tile(np.array(scores) / 5.0, 2), rtol=1e-6)
    classification = get_task("rte")
    rows = [Example("0", "a", "b", "entailment"), Example("1", "a", "b", "not_entailment")]
    assert classification.targets(rows).tolist() == classification.label_ids(rows).tolist() == [0, 1]


def test_the_training_step_uses_the_configured_reduction(monkeypatch):
    """One update through the Trainer: its loss is the batch's sum (or mean) of the example losses."""
    from configs.model_config import ModelConfig
    from finetune import loop
    from finetune.model import FinetuningModel, make_head
    from finetune.pretrained import build_encoder
    from finetune.tf_trainer import TFTrainer

    seen = []
    real = loop.task_loss
    monkeypatch.setattr(loop, "task_loss", lambda *args: seen.append(args[-1]) or real(*args))
    task = get_task("rte")
    model_config = ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                               embedding_size=16, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0)
    rng = np.random.default_rng(1)
    batch = {"input_ids": rng.integers(5, 50, (8, 10)).astype(np.int32), "segment_ids": np.zeros((8, 10), np.int32),
             "input_mask": np.ones((8, 10), np.int32), "labels": rng.integers(0, 2, 8).astype(np.int32)}
    losses = {}
    for reduction in ("sum", "mean"):
        config = FinetuningConfig.create({"loss_reduction": reduction, "head_dropout": 0.0}, "small", ["rte"])
        encoder = build_encoder(model_config)
        model = FinetuningModel(encoder, {"rte": make_head(task, 16, config)})
        weights = np.random.default_rng(3)  # the same weights for both runs
        for variable in model.weights:
            variable.assign(0.05 * weights.standard_normal(variable.shape).astype(np.float32))
        trainer = TFTrainer(model, [task], loop.build_optimizer(config, 10, 1), config)
        losses[reduction] = float(trainer.step(task, batch))
    assert seen == ["sum", "mean"]
    np.testing.assert_allclose(losses["sum"], 8 * losses["mean"], rtol=1e-5)
