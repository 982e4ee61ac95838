"""The two command lines: a round trip through them, and bad input as one line with exit code 2.

One case runs as a real subprocess (the exit code and stderr a user sees); the others call main()
in-process, which raises the same SystemExit(2) through common.errors.exit_on_input_error.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO_ROOT
from tests.checkpoint_fixtures import assert_one_line_exit_2, model_folder, weights


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tokenizer):
    """A micro model folder and its TF1 export made through the CLI."""
    from checkpoints import export

    root = tmp_path_factory.mktemp("cli")
    model = model_folder(root, tokenizer, seed=4)
    export.main(["--model-dir", str(root / "models" / "original"), "--format", "tf1", "--output", str(root / "tf1")])
    return root, model


def run_cli(module, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def error_lines(completed):
    """The lines our CLI wrote (TensorFlow's C++ start-up log lines also go to stderr)."""
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr
    return [line for line in completed.stderr.splitlines() if line.startswith("error:")]


def test_import_through_the_cli_feeds_the_same_weights(exported, capsys):
    from checkpoints import import_weights

    root, model = exported
    folder = import_weights.main([str(a) for a in ("--source", root / "tf1", "--model-name", "imported",
                                                   "--data-dir", root)])
    assert folder == root / "models" / "imported"
    out = capsys.readouterr().out
    command = next(line for line in out.splitlines() if "run_pretraining.py" in line)
    hparams = json.loads(command.split("--hparams ", 1)[1].strip("'"))
    assert hparams["model_size"] == "electra_tiny" and hparams["model_hparam_overrides"]["hidden_size"] == 32

    from pretrain.loaded_folder import load_model_folder

    back = load_model_folder(folder)
    original = weights(model.pretrainer)
    assert all(np.array_equal(original[k], v) for k, v in weights(back.pretrainer).items())
    assert back.step == 5 and (folder / "vocab.txt").read_bytes() == model.vocab_file.read_bytes()

    # and fine-tuning reads it as a pretrained model (finetune/pretrained.py)
    from finetune.pretrained import build_encoder, read_model_folder, restore_by_path

    pretrained = read_model_folder(folder)
    encoder = build_encoder(pretrained.model_config)
    restore_by_path(encoder, pretrained.checkpoint)
    encoder_weights = {v.path: v.numpy() for v in encoder.weights}
    assert encoder_weights and all(np.array_equal(original[k], v) for k, v in encoder_weights.items())


def test_overwrite_replaces_the_export_and_keeps_other_files(exported, capsys):
    from checkpoints import export

    root, _ = exported
    output = root / "tf1_again"
    args = ["--model-dir", root / "models" / "original", "--format", "tf1", "--output", output]
    export.main([str(a) for a in args])
    (output / "notes.txt").write_text("mine")
    index = (output / "model.ckpt-5.index").read_bytes()
    assert_one_line_exit_2(export.main, args, capsys, "--overwrite", str(output))
    export.main([str(a) for a in args] + ["--overwrite"])
    capsys.readouterr()
    assert (output / "notes.txt").read_text() == "mine"
    assert (output / "model.ckpt-5.index").read_bytes() == index
    assert not [p for p in output.parent.iterdir() if p.name.startswith(".tf1_again")]  # no temp left


def test_missing_tensor_exits_2_with_one_line(exported, tmp_path):
    import tensorflow as tf

    from checkpoints.tf1 import write_tf1_checkpoint

    root, _ = exported
    prefix = str(root / "tf1" / "model.ckpt-5")
    gone = "electra/encoder/layer_1/output/dense/bias"
    tensors = {name: tf.train.load_variable(prefix, name) for name, _ in tf.train.list_variables(prefix)
               if name not in (gone, "global_step")}
    broken = tmp_path / "broken"
    broken.mkdir()
    write_tf1_checkpoint(broken, "model.ckpt-5", tensors, 5)
    (broken / "vocab.txt").write_bytes((root / "tf1" / "vocab.txt").read_bytes())
    completed = run_cli("checkpoints.import_weights", "--source", broken, "--model-name", "x",
                        "--data-dir", tmp_path)
    lines = error_lines(completed)
    assert len(lines) == 1 and gone in lines[0] and "missing" in lines[0], lines
    assert not (tmp_path / "models" / "x").exists()


def copy_model_folder(source, target):
    target.mkdir()
    for path in source.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


def test_unknown_config_key_exits_2_with_one_line(exported, tmp_path, capsys):
    from checkpoints import export

    root, _ = exported
    folder = copy_model_folder(root / "models" / "original", tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hiden_size": 64}))
    assert_one_line_exit_2(export.main, ["--model-dir", folder, "--format", "hf", "--output", tmp_path / "o"],
                           capsys, "hiden_size", "config.json")
    assert not (tmp_path / "o").exists()


def test_checkpoint_of_another_size_exits_2(exported, capsys):
    from checkpoints import import_weights

    root, _ = exported
    error = assert_one_line_exit_2(
        import_weights.main, ["--source", root / "tf1", "--model-name", "y", "--data-dir", root,
                              "--hparams", '{"model_size": "electra_small"}'], capsys, "hidden_size 32 (config: 256)")
    assert "--hparams" in error
    assert not (root / "models" / "y").exists()


def test_config_that_does_not_describe_the_checkpoint_exits_2(exported, tmp_path, capsys):
    from checkpoints import export

    root, _ = exported
    folder = copy_model_folder(root / "models" / "original", tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    config["model_hparam_overrides"]["hidden_size"] = 48
    (folder / "config.json").write_text(json.dumps(config))
    assert_one_line_exit_2(export.main, ["--model-dir", folder, "--format", "hf", "--output", tmp_path / "o"],
                           capsys, "ckpt-5", "config.json")


def test_bert_export_of_a_projected_model_is_refused(exported, capsys):
    from checkpoints import export

    root, _ = exported
    error = assert_one_line_exit_2(
        export.main, ["--model-dir", root / "models" / "original", "--format", "bert", "--output", root / "bert"],
        capsys, "--format tf1", "--format hf", "cannot be folded")
    assert error.count(". ") == 0  # one sentence
    assert not (root / "bert").exists()


def test_wrong_vocabulary_and_non_electra_folder_exit_2(exported, tmp_path, capsys):
    from checkpoints import import_weights

    root, _ = exported
    small_vocab = tmp_path / "vocab.txt"
    small_vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]) + "\n")
    assert_one_line_exit_2(import_weights.main, ["--source", root / "tf1", "--model-name", "z", "--data-dir",
                                                 tmp_path, "--vocab-file", small_vocab], capsys, "6 tokens", "60 rows")
    bert_folder = tmp_path / "bert_hf"
    bert_folder.mkdir()
    (bert_folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (bert_folder / "model.safetensors").write_bytes(b"")
    assert_one_line_exit_2(import_weights.main, ["--source", bert_folder, "--model-name", "z", "--data-dir",
                                                 tmp_path], capsys, "model_type", "'bert'")
