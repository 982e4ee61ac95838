"""--format onnx on fine-tuned folders of each task kind (a 2-layer model, random weights): ONNX Runtime's
InferenceSession on the written model.onnx gives the Keras model's outputs at two batch sizes and lengths
(the regression score on the task's scale, the span head's beams); the folder's tokenizer.json (the
`tokenizers` library) gives our tokenizer's ids; config.json carries the labels; bad input stops with one
line and exit code 2, leaving nothing behind."""
import json

import numpy as np
import pytest

from tests.checkpoint_fixtures import assert_one_line_exit_2
from tests.onnx_fixtures import SENTENCES, TASKS, exported_folders, model_inputs


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{kind: (fine-tuned folder, ONNX folder)}, exported through the command line."""
    return exported_folders(tmp_path_factory.mktemp("onnx"), TASKS)


def keras_and_onnx(folder, onnx_folder, texts):
    """(the Keras model's outputs, ONNX Runtime's {name: output}) on the texts as [CLS] text [SEP]."""
    import onnxruntime

    from data.tokenization import load_tokenizer
    from finetune.saved import load_finetuned_model

    model, info = load_finetuned_model(folder)
    inputs = model_inputs(load_tokenizer(vocab_file=info.vocab_file), texts)
    session = onnxruntime.InferenceSession(str(onnx_folder / "model.onnx"), providers=["CPUExecutionProvider"])
    feed = {"input_ids": inputs["input_ids"].astype(np.int64), "attention_mask": inputs["input_mask"].astype(np.int64),
            "token_type_ids": inputs["segment_ids"].astype(np.int64)}
    names = [output.name for output in session.get_outputs()]
    return model(inputs), dict(zip(names, session.run(names, feed))), info


@pytest.mark.parametrize("kind", ["classification", "regression", "tagging"])
def test_onnx_runtime_gives_the_keras_outputs(exported, kind):
    folder, onnx_folder = exported[kind]
    for texts in (SENTENCES, SENTENCES[:2]):  # batch 6 at one length, batch 2 at a shorter one
        expected, served, info = keras_and_onnx(folder, onnx_folder, texts)
        expected = np.asarray(expected)
        if kind == "regression":
            low, high = info.score_range
            expected = expected * high + low  # the export serves the task's scale
        assert list(served) == ["logits"] and served["logits"].shape == expected.shape
        np.testing.assert_allclose(served["logits"], expected, atol=1e-4)
        assert np.ptp(expected[:, 0]) > 1e-3  # the inputs differ in effect


def test_the_span_heads_beams(exported):
    folder, onnx_folder = exported["span"]
    texts = ["what is the film about , the plot of the story", "is it good and funny , not dull at all"]
    expected, served, _ = keras_and_onnx(folder, onnx_folder, texts)
    assert sorted(served) == sorted(expected)
    for name, value in expected.items():
        value = np.asarray(value)
        if np.issubdtype(value.dtype, np.integer):
            np.testing.assert_array_equal(served[name], value)
        else:
            np.testing.assert_allclose(served[name], value, atol=1e-4)


def test_graph_inputs_are_dynamic_int64_token_ids(exported):
    import onnx

    graph = onnx.load(str(exported["tagging"][1] / "model.onnx")).graph
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    for tensor in graph.input:
        assert tensor.type.tensor_type.elem_type == onnx.TensorProto.INT64
        assert all(not dim.HasField("dim_value") for dim in tensor.type.tensor_type.shape.dim)  # batch, length free
    info = json.loads((exported["tagging"][1] / "electra_onnx.json").read_text())
    assert info["kind"] == "tagging" and info["onnx_vs_tensorflow_max_abs_diff"] <= 1e-4


def test_the_encoder_is_fused_and_span_models_convert(exported):
    """One Attention, one BiasGelu and two LayerNormalization a layer (the fixtures' 2 layers; one more for
    the embeddings), no loose Softmax or Erf; the span head's beam search goes through tf2onnx."""
    import collections

    import onnx

    for kind in ("classification", "regression", "tagging"):
        ops = collections.Counter(node.op_type for node in onnx.load(str(exported[kind][1] / "model.onnx")).graph.node)
        assert (ops["Attention"], ops["BiasGelu"], ops["LayerNormalization"]) == (2, 2, 5), ops
        assert not ops["Softmax"] and not ops["Erf"]
        assert json.loads((exported[kind][1] / "electra_onnx.json").read_text())["converter"] == "onnx_graph"
    assert json.loads((exported["span"][1] / "electra_onnx.json").read_text())["converter"] == "tf2onnx"


def test_tokenizer_json_gives_our_ids(exported):
    from tokenizers import Tokenizer

    from data.tokenization import load_tokenizer

    onnx_folder = exported["classification"][1]
    ours = load_tokenizer(vocab_file=onnx_folder / "vocab.txt")
    theirs = Tokenizer.from_file(str(onnx_folder / "tokenizer.json"))
    texts = SENTENCES + ["The FILM, it's GOOD!", "Café naïve -- 12,5%\tok"]  # ("[CLS]" typed: hf.py's note)
    special = ours.special_ids
    for text, ids in zip(texts, ours.encode_batch(texts)):
        assert theirs.encode(text).ids == [special.cls] + list(ids) + [special.sep], text
    pair = theirs.encode("the film", "it was good")
    assert pair.type_ids == [0] * 4 + [1] * 4


def test_config_names_the_labels(exported):
    for kind, architecture in (("classification", "ElectraForSequenceClassification"),
                               ("tagging", "ElectraForTokenClassification")):
        folder, onnx_folder = exported[kind]
        config = json.loads((onnx_folder / "config.json").read_text())
        labels = json.loads((folder / "finetuning_info.json").read_text())["label_names"]
        assert config["architectures"] == [architecture] and config["model_type"] == "electra"
        assert config["id2label"] == {str(i): name for i, name in enumerate(labels)}
        assert config["label2id"] == {name: i for i, name in enumerate(labels)}
    config = json.loads((exported["regression"][1] / "config.json").read_text())
    assert config["problem_type"] == "regression" and config["num_labels"] == 1


def test_the_graph_of_an_encoder_without_embeddings_projection(tmp_path):
    """embedding_size = hidden_size (ELECTRA-Base and -Large): no projection node, the Keras outputs."""
    import onnxruntime

    from checkpoints import onnx_export, onnx_graph
    from checkpoints.saved_model_ids import ids_function, load_exportable
    from tests.onnx_fixtures import finetuned_folder, write_vocab

    vocab = write_vocab(tmp_path / "vocab.txt")
    model, info = load_exportable(finetuned_folder(tmp_path / "sst_model_1", vocab, "classification",
                                                   embedding_size=32), "onnx")
    assert model.encoder.embeddings_project is None
    proto = onnx_graph.build(model, info)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    vocab_size = len(vocab.read_text().split())
    difference = onnx_export.max_difference(ids_function(model, info), session,
                                            onnx_export.check_inputs(info, vocab_size))
    assert difference <= 1e-4
    assert sum(node.op_type == "MatMul" for node in proto.graph.node) == 2 * 3 + 1  # no projection's


# ------------------------------------------------------------------------------------------------ bad input


def _leftovers(parent):
    return sorted(path.name for path in parent.iterdir() if ".tmp" in path.name)


def test_a_folder_that_is_not_fine_tuned(tmp_path, capsys):
    from checkpoints import export

    (tmp_path / "pretrained").mkdir()
    output = tmp_path / "out"
    assert_one_line_exit_2(export.main, ["--model-dir", tmp_path / "pretrained", "--format", "onnx", "--output",
                                         output], capsys, "finetuning_info.json", "run_finetuning.py")
    assert not output.exists() and not _leftovers(tmp_path)


def test_a_task_kind_the_exporter_cannot_handle(exported, tmp_path, capsys):
    import shutil

    from checkpoints import export

    folder = shutil.copytree(exported["classification"][0], tmp_path / "odd_model_1")
    info = json.loads((folder / "finetuning_info.json").read_text())
    (folder / "finetuning_info.json").write_text(json.dumps(dict(info, kind="multiple_choice")))
    output = tmp_path / "out"
    for fmt in ("onnx", "saved_model_ids"):
        assert_one_line_exit_2(export.main, ["--model-dir", folder, "--format", fmt, "--output", output], capsys,
                               "finetuning_info.json", "'multiple_choice'")
    assert not output.exists() and not _leftovers(tmp_path)


def test_a_difference_above_the_limit_leaves_nothing(exported, tmp_path, capsys, monkeypatch):
    import onnx

    from checkpoints import export, onnx_export

    folder, onnx_folder = exported["regression"]
    monkeypatch.setattr(onnx_export, "convert", lambda *args: (onnx.load(str(onnx_folder / "model.onnx")), "test"))
    monkeypatch.setattr(onnx_export, "TOLERANCE", 0.0)  # float32 rounding now fails, as a real mismatch would
    output = tmp_path / "out"
    assert_one_line_exit_2(export.main, ["--model-dir", folder, "--format", "onnx", "--output", output], capsys,
                           "ONNX Runtime's outputs differ from TensorFlow's by", "nothing was written")
    assert not output.exists() and not _leftovers(tmp_path)
