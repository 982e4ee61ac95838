"""A fine-tuned model that gives every dev example the same answer, said aloud.

A classifier that predicts one label for the whole dev set scores the majority baseline (or below it), and a
regression head with one output for every pair scores a correlation of 0: numbers that read as "a weak model"
when the cause is usually upstream. The first GPU window's pretraining collapsed (every token's hidden state
alike from its second layer on), and RTE, MRPC, CoLA and STS-B fine-tuned from it reported majority scores
without a word (docs/jax_gpu.md, "What the first window brought back"). The check runs on the outputs the
metrics already have, for classification and regression tasks; spans and tags vary by position and are left out.
"""
import numpy as np

from finetune.tasks import CLASSIFICATION, REGRESSION

# A regression head whose dev outputs spread less than this share of the task's score range gives one answer.
REGRESSION_SPREAD = 1e-4


def constant_answer(task, outputs):
    """What the model answered for every example (a label name, or a score), or None when its answers vary or
    the task is not one label or score per example."""
    kind = getattr(task, "kind", None)
    if kind not in (CLASSIFICATION, REGRESSION) or not hasattr(task, "predictions"):
        return None
    predictions = np.asarray(task.predictions(outputs))
    if predictions.size < 2:
        return None
    if kind == CLASSIFICATION:
        if np.any(predictions != predictions.flat[0]):
            return None
        names = task.label_names
        label = int(predictions.flat[0])
        return repr(names[label]) if label < len(names) else str(label)
    low, high = task.score_range
    if float(np.std(predictions)) > REGRESSION_SPREAD * max(abs(high), 1e-12):
        return None
    return f"{float(np.mean(predictions)):.3f}"


def warning(task_name, trial, split, answer):
    """The line a run says when constant_answer found one."""
    return (f"{task_name} trial {trial}: warning: every {split} example got the same answer ({answer}), so its "
            "scores are a baseline's. With a pretrained model this usually means the encoder gives every input the "
            "same representation: a collapsed pretraining run (check disc_auc in its metrics.jsonl; "
            "docs/pretraining.md); else the learning rate is too high or the run too short.")
