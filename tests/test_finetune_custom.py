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
        (dict(name="mrpc"), "'mrpc' is a built-in task, which reads its own files; give your task another name "
                            "(e.g. my_mrpc)"),
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
    task = task_of(tmp_path, same, same, task_type="regression")
    assert "--score-range" in one_line_error(lambda: task.read(None, "train"))


@pytest.mark.parametrize("name, content, split, fragment", [
    ("train.csv", "sentence,label\nfine,a\n,b\n", "train", "train.csv: line 3: the text in 'sentence' is empty"),
    ("train.csv", "sentence,label\nfine,a\nbad,b,c\nok,b\n", "train",
     "train.csv: line 3 has 3 CSV fields, the header has 2 (sentence, label)"),
    ("train.csv", 'sentence,label\nfine,a\n"bad"x,b\nok,b\n', "train", "train.csv: line 3: not a CSV row"),
    ("train.csv", "text,y\nfine,a\n", "train",
     "train.csv: no field label (the file has text, y); name the right one with --label-field"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n{"sentence": "b", "label": "y"\n', "train",
     "train.jsonl: line 2: not JSON"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n["b", "y"]\n', "train",
     "train.jsonl: line 2: a JSON list, not an object"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n{"label": "y"}\n', "train",
     "train.jsonl: line 2: field 'sentence' is missing (the row has label)"),
    ("train.jsonl", '{"sentence": "a", "label": "x"}\n{"sentence": null, "label": "y"}\n', "train",
     "train.jsonl: line 2: field 'sentence' is null"),
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
    assert sentences[0].words == ("EU", "rejects", "German", "call")
    assert sentences[0].tags[:3] == ("B-ORG", "O", "B-MISC")
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
    task.read(None, "train")
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
    ("dev", [[["Peter", "B-PER"], ["Smith", "I-PER"], ["went", "O", "x"]]],
     "dev.txt: line 3 has 3 fields, the file's first token line has 2"),
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


def make_model_folder(root, vocab_file):
    """models/tiny as run_pretraining.py writes it: config.json, vocab.txt, ckpt-1 (one layer: it traces in
    about half the time of two, and the tests' claims hold for any depth). Its weights are the config
    seed's, as run_pretraining.py's are, not whatever ran before in the process."""
    import keras
    import tensorflow as tf

    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from storage.model_folder import model_trackable

    folder = root / "models" / "tiny"
    folder.mkdir(parents=True)
    config = PretrainingConfig.create({"model_size": "electra_tiny",
                                       "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
                                       "model_name": "tiny", "vocab_size": len(vocab_file.read_text().split())})
    config.save(folder / "config.json")
    shutil.copyfile(vocab_file, folder / "vocab.txt")
    keras.utils.set_random_seed(config.seed)
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
        "--label-field", "stars", "--do-predict", "--matmul-dtype", "bfloat16")  # its saved model loads in float32
    printed = capsys.readouterr().out
    model_dir = data_dir / "models" / "tiny"
    results = json.loads((model_dir / "results" / "reviews_results.json").read_text())
    assert results["complete"] and results["primary_metric"] == "accuracy" and results["num_train_steps"] == 3
    assert results["label_names"] == ["negative", "neutral", "positive"]
    assert set(results["trials"][0]["metrics"]) == {"accuracy", "macro_f1"}  # MCC only for two classes
    assert results["task_spec"]["text_fields"] == ["review"] and results["task_spec"]["label_field"] == "stars"
    assert results["config"]["max_seq_length"] == 32 and results["config"]["num_train_epochs"] == 3.0
    assert results["config"]["matmul_dtype"] == "bfloat16"
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
    _, [(tasks, config)], _ = run_finetuning.prepare(args)
    assert tasks[0].name == "qa_intents" and (config.max_seq_length, config.num_train_epochs) == (128, 3.0)


def test_regression_and_tagging_end_to_end(data_dir, tmp_path, capsys):
    from finetune.saved import read_info

    rng = np.random.default_rng(0)
    records = [{"a": f"the film was {w}", "b": f"the plot was {v}", "score": float(s)}
               for w, v, s in zip(rng.choice(WORDS[:8], 20), rng.choice(WORDS[:8], 20), rng.integers(1, 6, 20))]
    write_jsonl(tmp_path / "sim.jsonl", records)
    run(data_dir, "--task", "sim", "--train-file", str(tmp_path / "sim.jsonl"),
        "--dev-file", str(tmp_path / "sim.jsonl"),
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
     "--do-predict for task mine: no --test-file; pass the rows to predict with --test-file"),
    (["--task", "mine,other", "--train-file", "{train}", "--dev-file", "{train}"], "describe several with --task-spec"),
    (["--task", "mine", "--task-spec", "{spec}", "--train-file", "{train}"], "either by the flags or by the spec"),
    (["--task", "elsewhere", "--task-spec", "{spec}"], "neither a built-in task nor in --task-spec"),
    (["--task", "mine", "--train-file", "{train}", "--dev-file", "{train}", "--matmul-dtype", "float16"],
     "fine-tuning config: matmul_dtype 'float16' is not one of float32, bfloat16"),
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


# ---------------------------------------------------------------- real data: GLUE and CoNLL-2000 rewritten
REAL = {"max_train_steps": 6, "iterations_per_loop": 3, "train_batch_size": 8, "eval_batch_size": 64,
        "max_seq_length": 64}


@pytest.fixture(scope="module")
def real_dir(tmp_path_factory, shared_data, bert_vocab_file):
    """A 1-layer model with BERT's vocabulary (as run_pretraining.py writes it) and slices of the shared
    GLUE and CoNLL-2000 files: in GLUE's and CoNLL's own layouts under finetuning_data/ for the built-in
    tasks, and rewritten by the tests for the custom ones (what they compare holds for any depth)."""
    root = tmp_path_factory.mktemp("custom_real")
    make_model_folder(root, bert_vocab_file)
    return root


def glue_rows(shared_data, folder, split, count):
    """The first `count` rows of a GLUE file as {column: value} (GLUE's reader: tabs, no quoting)."""
    from finetune.glue import read_tsv_rows

    rows = read_tsv_rows(shared_data / "glue" / folder / f"{split}.tsv")
    header = [cell.strip() for cell in rows[0]]
    return header, [dict(zip(header, row)) for row in rows[1:count + 1]]


def write_glue_slice(root, shared_data, folder, counts):
    """finetuning_data/<folder>/{train,dev}.tsv: the first rows of GLUE's files, as they are."""
    for split, count in counts.items():
        lines = (shared_data / "glue" / folder / f"{split}.tsv").read_text(encoding="utf-8-sig").split("\n")
        path = root / "finetuning_data" / folder / f"{split}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines[:count + 1]) + "\n", encoding="utf-8")


def real_run(root, *args, hparams=None, model="tiny"):
    import run_finetuning

    run_finetuning.main(["--model-name", model, "--data-dir", str(root), *args,
                         "--hparams", json.dumps({**REAL, **(hparams or {})})])
    task = args[args.index("--task") + 1].split(",")[-1]  # the last task's results
    return json.loads((root / "models" / model / "results" / f"{task}_results.json").read_text())


def trained_weights(root, task, model="tiny"):
    """{variable path, the head's scope made neutral: value} of a fine-tuned model folder's checkpoint."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(root / "models" / model / "finetuning_models" / f"{task}_model_1" / "ckpt"))
    return {name.replace(f"task_specific.S{task}.", "task_specific.S<head>."): reader.get_tensor(name)
            for name in reader.get_variable_to_shape_map() if name.startswith("model/")}


def conll_sentences(path, count=None, need_types=()):
    """The first `count` sentences of a CoNLL-2000 file (lists of `word POS tag` lines), plus the first
    sentence holding each chunk type of `need_types` not among them."""
    sentences = [block.split("\n") for block in path.read_text().strip().split("\n\n")]
    chosen = sentences[:count]
    for kind in need_types:
        if not any(line.endswith("-" + kind) for s in chosen for line in s):
            chosen.append(next(s for s in sentences if any(line.endswith("-" + kind) for line in s)))
    return chosen


def test_glue_and_conll2000_rewritten_with_other_names_fine_tune(real_dir, shared_data, tmp_path):
    """One --task-spec run of four tasks (mixed batches, as several tasks train): SST-2 as CSV (review,
    sentiment) with a test file, MRPC as JSON lines (first, second, paraphrase: JSON numbers), STS-B as
    TSV (left, right, similarity: regression), CoNLL-2000 as `number word chunk POS` columns (.conll, the
    word and tag named by number; its test file `number word` alone, predicted without gold)."""
    from finetune.saved import read_info

    _, sst = glue_rows(shared_data, "SST-2", "train", 72)
    write_csv(tmp_path / "sst_train.csv", ["sentiment", "review"], [[r["label"], r["sentence"]] for r in sst[:64]])
    _, sst_dev = glue_rows(shared_data, "SST-2", "dev", 32)
    write_csv(tmp_path / "sst_dev.csv", ["review", "sentiment"], [[r["sentence"], r["label"]] for r in sst_dev])
    write_csv(tmp_path / "sst_test.csv", ["review"], [[r["sentence"]] for r in sst[64:]])
    scores = {}
    for split, count in (("train", 64), ("dev", 32)):
        _, rows = glue_rows(shared_data, "MRPC", split, count)
        write_jsonl(tmp_path / f"mrpc_{split}.jsonl", [{"first": r["#1 String"], "second": r["#2 String"],
                                                        "paraphrase": int(r["Quality"])} for r in rows])
        _, rows = glue_rows(shared_data, "STS-B", split, count)
        write_csv(tmp_path / f"sts_{split}.tsv", ["left", "right", "similarity"],
                  [[r["sentence1"], r["sentence2"], r["score"]] for r in rows], delimiter="\t")
        scores[split] = [float(r["score"]) for r in rows]

    def rewrite(sentences, with_tags=True):
        return [[[str(i), line.split()[0], *(line.split()[:0:-1] if with_tags else [])] for i, line in enumerate(s)]
                for s in sentences]

    train = conll_sentences(shared_data / "conll2000" / "train.txt", 40)
    dev = conll_sentences(shared_data / "conll2000" / "test.txt", 20)
    write_columns(tmp_path / "train.conll", rewrite(train))
    write_columns(tmp_path / "dev.conll", rewrite(dev))
    write_columns(tmp_path / "test.conll", rewrite(dev[:3], with_tags=False))
    (tmp_path / "spec.json").write_text(json.dumps([
        {"name": "reviews", "train_file": "sst_train.csv", "dev_file": "sst_dev.csv", "test_file": "sst_test.csv",
         "text_fields": "review", "label_field": "sentiment"},
        {"name": "paraphrase", "train_file": "mrpc_train.jsonl", "dev_file": "mrpc_dev.jsonl",
         "text_fields": ["first", "second"], "label_field": "paraphrase"},
        {"name": "similarity", "task_type": "regression", "train_file": "sts_train.tsv", "dev_file": "sts_dev.tsv",
         "text_fields": "left,right", "label_field": "similarity"},
        {"name": "chunks", "train_file": "train.conll", "dev_file": "dev.conll", "test_file": "test.conll",
         "text_fields": [1], "label_field": 2}]))
    real_run(real_dir, "--task", "reviews,paraphrase,similarity,chunks", "--task-spec", str(tmp_path / "spec.json"),
             "--do-predict")
    model_dir = real_dir / "models" / "tiny"
    results = {name: json.loads((model_dir / "results" / f"{name}_results.json").read_text())
               for name in ("reviews", "paraphrase", "similarity", "chunks")}
    classification = {"accuracy", "macro_f1", "mcc"}
    for name, expected in (("reviews", classification), ("paraphrase", classification),
                           ("similarity", {"spearman", "pearson"}), ("chunks", {"precision", "recall", "f1"})):
        assert set(results[name]["trials"][0]["metrics"]) == expected, name
        assert results[name]["tasks_trained_together"] == ["reviews", "paraphrase", "similarity", "chunks"]
    assert results["reviews"]["label_names"] == results["paraphrase"]["label_names"] == ["0", "1"]
    assert results["paraphrase"]["task_spec"]["text_fields"] == ["first", "second"]
    types = sorted({line.split()[-1][2:] for s in train for line in s if line.split()[-1] != "O"})
    assert results["chunks"]["label_names"] == sorted(["O"] + [f"{p}-{t}" for p in "BIES" for t in types])

    lines = (model_dir / "test_predictions" / "trial_1" / "reviews_test.tsv").read_text().splitlines()
    assert len(lines) == 9 and {line.split("\t")[1] for line in lines[1:]} <= {"0", "1"}
    lines = (model_dir / "test_predictions" / "trial_1" / "chunks_test.txt").read_text().split("\n")
    assert [line.split()[0] for line in lines[:3]] == [line.split()[0] for line in dev[0][:3]]
    assert all(len(line.split()) == 2 for line in lines if line)  # word and prediction: no gold in the file
    assert read_info(model_dir / "finetuning_models" / "paraphrase_model_1").is_pair
    info = read_info(model_dir / "finetuning_models" / "similarity_model_1")
    assert info.score_range == [min(scores["train"]), max(scores["train"])] and info.kind == "regression"
    assert read_info(model_dir / "finetuning_models" / "chunks_model_1").tag_scheme == "span"


EQUAL = {"max_train_steps": 36, "iterations_per_loop": 4, "train_batch_size": 8, "eval_batch_size": 64,
         "max_seq_length": 64, "learning_rate": 3e-3}  # enough for MRPC's predictions to vary


def assert_same_weights(root, mine, theirs, model="tiny"):
    weights, reference = trained_weights(root, mine, model), trained_weights(root, theirs, model)
    # every weight of the model (25 at 1 layer, 41 at 2): the embeddings, the encoder layers and the head
    assert weights.keys() == reference.keys() and len(reference) > 20
    assert all(any(part in name for name in reference) for part in ("Sembeddings.", "Slayer_0.", "task_specific."))
    different = [name for name in reference if not np.array_equal(weights[name], reference[name])]
    assert not different, different[:3]


def test_custom_task_equals_the_builtin_one_on_the_same_rows_and_seed(real_dir, shared_data, tmp_path, capsys):
    """MRPC's first 96 training and 64 dev rows, once as `--task mrpc` (GLUE's files) and once as a task of
    CSV files with other column names (--task-spec: unordered_pairs, since the original trains MRPC's pairs
    both ways). Same model folder, seed and recipe: the same dev accuracy and, to the bit, the same trained
    weights (encoder and head), which the 36 updates moved from the pretrained ones. By construction:
    GLUE's featurisation, the labels sorted ("0", "1", the built-in order), the same head and
    initialisation. (Whether 36 updates on 96 rows leave a random model on the majority class depends on
    its initial weights: the weights, not the dev accuracy, are what shows the two runs equal.)"""
    import tensorflow as tf

    write_glue_slice(real_dir, shared_data, "MRPC", {"train": 96, "dev": 64})
    builtin = real_run(real_dir, "--task", "mrpc", hparams=EQUAL)
    for split, count in (("train", 96), ("dev", 64)):
        _, rows = glue_rows(shared_data, "MRPC", split, count)
        write_csv(tmp_path / f"{split}.csv", ["quality", "string_a", "string_b"],
                  [[r["Quality"], r["#1 String"], r["#2 String"]] for r in rows])
    (tmp_path / "mrpc.json").write_text(json.dumps({
        "name": "my_mrpc", "train_file": "train.csv", "dev_file": "dev.csv", "text_fields": ["string_a", "string_b"],
        "label_field": "quality", "unordered_pairs": True}))
    custom = real_run(real_dir, "--task", "my_mrpc", "--task-spec", str(tmp_path / "mrpc.json"), hparams=EQUAL)
    assert custom["num_train_steps"] == builtin["num_train_steps"] == EQUAL["max_train_steps"]
    mine, theirs = custom["trials"][0]["metrics"], builtin["trials"][0]["metrics"]
    assert mine["accuracy"] == theirs["accuracy"]  # MRPC's own metrics add F1, a custom task's macro F1 and MCC
    assert_same_weights(real_dir, "my_mrpc", "mrpc")
    table = "electra.Sembeddings.Sword_embeddings"
    pretrained = tf.train.load_checkpoint(str(real_dir / "models" / "tiny" / "ckpt-1")).get_tensor(
        f"model/weights_by_path/{table}/.ATTRIBUTES/VARIABLE_VALUE")
    trained = next(value for name, value in trained_weights(real_dir, "mrpc").items() if table in name)
    assert trained.shape == pretrained.shape and not np.array_equal(trained, pretrained)
    with capsys.disabled():
        print(f"\nmrpc: built-in {theirs} | custom {mine}")


def test_custom_sst_and_tagging_equal_sst_and_chunk_trained_together(real_dir, shared_data, tmp_path, capsys):
    """SST-2's first 96 training and 64 dev rows as JSON lines (text, polarity) through the flags alone,
    and CoNLL-2000's first 40 training sentences (plus one for each chunk type they lack, so that the
    training file's labels are chunk's 45) and 24 test sentences as a tagging task of the same files,
    trained together (mixed batches), against `--task sst,chunk` on the same rows: the same dev scores and
    trained weights (one max_seq_length given to both: chunk alone would get the original's 256)."""
    from finetune.tagging.spans import CHUNK_TYPES

    write_glue_slice(real_dir, shared_data, "SST-2", {"train": 96, "dev": 64})
    folder = real_dir / "finetuning_data" / "chunk"
    folder.mkdir(parents=True, exist_ok=True)
    train = conll_sentences(shared_data / "conll2000" / "train.txt", 40, CHUNK_TYPES)
    (folder / "train.txt").write_text("\n\n".join("\n".join(s) for s in train) + "\n")
    dev = conll_sentences(shared_data / "conll2000" / "test.txt", 24)
    (folder / "dev.txt").write_text("\n\n".join("\n".join(s) for s in dev) + "\n")
    builtin = real_run(real_dir, "--task", "sst,chunk", hparams=EQUAL)
    for split, count in (("train", 96), ("dev", 64)):
        _, rows = glue_rows(shared_data, "SST-2", split, count)
        write_jsonl(tmp_path / f"{split}.jsonl", [{"polarity": int(r["label"]), "text": r["sentence"]} for r in rows])
    (tmp_path / "chunks.json").write_text(json.dumps({
        "name": "my_chunk", "train_file": str(folder / "train.txt"), "dev_file": str(folder / "dev.txt")}))
    spec = [{"name": "my_sst", "train_file": "train.jsonl", "dev_file": "dev.jsonl", "label_field": "polarity"},
            {"name": "my_chunk", "train_file": str(folder / "train.txt"), "dev_file": str(folder / "dev.txt")}]
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    custom = real_run(real_dir, "--task", "my_sst,my_chunk", "--task-spec", str(tmp_path / "spec.json"), hparams=EQUAL)
    assert custom["label_names"] == builtin["label_names"] and len(custom["label_names"]) == 45
    mine, theirs = custom["trials"][0]["metrics"], builtin["trials"][0]["metrics"]
    assert mine == theirs
    results = real_dir / "models" / "tiny" / "results"
    sst = json.loads((results / "sst_results.json").read_text())["trials"][0]["metrics"]
    my_sst = json.loads((results / "my_sst_results.json").read_text())["trials"][0]["metrics"]
    assert my_sst["accuracy"] == sst["accuracy"]
    assert_same_weights(real_dir, "my_sst", "sst")
    assert_same_weights(real_dir, "my_chunk", "chunk")
    with capsys.disabled():
        print(f"\nsst: built-in {sst} | custom {my_sst}\nchunk: built-in {theirs} | custom {mine}")
