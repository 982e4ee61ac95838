"""Fine-tuning on the user's own files (finetune/custom, run_finetuning.py --train-file ... or --task-spec):
the spec's checks and defaults, CSV / TSV / JSON-lines rows, labels in run_glue's sorted order, STS-B's
score normalisation, tagging from column files (NER in IOB2, BIOES and BILOU, a tag set without spans),
bad input as one line naming file and line (exit 2, --skip-bad-rows respected), and tiny end-to-end runs
(results JSON and finetuning_info.json with the labels, test predictions). Real-data tier: GLUE's SST-2,
MRPC and STS-B and CoNLL-2000 rewritten with other field names and formats fine-tune as custom tasks,
and a custom task on MRPC's and SST-2's rows scores (and trains) exactly as the built-in task."""
import csv
import json
import re
import shutil

import numpy as np
import pytest

from common.errors import InputError
from configs.finetuning_config import FinetuningConfig
from finetune.bad_rows import BadRows
from finetune.custom import spec as spec_lib
from finetune.custom.task import make_task, sort_labels
from finetune.registry import FAMILIES, task_names
from tests.helpers import MICRO_MODEL, SPECIALS

BUILTIN = task_names() + list(FAMILIES)
QUICK = {"max_train_steps": 3, "iterations_per_loop": 1, "train_batch_size": 4, "eval_batch_size": 16,
         "max_seq_length": 32}


def write_csv(path, header, rows, delimiter=","):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_columns(path, sentences):
    """Sentences of token lines (each a list of fields), a blank line after each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\n".join(" ".join(f) for f in s) + "\n\n" for s in sentences), encoding="utf-8")
    return path


def task_of(tmp_path, train, dev, test=None, **fields):
    spec = spec_lib.from_flags("my_task", train, dev, test, builtin_names=BUILTIN, **fields)
    return make_task(spec)


def one_line_error(call):
    with pytest.raises(InputError) as error:
        call()
    message = str(error.value)
    assert len(message.splitlines()) == 1, message
    return message


# ---------------------------------------------------------------- the spec
def test_spec_defaults_and_checks(tmp_path):
    train = write_csv(tmp_path / "train.csv", ["sentence", "label"], [["a", "x"]])
    spec = spec_lib.from_flags("my_task", train, train, builtin_names=BUILTIN)
    assert spec.task_type == "classification" and spec.text_fields is None and spec.file_format is None
    conll = write_columns(tmp_path / "train.conll", [[["a", "O"]]])
    assert spec_lib.from_flags("ner", conll, conll, builtin_names=BUILTIN).task_type == "tagging"
    assert spec_lib.file_format("x/dev.jsonl.gz") == "jsonl" and spec_lib.file_format("a.TSV") == "tsv"
    cases = [
        (dict(name="mrpc"), "'mrpc' is a built-in task, which reads its own files; give your task another name (e.g. my_mrpc)"),
        (dict(name="my task"), "a task name is letters, digits"),
        (dict(name="mrqa"), "is a built-in task"),
        (dict(dev_file=tmp_path / "nope.csv"), "--dev-file " + str(tmp_path / "nope.csv") + ": no such file"),
        (dict(train_file=write_csv(tmp_path / "train.txt", ["a"], []), task_type="classification"),
         "cannot tell the format from the name; name it .csv, .tsv or .jsonl"),
        (dict(text_fields="a,b,c"), "one or two text fields"),
        (dict(text_fields="a,,b"), "an empty name"),
        (dict(task_type="regression", label_names="a,b"), "only a classification task takes its labels' order"),
        (dict(label_names="a,a"), "name two or more labels, each once"),
        (dict(task_type="regression", score_range="5,0"), "MIN < MAX"),
        (dict(score_range="0,5"), "only a regression task has a score range"),
        (dict(train_file=conll, dev_file=conll, text_fields="word"), "column numbers from 0"),
        (dict(train_file=conll, dev_file=conll, label_field="0"), "the tag column is the word column"),
        (dict(train_file=write_jsonl(tmp_path / "t.jsonl", [{}]), task_type="tagging"), "not JSON lines"),
    ]
    for change, fragment in cases:
        values = {"name": "my_task", "train_file": train, "dev_file": train, **change}
        message = one_line_error(lambda: spec_lib.from_flags(builtin_names=BUILTIN, **values))
        assert fragment in message, (change, message)
    assert "needs --train-file and --dev-file" in one_line_error(
        lambda: spec_lib.from_flags("t", train, None, builtin_names=BUILTIN))


def test_spec_file_paths_are_relative_to_it_and_its_keys_are_checked(tmp_path):
    write_csv(tmp_path / "data" / "train.csv", ["q", "s", "y"], [["a", "b", "1"]])
    path = tmp_path / "data" / "spec.json"
    path.write_text(json.dumps({"name": "pairs", "train_file": "train.csv", "dev_file": "train.csv",
                                "text_fields": ["q", "s"], "label_field": "y", "unordered_pairs": True}))
    spec, = spec_lib.read_spec_file(path, BUILTIN)
    assert spec.train_file == tmp_path / "data" / "train.csv" and spec.text_fields == ("q", "s")
    assert spec.unordered_pairs and spec.to_dict()["train_file"] == str(tmp_path / "data" / "train.csv")
    path.write_text(json.dumps({"name": "pairs", "train_file": "train.csv", "dev_file": "train.csv", "lables": []}))
    assert "unknown key(s) lables" in one_line_error(lambda: spec_lib.read_spec_file(path, BUILTIN))
    path.write_text("{")
    assert "not JSON" in one_line_error(lambda: spec_lib.read_spec_file(path, BUILTIN))


# ---------------------------------------------------------------- classification and regression rows
def test_default_text_fields_are_run_glues(tmp_path):
    """sentence1 and sentence2 when both are there, else sentence, else text (the label field: label)."""
    for header, expected in ((["id", "sentence1", "sentence2", "label"], ("sentence1", "sentence2")),
                             (["text", "sentence", "label"], ("sentence",)), (["label", "text"], ("text",))):
        rows = [[f"{name} {number}" if name != "label" else "xy"[number] for name in header] for number in (0, 1)]
        train = write_csv(tmp_path / "train.csv", header, rows)
        task = task_of(tmp_path, train, train)
        examples = task.read(None, "train")
        assert task.text_fields == expected and task.is_pair == (len(expected) == 2)
        assert (examples[1].text_a, examples[1].label) == (f"{expected[0]} 1", "y")
    train = write_csv(tmp_path / "train.csv", ["question", "passage", "label"], [["a", "b", "x"]])
    message = one_line_error(lambda: task_of(tmp_path, train, train).read(None, "train"))
    assert "no text field: neither sentence1 and sentence2, nor sentence, nor text (the file has question, " \
           "passage, label); name yours with --text-fields, e.g. --text-fields question,passage" in message


def test_labels_sorted_as_run_glue_and_label_names_order(tmp_path):
    assert sort_labels(["b", "a", "c", "a"]) == ["a", "b", "c"]
    assert sort_labels(["10", "2", "-1"]) == ["-1", "2", "10"] and sort_labels(["10", "2", "x"]) == ["10", "2", "x"]
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": "a", "label": 10}, {"text": "b", "label": 2},
                                                   {"text": "c", "label": True}])
    assert task_of(tmp_path, train, train).label_names == ["10", "2", "true"]
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": "a", "label": 10}, {"text": "b", "label": 2.0}])
    task = task_of(tmp_path, train, train)
    assert task.label_names == ["2", "10"] and task.kind == "classification" and task.num_outputs == 2
    task = task_of(tmp_path, train, train, label_names="10,2,7")
    assert task.label_names == ["10", "2", "7"] and task.num_outputs == 3
    assert "label '2' is not one of --label-names (10, 7)" in one_line_error(
        lambda: task_of(tmp_path, train, train, label_names="10,7").read(None, "train"))


def test_regression_uses_sts_normalisation_and_the_training_range(tmp_path):
    rows = [["a", "b", "0.0"], ["c", "d", "5"], ["e", "f", "2.5"]]
    train = write_csv(tmp_path / "train.csv", ["sentence1", "sentence2", "similarity"], rows)
    task = task_of(tmp_path, train, train, task_type="regression", label_field="similarity")
    examples = task.read(None, "train")
    assert task.score_range == (0.0, 5.0) and task.label_names == [] and task.num_outputs == 1
    assert task.targets(examples).tolist() == [0.0, 1.0, 0.5]  # as STS-B's (score - 0) / 5
    assert task.predictions(np.array([[0.2], [1.0]])).tolist() == pytest.approx([1.0, 5.0])
    task = task_of(tmp_path, train, train, task_type="regression", label_field="similarity", score_range="1,10")
    examples = task.read(None, "train")
    assert task.targets(examples).tolist() == pytest.approx([-0.1, 0.4, 0.15])
    same = write_csv(tmp_path / "same.csv", ["text", "label"], [["a", "3"], ["b", "3"]])
    assert "--score-range" in one_line_error(lambda: task_of(tmp_path, same, same, task_type="regression").read(None, "train"))


@pytest.mark.parametrize("name, content, split, fragment", [
    ("train.csv", "sentence,label\nfine,a\n,b\n", "train", "train.csv: line 3: the text in 'sentence' is empty"),
    ("train.csv", "sentence,label\nfine,a\nbad,b,c\nok,b\n", "train",
     "train.csv: line 3 has 3 CSV fields, the header has 2 (sentence, label)"),
    ("train.csv", 'sentence,label\nfine,a\n"bad"x,b\nok,b\n', "train", "train.csv: line 3: not a CSV row"),
    ("train.csv", "text,y\nfine,a\n", "train",
     "train.csv: no field label (the file has text, y); name the right one with --label-field"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n{"sentence": "b", "label": "y"\n', "train",
     "train.jsonl: line 2: not JSON"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n["b", "y"]\n', "train", "train.jsonl: line 2: a JSON list, not an object"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n{"label": "y"}\n', "train",
     "train.jsonl: line 2: no field 'sentence' (the row has label)"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n{"sentence": 3, "label": "y"}\n', "train",
     "field 'sentence' is a JSON int, not text"),
    ("dev.csv", "sentence,label\nfine,a\nnew,c\n", "dev",
     "dev.csv: line 3: label 'c' is not among the training file's labels (a, b), so the model cannot predict it"),
    ("dev.tsv", "sentence\tlabel\nfine\ta\n", "dev", None),  # TSV: GLUE's way, no quoting
    ("train.csv", "", "train", "train.csv: the file is empty or its first line is blank"),
    ("train.csv", b"sentence,label\nfine,a\nsa\xefd,b\n", "train", "train.csv: line 3: not UTF-8"),
])
def test_bad_rows_are_one_line_naming_file_and_line(tmp_path, name, content, split, fragment):
    train = write_csv(tmp_path / "ok" / "train.csv", ["sentence", "label"], [["one", "a"], ["two", "b"]])
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    task = task_of(tmp_path, path if split == "train" else train, path if split == "dev" else train)
    if fragment is None:
        assert [e.label for e in task.read(None, split)] == ["a"]
        return
    message = one_line_error(lambda: task.read(None, split))
    assert fragment in message and str(path) in message, message


def test_regression_score_not_a_number_and_skip_bad_rows(tmp_path):
    train = write_csv(tmp_path / "train.csv", ["text", "score"],
                      [["a", "1.5"], ["b", "high"], ["c", "nan"], ["d", "2"], ["e", ""]])
    task = task_of(tmp_path, train, train, task_type="regression", label_field="score")
    assert "train.csv: line 3: score 'high' is not a number" in one_line_error(lambda: task.read(None, "train"))
    bad_rows, said = BadRows(skip=True), []
    examples = task.read(None, "train", bad_rows)
    bad_rows.report(said.append)
    assert [e.label for e in examples] == [1.5, 2.0]
    assert said == [f"skipped 3 malformed rows of {train}: lines 3, 4, 6"]


def test_test_rows_need_no_label_and_keep_their_ids(tmp_path):
    train = write_csv(tmp_path / "train.csv", ["idx", "sentence", "label"], [["7", "a", "x"], ["9", "b", "y"]])
    test = write_jsonl(tmp_path / "test.jsonl", [{"sentence": "c"}, {"sentence": "d"}])
    task = task_of(tmp_path, train, train, test)
    assert [e.guid for e in task.read(None, "train")] == ["7", "9"]
    assert [(e.guid, e.text_a, e.label) for e in task.read(None, "test")] == [("0", "c", None), ("1", "d", None)]
    assert "no test file; pass it with --test-file" in one_line_error(
        lambda: task_of(tmp_path, train, train).read(None, "test"))


# ---------------------------------------------------------------- tagging
NER = [[["EU", "NNP", "B-NP", "B-ORG"], ["rejects", "VBZ", "B-VP", "O"], ["German", "JJ", "B-NP", "B-MISC"],
        ["call", "NN", "I-NP", "O"]],
       [["Peter", "NNP", "B-NP", "B-PER"], ["Blackburn", "NNP", "I-NP", "I-PER"]]]


def test_ner_columns_iob2_labels_over_the_training_types(tmp_path):
    train = write_columns(tmp_path / "train.txt", NER)
    dev = write_columns(tmp_path / "dev.txt", [[["Peter", "NNP", "B-NP", "B-PER"], ["EU", "NNP", "B-NP", "B-ORG"]]])
    task = task_of(tmp_path, train, dev, text_fields="0", label_field="3")
    sentences = task.read(None, "train")
    assert sentences[0].words == ("EU", "rejects", "German", "call") and sentences[0].tags[:3] == ("B-ORG", "O", "B-MISC")
    assert task.span_labels and task.output_scheme == "IOB2" and task.primary_metric == "f1"
    assert task.label_names == sorted(["O"] + [f"{p}-{t}" for p in "BIES" for t in ("MISC", "ORG", "PER")])
    assert task.read(None, "dev")[0].tags == ("B-PER", "B-ORG")
    # The chunk column instead: a default of the last column would have read the NER tags.
    chunks = task_of(tmp_path, train, train, label_field="2")
    chunks.read(None, "train")
    assert chunks.learnt()["types"] == ("NP", "VP")


def test_bioes_and_bilou_files_are_read_as_bioes(tmp_path):
    bilou = [[["New", "B-LOC"], ["York", "L-LOC"], ["is", "O"], ["big", "U-ADJ"]]]
    task = task_of(tmp_path, write_columns(tmp_path / "train.txt", bilou), write_columns(tmp_path / "dev.txt", bilou))
    assert task.read(None, "train")[0].tags == ("B-LOC", "E-LOC", "O", "S-ADJ") and task.output_scheme == "BIOES"
    assert task.read(None, "dev")[0].tags == ("B-LOC", "E-LOC", "O", "S-ADJ")


def test_a_tag_set_without_spans_is_learnt_tag_for_tag_and_scored_by_accuracy(tmp_path, tokenizer):
    pos = [[["EU", "NNP"], ["rejects", "VBZ"], ["German", "JJ"]], [["call", "NN"]]]
    task = task_of(tmp_path, write_columns(tmp_path / "train.txt", pos), write_columns(tmp_path / "dev.txt", pos))
    sentences = task.read(None, "train")
    assert not task.span_labels and task.label_names == ["JJ", "NN", "NNP", "VBZ"] and task.primary_metric == "accuracy"
    config = FinetuningConfig.create({"max_seq_length": 16}, "small", ["custom"])
    features = task.featurize(task.read(None, "dev"), tokenizer, config)
    gold = task.gold_tags(features)
    assert gold == [["NNP", "VBZ", "JJ"], ["NN"]]
    outputs = np.zeros((2, 16, 4))
    outputs[:, :, 2] = 1  # NNP everywhere: 1 of 4 words right
    scores, extra = task.evaluate(features, outputs, config)
    assert scores == {"accuracy": 25.0} and extra["label_mapping"] == {"JJ": 0, "NN": 1, "NNP": 2, "VBZ": 3}


@pytest.mark.parametrize("split, sentences, fragment", [
    ("dev", [[["Peter", "B-PER"], ["Smith", "I-PER"], ["went", "O", "x"]]], "dev.txt: line 3 has 3 fields, the file's first token line has 2"),
    ("dev", [[["Paris", "B-LOC"]]], "dev.txt: line 1: tag 'B-LOC': type 'LOC' is not among the training file's (PER)"),
    ("dev", [[["Paris", "LOC"]]], "dev.txt: line 1: tag 'LOC' is neither O nor a span tag"),
    ("train", [[["Peter", "B-PER"]], [["Paris", "LOC"], ["x", "O"]]], "train.txt: line 3: tag 'LOC' is neither O nor"),
    ("train", [[["Peter"], ["Smith"]]], "train.txt: line 1 has a word but no chunk tag"),
])
def test_bad_tag_lines_are_one_line_naming_file_and_line(tmp_path, split, sentences, fragment):
    good = write_columns(tmp_path / "good.txt", [[["Peter", "B-PER"], ["Smith", "I-PER"], ["x", "O"]]])
    path = write_columns(tmp_path / f"{split}.txt", sentences)
    task = task_of(tmp_path, path if split == "train" else good, path if split == "dev" else good)
    message = one_line_error(lambda: task.read(None, split))
    assert fragment in message and str(path) in message, message
    if split == "dev" and "fields" not in fragment:  # skipped with --skip-bad-rows, counted
        with pytest.raises(InputError, match="no sentences left after skipping 1 malformed ones"):
            task.read(None, split, BadRows(skip=True))


# ---------------------------------------------------------------- end to end, tiny
WORDS = ("good great fine nice bad awful poor sad the a film movie plot was is very quite not really "
         "peter paris smith london went to").split()


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    chars = sorted(set("".join(WORDS)))
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    words = [word for word in WORDS if word not in chars]
    path.write_text("\n".join(SPECIALS + chars + ["##" + c for c in chars] + words) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    from data.tokenization import load_tokenizer

    return load_tokenizer(vocab_file=vocab_file)


def make_model_folder(root, vocab_file, name="tiny"):
    """A pretrained-model folder as run_pretraining.py writes it: config.json, vocab.txt, ckpt-1."""
    import tensorflow as tf

    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from storage.model_folder import model_trackable

    folder = root / "models" / name
    folder.mkdir(parents=True)
    config = PretrainingConfig.create({"model_size": "electra_tiny", "model_hparam_overrides": MICRO_MODEL,
                                       "model_name": name, "vocab_size": len(vocab_file.read_text().split())})
    config.save(folder / "config.json")
    shutil.copyfile(vocab_file, folder / "vocab.txt")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model_trackable(build_pretrainer(config))), str(folder),
                               max_to_keep=1, checkpoint_name="ckpt").save(checkpoint_number=1)
    return folder


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, vocab_file):
    root = tmp_path_factory.mktemp("custom_run")
    make_model_folder(root, vocab_file)
    return root


def sentiment_rows(count, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for number in range(count):
        label = ["negative", "neutral", "positive"][number % 3]
        word = {"negative": "awful", "neutral": "fine", "positive": "great"}[label]
        rows.append([f"the {rng.choice(['film', 'movie', 'plot'])} was {word}", label])
    return rows


def run(data_dir, *args, hparams=None):
    import run_finetuning

    return run_finetuning.main(["--model-name", "tiny", "--data-dir", str(data_dir), *args,
                                "--hparams", json.dumps({**QUICK, **(hparams or {})})])


def test_classification_from_csv_end_to_end(data_dir, tmp_path, capsys):
    from finetune.saved import load_finetuned_model, read_info

    write_csv(tmp_path / "train.csv", ["review", "stars"], sentiment_rows(24, 0))
    write_jsonl(tmp_path / "dev.jsonl", [{"review": t, "stars": y} for t, y in sentiment_rows(9, 1)])
    write_csv(tmp_path / "test.tsv", ["id", "review"], [["a7", "the plot was great"], ["b9", "the film was awful"]],
              delimiter="\t")
    run(data_dir, "--task", "reviews", "--train-file", str(tmp_path / "train.csv"), "--dev-file",
        str(tmp_path / "dev.jsonl"), "--test-file", str(tmp_path / "test.tsv"), "--text-fields", "review",
        "--label-field", "stars", "--do-predict")
    printed = capsys.readouterr().out
    model_dir = data_dir / "models" / "tiny"
    results = json.loads((model_dir / "results" / "reviews_results.json").read_text())
    assert results["complete"] and results["primary_metric"] == "accuracy" and results["num_train_steps"] == 3
    assert results["label_names"] == ["negative", "neutral", "positive"]
    assert set(results["trials"][0]["metrics"]) == {"accuracy", "macro_f1"}  # MCC only for two classes
    assert results["task_spec"]["text_fields"] == ["review"] and results["task_spec"]["label_field"] == "stars"
    assert results["config"]["max_seq_length"] == 32 and results["config"]["num_train_epochs"] == 3.0
    assert "reviews  accuracy" in printed
    lines = (model_dir / "test_predictions" / "trial_1" / "reviews_test.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and [line.split("\t")[0] for line in lines[1:]] == ["a7", "b9"]
    assert {line.split("\t")[1] for line in lines[1:]} <= {"negative", "neutral", "positive"}
    folder = model_dir / "finetuning_models" / "reviews_model_1"
    info = read_info(folder)
    assert info.label_names == ["negative", "neutral", "positive"] and info.kind == "classification"
    assert info.text_fields == ["review"] and not info.is_pair
    model, _ = load_finetuned_model(folder)
    assert tuple(model({"input_ids": np.array([[2, 3]]), "input_mask": np.ones((1, 2)),
                        "segment_ids": np.zeros((1, 2))}).shape) == (1, 3)


def test_recipe_ignores_the_users_task_name(data_dir, tmp_path):
    """A name holding "qa" (or "sts", "rte", "chunk") must not pick SQuAD's (or another task's) recipe."""
    import run_finetuning

    write_csv(tmp_path / "train.csv", ["sentence", "label"], sentiment_rows(6, 0))
    args = run_finetuning.parse_args(["--model-name", "tiny", "--data-dir", str(data_dir), "--task", "qa_intents",
                                      "--train-file", str(tmp_path / "train.csv"), "--dev-file",
                                      str(tmp_path / "train.csv")])
    _, config, tasks, _ = run_finetuning.prepare(args)
    assert tasks[0].name == "qa_intents" and (config.max_seq_length, config.num_train_epochs) == (128, 3.0)


def test_regression_and_tagging_end_to_end(data_dir, tmp_path, capsys):
    from finetune.saved import read_info

    rng = np.random.default_rng(0)
    records = [{"a": f"the film was {w}", "b": f"the plot was {v}", "score": float(s)}
               for w, v, s in zip(rng.choice(WORDS[:8], 20), rng.choice(WORDS[:8], 20), rng.integers(1, 6, 20))]
    write_jsonl(tmp_path / "sim.jsonl", records)
    run(data_dir, "--task", "sim", "--train-file", str(tmp_path / "sim.jsonl"), "--dev-file", str(tmp_path / "sim.jsonl"),
        "--text-fields", "a,b", "--label-field", "score", "--task-type", "regression", "--do-predict",
        "--test-file", str(tmp_path / "sim.jsonl"))
    model_dir = data_dir / "models" / "tiny"
    results = json.loads((model_dir / "results" / "sim_results.json").read_text())
    assert set(results["trials"][0]["metrics"]) == {"spearman", "pearson"} and results["label_names"] == []
    assert results["primary_metric"] == "spearman"
    info = read_info(model_dir / "finetuning_models" / "sim_model_1")
    assert info.kind == "regression" and info.score_range == [1.0, 5.0] and info.is_pair
    assert info.text_fields == ["a", "b"]
    scores = [float(line.split("\t")[1]) for line in
              (model_dir / "test_predictions" / "trial_1" / "sim_test.tsv").read_text().splitlines()[1:]]
    assert len(scores) == 20

    sentences = [[["peter", "X", "B-PER"], ["smith", "X", "I-PER"], ["went", "X", "O"], ["to", "X", "O"],
                  ["london", "X", "S-LOC"]], [["paris", "X", "S-LOC"]]] * 4
    write_columns(tmp_path / "ner.txt", sentences)
    write_columns(tmp_path / "ner_test.txt", [[["peter"], ["went"], ["to"], ["paris"]]])
    run(data_dir, "--task", "ner", "--train-file", str(tmp_path / "ner.txt"), "--dev-file", str(tmp_path / "ner.txt"),
        "--test-file", str(tmp_path / "ner_test.txt"), "--do-predict")
    results = json.loads((model_dir / "results" / "ner_results.json").read_text())
    assert set(results["trials"][0]["metrics"]) == {"precision", "recall", "f1"} and results["primary_metric"] == "f1"
    assert results["label_names"] == ["B-LOC", "B-PER", "E-LOC", "E-PER", "I-LOC", "I-PER", "O", "S-LOC", "S-PER"]
    info = read_info(model_dir / "finetuning_models" / "ner_model_1")
    assert info.kind == "tagging" and info.tag_scheme == "span" and info.label_names == results["label_names"]
    lines = (model_dir / "test_predictions" / "trial_1" / "ner_test.txt").read_text().split("\n")
    assert [line.split()[0] for line in lines[:4]] == ["peter", "went", "to", "paris"] and lines[4] == ""
    assert all(re.fullmatch(r"O|[BIES]-(PER|LOC)", line.split()[1]) for line in lines[:4])  # BIOES, as the file


@pytest.mark.parametrize("args, fragment", [
    (["--task", "mrpc", "--train-file", "{train}", "--dev-file", "{train}"], "'mrpc' is a built-in task, which"),
    (["--task", "mine", "--train-file", "{train}"], "needs --train-file and --dev-file"),
    (["--task", "mine", "--train-file", "{train}", "--dev-file", "{dev}", "--label-field", "y"],
     "train.csv: no field y (the file has sentence, label); name the right one with --label-field"),
    (["--task", "mine", "--train-file", "{train}", "--dev-file", "{dev}"],
     "dev.csv: line 3: label 'maybe' is not among the training file's labels"),
    (["--task", "mine", "--train-file", "{train}", "--dev-file", "{train}", "--do-predict"],
     "task mine: no test file; pass it with --test-file"),
    (["--task", "mine,other", "--train-file", "{train}", "--dev-file", "{train}"], "describe several with --task-spec"),
    (["--task", "mine", "--task-spec", "{spec}", "--train-file", "{train}"], "either by the flags or by the spec"),
    (["--task", "elsewhere", "--task-spec", "{spec}"], "neither a built-in task nor in --task-spec"),
])
def test_command_line_faults_are_one_line_exit_2(data_dir, tmp_path, capsys, args, fragment):
    import run_finetuning

    paths = {"train": write_csv(tmp_path / "train.csv", ["sentence", "label"], sentiment_rows(6, 0)),
             "dev": write_csv(tmp_path / "dev.csv", ["sentence", "label"], [["fine", "neutral"], ["so so", "maybe"]]),
             "spec": tmp_path / "spec.json"}
    paths["spec"].write_text(json.dumps({"name": "mine", "train_file": "train.csv", "dev_file": "train.csv"}))
    with pytest.raises(SystemExit) as exit_info:
        run_finetuning.main(["--model-name", "tiny", "--data-dir", str(data_dir),
                             *[a.format(**paths) for a in args]])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert not (data_dir / "models" / "tiny" / "results" / "mine_results.json").exists()
