"""python -m inference.predict on folders run_finetuning.py wrote (a micro model fine-tuned a few steps on
real SST-2, STS-B, CoNLL-2000 and SQuAD 1.1 rows): its predictions are the fine-tuning evaluation's own
(accuracy, STS-B correlations, chunk tags and SQuAD answers equal the results the run saved) and the
exported SavedModel's (probabilities, scores, tags); input order survives length bucketing; malformed rows
stop with file and line (exit 2, nothing written) or are skipped and counted; stdin plain text; the
newest fine-tuned model of a task, with a custom task's label names, read from its folder only."""
import gzip
import io
import json
import os
import random
import shutil
import sys
import time

import numpy as np
import pytest

import run_finetuning
from inference import predict
from tests.checkpoint_fixtures import micro_model_folder

QUICK = {"max_train_steps": 3, "iterations_per_loop": 3, "eval_batch_size": 64}


def glue_subset(source, target, rows):
    """The header and the first `rows` rows of a GLUE TSV."""
    lines = source.read_text(encoding="utf-8").splitlines()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines[:rows + 1]) + "\n", encoding="utf-8")


def conll_subset(source, target, sentences):
    blocks = source.read_text(encoding="utf-8").strip().split("\n\n")[:sentences]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return [[line.split()[0] for line in block.splitlines()] for block in blocks]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data, bert_vocab_file):
    """A micro pretrained model (BERT's vocabulary) fine-tuned 3 steps on SST-2, STS-B and chunking (one
    multi-task run) and 2 on SQuAD 1.1, on small slices of the shared data."""
    root = tmp_path_factory.mktemp("electra_data")
    folder = micro_model_folder(root, bert_vocab_file, step=3, num_layers=1)
    data = root / "finetuning_data"
    for task, glue_name in (("sst", "SST-2"), ("sts", "STS-B")):
        glue_subset(shared_data / "glue" / glue_name / "train.tsv", data / task / "train.tsv", 64)
        glue_subset(shared_data / "glue" / glue_name / "dev.tsv", data / task / "dev.tsv", 48)
    conll_subset(shared_data / "conll2000" / "train.txt", data / "chunk" / "train.txt", 64)
    conll_subset(shared_data / "conll2000" / "test.txt", data / "chunk" / "dev.txt", 24)
    with gzip.open(shared_data / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as f:
        article = json.load(f)["data"][0]
    small = {"version": "1.1", "data": [dict(article, paragraphs=article["paragraphs"][:3])]}
    (data / "squadv1").mkdir()
    for name in ("train.json", "dev.json"):
        (data / "squadv1" / name).write_text(json.dumps(small), encoding="utf-8")
    common = ["--model-name", "tiny", "--data-dir", str(root)]
    run_finetuning.main(common + ["--task", "sst,sts,chunk", "--hparams", json.dumps(QUICK)])
    run_finetuning.main(common + ["--task", "squadv1", "--hparams", json.dumps(
        {**QUICK, "max_train_steps": 2, "max_seq_length": 64, "train_batch_size": 8})])
    return folder


def finetuned(model_dir, task):
    return model_dir / "finetuning_models" / f"{task}_model_1"


def run_predict(*args, stdin=None):
    """(JSON lines written to stdout, the summary predict.main returned)."""
    stdout = io.StringIO()
    if stdin is not None:
        saved, sys.stdin = sys.stdin, io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    try:
        summary = predict.main([str(arg) for arg in args], stdout=stdout)
    finally:
        if stdin is not None:
            sys.stdin = saved
    return [json.loads(line) for line in stdout.getvalue().splitlines()], summary


def trial_metrics(model_dir, task):
    return json.loads((model_dir / "results" / f"{task}_results.json").read_text())["trials"][0]["metrics"]


def export(folder, output):
    from checkpoints import export as export_cli

    export_cli.main(["--model-dir", str(folder), "--format", "saved_model", "--output", str(output)])
    return output


def test_classification_equals_the_fine_tuning_evaluation_and_the_saved_model(model_dir, tmp_path):
    dev = model_dir.parents[1] / "finetuning_data" / "sst" / "dev.tsv"
    out = tmp_path / "sst.jsonl"
    _, summary = run_predict("--model-dir", finetuned(model_dir, "sst"), dev, "--output", out)
    results = [json.loads(line) for line in out.read_text().splitlines()]
    gold = [line.split("\t")[-1] for line in dev.read_text().splitlines()[1:]]
    assert summary["rows"] == len(results) == len(gold) == 48
    assert [r["line"] for r in results] == list(range(2, 50))
    assert all(set(r["probabilities"]) == {"0", "1"} and r["label"] == max(r["probabilities"],
               key=r["probabilities"].get) for r in results)
    accuracy = 100 * np.mean([r["label"] == g for r, g in zip(results, gold)])
    assert accuracy == pytest.approx(trial_metrics(model_dir, "sst")["accuracy"])

    served, _ = run_predict("--model-dir", export(finetuned(model_dir, "sst"), tmp_path / "served" / "1"), dev)
    mine = np.array([[r["probabilities"]["0"], r["probabilities"]["1"]] for r in results])
    theirs = np.array([[r["probabilities"]["0"], r["probabilities"]["1"]] for r in served])
    np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert [r["label"] for r in served] == [r["label"] for r in results]
    assert len(set(np.round(mine[:, 0], 5))) > 24  # the rows differ in effect


def test_regression_scores_equal_the_evaluation_and_the_saved_model(model_dir, tmp_path):
    from scipy import stats

    dev = model_dir.parents[1] / "finetuning_data" / "sts" / "dev.tsv"
    results, _ = run_predict("--model-dir", finetuned(model_dir, "sts"), dev)  # sentence1/sentence2 by default
    scores = np.array([r["score"] for r in results])
    gold = np.array([float(line.split("\t")[-1]) for line in dev.read_text().splitlines()[1:]])
    metrics = trial_metrics(model_dir, "sts")
    assert 100 * stats.pearsonr(scores, gold)[0] == pytest.approx(metrics["pearson"], abs=1e-3)
    assert 100 * stats.spearmanr(scores, gold)[0] == pytest.approx(metrics["spearman"], abs=1e-3)
    served, _ = run_predict("--model-dir", export(finetuned(model_dir, "sts"), tmp_path / "sts" / "1"), dev)
    np.testing.assert_allclose(scores, [r["score"] for r in served], atol=1e-4)


def test_tagging_equals_the_evaluation_tags_and_the_saved_model(model_dir, tmp_path):
    dev = model_dir.parents[1] / "finetuning_data" / "chunk" / "dev.txt"
    sentences = [[line.split()[0] for line in block.splitlines()]
                 for block in dev.read_text().strip().split("\n\n")]
    rows = tmp_path / "words.jsonl"
    rows.write_text("".join(json.dumps({"id": n, "tokens": words}) + "\n" for n, words in enumerate(sentences)))
    results, _ = run_predict("--model-dir", finetuned(model_dir, "chunk"), rows)
    evaluated = json.loads((model_dir / "results" / "chunk_predictions_trial_1" / "predictions.json").read_text())
    assert [" ".join(r["tags"]) for r in results] == [evaluated[str(n)] for n in range(len(sentences))]
    assert [r["words"] for r in results] == sentences

    text = tmp_path / "words.txt"  # whitespace-separated words, one sentence per line
    text.write_text("".join(" ".join(words) + "\n" for words in sentences))
    served, _ = run_predict("--model-dir", export(finetuned(model_dir, "chunk"), tmp_path / "chunk" / "1"), text)
    assert [r["tags"] for r in served] == [r["tags"] for r in results]


def test_question_answering_gives_the_evaluations_answers_and_their_spans(model_dir, tmp_path):
    dev = json.loads((model_dir.parents[1] / "finetuning_data" / "squadv1" / "dev.json").read_text())
    questions = [(qa["id"], qa["question"], paragraph["context"])
                 for paragraph in dev["data"][0]["paragraphs"] for qa in paragraph["qas"]]
    rows = tmp_path / "qa.jsonl"
    rows.write_text("".join(json.dumps({"question": q, "context": c}) + "\n" for _, q, c in questions))
    results, _ = run_predict("--model-dir", finetuned(model_dir, "squadv1"), rows)
    evaluated = json.loads((model_dir / "results" / "squadv1_predictions_trial_1" / "predictions.json").read_text())
    assert [r["answer"] for r in results] == [evaluated[qid] for qid, _, _ in questions]
    for result, (_, _, context) in zip(results, questions):
        assert result["answer"] and context[result["start"]:result["end"]] == result["answer"]
        assert isinstance(result["null_odds"], float) and isinstance(result["score"], float)


def test_input_order_survives_bucketing_and_equals_unbatched_outputs(model_dir, tmp_path):
    """Rows of very different lengths, shuffled: small batches in a window that sorts them give each row
    the output it gets alone (batch 1), in input order."""
    rng = random.Random(0)
    words = "the film is a charming and often affecting journey but its ending falls flat".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.choice([1, 2, 5, 20, 60, 150])))
             for _ in range(40)]
    path = tmp_path / "rows.csv"
    path.write_text("id,sentence\n" + "".join(f'{n},"{t}"\n' for n, t in enumerate(texts)))
    bucketed, summary = run_predict("--model-dir", finetuned(model_dir, "sst"), path, "--batch-size", "4",
                                    "--window", "16")
    alone, _ = run_predict("--model-dir", finetuned(model_dir, "sst"), path, "--batch-size", "1")
    assert [r["line"] for r in bucketed] == [r["line"] for r in alone] == list(range(2, 42))
    np.testing.assert_allclose([r["probabilities"]["1"] for r in bucketed],
                               [r["probabilities"]["1"] for r in alone], atol=1e-5)
    assert summary["truncated"] == sum(len(t.split()) > 126 for t in texts) > 0
    assert all(r.get("truncated", False) == (len(t.split()) > 126) for r, t in zip(bucketed, texts))


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_malformed_rows_stop_with_file_and_line_or_are_skipped(model_dir, tmp_path, capsys, fmt):
    if fmt == "csv":
        lines = ["sentence,label", "a fine film,1", '"quoted, with a comma",0', "one,two,three",
                 "good,1", ",0", "bad,0"]
        bad = [4, 6]
    else:
        lines = ['{"sentence": "a fine film"}', '{"sentence": "good"}', '{"sentence": "broken"', "",
                 '{"text": "other key"}', '["a list"]', '{"sentence": "bad"}']
        bad = [3, 5, 6]
    path = tmp_path / f"rows.{fmt}"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    with pytest.raises(SystemExit) as exit_info:
        predict.main(["--model-dir", str(finetuned(model_dir, "sst")), str(path), "--output", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {path} line {bad[0]}:") and "--skip-malformed" in err[0]
    assert not out.exists() and not list(tmp_path.glob("out.jsonl*"))

    summary = predict.main(["--model-dir", str(finetuned(model_dir, "sst")), str(path), "--output", str(out),
                            "--skip-malformed"])
    written = [json.loads(line) for line in out.read_text().splitlines()]
    good = [n for n, line in enumerate(lines, 1) if n not in bad and line and n > (fmt == "csv")]
    assert [r["line"] for r in written] == good and summary["skipped"] == len(bad)
    err = capsys.readouterr().err
    assert f"skipped {len(bad)} malformed rows of {path}: lines {', '.join(map(str, bad))}" in err


def test_stdin_plain_text_newest_model_of_a_task_and_its_own_label_names(model_dir, tmp_path):
    """One text per line on stdin; --model-name + --task picks the newest sst model, whose labels (as a
    custom task's, from its training file) come from its finetuning_info.json alone."""
    newest = model_dir / "finetuning_models" / "sst_model_2"
    shutil.copytree(finetuned(model_dir, "sst"), newest)
    info = json.loads((newest / "finetuning_info.json").read_text())
    (newest / "finetuning_info.json").write_text(json.dumps(dict(info, label_names=["negative", "positive"])))
    os.utime(finetuned(model_dir, "sst") / "finetuning_info.json", (time.time() - 60,) * 2)
    try:
        results, _ = run_predict("--model-name", "tiny", "--data-dir", model_dir.parents[1], "--task", "sst",
                                 stdin="a charming journey\n\nits ending falls flat\n")
        assert [r["line"] for r in results] == [1, 3]
        assert all(set(r["probabilities"]) == {"negative", "positive"} for r in results)
        alone, _ = run_predict("--model-dir", finetuned(model_dir, "sst"), "-",
                               stdin="a charming journey\n\nits ending falls flat\n")
        assert [r["probabilities"]["1"] for r in alone] == [r["probabilities"]["positive"] for r in results]
    finally:
        shutil.rmtree(newest)


@pytest.mark.parametrize("case, fragment", [
    ("not_a_model", "neither a fine-tuned model folder"),
    ("no_task", "name the fine-tuned task with --task (it has: chunk, squadv1, sst, sts)"),
    ("unknown_task", "no fine-tuned model of task 'rte'"),
    ("missing_column", "no column premise (its columns: sentence, label)"),
    ("pair_as_text", "plain text holds one text per line, and this model reads two"),
    ("empty", "no row to predict"),
])
def test_bad_input_is_one_line_exit_2(model_dir, tmp_path, capsys, case, fragment):
    rows = tmp_path / "rows.tsv"
    rows.write_text("sentence\tlabel\na fine film\t1\n")
    args = ["--model-dir", str(finetuned(model_dir, "sst")), str(rows)]
    if case == "not_a_model":
        args[1] = str(tmp_path)
    elif case == "no_task":
        args[1] = str(model_dir)
    elif case == "unknown_task":
        args[1:2] = [str(model_dir), "--task", "rte"]
    elif case == "missing_column":
        args += ["--text-fields", "premise"]
    elif case == "pair_as_text":
        (tmp_path / "rows.txt").write_text("a fine film\n")
        args = ["--model-dir", str(finetuned(model_dir, "sts")), str(tmp_path / "rows.txt")]
    elif case == "empty":
        rows.write_text("sentence\tlabel\n")
    with pytest.raises(SystemExit) as exit_info:
        predict.main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err


def test_bfloat16_matmul_operands_move_probabilities_within_bfloat16_rounding(model_dir, tmp_path):
    """--matmul-dtype bfloat16 reaches the folder's model (the probabilities change) and changes only the
    matmuls' rounding (they stay within a few bfloat16 steps of float32's)."""
    dev = model_dir.parents[1] / "finetuning_data" / "sst" / "dev.tsv"
    float32, _ = run_predict("--model-dir", finetuned(model_dir, "sst"), dev)
    bfloat16, _ = run_predict("--model-dir", finetuned(model_dir, "sst"), dev, "--matmul-dtype", "bfloat16")
    mine, theirs = (np.array([r["probabilities"]["1"] for r in results]) for results in (float32, bfloat16))
    assert [r["line"] for r in bfloat16] == [r["line"] for r in float32]
    assert np.any(mine != theirs)
    np.testing.assert_allclose(theirs, mine, atol=2e-2)


def test_matmul_dtype_on_an_export_stops_before_the_input_is_read(monkeypatch, tmp_path, capsys):
    """An export runs as it was exported: --matmul-dtype bfloat16 there is one line, exit 2, before the input
    (missing here) is opened; the option's values are model.matmul's."""
    import types

    from model.matmul import MATMUL_DTYPES

    assert predict.MATMUL_DTYPES == MATMUL_DTYPES
    for kind, (onnx, saved_model) in {"an exported ONNX model": (True, False),
                                      "an exported SavedModel": (False, True)}.items():
        source = types.SimpleNamespace(path=tmp_path / "export", onnx=onnx, saved_model=saved_model)
        monkeypatch.setattr(predict, "resolve_model", lambda model_dir, task: source)
        with pytest.raises(SystemExit) as exit_info:
            predict.main(["--model-dir", str(tmp_path / "export"), str(tmp_path / "missing.tsv"),
                          "--matmul-dtype", "bfloat16"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"is {kind}, which runs as it was exported" in err[0], err


def test_file_names_match_their_writers():
    from checkpoints.saved_model import SERVING_INFO
    from finetune.saved import INFO_FILE
    from inference import sources

    assert (sources.SERVING_INFO, sources.FINETUNING_INFO) == (SERVING_INFO, INFO_FILE)


def test_the_command_in_its_own_process(model_dir):
    """python -m inference.predict as a user runs it: stdin to stdout, our lines only on stderr (quiet
    start), exit 0; a malformed row: exit 2, one line, nothing on stdout."""
    import subprocess

    from tests.conftest import REPO_ROOT

    env = {key: value for key, value in os.environ.items() if not key.startswith("TF_CPP")}
    command = [sys.executable, "-m", "inference.predict", "--model-dir", str(finetuned(model_dir, "sts"))]
    rows = ('{"sentence1": "a man is dancing", "sentence2": "a man dances"}\n'
            '{"sentence1": "a cat", "sentence2": "rain"}\n')
    done = subprocess.run(command, input=rows, capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [sorted(json.loads(line)) for line in done.stdout.splitlines()] == [["line", "score"]] * 2
    assert done.stderr.splitlines() == [done.stderr.splitlines()[-1]]
    assert done.stderr.startswith("predicted 2 rows with sts (regression)")
    bad = subprocess.run(command, input=rows + '{"sentence1": "no second"}\n', capture_output=True, text=True,
                         cwd=REPO_ROOT, env=env, timeout=300)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == ["error: stdin line 3: no field 'sentence2'; fix the row or pass "
                                       "--skip-malformed to skip such rows"]


def test_rows_keep_their_lines_and_name_what_is_wrong(tmp_path):
    """The reader alone (no model): a quoted CSV field over two lines, bytes that are not UTF-8, a quote
    left open, gzipped JSON lines with word lists, and the format guessed from a first line."""
    from inference import rows

    def read(path, fmt, role="single", fields=None):
        with rows.open_text(path) as handle:
            return [(item.line, item.texts if isinstance(item, rows.Row) else item.reason)
                    for item in rows.read_rows(handle, fmt, fields, role, str(path))]

    path = tmp_path / "rows.csv"
    path.write_bytes(b'\xef\xbb\xbftext,label\r\n"two\r\nlines",1\r\n"caf\xe9",0\r\nplain,1\r\n"open,1\r\n')
    assert read(path, "csv") == [(2, ("two\r\nlines",)), (4, "not UTF-8 text"), (5, ("plain",)),
                                 (6, "not a CSV row (unexpected end of data)")]
    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write('{"tokens": ["He", "reckons"]}\n\n{"tokens": "the current account"}\n{"tokens": []}\n')
    assert read(path, "jsonl", "words") == [(1, (["He", "reckons"],)), (3, (["the", "current", "account"],)),
                                            (4, "field 'tokens' holds no word")]
    assert rows.input_format(path, "", None, "words") == "jsonl"
    assert rows.input_format(None, "sentence1\tsentence2\tlabel\n", None, "pair") == "tsv"
    assert rows.input_format(None, "id,question,context\n", None, "qa") == "csv"
    assert rows.input_format(None, "a plain sentence, with a comma\n", None, "single") == "text"
    assert rows.input_format(None, '{"text": "x"}\n', None, "single") == "jsonl"
