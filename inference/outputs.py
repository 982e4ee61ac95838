"""The JSON object a predicted row becomes, for each kind of head: the one place that says what
`python -m inference.predict` writes, whichever predictor computed the numbers.

    classification  {"line": 2, "label": "1", "probabilities": {"0": 0.03, "1": 0.97}}
    regression      {"line": 2, "score": 3.81}
    tagging         {"line": 2, "words": [...], "tags": [...]}
    span (QA)       {"line": 2, "answer": "...", "start": 17, "end": 29, "score": -0.4, "null_odds": -3.1}

plus "truncated": true on a row the model read only the first tokens of.
"""
import numpy as np


def _softmax(logits):
    """Probabilities from logits over the last axis, in float32 (shifted by the maximum, so no overflow)."""
    logits = np.asarray(logits, np.float32)
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def label_output(source, row, probabilities):
    """A classified row: the most probable label and every label's probability.

    Args:
        source: the `inference.sources.ModelSource` (its `label_names`, in the head's order).
        row: the `inference.rows.Row` predicted (its `line` is echoed).
        probabilities: one probability per label, in `label_names`' order.
    """
    return {"line": row.line, "label": source.label_names[int(np.argmax(probabilities))],
            "probabilities": {name: float(p) for name, p in zip(source.label_names, probabilities)}}


def classification_output(source, score_range, row, output, truncated):
    """A classified or regressed row from the head's raw output.

    Args:
        source: the `inference.sources.ModelSource`; its `kind` is "classification" or "regression".
        score_range: regression only: (low, high) of the task's scale, or None when the output is on it
            already (the head regresses (score − low) / high).
        row: the `inference.rows.Row` predicted.
        output: the head's logits (classification) or its one value (regression).
        truncated: whether the row was longer than the model's max_seq_length.
    """
    if source.kind == "regression":
        value = float(np.asarray(output, np.float32).reshape(-1)[0])
        if score_range:
            low, high = score_range  # the head regresses (score − min) / max
            value = value * high + low
        result = {"line": row.line, "score": value}
    else:
        result = label_output(source, row, _softmax(output))
    if truncated:
        result["truncated"] = True
    return result


def tagging_output(source, row, tag_ids):
    """A tagged row: a tag per word, None for the words past max_seq_length (then "truncated").

    Args:
        source: the `inference.sources.ModelSource` (its `label_names` are the tags).
        row: the `inference.rows.Row`; `row.texts[0]` is its list of words.
        tag_ids: the tag of each word the model read, in order.
    """
    words = list(row.texts[0])
    tags = [source.label_names[i] for i in tag_ids] + [None] * (len(words) - len(tag_ids))
    result = {"line": row.line, "words": words, "tags": tags}
    if len(tag_ids) < len(words):
        result["truncated"] = True
    return result


def span_output(row, score, null_odds, answer=None, truncated=False):
    """A question-answering row: the answer text and its character offsets, or "" with null offsets.

    Args:
        row: the `inference.rows.Row` (question, context).
        score: the best span's score, or None when no window gave a candidate.
        null_odds: the lowest no-answer logit over the row's windows, or None without windows.
        answer: (text, start, end) of the answer in the context (end exclusive), or None for no answer.
        truncated: whether the question was longer than the model reads (a long context is read in windows).
    """
    result = {"line": row.line, "answer": "", "start": None, "end": None, "score": score, "null_odds": null_odds}
    if answer is not None:
        text, start, end = answer
        result.update(answer=text, start=start, end=end)
    if truncated:
        result["truncated"] = True
    return result
