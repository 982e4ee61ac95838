"""GLUE metrics in NumPy (the run needs no SciPy or scikit-learn; the tests check against both).

Each returns a float on the 0–100 scale the GLUE leaderboard and the papers report.
"""
import numpy as np


def accuracy(labels, predictions) -> float:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return 100.0 * float(np.mean(labels == predictions))


def f1_binary(labels, predictions, positive=1) -> float:
    """F1 of the positive class (MRPC, QQP); 0 when there are no true positives."""
    labels, predictions = np.asarray(labels) == positive, np.asarray(predictions) == positive
    true_positives = float(np.sum(labels & predictions))
    if true_positives == 0:
        return 0.0
    precision = true_positives / np.sum(predictions)
    recall = true_positives / np.sum(labels)
    return 100.0 * float(2 * precision * recall / (precision + recall))


def f1_macro(labels, predictions) -> float:
    """The mean of the classes' F1 over the classes in the gold labels or the predictions (scikit-learn's
    average="macro"); a class without true positives scores 0."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.union1d(labels, predictions)
    if classes.size == 0:
        return 0.0
    scores = [f1_binary(labels, predictions, positive=value) for value in classes]
    return float(np.mean(scores))


def matthews_corrcoef(labels, predictions) -> float:
    """Binary Matthews correlation (CoLA); 0 when a row or column of the confusion matrix is empty."""
    labels, predictions = np.asarray(labels).astype(bool), np.asarray(predictions).astype(bool)
    tp = float(np.sum(labels & predictions))
    tn = float(np.sum(~labels & ~predictions))
    fp = float(np.sum(~labels & predictions))
    fn = float(np.sum(labels & ~predictions))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    if denominator == 0:
        return 0.0
    return 100.0 * float((tp * tn - fp * fn) / denominator)


def pearson(x, y) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return 0.0 if denominator == 0 else 100.0 * float(np.sum(x * y) / denominator)


def average_ranks(values) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank (what Spearman's correlation needs)."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman(x, y) -> float:
    return pearson(average_ranks(x), average_ranks(y))


def summary(values) -> dict:
    """Median, mean and (population) standard deviation over trials, as the original reports them."""
    values = np.asarray(values, np.float64)
    return {"median": float(np.median(values)), "mean": float(np.mean(values)),
            "std": float(np.std(values)), "n": int(len(values))}
