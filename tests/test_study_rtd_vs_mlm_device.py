"""studies/rtd_vs_mlm/device.py: the study's work moved to an accelerator without TensorFlow and back."""
import json
import shutil

import pytest

from training_jax import weights as jax_weights

from studies.rtd_vs_mlm import cli as rtd_vs_mlm, device, plan as study_plan, stages
from tests.study_fixtures import export_tiny_study, plan_in


def device_calls(export):
    """The shell lines of COMMANDS.txt, in order (the comment lines are their notes)."""
    return [line for line in (export / "COMMANDS.txt").read_text().splitlines() if not line.startswith("#")]


def test_the_two_device_calls_run_as_printed_then_import_and_finetune_here(tmp_path):
    """The 15-minute plan's two calls, exactly as the export wrote them, run by bash in a copy of the
    repository with the accelerator's python3 (only its image's packages and the wheels the export named;
    no TensorFlow), a micro model and seconds instead of minutes: both arms size themselves and pretrain at
    once, come back, fine-tune; then --device-results here imports them and run_finetuning.py
    (TensorFlow) fine-tunes the imported ELECTRA folder. The throughput line is exported to need more time
    than call 2 has (its choice is tested below): on a CPU it is a compile and 30 updates this test would
    not check."""
    import numpy as np

    import run_finetuning
    from configs.pretraining_config import PretrainingConfig
    from finetune.pretrained import read_model_folder
    from tests.helpers import (JAX_QUICK_XLA_FLAGS, accelerator_python, repack_wheels, repository_mirror,
                               run_device_line)
    from pretrain.loaded_folder import load_model_folder

    repo = repository_mirror(stages.REPO, tmp_path / "repo")
    repack_wheels(device.wheel_requirements(), repo / device.WHEELS_DIR)
    plan, export = export_tiny_study(tmp_path, finetune_tasks=True, seeds=1, finetune_max_steps=1,
                                     export=repo / "device_study", minutes=(7.0, 5.0), throughput_seconds=3600)
    # Minutes to spare: the runs stop at the planned 6 steps (as many as fit, at most the planned ones), so a
    # loaded CPU's slow compile cannot leave them no time, and an idle one does not wait for the deadline.
    calls = device_calls(export)
    assert len(calls) == 2 and all(len(line) <= 2000 for line in calls)
    assert all(line.startswith(device.PRELUDE) for line in calls)
    assert "--fit-minutes 6" in calls[0] and "--device-finetune" in calls[1]
    python = accelerator_python(tmp_path / "accelerator")  # this virtualenv's, limited to the image's packages

    outs = [tmp_path / "OUT1", tmp_path / "OUT2"]
    status, output = run_device_line(calls[0], repo, outs[0], python, 600, JAX_QUICK_XLA_FLAGS)
    assert status == 0, output[-4000:]
    summary = output[output.index("==== summary of the pretraining call"):]
    assert "electra: done; sized to" in summary and "mlm: done; sized to" in summary, output[-4000:]
    assert "next: call 2" in summary
    record = json.loads((outs[0] / device.PLAN_FILE).read_text())
    sized = {arm: record["arms"][arm]["sized"] for arm in study_plan.ARMS}
    steps = sized["electra"]["num_train_steps"]
    assert steps == plan.electra_steps  # as many as fit, at most the planned ones: here the planned ones
    assert sized["electra"]["units"] == sized["mlm"]["units"] == steps
    ratio = plan.steps_per_electra_step("mlm")
    assert sized["mlm"]["num_train_steps"] == max(1, round(steps * ratio / plan.budgets)) * plan.budgets
    for arm in study_plan.ARMS:  # each ran the sized config to its end, its schedule included
        config = PretrainingConfig.load(export / sized[arm]["config_file"])
        assert config.num_train_steps == sized[arm]["num_train_steps"] == record["arms"][arm]["run"]["num_train_steps"]
        assert config.num_warmup_steps == max(1, config.num_train_steps // 10)

    status, output = run_device_line(calls[1], repo, outs[1], python, 600, JAX_QUICK_XLA_FLAGS)
    assert status == 0, output[-4000:]
    summary = output[output.index("==== summary of the finetuning call"):]
    assert summary.count("rte: 1 trial(s), median") == 3, summary
    assert "throughput" not in summary and json.loads((outs[1] / device.PLAN_FILE).read_text())["throughput"] is None

    for out in outs:  # what the device tool brings back: at most 8 files of at most 16 MiB
        back = [p for p in out.rglob("*") if p.is_file()]
        assert len(back) <= 8 and all(p.stat().st_size <= jax_weights.SHARD_BYTES for p in back)
    results = tmp_path / "OUT"  # both calls' files in one folder, as the runbook says
    for out in outs:
        shutil.copytree(out, results, dirs_exist_ok=True)
    hparams = {**plan.pretraining, "model_hparam_overrides": plan.model["model_hparam_overrides"]}
    rtd_vs_mlm.main(["--work-dir", str(plan.work_dir), "--shared-data", str(plan.shared_data), "--budgets",
                     str(plan.budgets), "--tasks", "rte", "--seeds", "1", "--finetune-max-steps", "1",
                     "--hparams", json.dumps(hparams), "--device-results", str(results)])
    summary = json.loads((plan.work_dir / "summary.json").read_text())
    last = {arm: summary["arms"][arm][-1] for arm in study_plan.ARMS}
    for row in (*last.values(), summary["control"]):
        assert 0 <= row["scores"]["rte"] <= 100
    assert last["electra"]["step"] == steps
    folder = plan.data_dir / "models" / f"electra_step{steps}"
    assert read_model_folder(folder).checkpoint.endswith(f"ckpt-{steps}")
    came_back = jax_weights.read_weights(results / "electra", jax_weights.weights_file(steps))
    loaded = load_model_folder(folder)
    for variable in loaded.pretrainer.weights:
        np.testing.assert_array_equal(variable.numpy(), came_back[variable.path].astype(variable.dtype))
    assert (plan.data_dir / "models" / f"mlm_step{sized['mlm']['num_train_steps']}" / "config.json").is_file()

    run_finetuning.main(["--data-dir", str(plan.data_dir), "--model-name", folder.name, "--task", "rte",
                         "--finetuning-data-dir", str(plan.shared_data / "glue"),
                         "--hparams", json.dumps({"max_train_steps": 1, "save_finetuned_models": False})])
    mine = json.loads((folder / "results" / "rte_results.json").read_text())
    assert mine["complete"] and mine["trials_done"] == 1


def test_importing_a_device_run_with_no_weights_back_names_the_folder(tmp_path):
    """A run stopped at its limit imports (tests/test_import_gpu_runs.py); one that brought no weights back cannot."""
    from common.errors import InputError

    plan = plan_in(tmp_path)
    cut_off = tmp_path / "results" / "electra"
    cut_off.mkdir(parents=True)
    (cut_off / "metrics.jsonl").write_text('{"split": "train", "step": 100, "masked_lm_loss": 7.0}\n')
    with pytest.raises(InputError, match=r"results/electra: no weights-<step>\.npz .*came back for the electra run"):
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


def test_call_2_measures_the_throughput_only_with_the_exported_seconds_left(tmp_path, monkeypatch):
    """After one seed of every job: the throughput line when more than the export's throughput_seconds
    (an older export: THROUGHPUT_SECONDS) are left, then the other seeds."""
    study = {"plan": {"seeds": 2}, "throughput_seconds": 45}
    passes, measured = [], []
    monkeypatch.setattr(device, "read_study", lambda folder: study)
    monkeypatch.setattr(device, "finetune_jobs", lambda folder, s: [("electra_step6", ["w.npz"], "rte"),
                                                                    (study_plan.CONTROL, [], "rte")])
    monkeypatch.setattr(device, "finetuned_on_device", lambda *args: False)
    monkeypatch.setattr(device, "run_jobs", lambda folder, s, pending, seeds, *args: passes.append(seeds) or True)
    monkeypatch.setattr(device, "measure_throughput", lambda folder, s, deadline: measured.append(deadline))
    for exported, minutes, measures in ((45, 1.0, 1), (3600, 1.0, 0), (None, 1.0, 1), (None, 0.5, 0)):
        study.pop("throughput_seconds", None)
        if exported is not None:
            study["throughput_seconds"] = exported
        passes.clear()
        measured.clear()
        assert device.finetune_on_device(tmp_path, minutes)
        assert passes == [1, 2] and len(measured) == measures, (exported, minutes)
