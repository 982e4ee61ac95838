"""The official SQuAD evaluation scripts (v1.1 and v2.0), same normalisation and arithmetic.

Both read the gold answers from the dataset JSON and predictions {id: text}. v2.0 also takes null odds
{id: score} and the threshold above which a question is predicted unanswerable (the original passes
its qa_na_threshold, −2.75), and reports HasAns/NoAns and the best thresholds.
"""
import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lower case, drop punctuation, articles and extra whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _questions(dataset):
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


# ---------------------------------------------------------------------------------------------- v1.1


def f1_v1(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(ground_truth).split()
    same = sum((collections.Counter(prediction_tokens) & collections.Counter(truth_tokens)).values())
    if same == 0:
        return 0
    precision, recall = same / len(prediction_tokens), same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def evaluate_v1(dataset, predictions):
    """{"exact_match", "f1"} over every question (a missing prediction scores 0, as in the script)."""
    exact = f1 = total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        truths = [answer["text"] for answer in qa["answers"]]
        prediction = predictions[qa["id"]]
        exact += max(normalize_answer(prediction) == normalize_answer(t) for t in truths)
        f1 += max(f1_v1(prediction, t) for t in truths)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


# ---------------------------------------------------------------------------------------------- v2.0


def _tokens(text):
    return normalize_answer(text).split() if text else []


def f1_v2(gold, prediction):
    gold_tokens, prediction_tokens = _tokens(gold), _tokens(prediction)
    if not gold_tokens or not prediction_tokens:
        return int(gold_tokens == prediction_tokens)
    same = sum((collections.Counter(gold_tokens) & collections.Counter(prediction_tokens)).values())
    if same == 0:
        return 0
    precision, recall = same / len(prediction_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _best_threshold(predictions, scores, null_odds, has_answer):
    score = best = sum(1 for qid in has_answer if not has_answer[qid])
    threshold = 0.0
    for qid in sorted(null_odds, key=lambda k: null_odds[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        score += diff
        if score > best:
            best, threshold = score, null_odds[qid]
    return 100.0 * best / len(scores), threshold


def evaluate_v2(dataset, predictions, null_odds=None, threshold=1.0):
    """The v2.0 script's output dict: exact, f1, total, HasAns_*, NoAns_*, and with null odds the
    best_exact/best_f1 and their thresholds."""
    has_answer, exact_raw, f1_raw = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            continue
        exact_raw[qid] = max(int(normalize_answer(g) == normalize_answer(predictions[qid])) for g in golds)
        f1_raw[qid] = max(f1_v2(g, predictions[qid]) for g in golds)
    odds = null_odds if null_odds is not None else {qid: 0.0 for qid in predictions}

    def thresholded(raw):
        return {qid: float(not has_answer[qid]) if odds[qid] > threshold else value for qid, value in raw.items()}

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids):
        return {"exact": 100.0 * sum(exact.get(q, 0.0) for q in qids) / len(qids),
                "f1": 100.0 * sum(f1.get(q, 0.0) for q in qids) / len(qids), "total": len(qids)}

    result = summary(list(exact))
    for prefix, keep in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in has_answer if has_answer[q] == keep]
        if qids:
            result.update({f"{prefix}_{key}": value for key, value in summary(qids).items()})
    if null_odds is not None:
        result["best_exact"], result["best_exact_thresh"] = _best_threshold(predictions, exact_raw, odds, has_answer)
        result["best_f1"], result["best_f1_thresh"] = _best_threshold(predictions, f1_raw, odds, has_answer)
    return result
