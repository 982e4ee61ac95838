"""--format saved_model_ids: `saved_model_cli run` (TensorFlow's own command, which loads no
tensorflow-text) runs the ids-in SavedModel of a fine-tuned classifier and gives the Keras model's logits;
no tensorflow-text op is in its graph; a span model's beams come out of tf.saved_model.load."""
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.onnx_fixtures import SENTENCES, exported_folders, model_inputs

TEXT_OPS = ("NormalizeUTF8", "Wordpiece", "SentencepieceOp", "RegexSplitWithOffsets", "CaseFoldUTF8")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{kind: (fine-tuned folder, its ids-in SavedModel)}."""
    return exported_folders(tmp_path_factory.mktemp("ids"), ("classification", "span"), "saved_model_ids")


def keras_inputs(folder, texts):
    from data.tokenization import load_tokenizer
    from finetune.saved import load_finetuned_model

    model, info = load_finetuned_model(folder)
    return model, model_inputs(load_tokenizer(vocab_file=info.vocab_file), texts)


def test_saved_model_cli_runs_it(exported, tmp_path):
    folder, saved = exported["classification"]
    model, inputs = keras_inputs(folder, SENTENCES)
    names = {"input_ids": "input_ids", "attention_mask": "input_mask", "token_type_ids": "segment_ids"}
    for name, ours in names.items():
        np.save(tmp_path / f"{name}.npy", inputs[ours].astype(np.int64))
    cli = [sys.executable, "-c", "import sys; from tensorflow.python.tools.saved_model_cli import main; "
           "sys.argv[0] = 'saved_model_cli'; sys.exit(main())"]  # .venv/bin/saved_model_cli, on this Python
    completed = subprocess.run(cli + [
        "run", "--dir", str(saved), "--tag_set", "serve", "--signature_def", "serving_default",
        "--inputs", ";".join(f"{name}={tmp_path / name}.npy" for name in names), "--outdir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    served = np.load(tmp_path / "out" / "logits.npy")
    np.testing.assert_allclose(served, np.asarray(model(inputs)), atol=1e-5)
    assert np.ptp(served[:, 0]) > 1e-3


def test_no_tensorflow_text_op_in_the_graph(exported):
    from tests.helpers import saved_model_ops

    ops = saved_model_ops(exported["classification"][1])
    assert "MatMul" in ops or "BatchMatMulV2" in ops  # the model is in there
    assert "ScatterNd" in ops  # the real tokens' rows only (model/unpadding.py): a client's padding is skipped
    assert "ScatterNd" not in saved_model_ops(exported["span"][1])  # the span beams compute every position
    assert not [op for op in ops if op.startswith(TEXT_OPS)]
    info = json.loads((exported["classification"][1] / "electra_ids_serving.json").read_text())
    assert info["inputs"] == ["input_ids", "attention_mask", "token_type_ids"] and info["outputs"] == ["logits"]


def test_span_beams(exported):
    import tensorflow as tf

    folder, saved = exported["span"]
    model, inputs = keras_inputs(folder, ["what is the film about , the plot of the story", "is it good"])
    serve = tf.saved_model.load(str(saved)).signatures["serving_default"]
    served = serve(input_ids=tf.constant(inputs["input_ids"], tf.int64),
                   attention_mask=tf.constant(inputs["input_mask"], tf.int64),
                   token_type_ids=tf.constant(inputs["segment_ids"], tf.int64))
    expected = model(inputs)
    assert sorted(served) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(served[name].numpy(), np.asarray(value), atol=1e-5)
