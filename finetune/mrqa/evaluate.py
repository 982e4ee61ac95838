"""The MRQA shared task's official evaluation: SQuAD 1.1's normalisation and token F1, exact match and F1
each the maximum over a question's `answers`, averaged over every question (a missing prediction
scores 0, the script's default), on 0–100.

The original ran the script with skip_no_answer (questions without a prediction left out); the tasks
here predict every question, so that flag would change nothing.
"""
from finetune.squad.evaluate import f1_v1, normalize_answer


def evaluate(gold, predictions):
    """{"exact_match", "f1"} from gold {question id: answer texts} and predictions {question id: text}."""
    exact = f1 = 0.0
    for qid, answers in gold.items():
        if qid not in predictions:
            continue
        prediction = predictions[qid]
        exact += max(normalize_answer(prediction) == normalize_answer(answer) for answer in answers)
        f1 += max(f1_v1(prediction, answer) for answer in answers)
    return {"exact_match": 100.0 * exact / len(gold), "f1": 100.0 * f1 / len(gold)}
