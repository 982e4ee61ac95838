"""Pretraining metrics as sufficient statistics: sums and counts that add across replicas and steps.

`metric_stats` returns a flat dict of float32 tensors; all-reduce (SUM) or accumulate them with
`add_stats`, then `finalize_metrics` turns them into the original's metric names. `PretrainingMetrics`
wraps the same statistics as Keras metrics for `fit`/`evaluate`.
"""
import numpy as np
import keras
from keras import ops

from pretrain.sampling import argmax_last_axis

ELECTRA_RATIO_METRICS = ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy", "disc_loss",
                         "disc_accuracy", "disc_precision", "disc_recall")
RATIO_METRICS = ELECTRA_RATIO_METRICS + ("cloze_loss",)  # cloze_loss: two-tower (Electric) generators
AUC_NUM_THRESHOLDS = 200
_AUC_KEPSILON = 1e-7
_AUC_EPSILON = 1e-6


def auc_thresholds(num_thresholds=AUC_NUM_THRESHOLDS):
    """The thresholds of tf.compat.v1.metrics.auc: -ε, 1/(n-1), …, (n-2)/(n-1), 1+ε."""
    inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return np.array([-_AUC_KEPSILON] + inner + [1.0 + _AUC_KEPSILON], dtype="float32")


def _ratio_stat(stats, name, numerator, denominator):
    stats[f"{name}/numerator"] = ops.cast(numerator, "float32")
    stats[f"{name}/denominator"] = ops.cast(denominator, "float32")


def mlm_stats(nll, logits, target_ids, weights, sampled_ids=None):
    """Statistics of the generator's predictions over the weighted slots."""
    weights = ops.cast(weights, "float32")
    target_ids = ops.cast(target_ids, "int32")
    total = ops.sum(weights)
    predictions = argmax_last_axis(ops.stop_gradient(logits))
    stats = {}
    _ratio_stat(stats, "masked_lm_accuracy",
                ops.sum(weights * ops.cast(ops.equal(predictions, target_ids), "float32")), total)
    _ratio_stat(stats, "masked_lm_loss", ops.sum(weights * nll), total)
    if sampled_ids is not None:
        correct = ops.cast(ops.equal(ops.cast(sampled_ids, "int32"), target_ids), "float32")
        _ratio_stat(stats, "sampled_masked_lm_accuracy", ops.sum(weights * correct), total)
    return stats


def cloze_stats(terms):
    """A two-tower generator's training loss over every candidate token (ours to log; the original
    reports masked_lm_loss only, the same softmax at the masked slots)."""
    stats = {}
    _ratio_stat(stats, "cloze_loss", terms.numerator, terms.denominator)
    return stats


def discriminator_stats(logits, labels, input_mask, bce):
    """Loss, accuracy, precision, recall and ROC counts over real tokens (prediction: logit > 0)."""
    mask = ops.cast(input_mask, "float32")
    labels = ops.cast(labels, "float32")
    predictions = ops.cast(ops.cast(logits, "float32") > 0.0, "float32")
    true_positives = ops.sum(mask * predictions * labels)
    stats = {}
    _ratio_stat(stats, "disc_loss", ops.sum(bce * mask), ops.sum(mask))
    _ratio_stat(stats, "disc_accuracy", ops.sum(mask * ops.cast(ops.equal(predictions, labels), "float32")),
                ops.sum(mask))
    _ratio_stat(stats, "disc_precision", true_positives, ops.sum(mask * predictions))
    _ratio_stat(stats, "disc_recall", true_positives, ops.sum(mask * labels))
    probs = ops.sigmoid(ops.cast(logits, "float32"))
    above = ops.cast(probs[..., None] > ops.convert_to_tensor(auc_thresholds()), "float32")
    positives = (mask * labels)[..., None]
    negatives = (mask * (1.0 - labels))[..., None]
    stats["disc_auc/true_positives"] = ops.sum(above * positives, axis=(0, 1))
    stats["disc_auc/false_positives"] = ops.sum(above * negatives, axis=(0, 1))
    stats["disc_auc/positives"] = ops.sum(positives)
    stats["disc_auc/negatives"] = ops.sum(negatives)
    return stats


def add_stats(a, b):
    """Accumulates two stats dicts (numpy or tensors); a missing side counts as zero."""
    return {key: (a[key] + b[key]) if key in a and key in b else a.get(key, b.get(key)) for key in {**a, **b}}


def roc_auc(true_positives, false_positives, positives, negatives):
    """Trapezoidal ROC AUC from per-threshold counts, as tf.compat.v1.metrics.auc computes it."""
    true_positives = np.asarray(true_positives, dtype="float64")
    false_positives = np.asarray(false_positives, dtype="float64")
    false_negatives = float(positives) - true_positives
    true_negatives = float(negatives) - false_positives
    tpr = (true_positives + _AUC_EPSILON) / (true_positives + false_negatives + _AUC_EPSILON)
    fpr = false_positives / (false_positives + true_negatives + _AUC_EPSILON)
    return float(np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2.0))


def finalize_metrics(stats, gen_weight=1.0, disc_weight=50.0):
    """Host-side: stats (summed over replicas/steps) → {metric name: float}, total_loss included."""
    values = {key: np.asarray(value) for key, value in stats.items()}
    results = {}
    for name in RATIO_METRICS:
        if f"{name}/numerator" in values:
            denominator = float(values[f"{name}/denominator"])
            results[name] = float(values[f"{name}/numerator"]) / denominator if denominator > 0 else 0.0
    if "disc_auc/true_positives" in values:
        results["disc_auc"] = roc_auc(values["disc_auc/true_positives"], values["disc_auc/false_positives"],
                                      values["disc_auc/positives"], values["disc_auc/negatives"])
    if "masked_lm_loss" in results:
        generator = "cloze_loss" if "cloze_loss" in results else "masked_lm_loss"  # what the step trained
        mlm = float(values[f"{generator}/numerator"]) / (float(values[f"{generator}/denominator"]) + 1e-6)
        total = gen_weight * mlm
        if "disc_loss" in results:
            total += disc_weight * float(values["disc_loss/numerator"]) / (
                float(values["disc_loss/denominator"]) + 1e-6)
        results["total_loss"] = total
    return results


class RatioMetric(keras.metrics.Metric):
    """Σ numerator / Σ denominator over the updates (a weighted mean that all-reduces exactly)."""

    def __init__(self, name, **kwargs):
        super().__init__(name=name, **kwargs)
        self.numerator = self.add_variable(shape=(), initializer="zeros", name="numerator")
        self.denominator = self.add_variable(shape=(), initializer="zeros", name="denominator")

    def update_state(self, numerator, denominator):
        self.numerator.assign_add(ops.cast(numerator, self.dtype))
        self.denominator.assign_add(ops.cast(denominator, self.dtype))

    def result(self):
        return ops.divide_no_nan(self.numerator, self.denominator)


class HistogramAUC(keras.metrics.Metric):
    """ROC AUC from the 200-threshold counts of `discriminator_stats`."""

    def __init__(self, name="disc_auc", **kwargs):
        super().__init__(name=name, **kwargs)
        n = AUC_NUM_THRESHOLDS
        self.true_positives = self.add_variable(shape=(n,), initializer="zeros", name="true_positives")
        self.false_positives = self.add_variable(shape=(n,), initializer="zeros", name="false_positives")
        self.positives = self.add_variable(shape=(), initializer="zeros", name="positives")
        self.negatives = self.add_variable(shape=(), initializer="zeros", name="negatives")

    def update_state(self, true_positives, false_positives, positives, negatives):
        self.true_positives.assign_add(ops.cast(true_positives, self.dtype))
        self.false_positives.assign_add(ops.cast(false_positives, self.dtype))
        self.positives.assign_add(ops.cast(positives, self.dtype))
        self.negatives.assign_add(ops.cast(negatives, self.dtype))

    def result(self):
        tp, fp = self.true_positives, self.false_positives
        fn, tn = self.positives - tp, self.negatives - fp
        tpr = (tp + _AUC_EPSILON) / (tp + fn + _AUC_EPSILON)
        fpr = fp / (fp + tn + _AUC_EPSILON)
        return ops.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2.0)


class PretrainingMetrics:
    """The Keras-metric view of the statistics (for fit/evaluate): one metric per original name."""

    def __init__(self, electra_objective=True, cloze=False):
        names = ELECTRA_RATIO_METRICS if electra_objective else ("masked_lm_accuracy", "masked_lm_loss")
        names += ("cloze_loss",) if cloze else ()
        self.ratio_metrics = [RatioMetric(name) for name in names]
        self.auc = HistogramAUC() if electra_objective else None

    @property
    def metrics(self):
        return self.ratio_metrics + ([self.auc] if self.auc is not None else [])

    def update(self, stats):
        for metric in self.ratio_metrics:
            metric.update_state(stats[f"{metric.name}/numerator"], stats[f"{metric.name}/denominator"])
        if self.auc is not None:
            self.auc.update_state(stats["disc_auc/true_positives"], stats["disc_auc/false_positives"],
                                  stats["disc_auc/positives"], stats["disc_auc/negatives"])
