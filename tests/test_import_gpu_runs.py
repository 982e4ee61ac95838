"""The import back here takes every run a GPU can produce: sized shorter than planned by --fit-minutes,
stopped at its hard limit (weights at a step that is no checkpoint, no run record, half a last metrics
line), and recorded by an older trainer whose run record holds the exported, unsized config (the real H200
run of 2026-11-27, in ../shared/gpu_runs); a run of another config is refused with one line."""
import dataclasses
import json
import pathlib
import shutil
import time

import numpy as np
import pytest

from tests.checkpoint_fixtures import assert_one_line_exit_2
from tests.helpers import run_script_under_jax
from tests.study_fixtures import export_tiny_study

REPO = pathlib.Path(__file__).resolve().parents[1]
PLANNED, SIZED, BUDGETS = 8, 4, 2
H200_RUN = "2026-11-27-h200"


class MeasuredRun:
    """What training_jax.fit.size_run asks of a run (training_jax.pretrain.Run) once it has compiled, with
    its measurements given: the sizing's own code sets the length, no training needed."""

    def __init__(self, export, arm):
        from configs.pretraining_config import PretrainingConfig

        from studies.device_path.pretrain_export import plan_from_export

        self.plan = plan_from_export(export, arm)
        self.config = PretrainingConfig.load(self.plan.config_file)
        self.block_steps = 1

    def compile_and_time_evaluation(self):
        return 1.0, 0.01

    def measure_rate(self, steps):
        return 50.0

    def resize(self, fields, config_path):  # as Run.resize: the run becomes the sized one
        self.config = dataclasses.replace(self.config, **fields["config"])
        self.config.save(config_path)

    def log(self, message):
        print(message)


def write_run(folder, config, steps, record=None):
    """What training_jax.pretrain leaves in its --out: ckpt-<step> (float16, by Keras path, its own writer) of
    the config's model, and metrics.jsonl (a held-out line, a training window, the run record)."""
    from pretrain.builder import build_pretrainer
    from training_jax.weights import save_checkpoint

    folder.mkdir(parents=True)
    pretrainer = build_pretrainer(config)
    for step in steps:
        save_checkpoint(folder, step, pretrainer, "float16", config, None)
    lines = [{"split": "eval", "step": 0, "disc_auc": 0.5}, {"split": "train", "step": steps[-1], "total_loss": 40.0}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines + [record] if line))


@pytest.fixture(scope="module")
def device_runs(tmp_path_factory):
    """(plan as sized, export folder, {"sized": OUT, "stopped": OUT}): the micro study's ELECTRA arm sized by
    training_jax.fit to fewer steps than planned (the fitting length fixed, so that it is the same on any
    CPU), its run's files, and what a device call's collect brings back of it; then the same sized run
    stopped at its hard limit after step 1 (weights of a step that is no checkpoint, no run record)."""
    from studies.rtd_vs_mlm import device
    from training_jax import fit

    root = tmp_path_factory.mktemp("gpu_runs")
    plan, export = export_tiny_study(root, electra_steps=PLANNED, budgets=BUDGETS)
    run = MeasuredRun(export, "electra")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fit, "BARRIER_SECONDS", 0.1)  # the MLM arm is not run: the ELECTRA arm sizes alone
        patch.setattr(fit, "units_that_fit", lambda rates, steps_per_unit, seconds, multiple: SIZED)
        entry = fit.size_run(run, time.monotonic(), fit_minutes=5, measure_steps=2)
    record = {"split": "run", "arm": "electra", "config": run.config.to_dict(), "device": "cpu cpu",
              "num_train_steps": entry["num_train_steps"], "checkpoint_steps": entry["checkpoint_steps"],
              "wall_clock_seconds": 1.0, "compile_seconds": 1.0, "steps_per_second": 50.0, "weights_dtype": "float16"}
    outs = {name: root / "OUT" / name for name in ("sized", "stopped")}
    write_run(export / device.RUNS / "electra", run.config, entry["checkpoint_steps"], record)
    device.collect_from_device(export, outs["sized"])
    shutil.rmtree(export / device.RUNS)
    write_run(export / device.RUNS / "electra", run.config, [1])
    device.collect_from_device(export, outs["stopped"])
    return dataclasses.replace(plan, electra_steps=SIZED), export, outs


def rewrite_run_record(results, change):
    """The results folder's ELECTRA run record, `change`d (a function of the record) in place."""
    path = results / "electra" / "metrics.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1] + [json.dumps(change(json.loads(lines[-1])))]) + "\n")


def copy_results(source, folder):
    shutil.copytree(source, folder)
    return folder


def fresh_study(plan, work_dir):
    """The plan in another work folder holding the same dataset and no model folders yet."""
    shutil.copytree(plan.data_dir, work_dir / "data", ignore=shutil.ignore_patterns("models"))
    return dataclasses.replace(plan, work_dir=work_dir)


def assert_folder_holds(folder, results, step):
    """The model folder's checkpoint is `step` and holds exactly the weights that came back; returns the folder
    as loaded (pretrain.loaded_folder), for a test to use without loading it again."""
    from pretrain.loaded_folder import load_model_folder
    from training_jax.weights import read_weights

    loaded = load_model_folder(folder)
    assert loaded.checkpoint.endswith(f"ckpt-{step}")
    came_back = read_weights(results / "electra", f"weights-{step}.npz")
    for variable in loaded.pretrainer.weights:
        np.testing.assert_array_equal(variable.numpy(), came_back[variable.path].astype(variable.dtype))
    return loaded


def import_jax_args(plan, export, results, step, data_dir, name):
    """studies.device_path.import_jax's arguments for the study export's ELECTRA model (the study reads the shared vocabulary)."""
    return ["--export", str(export), "--model", "electra", "--weights", str(results / "electra" / f"weights-{step}.npz"),
            "--vocab-file", str(plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt"),
            "--data-dir", str(data_dir), "--model-name", name]


def test_a_run_sized_shorter_than_planned_imports_through_the_study_and_import_jax(device_runs, tmp_path, capsys):
    from studies.device_path import import_jax
    from common.errors import InputError
    from studies.rtd_vs_mlm import cli, device

    plan, export, outs = device_runs
    record = json.loads((outs["sized"] / "plan.json").read_text())
    assert record["arms"]["electra"]["sized"]["num_train_steps"] == SIZED < PLANNED
    run = record["arms"]["electra"]["run"]
    assert run["num_train_steps"] == SIZED and run["checkpoint_steps"] == [SIZED // BUDGETS, SIZED]
    # The study's flags as exported (--electra-steps the planned length) take the sized steps; others are refused.
    assert cli.sized_electra_steps(outs["sized"], PLANNED) == SIZED == cli.sized_electra_steps(outs["sized"], None)
    with pytest.raises(InputError, match=f"sized the run to {SIZED}; give {SIZED}"):
        cli.sized_electra_steps(outs["sized"], PLANNED - 2)

    device.import_device_run(plan, "electra", outs["sized"])
    for step in (SIZED // BUDGETS, SIZED):  # the collect brings the newest weights only
        assert (plan.data_dir / "models" / f"electra_step{step}").is_dir() == (step == SIZED)
    config = assert_folder_holds(plan.data_dir / "models" / f"electra_step{SIZED}", outs["sized"], SIZED).config
    assert (config.num_train_steps, config.num_warmup_steps, config.save_checkpoints_steps) == (SIZED, 1, 2)
    curves = (plan.data_dir / "models" / "electra" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(curves[-1])["split"] == "run" and (plan.data_dir / "models" / "electra" / "logs").is_dir()

    folder = import_jax.main(import_jax_args(plan, export, outs["sized"], SIZED, tmp_path / "data", "sized"))
    assert f"sized to {SIZED} of the planned {PLANNED} steps" in capsys.readouterr().out
    assert assert_folder_holds(folder, outs["sized"], SIZED).config.num_train_steps == SIZED


def test_an_older_run_record_imports_saying_so_and_another_config_is_refused(device_runs, tmp_path, capsys):
    """An older trainer wrote the exported config into the record of a sized run (the H200's file): the
    import takes it when only the sizing's step counts differ; one setting more is another run."""
    from studies.device_path import import_jax
    from common.errors import InputError
    from configs.pretraining_config import PretrainingConfig
    from studies.rtd_vs_mlm import device

    plan, export, outs = device_runs
    exported = PretrainingConfig.load(export / "config_electra.json").to_dict()
    assert exported["num_train_steps"] == PLANNED
    older = copy_results(outs["sized"], tmp_path / "older")
    rewrite_run_record(older, lambda run: {**run, "config": exported})
    folder = import_jax.main(import_jax_args(plan, export, older, SIZED, tmp_path / "data", "older"))
    said = [line for line in capsys.readouterr().out.splitlines() if "exported (unsized) config" in line]
    assert len(said) == 1 and f"num_train_steps {PLANNED} -> {SIZED}" in said[0], said
    assert assert_folder_holds(folder, older, SIZED).config.num_train_steps == SIZED
    study_plan = fresh_study(plan, tmp_path / "study")
    device.import_device_run(study_plan, "electra", older)
    assert "exported (unsized) config" in capsys.readouterr().out
    assert assert_folder_holds(study_plan.data_dir / "models" / f"electra_step{SIZED}", older, SIZED)

    other = copy_results(outs["sized"], tmp_path / "other")
    rewrite_run_record(other, lambda run: {**run, "config": {**run["config"], "learning_rate": 0.1}})
    assert_one_line_exit_2(import_jax.main, import_jax_args(plan, export, other, SIZED, tmp_path / "data", "other"),
                           capsys, "trained with another config than the export's model electra", "learning_rate 0.1")
    assert not (tmp_path / "data" / "models" / "other").exists()
    with pytest.raises(InputError, match="learning_rate 0.1, expected 0.0005.*export the study again"):
        device.import_device_run(fresh_study(plan, tmp_path / "study2"), "electra", other)
    warmup = copy_results(outs["sized"], tmp_path / "warmup")  # a schedule no sizing gives
    rewrite_run_record(warmup, lambda run: {**run, "config": {**run["config"], "num_warmup_steps": 3}})
    assert_one_line_exit_2(import_jax.main, import_jax_args(plan, export, warmup, SIZED, tmp_path / "data", "warmup"),
                           capsys, "not one a sizing to fewer steps gives", "num_warmup_steps 3, expected 1")


def test_a_run_stopped_at_its_hard_limit_imports_its_newest_weights(device_runs, tmp_path, capsys):
    from studies.device_path import import_jax
    from studies.rtd_vs_mlm import device

    plan, export, outs = device_runs
    stopped = copy_results(outs["stopped"], tmp_path / "stopped")
    assert json.loads((stopped / "plan.json").read_text())["arms"]["electra"]["newest_weights"] == 1
    metrics = stopped / "electra" / "metrics.jsonl"
    whole = metrics.read_text().splitlines()
    assert all(json.loads(line)["split"] != "run" for line in whole)
    metrics.write_text(metrics.read_text() + '{"split": "train", "step": 2, "masked_lm_lo')  # killed mid-line

    study_plan = fresh_study(plan, tmp_path / "study")
    device.import_device_run(study_plan, "electra", stopped)
    printed = capsys.readouterr().out
    assert "its last line is cut off" in printed and "the run stopped at step 1, before its checkpoint(s)" in printed
    config = assert_folder_holds(study_plan.data_dir / "models" / "electra_step1", stopped, 1).config
    assert config.num_train_steps == SIZED
    curves = (study_plan.data_dir / "models" / "electra" / "metrics.jsonl").read_text().splitlines()
    assert curves == whole  # the records that were whole, the cut one dropped

    folder = import_jax.main(import_jax_args(plan, export, stopped, 1, tmp_path / "data", "stopped"))
    assert f"as the device sized it ({SIZED} steps, plan.json)" in capsys.readouterr().out
    assert assert_folder_holds(folder, stopped, 1).config.num_train_steps == SIZED
    # the history of the weights imported: the whole records up to their step, no run record (unfinished)
    history = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert history == [json.loads(line) for line in whole if json.loads(line)["step"] <= 1] and history


# ---------------------------------------------------------------- the real H200 run (real-data tier)
JAX_DISCRIMINATOR = '''
import json, sys
sys.modules["tensorflow"] = None
import numpy as np
from configs.pretraining_config import PretrainingConfig
from training_jax.weights import pretrainer_with_weights, read_weights

folder, config_file = FOLDER, CONFIG
pretrainer = pretrainer_with_weights(PretrainingConfig.load(config_file),
                                     read_weights(folder, "weights-11144.npz"), folder)
batch = {key: np.asarray(value, "int32") for key, value in json.loads(BATCH).items()}
logits = pretrainer.discriminator_head(pretrainer.discriminator(batch, training=False))
print("RESULTS" + json.dumps(np.asarray(logits, "float64").tolist()))
'''


@pytest.fixture(scope="module")
def h200_run(shared_data):
    """../shared/gpu_runs/<H200_RUN>/, beside ../shared/data: missing while the data is set is a failure."""
    folder = shared_data.parent / "gpu_runs" / H200_RUN
    if not (folder / "electra" / "metrics.jsonl").is_file():
        pytest.fail(f"{folder}: missing; the real-data tier needs the H200 run's files beside {shared_data}")
    return folder


def test_the_h200_run_record_is_the_studys_electra_arm_as_sized(h200_run, tmp_path):
    """The study's --device-results with the export's flags (the run's README: --electra-steps 1000000,
    --budgets 1, electra_small at batch 128, 40 held-out batches) takes the 11,144 steps the device sized,
    and the record's config, sized as the run was, is the study's ELECTRA arm at them (BERT's vocabulary:
    the dataset's values are the defaults)."""
    from checkpoints import run_record
    from configs.pretraining_config import PretrainingConfig
    from studies.rtd_vs_mlm import cli
    from studies.rtd_vs_mlm.plan import WARMUP_FRACTION, pretraining_hparams
    from tests.study_fixtures import plan_in

    assert cli.sized_electra_steps(h200_run, 1_000_000) == 11144
    _, record, note = run_record.read_run(h200_run / "electra" / "metrics.jsonl")
    assert note is None and record["config"]["num_train_steps"] == 1_000_000
    used, note = run_record.used_config(record, WARMUP_FRACTION)
    assert "num_warmup_steps 100000 -> 1114" in note
    plan = plan_in(tmp_path, electra_steps=11144, budgets=1, model={"model_size": "electra_small"})
    plan.pretraining.update(train_batch_size=128, num_eval_steps=40)
    expected = PretrainingConfig.create({**pretraining_hparams(plan, "electra"), "model_name": "electra"}).to_dict()
    assert run_record.check_config(used, expected, "metrics.jsonl", "the study's electra arm") is None
    assert run_record.differences(record["config"], expected) == ["eval_every_steps", "num_train_steps",
                                                                  "num_warmup_steps", "save_checkpoints_steps"]


def test_the_h200_weights_import_match_jax_and_finetune_mrpc(h200_run, shared_data, bert_vocab_file, tmp_path,
                                                             capsys):
    """The real ELECTRA-Small weights of step 11,144 (float16 shards) as a model folder, with the config of
    the run record (the exported, unsized one, as that trainer wrote it): TensorFlow's discriminator outputs
    are JAX's on the same float16 weights, and run_finetuning.py fine-tunes MRPC from the folder."""
    import run_finetuning
    from studies.device_path import import_jax
    from data.tokenization import load_tokenizer
    from tests.checkpoint_fixtures import sst2_batch

    weights = h200_run / "electra" / "weights-11144.npz"  # its two shards lie beside
    folder = import_jax.main(["--metrics", str(h200_run / "electra" / "metrics.jsonl"), "--vocab-file",
                              str(bert_vocab_file), "--weights", str(weights), "--data-dir", str(tmp_path / "data"),
                              "--model-name", "electra_h200"])
    said = [line for line in capsys.readouterr().out.splitlines() if "exported (unsized) config" in line]
    assert len(said) == 1 and "num_train_steps 1000000 -> 11144" in said[0], said
    loaded = assert_folder_holds(folder, h200_run, 11144)
    config = loaded.config
    assert (config.model_size, config.num_train_steps, config.num_warmup_steps) == ("electra_small", 11144, 1114)
    # the run's history came with its weights of its last step: every line, its run record last, as TensorBoard
    # scalars and the curves PNG too
    history = (folder / "metrics.jsonl").read_text().splitlines()
    assert history == (h200_run / "electra" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(history[-1])["split"] == "run"
    assert list((folder / "logs" / "eval").glob("events.out.tfevents.*")) and (folder / "logs" / "curves.png").is_file()

    _, batch = sst2_batch(shared_data, load_tokenizer(vocab_file=bert_vocab_file, lower_case=True))
    pretrainer = loaded.pretrainer  # the folder as loaded above, not loaded again
    ours = np.asarray(pretrainer.discriminator_head(pretrainer.discriminator(batch, training=False)))
    script = (JAX_DISCRIMINATOR.replace("FOLDER", repr(str(h200_run / "electra")))
              .replace("CONFIG", repr(str(folder / "config.json")))
              .replace("BATCH", repr(json.dumps({k: v.tolist() for k, v in batch.items()}))))
    theirs = np.asarray(run_script_under_jax(script, REPO, timeout=300))
    real = batch["input_mask"].astype(bool)
    # Both hold the same float16 values in float32; what is left is the two backends' float32 arithmetic, far
    # inside float16's rounding (2^-11 of a logit's size).
    assert np.max(np.abs(ours - theirs)[real]) <= 2 ** -11 * max(1.0, np.max(np.abs(theirs[real])))
    assert np.mean(theirs[real] < 0) > 0.5  # unmodified text: a trained discriminator calls most tokens original

    glue = tmp_path / "glue" / "MRPC"  # a slice of the real MRPC files, one shape of batch each: seconds long
    glue.mkdir(parents=True)
    for split, rows in (("train", 32), ("dev", 48)):
        lines = (shared_data / "glue" / "MRPC" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        (glue / f"{split}.tsv").write_text("\n".join(lines[:rows + 1]) + "\n", encoding="utf-8")
    run_finetuning.main(["--data-dir", str(tmp_path / "data"), "--model-name", "electra_h200", "--task", "mrpc",
                         "--finetuning-data-dir", str(tmp_path / "glue"),
                         "--hparams", json.dumps({"max_train_steps": 2, "save_finetuned_models": False,
                                                  "max_seq_length": 64, "train_batch_size": 8,
                                                  "eval_batch_size": 48})])
    results = json.loads((folder / "results" / "mrpc_results.json").read_text())
    assert results["complete"] and results["trials_done"] == 1 and results["checkpoint"].endswith("ckpt-11144")
    assert 0 <= results["summary"][results["primary_metric"]]["median"] <= 100


def test_a_record_made_before_a_config_field_existed_compares_at_its_default():
    """The H200 run's record has no matmul_dtype (added later): it trained with the default, float32."""
    from checkpoints.run_record import differences

    assert differences({"seed": 1}, {"seed": 1, "matmul_dtype": "float32"}) == []
    assert differences({"seed": 1}, {"seed": 1, "matmul_dtype": "bfloat16"}) == ["matmul_dtype"]
    assert differences({"seed": 1, "matmul_dtype": "bfloat16"}, {"seed": 2}) == ["matmul_dtype", "seed"]
