"""studies/rtd_vs_mlm: equal-FLOP budgets, per-checkpoint model folders, and the summary of what finished."""
import json
import threading

import pytest
import tensorflow as tf

from studies.rtd_vs_mlm import cli as rtd_vs_mlm, plan as study_plan, report, stages
from finetune.registry import get_task
from tests.study_fixtures import plan_in


def test_the_mlm_run_gets_the_electra_runs_flops_at_every_budget(tmp_path):
    plan = plan_in(tmp_path)
    electra, mlm = plan.flops_per_step("electra"), plan.flops_per_step("mlm")
    assert electra != mlm  # the objectives really cost differently per step
    assert plan.steps("mlm") % plan.budgets == 0
    for e_step, m_step in zip(plan.checkpoint_steps("electra"), plan.checkpoint_steps("mlm")):
        # equal compute up to rounding the MLM run to whole steps (one step per budget at most)
        assert abs(m_step * mlm - e_step * electra) <= mlm * plan.budgets
    assert plan.checkpoint_steps("electra") == [500, 1000, 1500]
    assert plan.checkpoint_steps("mlm")[-1] == plan.steps("mlm")
    assert plan.arm_config("mlm").electra_objective is False
    assert plan.arm_config("electra").model_config().hidden_size == 128


def test_an_extra_budget_is_one_more_equal_flops_checkpoint_of_the_same_runs(tmp_path):
    """--extra-budgets 250: a checkpoint before the evenly spaced ones, at ELECTRA step 250 and the MLM step of
    the same FLOPs, saved by the same runs (same schedule), and fine-tuned like the others."""
    plan = plan_in(tmp_path, extra_budgets=[250])
    electra, mlm = plan.flops_per_step("electra"), plan.flops_per_step("mlm")
    assert plan.checkpoint_steps("electra") == [250, 500, 1000, 1500]
    first_mlm = plan.checkpoint_steps("mlm")[0]
    assert abs(first_mlm * mlm - 250 * electra) <= mlm / 2  # the nearest whole step
    assert plan.checkpoint_steps("mlm")[1:] == plan_in(tmp_path).checkpoint_steps("mlm")
    for arm in ("electra", "mlm"):
        hparams = study_plan.pretraining_hparams(plan, arm)
        assert hparams["num_train_steps"] == plan_in(tmp_path).steps(arm)  # the schedule is unchanged
        assert hparams["extra_checkpoint_steps"] == plan.checkpoint_steps(arm)[:1]
        assert plan.arm_config(arm).extra_checkpoint_steps == ()  # the study's model itself is unchanged
        # an extra budget that is already an evenly spaced one adds nothing, so the arms stay paired
        assert plan_in(tmp_path, extra_budgets=[1000]).checkpoint_steps(arm) == plan_in(tmp_path).checkpoint_steps(arm)

    run = plan.data_dir / "models" / "mlm"
    run.mkdir(parents=True)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable([1.0])), str(run), max_to_keep=None,
                                         checkpoint_name="ckpt")
    manager.save(checkpoint_number=first_mlm)
    assert stages.ready_budgets(plan) == [("mlm", first_mlm)]
    assert [row["step"] for row in report.collect(plan)["arms"]["mlm"]] == plan.checkpoint_steps("mlm")


@pytest.mark.parametrize("value, fragment", [("5OO", "separated by commas"), ("1500", "between 1 and")])
def test_a_bad_extra_budget_is_one_line_exit_2(tmp_path, capsys, value, fragment):
    with pytest.raises(SystemExit) as exit_info:
        rtd_vs_mlm.main(["--work-dir", str(tmp_path), "--electra-steps", "1500", "--extra-budgets", value])
    assert exit_info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_a_budget_folder_holds_exactly_that_checkpoint(tmp_path):
    plan = plan_in(tmp_path)
    run = plan.data_dir / "models" / "electra"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "vocab.txt").write_text("[PAD]\n")
    variable = tf.Variable([1.0, 2.0])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), str(run), max_to_keep=None,
                                         checkpoint_name="ckpt")
    manager.save(checkpoint_number=500)
    variable.assign([3.0, 4.0])
    manager.save(checkpoint_number=1000)

    folder = stages.budget_folder(plan, "electra", 500)
    assert folder.name == "electra_step500"
    assert tf.train.latest_checkpoint(str(folder)) == str(folder / "ckpt-500")
    restored = tf.Variable([0.0, 0.0])
    tf.train.Checkpoint(v=restored).restore(str(folder / "ckpt-500")).expect_partial()
    assert restored.numpy().tolist() == [1.0, 2.0]
    assert not list(folder.glob("ckpt-1000*"))
    assert stages.budget_folder(plan, "electra", 500) == folder  # done once, then reused


def test_finetune_ready_takes_only_the_checkpoints_saved_so_far(tmp_path, monkeypatch):
    """--finetune-ready: the budget checkpoints pretraining has saved are fine-tuned on every task, the last
    first; the budget not reached yet, and the arm that has not started, are left for a later call."""
    plan = plan_in(tmp_path)
    run = plan.data_dir / "models" / "electra"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "vocab.txt").write_text("[PAD]\n")
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable([1.0])), str(run), max_to_keep=None,
                                         checkpoint_name="ckpt")
    for step in (250, 500, 1000):  # 250 is not a budget
        manager.save(checkpoint_number=step)
    assert stages.ready_budgets(plan) == [("electra", 1000), ("electra", 500)]  # the most trained first
    calls = []
    monkeypatch.setattr(rtd_vs_mlm, "finetune", lambda plan, folder, task, name: calls.append((folder.name, task)))
    monkeypatch.setattr(rtd_vs_mlm, "write_summary", lambda plan: None)
    rtd_vs_mlm.main(["--work-dir", str(tmp_path), "--shared-data", str(tmp_path / "shared"), "--tasks", "cola,rte",
                     "--finetune-ready"])
    assert calls == [("electra_step1000", "cola"), ("electra_step1000", "rte"),
                     ("electra_step500", "cola"), ("electra_step500", "rte")]
    assert not (plan.data_dir / "pretrain_tfrecords").exists()  # no dataset build, no pretraining


def test_pretrain_only_runs_one_arm_and_no_fine_tuning(tmp_path, monkeypatch):
    """--pretrain-only mlm: the dataset (when missing) and the MLM arm's pretraining, nothing of the ELECTRA
    arm, no fine-tuning."""
    calls = []
    monkeypatch.setattr(rtd_vs_mlm, "build_dataset", lambda plan: calls.append("dataset"))
    monkeypatch.setattr(rtd_vs_mlm, "pretrain", lambda plan, arm: calls.append(arm))
    monkeypatch.setattr(rtd_vs_mlm, "finetune", lambda *args: calls.append("finetune"))
    rtd_vs_mlm.main(["--work-dir", str(tmp_path), "--shared-data", str(tmp_path / "shared"), "--pretrain-only", "mlm"])
    assert calls == ["dataset", "mlm"]


def write_result(folder, task, median, complete=True):
    """Three trials (seeds 0, 1, 2) at median - 1, median, median + 3."""
    metric = get_task(task).primary_metric
    (folder / "results").mkdir(parents=True, exist_ok=True)
    trials = [{"seed": seed, "metrics": {metric: median + offset}} for seed, offset in enumerate((-1, 0, 3))]
    stages.results_file(folder, task).write_text(json.dumps({
        "complete": complete, "primary_metric": metric, "majority_baseline": {metric: 50.0}, "trials": trials,
        "summary": {metric: {"median": median, "mean": median + 2 / 3, "std": 1.0}}}))


def test_the_summary_counts_only_finished_cells(tmp_path):
    plan = plan_in(tmp_path, budgets=1, electra_steps=300)
    models = plan.data_dir / "models"
    electra = models / f"electra_step{plan.checkpoint_steps('electra')[0]}"
    mlm = models / f"mlm_step{plan.checkpoint_steps('mlm')[0]}"
    write_result(electra, "cola", 20.0)
    write_result(electra, "rte", 60.0)
    write_result(mlm, "cola", 10.0)
    write_result(mlm, "rte", 55.0, complete=False)  # interrupted: run again, not counted

    summary = report.collect(plan)
    (electra_row,), (mlm_row,) = summary["arms"]["electra"], summary["arms"]["mlm"]
    assert electra_row["average"] == 40.0 and electra_row["flops"] == 300 * plan.flops_per_step("electra")
    assert electra_row["seed_averages"] == [39.0, 40.0, 43.0]  # per seed, over tasks
    assert "seed_averages" not in mlm_row
    assert mlm_row["scores"] == {"cola": 10.0} and "average" not in mlm_row
    table = report.markdown(summary, plan.tasks)
    assert "| ELECTRA (RTD) | 300 |" in table and "| 20.0 ± 1.0 | 60.0 ± 1.0 | 40.0 |" in table
    assert "| 10.0 ± 1.0 | … | … |" in table
    assert "| majority class | | | 50.0 | 50.0 | 50.0 |" in table
    assert "| no pretraining | 0 | 0.00e+00 | … | … | … |" in table

    control = models / study_plan.CONTROL
    write_result(control, "cola", 5.0)
    write_result(control, "rte", 53.0)
    summary = report.collect(plan)
    assert summary["control"]["flops"] == 0 and summary["control"]["average"] == 29.0
    assert "| no pretraining | 0 | 0.00e+00 | 5.0 ± 1.0 | 53.0 ± 1.0 | 29.0 |" in report.markdown(summary, plan.tasks)
    report.figures(plan, summary)  # error bars from the seed averages, the control and majority lines
    assert (plan.work_dir / "dev_score_vs_flops.png").stat().st_size > 10_000


def test_the_control_is_the_studys_discriminator_untrained(tmp_path):
    """random_init: the ELECTRA arm's config at step 0, readable by fine-tuning, written once."""
    from finetune.pretrained import read_model_folder

    vocab = tmp_path / "shared" / "vocab" / "bert-base-uncased-vocab.txt"
    vocab.parent.mkdir(parents=True)
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(60)]) + "\n")
    plan = plan_in(tmp_path)
    plan.model["model_hparam_overrides"] = {**plan.model["model_hparam_overrides"], "vocab_size": 65}
    folder = stages.control_folder(plan)
    pretrained = read_model_folder(folder)
    assert pretrained.checkpoint.endswith("ckpt-0")
    assert pretrained.model_config.hidden_size == 128 and pretrained.model_config.num_layers == 4
    stamp = (folder / "checkpoint").stat().st_mtime_ns
    assert stages.control_folder(plan) == folder and (folder / "checkpoint").stat().st_mtime_ns == stamp


def test_stage_timings_add_up_across_restarts_and_per_arm(tmp_path):
    stages.add_timing(tmp_path, "pretrain mlm", 60.0)
    stages.add_timing(tmp_path, "pretrain mlm", 120.0)  # resumed after a stop
    stages.add_timing(tmp_path, "finetune mlm_step534 cola", 30.0)
    stages.add_timing(tmp_path, "finetune mlm_step1068 rte", 90.0)
    seconds = json.loads((tmp_path / stages.TIMINGS).read_text())
    assert seconds["pretrain mlm"] == 180.0
    assert report.stage_minutes(seconds) == {"finetune mlm": 2.0, "pretrain mlm": 3.0}


def test_timings_from_arms_running_at_once_are_all_kept(tmp_path):
    """Both arms' --pretrain-only runs and a --finetune-ready run may end stages at the same moment.
    flock excludes separate open()s even within one process, so threads stand in for the processes."""
    errors = []

    def add_seconds(stage):
        try:
            for _ in range(200):
                stages.add_timing(tmp_path, stage, 1.0)
        except OSError as error:
            errors.append(error)

    workers = [threading.Thread(target=add_seconds, args=(f"stage {i % 2}",)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors
    assert json.loads((tmp_path / stages.TIMINGS).read_text()) == {"stage 0": 400.0, "stage 1": 400.0}


def test_a_resumed_runs_curves_keep_the_last_write_of_each_step(tmp_path):
    train = tmp_path / "logs" / "train"
    for run, losses in enumerate(([9.0, 8.0, 7.0], [8.5, 6.0])):  # the second run resumed at step 100
        writer = tf.summary.create_file_writer(str(train / f"run{run}"))
        with writer.as_default():
            for step, loss in zip((100, 200, 300)[:len(losses)] if run == 0 else (200, 300), losses):
                tf.summary.scalar("disc_loss", loss, step=step)
        writer.close()
        for path in (train / f"run{run}").iterdir():
            path.rename(train / f"{path.name}.{run}")
    curves = report.training_curves(tmp_path)
    assert curves["disc_loss"] == [(100, 9.0), (200, 8.5), (300, 6.0)]
