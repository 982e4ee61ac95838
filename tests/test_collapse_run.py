"""The collapse warning inside real runs (1-layer micro model, tiny dataset, 500 steps: the detector's first check).

Both runs fake tokens with the original's uniform_generator, so the discriminator's task does not change
as a generator learns, and differ only in learning_rate: at 1e-3 the discriminator learns (AUC ≈ 0.9 by
step 500) and nothing is printed; at 0.05 ("the learning rate is too high") it collapses to calling every
token original (recall 0, AUC ≈ 0.5) and the run prints the warning line with the likely causes.
"""
import json

import pytest

import run_pretraining
from tests.helpers import MICRO_MODEL, build_tiny_dataset, train_scalars

BASE = {"model_size": "electra_tiny", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}, "train_batch_size": 8,
        "num_warmup_steps": 10, "iterations_per_loop": 100, "num_train_steps": 500,
        "save_checkpoints_steps": 1000, "uniform_generator": True}
WARNING = "warning: the discriminator looks collapsed at step 500"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("collapse_data")
    build_tiny_dataset(folder, max_seq_length=32, num_shards=2, max_documents=40)
    return folder


def last_train_scalar(model_dir, tag):
    values = train_scalars(model_dir, tag)
    return values[max(values)]


def run(data_dir, name, capsys, **extra):
    run_pretraining.main(["--model-name", name, "--data-dir", str(data_dir),
                          "--hparams", json.dumps({**BASE, **extra})])
    captured = capsys.readouterr()
    return captured.out, captured.err, data_dir / "models" / name


def test_a_learning_discriminator_gets_no_warning(data_dir, capsys):
    out, err, model_dir = run(data_dir, "healthy", capsys)
    assert "step 500/500" in out
    assert "collapsed" not in out + err
    assert last_train_scalar(model_dir, "disc_auc") > 0.8  # it really learned (≈ 0.92 measured)


def test_a_collapsed_discriminator_is_warned_about_with_its_likely_causes(data_dir, capsys):
    out, err, model_dir = run(data_dir, "collapsed", capsys, learning_rate=0.05)
    assert "step 500/500" in out
    warnings = [line for line in err.splitlines() if "collapsed" in line]
    assert len(warnings) == 1 and warnings[0].startswith(WARNING), err[-2000:]
    for cause in ("generator_hidden_size", "learning_rate", "train_batch_size"):
        assert cause in warnings[0]
    assert "step 400" not in warnings[0]  # nothing before the first check (max(2 × warmup, 500))
    # The run's own metrics agree: the discriminator is at chance and predicts no replaced token.
    assert last_train_scalar(model_dir, "disc_auc") < 0.55
    assert last_train_scalar(model_dir, "disc_recall") < 0.05
