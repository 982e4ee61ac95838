"""Real-data tier: --format onnx exports of fine-tuned SST-2, MRPC, STS-B and CoNLL-2000 models (2 layers,
BERT's vocabulary, random weights: parity, not accuracy) predict on dev rows as the fine-tuned folders do
(python -m inference.predict: labels and tags identical, probabilities and scores within 1e-4), and
Hugging Face Optimum's ORTModelForSequenceClassification with transformers' AutoTokenizer, loading the
exported folder, gives our SST-2 labels (optimum-onnx needs transformers 4.x: it runs in a subprocess
on .venv/hf4, requirements-hf4.txt)."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.onnx_fixtures import finetuned_folder

HF4_DIR = REPO_ROOT / ".venv" / "hf4"
ROWS = 40
TOLERANCE = 1e-4
# task: (kind, dev file, the file's text columns for --text-fields or None)
TASKS = {"sst": ("classification", "glue/SST-2/dev.tsv", None),
         "mrpc": ("classification", "glue/MRPC/dev.tsv", "#1 String,#2 String"),
         "sts": ("regression", "glue/STS-B/dev.tsv", None),
         "chunk": ("tagging", "conll2000/test.txt", None)}


@pytest.fixture(scope="module")
def exports(tmp_path_factory, shared_data, bert_vocab_file):
    """{task: (fine-tuned folder, ONNX export, the dev rows' input file)}."""
    from checkpoints.onnx_export import export_onnx

    root = tmp_path_factory.mktemp("onnx_clients")
    made = {}
    for task, (kind, dev, _) in TASKS.items():
        # seed 3: at the fixture's default (2) the classifiers saturate, every row's top probability near 0.9996,
        # which would leave the parity nothing to tell apart (the last assertion below)
        folder = finetuned_folder(root / f"{task}_model_1", bert_vocab_file, kind, seed=3, task=task)
        export_onnx(folder, root / f"{task}_onnx")
        made[task] = (folder, root / f"{task}_onnx", dev_rows(shared_data / dev, root / f"{task}_rows", kind))
    return made


def dev_rows(source, target, kind):
    """The first ROWS rows (a TSV with its header; CoNLL sentences as JSON lines of words)."""
    text = source.read_text(encoding="utf-8-sig")
    if kind == "tagging":
        blocks = text.strip().split("\n\n")[:ROWS]
        path = target.with_suffix(".jsonl")
        path.write_text("".join(json.dumps({"tokens": [line.split()[0] for line in block.splitlines()]}) + "\n"
                                for block in blocks), encoding="utf-8")
        return path
    path = target.with_suffix(".tsv")
    path.write_text("\n".join(text.splitlines()[:ROWS + 1]) + "\n", encoding="utf-8")
    return path


def predict_lines(model_dir, rows, fields):
    import io

    from inference import predict

    stdout = io.StringIO()
    predict.main(["--model-dir", str(model_dir), str(rows)] + (["--text-fields", fields] if fields else []),
                 stdout=stdout)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


@pytest.mark.parametrize("task", list(TASKS))
def test_predictions_equal_the_tensorflow_path(exports, task):
    folder, onnx_folder, rows = exports[task]
    fields = TASKS[task][2]
    ours, served = predict_lines(folder, rows, fields), predict_lines(onnx_folder, rows, fields)
    assert len(ours) == len(served) == ROWS
    for a, b in zip(ours, served):
        assert a["line"] == b["line"] and a.get("truncated") == b.get("truncated")
        if "score" in a:
            assert abs(a["score"] - b["score"]) <= TOLERANCE
        elif "tags" in a:
            assert a["words"] == b["words"] and a["tags"] == b["tags"]
        else:
            assert a["label"] == b["label"]
            assert max(abs(a["probabilities"][k] - b["probabilities"][k]) for k in a["probabilities"]) <= TOLERANCE
    values = [line.get("score") or max(line.get("probabilities", {"": 0}).values()) for line in ours]
    assert task == "chunk" or len(set(round(v, 4) for v in values)) > ROWS // 2  # the rows differ in effect


OPTIMUM_SCRIPT = """
import json, sys
import numpy as np
from optimum.onnxruntime import ORTModelForSequenceClassification
from transformers import AutoTokenizer
folder, sentences = sys.argv[1], json.loads(sys.argv[2])
model = ORTModelForSequenceClassification.from_pretrained(folder)
tokenizer = AutoTokenizer.from_pretrained(folder)
logits = model(**tokenizer(sentences, padding=True, truncation=True, return_tensors="np")).logits
shifted = np.exp(logits - logits.max(-1, keepdims=True))
probabilities = shifted / shifted.sum(-1, keepdims=True)
print("RESULT " + json.dumps({"labels": [model.config.id2label[int(i)] for i in logits.argmax(-1)],
                              "probabilities": probabilities.tolist(), "tokenizer": type(tokenizer).__name__}))
"""


def test_optimum_and_auto_tokenizer_give_our_labels(exports):
    if not (HF4_DIR / "optimum" / "onnxruntime").is_dir():
        pytest.fail(f"{HF4_DIR} lacks optimum-onnx: `make test` installs it there "
                    "(pip install --no-deps --target .venv/hf4 -r requirements-hf4.txt)")
    _, onnx_folder, rows = exports["sst"]
    lines = rows.read_text(encoding="utf-8").splitlines()
    sentences = [line.split("\t")[lines[0].split("\t").index("sentence")] for line in lines[1:]]
    env = dict(os.environ, PYTHONPATH=f"{HF4_DIR}{os.pathsep}{REPO_ROOT}", TF_CPP_MIN_LOG_LEVEL="3")
    completed = subprocess.run([sys.executable, "-c", OPTIMUM_SCRIPT, str(onnx_folder), json.dumps(sentences)],
                               capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    theirs = json.loads([line for line in completed.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
    ours = predict_lines(onnx_folder, rows, None)
    assert theirs["tokenizer"] == "ElectraTokenizerFast"
    assert theirs["labels"] == [line["label"] for line in ours]
    for line, probabilities in zip(ours, theirs["probabilities"]):
        assert max(abs(line["probabilities"][str(i)] - p) for i, p in enumerate(probabilities)) <= TOLERANCE
