"""bench/rtd_vs_mlm_device.py: the study's work moved to an accelerator without TensorFlow and back."""
import json

import pytest

from bench import rtd_vs_mlm
from bench import rtd_vs_mlm_device as device
from tests.test_bench_rtd_vs_mlm import plan_in


def export_tiny_study(tmp_path, electra_steps=6, budgets=2):
    """A study of a 1-layer micro model (it compiles fastest under JAX) on a tiny dataset, exported for the
    device: (plan, export folder)."""
    from tests.helpers import MICRO_MODEL, build_tiny_dataset

    plan = plan_in(tmp_path / "work", electra_steps=electra_steps, budgets=budgets, tasks=["rte"])
    build_tiny_dataset(plan.data_dir, max_seq_length=32, num_shards=2)
    vocab = plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt"  # the study reads the shared vocab
    vocab.parent.mkdir(parents=True)
    vocab.write_text((plan.data_dir / "vocab.txt").read_text())
    plan.model["model_hparam_overrides"] = {**MICRO_MODEL, "num_layers": 1}
    plan.pretraining.update(train_batch_size=4, eval_batch_size=4, num_eval_steps=2)
    export = tmp_path / "export"
    device.export_for_device(plan, export, finetune_tasks=False)
    return plan, export


def test_the_device_path_trains_under_jax_and_imports_readable_budget_folders(tmp_path):
    """--device-export → training_jax.pretrain (JAX, no TensorFlow) → --device-results: each checkpoint
    becomes a model folder fine-tuning reads, holding exactly the weights the device run saved. One arm is
    trained (the trainer and the import do not depend on the arm; ELECTRA's also has the discriminator)."""
    import os
    import subprocess
    import sys

    import numpy as np

    from training_jax import pretrain as pretrain_jax
    from checkpoints.model_folder import load_model_folder
    from configs.pretraining_config import PretrainingConfig
    from finetune.pretrained import read_model_folder

    plan, export = export_tiny_study(tmp_path)
    study = json.loads((export / pretrain_jax.STUDY_FILE).read_text())
    for arm in rtd_vs_mlm.ARMS:
        config = PretrainingConfig.load(export / study["arms"][arm]["config_file"])
        assert config.electra_objective == (arm == "electra") and config.num_train_steps == plan.steps(arm)
        assert study["arms"][arm]["checkpoint_steps"] == plan.checkpoint_steps(arm)

    results = tmp_path / "results"
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(rtd_vs_mlm.REPO))
    # TensorFlow made unimportable, as on the accelerator machines: any use of it fails the run.
    script = ("import sys; sys.modules['tensorflow'] = None; from training_jax import pretrain as pretrain_jax; "
              "pretrain_jax.main(sys.argv[1:])")
    completed = subprocess.run(
        [sys.executable, "-c", script, "--study", str(export), "--arm", "electra", "--out", str(results / "electra")],
        cwd=rtd_vs_mlm.REPO, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]

    device.import_device_run(plan, "electra", results)
    splits, run = pretrain_jax.read_metrics(results / "electra")
    assert run["arm"] == "electra" and run["num_train_steps"] == plan.steps("electra")
    assert len(list((results / "electra").iterdir())) == plan.budgets + 1  # weights and metrics.jsonl only
    records = splits["train"] + splits["eval"]
    assert splits["train"] and splits["eval"] and all(np.isfinite(r["masked_lm_loss"]) for r in records)
    assert "disc_auc" in splits["eval"][-1]
    for step in plan.checkpoint_steps("electra"):
        folder = plan.data_dir / "models" / f"electra_step{step}"
        assert read_model_folder(folder).checkpoint.endswith(f"ckpt-{step}")  # what fine-tuning reads
        loaded = load_model_folder(folder)
        saved = np.load(results / "electra" / pretrain_jax.weights_file(step))
        assert loaded.step == step and sorted(v.path for v in loaded.pretrainer.weights) == sorted(saved.files)
        for variable in loaded.pretrainer.weights:
            np.testing.assert_array_equal(variable.numpy(), saved[variable.path].astype(variable.dtype))
    curves = rtd_vs_mlm.training_curves(plan.data_dir / "models" / "electra")
    assert [s for s, _ in curves["masked_lm_loss"]] == [r["step"] for r in splits["train"]]
    first, last = (np.load(results / "electra" / pretrain_jax.weights_file(step))
                   for step in plan.checkpoint_steps("electra"))
    table = "electra/embeddings/word_embeddings"
    assert not np.array_equal(first[table], last[table])  # it trained in between


def test_importing_an_unfinished_device_run_names_the_missing_file(tmp_path):
    from data.errors import InputError

    plan = plan_in(tmp_path)
    cut_off = tmp_path / "results" / "electra"
    cut_off.mkdir(parents=True)
    with pytest.raises(InputError, match=r"electra/metrics\.jsonl: missing.*run training_jax\.pretrain"):
        device.import_device_run(plan, "electra", tmp_path / "results")
    (cut_off / "metrics.jsonl").write_text('{"split": "train", "step": 100, "masked_lm_loss": 7.0}\n')
    with pytest.raises(InputError, match="without its final run record"):  # killed before its last line
        device.import_device_run(plan, "electra", tmp_path / "results")


def test_the_runs_are_sized_to_fit_the_minutes_at_the_measured_speed(tmp_path):
    """Both arms, one after the other, with a compile per piece, inside 90% of the minutes; equal FLOPs."""
    plan = plan_in(tmp_path, electra_steps=1500, budgets=3)
    measured = {"electra": (40.0, 50.0), "mlm": (45.0, 40.0)}  # steps/s, compile seconds
    steps, expected = device.steps_that_fit(plan, measured, minutes=17)
    ratio = plan.steps("mlm") / plan.steps("electra")
    two_pieces = 2 * (50.0 + 40.0)
    assert steps % plan.budgets == 0
    assert expected <= 0.9 * 17 * 60
    per_step = 1.05 * (1 / 40.0 + ratio / 45.0)
    assert steps * per_step + two_pieces <= 0.9 * 17 * 60 < (steps + plan.budgets) * per_step + two_pieces
    faster = device.steps_that_fit(plan, {"electra": (80.0, 50.0), "mlm": (90.0, 40.0)}, minutes=17)[0]
    assert faster > 1.9 * steps
    with pytest.raises(Exception, match="too short"):
        device.steps_that_fit(plan, measured, minutes=1)  # the compiles alone take longer
