"""bench/study/device.py: the study's work moved to an accelerator without TensorFlow and back."""
import json
import textwrap

import pytest

from bench import rtd_vs_mlm
from bench.study import plan as study_plan, report, stages
from bench.study import device
from tests.test_bench_rtd_vs_mlm import plan_in


def export_tiny_study(tmp_path, electra_steps=6, budgets=2, finetune_tasks=False, **changes):
    """A study of a 1-layer micro model (it compiles fastest under JAX) on a tiny dataset, exported for the
    device: (plan, export folder). With finetune_tasks, an RTE-format fixture is exported too."""
    from tests.helpers import MICRO_MODEL, build_tiny_dataset

    plan = plan_in(tmp_path / "work", electra_steps=electra_steps, budgets=budgets, tasks=["rte"], **changes)
    build_tiny_dataset(plan.data_dir, max_seq_length=32, num_shards=2)
    vocab = plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt"  # the study reads the shared vocab
    vocab.parent.mkdir(parents=True)
    vocab.write_text((plan.data_dir / "vocab.txt").read_text())
    if finetune_tasks:
        from tests.test_jax_finetune import write_rte

        text = " ".join(p.read_text() for p in sorted((plan.data_dir / "corpus").glob("*.txt")))
        sentences = [" ".join(s.split()[:10]) for s in text.replace("\n", " ").split(". ") if len(s.split()) >= 6]
        write_rte(plan.shared_data / "glue" / "rte", sentences, {"train": 40, "dev": 16}, seed=0)
    plan.model["model_hparam_overrides"] = {**MICRO_MODEL, "num_layers": 1}
    plan.pretraining.update(train_batch_size=4, eval_batch_size=4, num_eval_steps=2)
    export = tmp_path / "export"
    device.export_for_device(plan, export, finetune_tasks=finetune_tasks)
    return plan, export


ON_THE_ACCELERATOR = textwrap.dedent('''
    import json, os, pathlib, sys
    sys.modules["tensorflow"] = None  # as on the accelerator machines: any use of TensorFlow fails
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # cache even the tiny model's programs
    from bench import rtd_vs_mlm
    from training_jax import pretrain

    study, out = pathlib.Path(STUDY), OUT
    pretrain.measure = lambda *args: (100.0, 0.5)  # the size must not depend on this CPU's speed
    rtd_vs_mlm.main(["--device-size", str(study), "--minutes", "0.03"])
    for arm in ("electra", "mlm"):
        pretrain.main(["--study", str(study), "--arm", arm, "--out", str(study / "runs" / arm)])
    rtd_vs_mlm.main(["--device-finetune", str(study), "--minutes", "5"])
    rtd_vs_mlm.main(["--device-collect", str(study), "--out", out])
    print("RESULTS" + json.dumps({"plan": json.loads((study / "study.json").read_text())}))
''')


def test_the_whole_device_sequence_dry_runs_on_the_cpu(tmp_path, capsys):
    """export → size → pretrain both arms → fine-tune each arm's last checkpoint and the control → collect
    (JAX, TensorFlow unimportable) → --device-results here: the ELECTRA weights become a model folder
    holding exactly what came back, the results fill the study's table, the curves its figures."""
    import numpy as np

    from training.model_folder import load_model_folder
    from configs.pretraining_config import PretrainingConfig
    from finetune.pretrained import read_model_folder
    from tests.helpers import run_script_under_jax
    from training_jax import pretrain

    plan, export = export_tiny_study(tmp_path, finetune_tasks=True, seeds=1, finetune_max_steps=1)
    commands = (export / "COMMANDS.txt").read_text()
    assert [line.split(" --")[0].split()[-1] for line in commands.splitlines() if not line.startswith("#")][-2:] \
        == ["bench.rtd_vs_mlm", "bench.rtd_vs_mlm"]
    assert "--time-limit-minutes 8.5" in commands and "--device-size" in commands and "--device-finetune" in commands
    for arm in study_plan.ARMS:
        config = PretrainingConfig.load(export / f"config_{arm}.json")
        assert config.electra_objective == (arm == "electra") and config.num_train_steps == plan.steps(arm)

    out = tmp_path / "OUT"
    script = ON_THE_ACCELERATOR.replace("STUDY", repr(str(export))).replace("OUT", repr(str(out)))
    results = run_script_under_jax(script, stages.REPO, timeout=600)
    sized = results["plan"]["plan"]
    steps = sized["electra_steps"]
    assert steps != plan.electra_steps and steps % plan.budgets == 0  # sized from the (fixed) speed
    back = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(back) <= 8 and all((out / name).stat().st_size <= device.SHARD_BYTES for name in back)
    assert {"electra/metrics.jsonl", "mlm/metrics.jsonl", "finetune/random_init.json"} <= set(back)

    hparams = {**plan.pretraining, "model_hparam_overrides": plan.model["model_hparam_overrides"]}
    rtd_vs_mlm.main(["--work-dir", str(plan.work_dir), "--shared-data", str(plan.shared_data), "--electra-steps",
                     str(steps), "--budgets", str(plan.budgets), "--tasks", "rte", "--seeds", "1",
                     "--finetune-max-steps", "1", "--hparams", json.dumps(hparams), "--device-results", str(out)])
    assert "no weights came back and no results" in capsys.readouterr().out  # the first budget: not brought back
    summary = json.loads((plan.work_dir / "summary.json").read_text())
    last = {arm: summary["arms"][arm][-1] for arm in study_plan.ARMS}
    for row in (*last.values(), summary["control"]):
        assert 0 <= row["scores"]["rte"] <= 100 and "average" in row
    assert last["electra"]["step"] == steps
    assert last["mlm"]["step"] == results["plan"]["arms"]["mlm"]["checkpoint_steps"][-1]
    folder = plan.data_dir / "models" / f"electra_step{steps}"
    assert read_model_folder(folder).checkpoint.endswith(f"ckpt-{steps}")  # what run_finetuning.py reads
    came_back = device.read_weights(out / "electra", pretrain.weights_file(steps))
    loaded = load_model_folder(folder)
    assert sorted(v.path for v in loaded.pretrainer.weights) == sorted(came_back)
    for variable in loaded.pretrainer.weights:
        np.testing.assert_array_equal(variable.numpy(), came_back[variable.path].astype(variable.dtype))
    splits, _ = pretrain.read_metrics(out / "electra")
    curves = report.training_curves(plan.data_dir / "models" / "electra")
    assert [s for s, _ in curves["masked_lm_loss"]] == [r["step"] for r in splits["train"]]
    assert (plan.work_dir / "dev_score_vs_flops.png").is_file()


def test_weights_in_shards_read_back_whole(tmp_path):
    import numpy as np

    values = {f"layer_{i}/kernel": np.full((64, 64), i, np.float16) for i in range(5)}  # 8 KiB each
    device.write_shards(values, tmp_path, "weights-9.npz", max_bytes=20_000)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"weights-9.part{k}of3.npz" for k in (1, 2, 3)]
    whole = device.read_weights(tmp_path, "weights-9.npz")
    assert sorted(whole) == sorted(values) and all(np.array_equal(whole[k], values[k]) for k in values)
    (tmp_path / "weights-9.part2of3.npz").unlink()
    with pytest.raises(Exception, match="2 of the 3 shards"):
        device.read_weights(tmp_path, "weights-9.npz")
    assert device.read_weights(tmp_path, "weights-1.npz") is None


def test_importing_an_unfinished_device_run_names_the_missing_file(tmp_path):
    from common.errors import InputError

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
