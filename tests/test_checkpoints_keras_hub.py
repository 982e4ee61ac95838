"""keras-hub presets judged by keras-hub (0.32, requirements-test.txt) itself.

- Our export (`checkpoints.export --format keras_hub`) of a model with the real 30522-token BERT vocabulary,
  an embedding projection (E 16 ≠ H 32) and gradient-disentangled embeddings: keras-hub's
  ElectraBackbone.from_preset gives our encoder's sequence output on SST-2 dev sentence pairs, and its
  ElectraTokenizer.from_preset gives our ids on every SST-2 dev sentence. keras-hub computes GELU with
  the tanh approximation, we exactly: the weights are checked with our encoder switched to keras-hub's
  GELU, the whole with keras-hub's switched to ours (keras_hub_preset.exact_gelu).
- The round trip ours → preset → ours (the import CLI) gives the same encoder weights.
- A preset saved by keras-hub itself becomes a model folder whose encoder computes keras-hub's outputs.
- What keras-hub cannot hold is refused with one line and exit code 2.
"""
import contextlib
import functools
import json

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL
from tests.checkpoint_fixtures import TOLERANCE, assert_one_line_exit_2, max_diff, model_folder, randomise, sst2_batch
from tests.model_fixtures import tiny_batch


@pytest.fixture(scope="module")
def keras_hub():
    """Imported here, not at collection (it takes seconds); a pinned test extra, so never skipped."""
    import keras_hub

    return keras_hub


def keras_hub_inputs(batch):
    return {"token_ids": batch["input_ids"], "segment_ids": batch["segment_ids"],
            "padding_mask": batch["input_mask"]}


def sequence_output(backbone, batch):
    return np.asarray(backbone(keras_hub_inputs(batch))["sequence_output"])


@contextlib.contextmanager
def gelu_as_keras_hub(encoder):
    """Our encoder with keras-hub's tanh-approximated GELU in its feed-forward layers, for the while."""
    import keras

    saved = [layer.intermediate_dense.activation for layer in encoder.transformer_layers]
    for layer in encoder.transformer_layers:
        layer.intermediate_dense.activation = functools.partial(keras.activations.gelu, approximate=True)
    try:
        yield encoder
    finally:
        for layer, activation in zip(encoder.transformer_layers, saved):
            layer.intermediate_dense.activation = activation


def encoder_weights(pretrainer):
    """{TF1 name: array} of the main encoder as exported (a GDES table merged)."""
    from checkpoints.names import DISCRIMINATOR, export_tensors

    return {name: array for name, array in export_tensors(pretrainer).items() if name.startswith(f"{DISCRIMINATOR}/")}


@pytest.fixture(scope="module")
def bert_tokenizer(bert_vocab_file):
    from data.tokenization import load_tokenizer

    return load_tokenizer(vocab_file=bert_vocab_file)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, shared_data, bert_vocab_file, bert_tokenizer):
    """A micro model with BERT's vocabulary and GDES embeddings, weights moved off their initial values,
    in a model folder, exported through the CLI."""
    from checkpoints import export
    from storage.model_folder import write_model_folder
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer

    root = tmp_path_factory.mktemp("keras_hub")
    config = PretrainingConfig.create({"model_size": "electra_small", "model_name": "original", "seed": 5,
                                       "data_dir": str(root), "model_hparam_overrides": dict(MICRO_MODEL),
                                       "gdes_embeddings": True})
    pretrainer = build_pretrainer(config)
    randomise(pretrainer, seed=2)
    folder = write_model_folder(root / "models" / "original", config, pretrainer, bert_vocab_file, step=42)
    preset = root / "preset"
    export.main(["--model-dir", str(folder), "--format", "keras_hub", "--output", str(preset)])
    sentences, batch = sst2_batch(shared_data, bert_tokenizer)
    return {"root": root, "config": config, "pretrainer": pretrainer, "preset": preset, "batch": batch}


def test_keras_hub_backbone_gives_our_sequence_output_on_sst2(exported, keras_hub):
    from checkpoints.keras_hub_preset import exact_gelu

    backbone = keras_hub.models.ElectraBackbone.from_preset(str(exported["preset"]))
    assert (backbone.embedding_dim, backbone.hidden_dim, backbone.vocab_size) == (16, 32, 30522)
    batch, encoder = exported["batch"], exported["pretrainer"].discriminator
    mask = batch["input_mask"]
    with gelu_as_keras_hub(encoder):
        ours_with_their_gelu = np.asarray(encoder(batch))
    assert max_diff(ours_with_their_gelu, sequence_output(backbone, batch), mask) <= TOLERANCE
    ours = np.asarray(encoder(batch))
    assert max_diff(ours, sequence_output(exact_gelu(backbone), batch), mask) <= TOLERANCE
    assert np.std(ours[mask.astype(bool)]) > 0.5  # not a degenerate comparison


def test_keras_hub_tokenizer_gives_our_ids_on_sst2(exported, shared_data, bert_tokenizer, keras_hub):
    hub_tokenizer = keras_hub.models.ElectraTokenizer.from_preset(str(exported["preset"]))
    lines = (shared_data / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    sentences = [line.split("\t")[0] for line in lines]
    assert len(sentences) == 872
    theirs = [[int(i) for i in ids] for ids in hub_tokenizer(sentences)]  # a list of lists for a list of strings
    assert theirs == [[int(i) for i in ids] for ids in bert_tokenizer.encode_batch(sentences)]
    special = bert_tokenizer.special_ids
    theirs_special = (hub_tokenizer.cls_token_id, hub_tokenizer.sep_token_id, hub_tokenizer.pad_token_id,
                      hub_tokenizer.mask_token_id)
    assert theirs_special == (special.cls, special.sep, special.pad, special.mask)


def test_import_of_our_preset_gives_back_the_encoder(exported, capsys):
    from checkpoints import import_weights
    from pretrain.loaded_folder import load_model_folder
    from data.tokenization import load_tokenizer

    root = exported["root"]
    folder = import_weights.main(["--source", str(exported["preset"]), "--model-name", "back",
                                  "--data-dir", str(root)])
    assert "encoder alone" in capsys.readouterr().out
    back = load_model_folder(folder)
    original, imported = encoder_weights(exported["pretrainer"]), encoder_weights(back.pretrainer)
    assert set(imported) == set(original)
    assert all(np.array_equal(original[name], imported[name]) for name in original)
    assert back.config.model_config() == exported["config"].model_config()
    assert back.config.do_lower_case
    ours = load_tokenizer(vocab_file=root / "models" / "original" / "vocab.txt")
    assert back.vocab_file.read_text(encoding="utf-8").split() == ours.convert_ids_to_tokens(range(ours.vocab_size))


def test_a_preset_saved_by_keras_hub_becomes_a_model_folder(tmp_path, tokenizer, capsys, keras_hub):
    """keras-hub builds, fills and saves the preset; the import's encoder computes keras-hub's outputs."""
    from checkpoints import import_weights
    from pretrain.loaded_folder import load_model_folder

    backbone = keras_hub.models.ElectraBackbone(vocab_size=tokenizer.vocab_size, num_layers=2, num_heads=2,
                                                hidden_dim=32, embedding_dim=16, intermediate_dim=64,
                                                max_sequence_length=32)
    rng = np.random.default_rng(0)
    for variable in backbone.weights:
        variable.assign(variable.numpy() + 0.1 * rng.standard_normal(variable.shape).astype(np.float32))
    vocabulary = tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
    backbone.save_to_preset(str(tmp_path / "preset"))
    keras_hub.models.ElectraTokenizer(vocabulary=vocabulary, lowercase=True,
                                      strip_accents=True).save_to_preset(str(tmp_path / "preset"))
    folder = import_weights.main(["--source", str(tmp_path / "preset"), "--model-name", "from_keras_hub",
                                  "--data-dir", str(tmp_path)])
    assert "pooled" not in capsys.readouterr().out  # the pooler is dropped without a note about unused tensors
    model = load_model_folder(folder)
    assert model.config.do_lower_case and model.config.model_config().num_heads == 2
    batch = tiny_batch(seq_length=16)
    with gelu_as_keras_hub(model.pretrainer.discriminator) as encoder:
        ours = np.asarray(encoder(batch))
    assert max_diff(ours, sequence_output(backbone, batch), batch["input_mask"]) <= TOLERANCE


def test_what_keras_hub_cannot_hold_is_refused_in_one_line(tmp_path, tokenizer, capsys, monkeypatch):
    import sys
    import types

    from checkpoints import export, import_weights
    from checkpoints.keras_hub_preset import check_exportable
    from common.errors import InputError

    model = model_folder(tmp_path, tokenizer, model_hparam_overrides={"layer_norm_epsilon": 1e-6})
    source = tmp_path / "models" / "original"
    assert_one_line_exit_2(export.main, ["--model-dir", source, "--format", "keras_hub", "--output",
                                         tmp_path / "out"], capsys, str(source), "epsilon", "--format hf")
    assert not (tmp_path / "out").exists()
    spm = types.SimpleNamespace(checkpoint=str(source / "ckpt-5"), is_sentencepiece=True,
                                vocab_file=tmp_path / "spm.model")
    with pytest.raises(InputError, match="SentencePiece model spm.model.*WordPiece only.*--format hf"):
        check_exportable(spm, model.pretrainer.discriminator)
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"registered_name": "keras_hub>BertBackbone"}))
    assert_one_line_exit_2(import_weights.main, ["--source", tmp_path / "bert", "--model-name", "x", "--data-dir",
                                                 tmp_path], capsys, "BertBackbone", "ELECTRA preset")
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # as if it were not installed
    assert_one_line_exit_2(export.main, ["--model-dir", source, "--format", "keras_hub", "--output",
                                         tmp_path / "out"], capsys, "pip install keras-hub==0.32.0")
