"""MRQA tasks: the reader on fixtures (answer text from the char span, not the detected text), the file
layouts, `mrqa:<name>` (and an end-to-end TensorFlow run of one), the official scoring, bad input as one
line with file and line; on the shared
SQuAD, NewsQA and DROP dev sets every detected span maps back to its text (the mismatches are MRQA's
normalised detections), featurisation keeps every first answer, the first answer scores 100, and a tiny
model fine-tunes on part of NewsQA dev and scores the rest through run_finetuning.py."""
import collections
import gzip
import json
import shutil

import pytest

from common.errors import InputError
from configs.finetuning_config import FinetuningConfig
from studies.device_path import task_arrays as arrays
from finetune.mrqa import evaluate as mrqa_eval
from finetune.mrqa.reader import read_mrqa
from finetune.registry import get_task, parse_task_list
from finetune.squad.evaluate import normalize_answer
from finetune.tasks import SPAN

CONTEXT = "The Denver Broncos won Super Bowl 50 in Santa Clara, California."
QAS = [{"qid": "q1", "question": "Who won?", "answers": ["The Denver Broncos", "Broncos"],
        "detected_answers": [{"text": "The Denver Broncos", "char_spans": [[4, 17]]}]},
       {"qid": "q2", "question": "Where?", "answers": ["Santa Clara, California"],
        "detected_answers": [{"text": "Santa Clara, California", "char_spans": [[40, 62]]}]}]
HEADER = {"header": {"dataset": "Fixture", "split": "dev"}}


def write_mrqa(path, lines, header=HEADER):
    """JSON lines (gzipped for .gz): the header, then each context record or raw text line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = ([json.dumps(header)] if header else []) + [line if isinstance(line, str) else json.dumps(line)
                                                       for line in lines]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    return path


def record(qas=QAS, context=CONTEXT):
    return {"context": context, "qas": qas}


@pytest.mark.parametrize("name", ["dev.jsonl", "dev.jsonl.gz"])
def test_reader_takes_the_span_text_and_keeps_every_answer(tmp_path, name):
    """mrqa_answer_end "char_span": the first span's own characters are the target."""
    second = record([{**QAS[1], "qid": "q3", "answers": ["Levi's Stadium"],
                      "detected_answers": [{"text": "Levi's Stadium", "char_spans": [[0, 13]]}]}],
                    "Levi's Stadium hosted it.")
    examples = read_mrqa(write_mrqa(tmp_path / name, [record(), second]), answer_end="char_span")
    assert [e.qas_id for e in examples] == ["q1", "q2", "q3"]
    first = examples[0]
    assert first.answer_text == "Denver Broncos"  # the span's characters, not the detected "The Denver Broncos"
    assert first.paragraph.doc_tokens[first.start_word:first.end_word + 1] == ["Denver", "Broncos"]
    assert first.answers == ["The Denver Broncos", "Broncos"] and first.answer_found and not first.is_impossible
    assert examples[1].answer_text == "Santa Clara, California" and examples[1].paragraph is first.paragraph
    assert examples[2].answer_text == "Levi's Stadium" and examples[2].paragraph is not first.paragraph


def test_the_originals_rule_is_the_default_text_length_from_the_span_start(tmp_path):
    """The original (qa_tasks._add_examples): the detected text, len(text) characters from the span's
    start, trained on only if those words contain the text, case aside; past the context's end, skipped."""
    qas = [QAS[0], {**QAS[1], "detected_answers": [{"text": "santa clara, california", "char_spans": [[40, 62]]}]},
           {"qid": "q3", "question": "Which?", "answers": ["California."],
            "detected_answers": [{"text": "California. And more", "char_spans": [[53, 63]]}]}]
    examples = read_mrqa(write_mrqa(tmp_path / "dev.jsonl", [record(qas)]))
    first, second, third = examples
    assert first.answer_text == "The Denver Broncos" and not first.answer_found  # "Denver Broncos won"
    assert first.paragraph.doc_tokens[first.start_word:first.end_word + 1] == ["Denver", "Broncos", "won"]
    assert second.answer_text == "santa clara, california" and second.answer_found
    assert second.paragraph.doc_tokens[second.start_word:second.end_word + 1] == ["Santa", "Clara,", "California."]
    assert not third.answer_found  # 20 characters from 53 run past the context's 64
    assert [e.answers for e in examples] == [q["answers"] for q in qas]  # scoring is the same either way


def test_a_question_without_detected_answers_is_scored_but_not_trained_on(tmp_path):
    examples = read_mrqa(write_mrqa(tmp_path / "dev.jsonl", [record([{**QAS[0], "detected_answers": []}])]))
    assert (examples[0].answer_text, examples[0].start_word, examples[0].answer_found) == ("", -1, False)


BAD_LINES = {
    "malformed JSON": ([record(), '{"context": "x", "qas": [}'], "line 3: malformed JSON"),
    "missing header": (None, "line 1: no MRQA header"),
    "span outside": ([record([{**QAS[0], "detected_answers": [{"text": "x", "char_spans": [[60, 70]]}]}])],
                     "line 2: question q1: char span [60, 70] lies outside its context of 64 characters"),
    "missing key": ([{"context": CONTEXT}], "line 2: malformed MRQA context (missing 'qas')"),
    "repeated qid": ([record(), record()], "line 3: question id q1 repeats"),
    "no answers": ([record([{**QAS[0], "answers": []}])], "line 2: question q1 has no answers"),
    "header only": ([], "line 1: no question after the header"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES) + ["empty file", "missing file", "not gzip", "train header"])
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, case):
    path = tmp_path / "dev.jsonl"
    if case in BAD_LINES:
        lines, fragment = BAD_LINES[case]
        if lines is None:
            write_mrqa(path, [record()], header=None)
        else:
            write_mrqa(path, lines)
    elif case == "empty file":
        path.write_text("")
        fragment = "line 1: the file is empty"
    elif case == "missing file":
        fragment = "no such file"
    elif case == "not gzip":
        path = tmp_path / "dev.jsonl.gz"
        path.write_text("plain text\n")
        fragment = "line 1: unreadable"
    else:
        write_mrqa(path, [record()], header={"header": {"split": "train"}})
        fragment = "line 1: the header says split 'train', but the file was found as the dev split"
    with pytest.raises(InputError) as error:
        read_mrqa(path, "dev")
    message = str(error.value)
    assert len(message.splitlines()) == 1 and message.startswith(str(path)) and fragment in message, message
    assert "; " in message  # followed by the fix


def test_file_layouts_official_names_and_mrqa_name(tmp_path):
    root = tmp_path / "finetuning_data"
    newsqa = get_task("newsqa")
    write_mrqa(root / "newsqa" / "train" / "NewsQA.jsonl.gz", [record()], {"header": {"split": "train"}})
    write_mrqa(root / "mrqa" / "NEWSQA.jsonl", [record()])  # the shared folder, case aside
    assert newsqa.split_file(root, "train") == (root / "newsqa" / "train" / "NewsQA.jsonl.gz", "train")
    assert newsqa.split_file(root, "dev") == (root / "mrqa" / "NEWSQA.jsonl", "dev")
    write_mrqa(root / "newsqa" / "dev.jsonl.gz", [record()])  # the original's name comes first
    assert newsqa.split_file(root, "dev") == (root / "newsqa" / "dev.jsonl.gz", None)
    write_mrqa(root / "triviaqa" / "TriviaQA-web.jsonl.gz", [record()])
    assert get_task("triviaqa").split_file(root, "dev")[0].name == "TriviaQA-web.jsonl.gz"
    with pytest.raises(InputError, match="no train file"):
        get_task("triviaqa").split_file(root, "train")  # a bare official name is the dev split only
    write_mrqa(root / "mrqa" / "DROP.jsonl", [record()])
    drop = get_task("mrqa:DROP")
    assert (drop.name, drop.kind, drop.primary_metric) == ("mrqa:drop", SPAN, "f1")
    assert [e.qas_id for e in drop.read(root, "dev")["examples"]] == ["q1", "q2"]
    # mrqa:<a named task> keeps that task's official names
    assert get_task("mrqa:triviaqa").split_file(root, "dev")[0].name == "TriviaQA-web.jsonl.gz"
    with pytest.raises(InputError) as error:
        get_task("mrqa:bioasq").read(root, "dev")
    assert "no dev file" in str(error.value) and "bioasq.jsonl[.gz]" in str(error.value)


def test_registry_names_and_file_stems():
    assert [t.name for t in parse_task_list("newsqa, mrqa:newsqa,NaturalQs")] == ["newsqa", "mrqa:newsqa", "naturalqs"]
    for bad, fragment in (("mrqa:", "give the data folder's name"), ("mrqa:../x", "give the data folder's name"),
                          ("chunky", "mrqa:<name>")):
        with pytest.raises(InputError, match=fragment):
            get_task(bad)
    # file names never hold the colon (Windows refuses it, scp reads it as a host)
    assert [get_task(name).file_stem for name in ("newsqa", "mrqa:drop")] == ["newsqa", "mrqa-drop"]


def test_qa_recipe_follows_the_originals_name_rule_by_default():
    """configure_finetuning.py gives 512 tokens and 2 epochs to a name holding "squad" or "qa": of the named
    tasks every span task but naturalqs, which gets 128 and 3; `qa_recipe: "every_span_task"` adds it."""
    from finetune.registry import REGISTRY
    from finetune.tasks import SPAN as span

    def recipe(names, **hparams):
        config = FinetuningConfig.create(hparams, "small", names)
        return config.max_seq_length, config.num_train_epochs

    assert {name for name in REGISTRY if recipe([name]) == (512, 2.0)} == {
        "squad", "squadv1", "newsqa", "triviaqa", "searchqa"}
    assert recipe(["naturalqs"]) == (128, 3.0) and recipe(["mrqa:drop"]) == (512, 2.0)
    every = {name for name in REGISTRY if recipe([name], qa_recipe="every_span_task") == (512, 2.0)}
    assert every == {name for name, task in REGISTRY.items() if task.kind == span}
    assert recipe(["naturalqs"], qa_recipe="every_span_task", max_seq_length=384) == (384, 2.0)  # --hparams win
    with pytest.raises(InputError, match="qa_recipe 'all' is not one of original, every_span_task"):
        FinetuningConfig.create({"qa_recipe": "all"}, "small", ["naturalqs"])


def test_official_scoring_by_hand():
    """Max over answers after SQuAD's normalisation; a question without a prediction scores 0."""
    gold = {"a": ["The Denver Broncos", "Broncos"], "b": ["Santa Clara, California"], "c": ["1995"]}
    scores = mrqa_eval.evaluate(gold, {"a": "broncos!", "b": "Clara California state"})
    # a: exact (second answer); b: 2 of 3 predicted, 2 of 3 gold → F1 2/3; c: missing → 0.
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)


def test_the_jax_export_refuses_span_tasks_clearly():
    """(check_supported is what export_tasks and load_task_data call first.)"""
    for name in ("newsqa", "mrqa:drop"):
        with pytest.raises(InputError, match="not supported on the JAX path yet .* run_finetuning.py"):
            arrays.check_supported(get_task(name))


def tiny_model_folder(root, vocab_words):
    """<root>/models/tiny: a 1-layer (it traces fastest), 32-wide pretrained folder (untrained weights) whose
    vocabulary is the specials and `vocab_words`: what run_finetuning.py reads."""
    import tensorflow as tf

    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from tests.helpers import MICRO_MODEL, SPECIALS
    from storage.model_folder import model_trackable

    folder = root / "models" / "tiny"
    folder.mkdir(parents=True)
    config = PretrainingConfig.create({"model_size": "electra_tiny",
                                       "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
                                       "model_name": "tiny"})
    config.save(folder / "config.json")
    (folder / "vocab.txt").write_text("\n".join(SPECIALS + sorted(set(vocab_words))) + "\n", encoding="utf-8")
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model_trackable(build_pretrainer(config))),
                                         str(folder), max_to_keep=1, checkpoint_name="ckpt")
    manager.save(checkpoint_number=1)
    return folder


def test_an_mrqa_name_task_fine_tunes_evaluates_and_predicts_under_tensorflow(tmp_path):
    """`--task mrqa:<name>` through run_finetuning.py on a set no named task knows: TensorFlow refused
    'mrqa:fixture' as the head's scope name; its head is now `task_specific/mrqa-fixture/`, its files and
    TensorBoard folders have no colon, and the saved model loads back with every weight."""
    import re

    import run_finetuning
    import tensorflow as tf

    from finetune.saved import load_finetuned_model

    qas = lambda tag: [dict(qa, qid=f"{tag}{i}-{qa['qid']}") for i in range(4) for qa in QAS]  # noqa: E731
    write_mrqa(tmp_path / "finetuning_data" / "fixture" / "train.jsonl", [record(qas("t"))])
    write_mrqa(tmp_path / "finetuning_data" / "fixture" / "dev.jsonl", [record(qas("d"))])
    folder = tiny_model_folder(tmp_path, re.findall(r"\w+|[^\w\s]", (CONTEXT + " who won where").lower()))
    hparams = {"max_seq_length": 64, "train_batch_size": 4, "eval_batch_size": 8, "max_train_steps": 2,
               "iterations_per_loop": 1}
    run_finetuning.main(["--model-name", "tiny", "--data-dir", str(tmp_path), "--task", "mrqa:fixture",
                         "--do-predict", "--hparams", json.dumps(hparams)])
    results = json.loads((folder / "results" / "mrqa-fixture_results.json").read_text())
    assert results["complete"] and results["num_train_steps"] == 2 and results["task"] == "mrqa:fixture"
    metrics = results["trials"][0]["metrics"]
    assert set(metrics) == {"exact_match", "f1"} and all(0 <= v <= 100 for v in metrics.values())
    predictions = json.loads((folder / "test_predictions" / "trial_1" / "mrqa-fixture_dev_predictions.json")
                             .read_text())
    assert set(predictions) == {qa["qid"] for qa in qas("d")}
    assert [p.name for p in (folder / "finetuning_logs").iterdir()] == ["mrqa-fixture_trial_1"]
    saved = folder / "finetuning_models" / "mrqa-fixture_model_1"
    head_weights = {name for name, _ in tf.train.list_variables(str(saved / "ckpt")) if "task_specific" in name}
    assert len(head_weights) == 10 and all("task_specific.Smrqa-fixture.S" in name for name in head_weights)
    model, info = load_finetuned_model(saved)  # restore_by_path fails on a weight it cannot match
    assert (info.task, model.head.name) == ("mrqa:fixture", "mrqa-fixture")


def test_named_tasks_keep_their_scope_names():
    """The original's checkpoint names (task_specific/<task>/...) for every named task; a family task's
    colon becomes '-', and two family names never meet."""
    from finetune.registry import REGISTRY
    from finetune.tasks import layer_name

    assert all(task.layer_name == name for name, task in REGISTRY.items())
    assert [get_task(name).layer_name for name in ("mrqa:drop", "mrqa:a-b", "mrqa:a.b_c")] == [
        "mrqa-drop", "mrqa-a-b", "mrqa-a.b_c"]
    assert layer_name("squad") == "squad" and not set(REGISTRY) & {get_task("mrqa:squad").layer_name}


# ------------------------------------------------------------------------------------ the shared data
FILES = {"SQuAD": "SQuAD.jsonl.gz", "NewsQA": "NewsQA.jsonl.gz", "DROP": "DROP.jsonl"}
# Per file, detected answer spans whose context characters are: the detected text itself; the same after
# the official normalisation (case, articles, punctuation: MRQA detected answers by normalised match);
# the same only when punctuation splits words (DROP's "salt-tax collectors" found as "salt tax collectors").
SPAN_COUNTS = {"SQuAD": {"same": 34343, "normalised": 384},
               "NewsQA": {"same": 4211, "normalised": 1},
               "DROP": {"same": 2728, "normalised": 190, "punctuation as space": 1}}
QUESTIONS = {"SQuAD": 10507, "NewsQA": 4212, "DROP": 1503}


@pytest.fixture(scope="module")
def mrqa_files(shared_data):
    files = {name: shared_data / "mrqa" / file for name, file in FILES.items()}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        pytest.fail(f"ELECTRA_SHARED_DATA is set but {missing} are missing")
    return files


@pytest.fixture(scope="module")
def mrqa_examples(mrqa_files):
    return {name: read_mrqa(path, answer_end="char_span") for name, path in mrqa_files.items()}


def raw_records(path, limit=None):
    """The context records of an MRQA file (the first `limit`), read directly."""
    opener = gzip.open if path.suffix == ".gz" else open
    records = []
    with opener(path, "rt", encoding="utf-8") as f:
        next(f)
        for line in f:
            if limit is not None and len(records) == limit:
                break
            records.append(json.loads(line))
    return records


def span_kind(span_text, detected):
    if span_text == detected:
        return "same"
    if normalize_answer(span_text) == normalize_answer(detected):
        return "normalised"
    if normalize_answer(span_text) == " ".join(normalize_answer(detected.replace("-", " ")).split()):
        return "punctuation as space"
    return "other"


def test_every_detected_span_maps_back_to_its_text(mrqa_files, mrqa_examples):
    """All 41,858 spans of the three files; the reader's answer is the first span's characters."""
    for name, path in mrqa_files.items():
        kinds, first_spans = collections.Counter(), {}
        for item in raw_records(path):
            context = item["context"]
            for qa in item["qas"]:
                for detected in qa["detected_answers"]:
                    for start, end in detected["char_spans"]:
                        kinds[span_kind(context[start:end + 1], detected["text"])] += 1
                start, end = qa["detected_answers"][0]["char_spans"][0]
                first_spans[qa["qid"]] = context[start:end + 1]
        print(f"\n{name}: {dict(kinds)}")
        assert dict(kinds) == SPAN_COUNTS[name]
        examples = mrqa_examples[name]
        assert len(examples) == QUESTIONS[name] and all(e.answer_found for e in examples)
        assert {e.qas_id: e.answer_text for e in examples} == first_spans


def test_the_originals_rule_skips_the_answers_it_overshoots(mrqa_files, mrqa_examples):
    """The default (the original's len(text) from the span start) against "char_span": the targets differ
    only where the detected text differs from the span's characters, and the original's rule then skips
    most of them in training: measured DROP 61 of 1,503 first answers, SQuAD 48 of 10,507, NewsQA 0."""
    skipped = {}
    for name, path in mrqa_files.items():
        original = read_mrqa(path)
        by_span = mrqa_examples[name]
        assert [e.qas_id for e in original] == [e.qas_id for e in by_span]
        for a, b in zip(original, by_span):
            if a.answer_text == b.answer_text:
                assert (a.start_word, a.end_word, a.answer_found) == (b.start_word, b.end_word, b.answer_found)
        skipped[name] = sum(not e.answer_found for e in original)
    print(f"\nskipped in training by the original's rule: {skipped}")
    assert skipped == {"SQuAD": 48, "NewsQA": 0, "DROP": 61}


def test_featurisation_keeps_every_first_answer(mrqa_files, bert_vocab_file, tmp_path):
    """DROP whole and the first 50 contexts of SQuAD and NewsQA at 512 tokens, doc stride 128: every
    question has a window holding its answer, whose pieces spell it back except where WordPiece cannot
    (an answer starting inside a word: "27,814" of "€27,814"; full files: SQuAD 10 of 10,507, NewsQA and
    DROP none)."""
    from data.tokenization import load_tokenizer
    from finetune.squad.featurize import featurize_examples
    from finetune.squad.postprocess import span_text
    from tests.finetune_fixtures import why_unmappable

    tokenizer = load_tokenizer(vocab_file=bert_vocab_file)
    for name, limit in (("DROP", None), ("SQuAD", 50), ("NewsQA", 50)):
        records = raw_records(mrqa_files[name], limit)
        starts = {qa["qid"]: qa["detected_answers"][0]["char_spans"][0][0] for item in records for qa in item["qas"]}
        examples = read_mrqa(write_mrqa(tmp_path / f"{name}.jsonl", records), answer_end="char_span")
        windows = featurize_examples(examples, tokenizer, 512, 128, 64, training=True)
        exact, reasons = set(), {}
        for window in windows:
            if window.start_position:
                example = examples[window.example_index]
                text = span_text(window, example, tokenizer, window.start_position, window.end_position, True)
                if text == example.answer_text:
                    exact.add(window.example_index)
                else:
                    reasons[window.example_index] = why_unmappable(example, tokenizer, starts[example.qas_id])
        assert exact | set(reasons) == set(range(len(examples)))
        unmapped = collections.Counter(r for i, r in reasons.items() if i not in exact)
        print(f"\n{name}: {len(exact)} of {len(examples)} first answers map back exactly; not: {dict(unmapped)}")
        assert None not in unmapped and sum(unmapped.values()) <= 0.01 * len(examples)


def test_first_answer_scores_100_and_the_first_span_nearly(mrqa_examples):
    """The official rules give F1 0 to an answer that normalises to nothing, even against itself: NewsQA
    has 5 ('"@"', '"The', 'a', 'the', ...), so its first answers score F1 100 × 4207/4212. The first span's
    text (what training targets) scores the same, except DROP's "salt tax collectors" (gold "salt-tax
    collectors": EM 0, F1 0.4)."""
    expected = {"SQuAD": (100.0, 100.0), "NewsQA": (100.0, 100 * 4207 / 4212), "DROP": (100.0, 100.0)}
    for name, examples in mrqa_examples.items():
        gold = {e.qas_id: e.answers for e in examples}
        first = mrqa_eval.evaluate(gold, {e.qas_id: e.answers[0] for e in examples})
        assert (first["exact_match"], first["f1"]) == pytest.approx(expected[name])
        spans = mrqa_eval.evaluate(gold, {e.qas_id: e.answer_text for e in examples})
        if name == "DROP":
            expected[name] = (100 * 1502 / 1503, 100 * (1502 + 0.4) / 1503)
        assert (spans["exact_match"], spans["f1"]) == pytest.approx(expected[name])


@pytest.fixture(scope="module")
def newsqa_root(tmp_path_factory, mrqa_files, bert_vocab_file):
    """A tiny pretrained model folder (1 layer: it traces fastest) with BERT's vocabulary, and NewsQA's first
    12 dev contexts as finetuning_data/newsqa/train.jsonl, the next 4 as dev.jsonl."""
    from tests.checkpoint_fixtures import micro_model_folder

    root = tmp_path_factory.mktemp("mrqa_run")
    micro_model_folder(root, bert_vocab_file, step=1, num_layers=1)
    records = raw_records(mrqa_files["NewsQA"], limit=16)
    write_mrqa(root / "finetuning_data" / "newsqa" / "train.jsonl", records[:12])
    write_mrqa(root / "finetuning_data" / "newsqa" / "dev.jsonl", records[12:])
    return root, records[12:]


def run_newsqa(root, *args):
    import run_finetuning

    hparams = {"max_seq_length": 128, "train_batch_size": 8, "eval_batch_size": 64, "max_train_steps": 2,
               "iterations_per_loop": 1, "save_finetuned_models": False}
    return run_finetuning.main(["--model-name", "tiny", "--data-dir", str(root), "--task", "newsqa", *args,
                                "--hparams", json.dumps(hparams)])


def test_tiny_newsqa_run_writes_scores_and_predictions(newsqa_root):
    root, dev_records = newsqa_root
    run_newsqa(root, "--do-predict")
    model_dir = root / "models" / "tiny"
    results = json.loads((model_dir / "results" / "newsqa_results.json").read_text())
    assert results["complete"] and results["primary_metric"] == "f1" and results["num_train_steps"] == 2
    metrics = results["trials"][0]["metrics"]
    assert set(metrics) == {"exact_match", "f1"} and all(0 <= v <= 100 for v in metrics.values())
    qids = {qa["qid"] for item in dev_records for qa in item["qas"]}
    predictions = json.loads((model_dir / "test_predictions" / "trial_1" / "newsqa_dev_predictions.json").read_text())
    assert set(predictions) == qids and all(isinstance(text, str) and text for text in predictions.values())
    scored = json.loads((model_dir / "results" / "newsqa_predictions_trial_1" / "predictions.json").read_text())
    gold = {qa["qid"]: qa["answers"] for item in dev_records for qa in item["qas"]}
    assert scored == predictions and mrqa_eval.evaluate(gold, scored) == pytest.approx(metrics)


def test_a_bad_line_stops_the_run_with_one_line_and_exit_2(newsqa_root, tmp_path, capsys):
    root, _ = newsqa_root
    data = tmp_path / "finetuning_data" / "newsqa"
    shutil.copytree(root / "finetuning_data" / "newsqa", data)
    with open(data / "dev.jsonl", "a", encoding="utf-8") as f:
        f.write('{"context": "cut off\n')
    with pytest.raises(SystemExit) as exit_info:
        run_newsqa(root, "--finetuning-data-dir", str(tmp_path / "finetuning_data"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{data / 'dev.jsonl'}: line 6: malformed JSON" in err[0], err


def test_answerability_labels_are_0_in_every_newsqa_window(mrqa_files, bert_vocab_file):
    """The original reads is_impossible only for SQuAD 2.0, so every MRQA window is labelled answerable
    (the classifier learns nothing it uses: MRQA scoring ignores the null odds). Labelling 1 every window
    without the answer, as this code did before, marked 5,478 of NewsQA dev's 11,458 windows at 512 tokens
    unanswerable."""
    from data.tokenization import load_tokenizer

    tokenizer = load_tokenizer(vocab_file=bert_vocab_file)
    task = get_task("newsqa")
    read = task.read(mrqa_files["NewsQA"].parent.parent, "dev")
    assert read["path"] == mrqa_files["NewsQA"] and len(read["examples"]) == 4212
    features = task.featurize(read, tokenizer, FinetuningConfig.create({}, "small", ["newsqa"]), training=True)
    starts, labels = features["scalars"]["start_positions"], features["scalars"]["is_impossible"]
    assert features["count"] == len(labels) == 11458 and not labels.any()
    assert (starts == 0).sum() == 5478
