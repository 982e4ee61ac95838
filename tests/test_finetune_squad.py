"""SQuAD: featurisation with doc stride maps the answers of the shared v1.1 dev set (10,570 questions)
back to their text; the scorer follows the official v1.1 and v2.0 scripts; get_final_text."""
import collections
import gzip
import json
import types

import pytest

from data.tokenization import load_tokenizer
from finetune.squad import evaluate as squad_eval
from finetune.squad.featurize import featurize_examples
from finetune.squad.postprocess import get_final_text, span_text
from finetune.squad.reader import read_squad
from tests.finetune_fixtures import why_unmappable


@pytest.fixture(scope="module")
def squad_files(shared_data):
    folder = shared_data / "squad"
    files = {"v1": folder / "dev-v1.1.json.gz", "v2": folder / "dev-v2.0.reconstructed.json.gz"}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        pytest.fail(f"ELECTRA_SHARED_DATA is set but {missing} are missing")
    return files


def load(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def questions(dataset):
    return [qa for article in dataset["data"] for p in article["paragraphs"] for qa in p["qas"]]


def test_featurisation_maps_every_v1_answer_back(squad_files, bert_vocab_file):
    """Every question has a window holding its first answer; the pieces map back to the exact answer
    text except where WordPiece cannot express it (each such case is explained, and they are few)."""
    tokenizer = load_tokenizer(vocab_file=bert_vocab_file)
    dataset = load(squad_files["v1"])
    starts = {qa["id"]: qa["answers"][0]["answer_start"] for qa in questions(dataset)}
    examples = read_squad(squad_files["v1"], dataset)
    assert len(examples) == 10570
    windows = featurize_examples(examples, tokenizer, 512, 128, 64, training=True)
    assert len(windows) > len(examples)  # long contexts need several windows
    assert max(len(w.input_ids) for w in windows) <= 512
    exact, reasons = set(), {}
    for window in windows:
        if window.start_position == 0:
            continue
        example = examples[window.example_index]
        text = span_text(window, example, tokenizer, window.start_position, window.end_position, True)
        if text == example.answer_text:
            exact.add(window.example_index)
        else:
            reasons[window.example_index] = why_unmappable(example, tokenizer, starts[example.qas_id])
    covered = exact | set(reasons)
    assert covered == set(range(len(examples)))
    unmapped = {i: r for i, r in reasons.items() if i not in exact}
    summary = collections.Counter(unmapped.values())
    print(f"\n{len(exact)} of {len(examples)} answers map back exactly; not mappable: {dict(summary)}")
    assert None not in summary, [examples[i].answer_text for i, r in unmapped.items() if r is None]
    assert len(unmapped) <= 0.01 * len(examples)


def test_first_gold_answer_scores_100(squad_files):
    v1 = load(squad_files["v1"])
    assert squad_eval.evaluate_v1(v1, {qa["id"]: qa["answers"][0]["text"] for qa in questions(v1)}) == {
        "exact_match": 100.0, "f1": 100.0}
    v2 = load(squad_files["v2"])
    first = {qa["id"]: qa["answers"][0]["text"] if qa["answers"] else "" for qa in questions(v2)}
    result = squad_eval.evaluate_v2(v2, first)
    assert result["exact"] == result["f1"] == result["HasAns_exact"] == result["NoAns_f1"] == 100.0
    assert result["total"] == 11873 and result["NoAns_total"] == 5945


def test_v2_all_empty_and_thresholds(squad_files):
    v2 = load(squad_files["v2"])
    qas = questions(v2)
    result = squad_eval.evaluate_v2(v2, {qa["id"]: "" for qa in qas})
    assert result["exact"] == pytest.approx(100.0 * 5945 / 11873) and result["HasAns_f1"] == 0.0
    # Gold answers everywhere, but null odds above the threshold for the answerable ones: they become "".
    first = {qa["id"]: qa["answers"][0]["text"] if qa["answers"] else "" for qa in qas}
    odds = {qa["id"]: (5.0 if qa["answers"] else -5.0) for qa in qas}
    result = squad_eval.evaluate_v2(v2, first, odds, threshold=-2.75)
    assert result["HasAns_exact"] == 0.0 and result["NoAns_exact"] == 100.0
    assert result["best_exact"] == 100.0 and result["best_exact_thresh"] == 5.0


TOY = {"data": [{"paragraphs": [{"context": "", "qas": [
    {"id": "a", "answers": [{"text": "the Denver Broncos", "answer_start": 0}, {"text": "Broncos", "answer_start": 0}]},
    {"id": "b", "answers": [{"text": "Santa Clara, California", "answer_start": 0}]},
    {"id": "c", "answers": []},
    {"id": "d", "answers": [{"text": "1995", "answer_start": 0}]}]}]}]}


def test_scorer_normalisation_by_hand():
    """Values worked out by hand from the official scripts' rules (lower case, no punctuation or
    articles, token-bag F1, max over gold answers; v2: empty prediction vs empty gold is 1)."""
    predictions = {"a": "Denver Broncos!", "b": "Clara California state", "c": "", "d": "in 1995"}
    # a: exact (articles and punctuation dropped); b: 2 of 3 predicted, 2 of 3 gold → F1 2/3;
    # d: 1 of 2 predicted, 1 of 1 gold → F1 2/3.
    v2 = squad_eval.evaluate_v2(TOY, predictions)
    assert v2["exact"] == pytest.approx(100 * 2 / 4) and v2["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 2 / 3) / 4)
    toy_v1 = {"data": [{"paragraphs": [{"qas": [q for q in TOY["data"][0]["paragraphs"][0]["qas"] if q["answers"]]}]}]}
    v1 = squad_eval.evaluate_v1(toy_v1, {k: v for k, v in predictions.items() if k != "c"})
    assert v1["exact_match"] == pytest.approx(100 / 3) and v1["f1"] == pytest.approx(100 * (1 + 4 / 3) / 3)
    assert squad_eval.evaluate_v1(toy_v1, {"a": "Broncos"})["exact_match"] == pytest.approx(100 / 3)  # missing → 0


def test_get_final_text_projects_onto_the_original_words():
    assert get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert get_final_text("1895", "(1895)", True) == "1895"
    assert get_final_text("cafe", "Café,", True) == "Café"
    assert get_final_text("nothing", "Steve Smith's", True) == "Steve Smith's"  # not found: the words


def test_answerability_labels_are_the_questions_flag_in_every_window(squad_files, bert_vocab_file):
    """The original's label (qa_tasks.py writes the example's is_impossible into each of its windows): on
    SQuAD 2.0 dev at 512 tokens every window carries its question's is_impossible from the file, a window
    that misses an answerable question's answer too. Labelling 1 every window without the answer (what
    this code did before) differs in 37 of 12,022 windows: SQuAD's contexts seldom need two."""
    from configs.finetuning_config import FinetuningConfig
    from finetune.registry import get_task

    tokenizer = load_tokenizer(vocab_file=bert_vocab_file)
    dataset = load(squad_files["v2"])
    read = {"path": squad_files["v2"], "dataset": dataset, "examples": read_squad(squad_files["v2"], dataset)}
    features = get_task("squad").featurize(read, tokenizer, FinetuningConfig.create({}, "small", ["squad"]),
                                           training=True)
    flags = [bool(qa["is_impossible"]) for qa in questions(dataset)]
    windows, labels = features["windows"], features["scalars"]["is_impossible"]
    assert len(labels) == len(windows) == features["count"] == 12022
    assert labels.tolist() == [int(flags[w.example_index]) for w in windows]
    assert labels.sum() == 6024 and sum(flags) == 5945  # unanswerable questions with two windows count twice
    without_answer = features["scalars"]["start_positions"] == 0
    assert (without_answer != labels.astype(bool)).sum() == 37


def test_answerable_label_rules_by_hand():
    """Three windows of an answerable question (the answer in the second) and two of an unanswerable one:
    the original's label is the question's flag in each window, only where the task reads it (SQuAD 2.0,
    not 1.1 or MRQA)."""
    import numpy as np

    from finetune.registry import get_task
    from finetune.squad.featurize import Window
    from finetune.squad.task import answerable_labels

    examples = [types.SimpleNamespace(is_impossible=False), types.SimpleNamespace(is_impossible=True)]
    starts = np.array([0, 17, 0, 0, 0], np.int32)
    windows = [Window(index, 0, None, None, {}, {}, int(start), int(start)) for index, start in
               zip([0, 0, 0, 1, 1], starts)]
    assert answerable_labels(examples, windows, True).tolist() == [0, 0, 0, 1, 1]
    assert answerable_labels(examples, windows, False).tolist() == [0, 0, 0, 0, 0]
    assert [get_task(name).has_unanswerable for name in ("squad", "squadv1", "newsqa", "mrqa:drop")] == [
        True, False, False, False]
