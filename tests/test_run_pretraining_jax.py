"""run_pretraining.py under KERAS_BACKEND=jax with TensorFlow unimportable: the same command trains the dataset
folder build_pretraining_dataset.py wrote into the same model folder, resumes after kill -9 from its last
checkpoint, refuses a second writer and a folder it did not write with one line; TensorFlow then reads the folder
as it is and run_finetuning.py fine-tunes it."""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from tests.helpers import JAX_QUICK_XLA_FLAGS, MICRO_MODEL, build_tiny_dataset, run_each_under_jax, write_rte

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# TensorFlow made unimportable, as on a GPU machine without it; then the command as a user types it
LAUNCH = ('import sys, runpy; sys.modules["tensorflow"] = None; sys.argv = ["run_pretraining.py"] + sys.argv[1:]; '
          'runpy.run_path("run_pretraining.py", run_name="__main__")')
HPARAMS = {"model_size": "electra_small", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
           "train_batch_size": 4, "eval_batch_size": 4, "num_eval_steps": 2, "iterations_per_loop": 2,
           "save_checkpoints_steps": 4, "num_warmup_steps": 1, "learning_rate": 5e-4, "do_eval": True}


def launch(data_dir, model, steps, log):
    """The command in its own process, its output into the file `log` (a pipe nobody reads would block it)."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
               XLA_FLAGS=JAX_QUICK_XLA_FLAGS)
    with open(log, "w") as output:
        return subprocess.Popen([sys.executable, "-c", LAUNCH, "--data-dir", str(data_dir), "--model-name", model,
                                 "--hparams", json.dumps({**HPARAMS, "num_train_steps": steps})],
                                cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)


def finished(process, log):
    process.wait(timeout=600)
    return process.returncode, pathlib.Path(log).read_text()


def listed_steps(model_dir):
    from storage import model_folder

    return sorted(model_folder.checkpoint_step(path) for path in model_folder.saved_checkpoints(model_dir))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A long run killed with SIGKILL once its checkpoint at step 8 is listed (a second command on the folder
    tried meanwhile), then the same command set to end 4 steps after the last checkpoint:
    {killed, second, resumed: (exit code, output)}, the data dir, the model folder, the last listed step."""
    data_dir = tmp_path_factory.mktemp("jax_cli") / "data"
    build_tiny_dataset(data_dir, max_seq_length=32, num_shards=2)
    model_dir, logs = data_dir / "models" / "micro", data_dir.parent
    first = launch(data_dir, "micro", 100000, logs / "killed.log")
    lock = data_dir / "models" / ".micro.lock"  # storage.folder_lock's file: the holder's pid once it holds it
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and first.poll() is None and not (
                lock.is_file() and lock.read_text().startswith(f"pid {first.pid},")):
            time.sleep(0.2)
        # the second command starts while the first holds the folder (it trains until killed), beside its compile
        second_process = launch(data_dir, "micro", 100000, logs / "second.log")
        while time.monotonic() < deadline and first.poll() is None and 8 not in listed_steps(model_dir):
            time.sleep(0.2)
        second = finished(second_process, logs / "second.log")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed = (logs / "killed.log").read_text()
    assert listed_steps(model_dir), killed[-3000:]
    last = listed_steps(model_dir)[-1]
    resumed = finished(launch(data_dir, "micro", last + 4, logs / "resumed.log"), logs / "resumed.log")
    return {"killed": killed, "second": second, "resumed": resumed}, data_dir, model_dir, last


def test_the_command_trains_without_tensorflow_and_resumes_after_kill_9(runs):
    outputs, data_dir, model_dir, last = runs
    assert last >= 8, outputs["killed"][-3000:]
    code, output = outputs["resumed"]
    assert code == 0, output[-3000:]
    # from the state saved at the last checkpoint (or the one before, had the kill come between the two writes)
    resumed_at = int(re.search(r"resumed at step (\d+)", output).group(1))
    assert resumed_at in (last, last - 4) and resumed_at >= 4 and f"done: {last + 4} steps" in output
    assert "train.npz: " not in output  # the arrays read from the shards the first time are kept
    assert listed_steps(model_dir)[-1] == last + 4
    assert len(listed_steps(model_dir)) <= 5  # keep_checkpoint_max: the older checkpoints' files are gone
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in records if r["split"] == "train"]
    assert train_steps == sorted(set(train_steps)) and train_steps[-1] == last + 4
    assert any(r["split"] == "eval" for r in records)
    assert records[-1]["split"] == "run" and records[-1]["backend"] == "jax"
    config = json.loads((model_dir / "config.json").read_text())
    assert config["num_train_steps"] == last + 4 and config["model_name"] == "micro"
    assert (model_dir / "vocab.txt").read_bytes() == (data_dir / "vocab.txt").read_bytes()


def test_a_second_writer_stops_at_once_with_one_line(runs):
    code, output = runs[0]["second"]
    assert code == 2 and "another run is pretraining here" in output.strip().splitlines()[-1]


def test_tensorflow_reads_the_folder_and_finetunes_it(runs):
    import run_finetuning
    from pretrain.loaded_folder import load_model_folder
    from storage.checkpoint_bundle import read_model_weights

    _, data_dir, model_dir, last = runs
    loaded = load_model_folder(model_dir)
    assert loaded.checkpoint.endswith(f"ckpt-{last + 4}")
    trained = read_model_weights(model_dir / f"ckpt-{last + 4}")
    for variable in loaded.pretrainer.weights:
        np.testing.assert_array_equal(variable.numpy(), trained[variable.path].astype(variable.dtype))
    text = (data_dir / "corpus" / "part0.txt").read_text().replace("\n", " ")
    sentences = [" ".join(s.split()[:10]) for s in text.split(". ") if len(s.split()) >= 6]
    write_rte(data_dir.parent / "glue" / "rte", sentences, {"train": 24, "dev": 8}, seed=0)
    run_finetuning.main(["--data-dir", str(data_dir), "--model-name", "micro", "--task", "rte",
                         "--finetuning-data-dir", str(data_dir.parent / "glue"),
                         "--hparams", json.dumps({"max_train_steps": 2, "save_finetuned_models": False})])
    results = json.loads((model_dir / "results" / "rte_results.json").read_text())
    assert results["complete"] and results["checkpoint"].endswith(f"ckpt-{last + 4}")


def test_a_folder_this_run_did_not_write_is_refused(commands):
    code, output, *_ = commands["copied"]
    assert code == 2 and "holds checkpoints of a run this JAX run did not write" in output.strip().splitlines()[-1]


# ---------------------------------------------------------------- --max-minutes (the GPU window's pretraining)
# The run sizes itself and keeps the config's checkpoint spacing (a checkpoint every save_checkpoints_steps and at
# the end), not the config's number of checkpoints spread over the sized length: a default config (1M steps, a
# checkpoint every 1,000) would otherwise need 1,000 steps at least and write a checkpoint every few steps.
@pytest.mark.parametrize("steps, every, expected", [
    (9000, 1000, [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000]),
    (2500, 1000, [1000, 2000, 2500]),
    (500, 1000, [500]),
])
def test_a_sized_run_keeps_the_configs_checkpoint_spacing(steps, every, expected):
    from training_jax.fit import sized_fields

    fields = sized_fields(steps, 1, 0.1, evals=10, checkpoint_every=every)
    assert fields["checkpoint_steps"] == expected
    assert fields["config"]["save_checkpoints_steps"] == min(every, steps)
    assert fields["config"]["num_train_steps"] == steps and fields["config"]["num_warmup_steps"] == steps // 10
    spread = sized_fields(steps, 4, 0.1, evals=10)  # the studies' rule, unchanged: budgets evenly spaced
    assert spread["checkpoint_steps"] == [steps // 4 * k for k in (1, 2, 3, 4)]


@pytest.mark.parametrize("hparams, steps, warmup", [
    ({}, 10_800, 1_080),  # the H200 window's length: a tenth, not the original's 1% (108 steps, then collapse)
    ({}, 250_000, 10_000),  # long enough: the config's own warmup steps
    ({}, 1_000_000, 10_000),  # the whole config: as the original
    ({"num_warmup_steps": 300_000}, 10_800, 3_240),  # a config that warms up for longer keeps its share
    ({"num_warmup_steps": 0}, 10_800, 1),  # none asked for: the one step every sized run has
])
def test_a_sized_run_warms_up_for_the_configs_steps_or_a_tenth_of_it(hparams, steps, warmup):
    from configs.pretraining_config import PretrainingConfig
    from training_jax.fit import sized_fields
    from training_jax.from_dataset import fit_block

    block = fit_block("electra_small", PretrainingConfig.create({"model_size": "electra_small", **hparams}))
    fields = sized_fields(steps, block["budgets"], block["warmup_fraction"], block["evals"],
                          checkpoint_every=block["checkpoint_every"], most_warmup=block["most_warmup"])
    assert fields["config"]["num_warmup_steps"] == warmup


def test_long_step_lists_are_shortened_in_log_lines():
    from training_jax.fit import steps_list

    assert steps_list([12, 24, 30]) == "[12, 24, 30]"
    assert steps_list(range(1000, 1_000_001, 1000)) == "[1000, 2000, 3000, ... 998000, 999000, 1000000] (1000)"


def test_the_default_configs_fit_block_asks_for_one_step_at_least(tmp_path):
    from configs.pretraining_config import PretrainingConfig
    from training_jax.from_dataset import make_plan

    vocab = tmp_path / "source_vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    config = PretrainingConfig.create({"model_size": "electra_small"})
    assert config.num_train_steps == 1_000_000 and config.save_checkpoints_steps == 1000  # the original's
    (tmp_path / "work").mkdir()
    plan = make_plan(tmp_path / "work", "electra_small", config, types.SimpleNamespace(vocab_file=vocab), 0)
    fit = plan.fit
    assert plan.checkpoint_steps[:2] == (1000, 2000) and plan.log_every == config.iterations_per_loop
    assert (tmp_path / "work" / "vocab.txt").read_text() == vocab.read_text() and plan.config_file.is_file()
    assert fit["budgets"] == 1 and fit["checkpoint_every"] == 1000 and fit["max_units"] == 1_000_000


def test_the_command_sizes_itself_and_checkpoints_every_save_checkpoints_steps(commands):
    code, output, argv, _ = commands["sized"]  # run_pretraining.py --max-minutes 8 on a model folder of its own
    assert code == 0, output[-3000:]
    assert "sized: 30 steps" in output  # the config's 30 fit in the minutes: the most planned
    # The config's spacing: 12, 24 and the end. Spread as the studies spread theirs, 3 checkpoints of 30 steps
    # would have fallen at 10, 20, 30.
    assert listed_steps(pathlib.Path(argv[1]) / "models" / argv[3]) == [12, 24, 30]


def test_the_dry_run_prints_the_gpu_settings_without_building_anything(tmp_path, capsys):
    """On a GPU the step computes in bfloat16 with every proven option on; on this CPU the original's float32; a flag
    wins over either. Nothing is built or written."""
    from training_jax import from_dataset

    data_dir = tmp_path / "data"
    build_tiny_dataset(data_dir, max_seq_length=32, num_shards=2)
    common = ["--data-dir", str(data_dir), "--model-name", "micro", "--hparams", json.dumps(HPARAMS), "--dry-run"]
    gpu = from_dataset.main(common + ["--platform", "gpu"])
    assert (gpu.precision, gpu.prng, gpu.flat_update, gpu.bf16_attention) == ("mixed_bfloat16", "rbg", True, True)
    assert (gpu.scan_layers, gpu.fused_attention, gpu.steps_per_dispatch) == (False, True, 0)  # as measured
    assert from_dataset.main(common + ["--platform", "rocm"]).fused_attention is False  # Triton's kernels: NVIDIA's
    cpu = from_dataset.main(common + ["--platform", "cpu"])
    assert (cpu.precision, cpu.prng, cpu.flat_update, cpu.bf16_attention) == ("float32", "threefry2x32", False, False)
    assert from_dataset.main(common + ["--platform", "gpu", "--precision", "float32"]).bf16_attention is False
    printed = capsys.readouterr().out
    assert "pretraining micro: platform gpu: precision mixed_bfloat16 (default); prng rbg (default); flat update on " \
           "(default); bf16 attention on (default)" in printed
    assert "platform gpu: precision float32; " in printed
    assert not (data_dir / "models").exists()


@pytest.fixture(scope="module")
def commands(runs, tmp_path_factory):
    """The module's other commands, all in one JAX process (run_each_under_jax: each its own log and exit code, one
    start-up instead of one each), reading back the programs the module's runs compiled (the same model, batch and
    XLA flags): the bad inputs of test_bad_input_gets_the_tensorflow_runs_one_line_and_exit_code_2, a copy of the
    trained folder without its JAX state ("copied"), and a run sized by --max-minutes into a folder of its own
    ("sized"). {label: (exit code, output, argv, what a bad input's line names)}."""
    _, data_dir, model_dir, _ = runs
    tmp_path = tmp_path_factory.mktemp("jax_commands")
    (tmp_path / "empty" / "pretrain_tfrecords").mkdir(parents=True)  # a folder, but no metadata.json
    damaged = tmp_path / "damaged"
    shutil.copytree(data_dir / "pretrain_tfrecords", damaged / "pretrain_tfrecords")
    shard = sorted((damaged / "pretrain_tfrecords").glob("*.tfrecord*"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    wider = {**HPARAMS, "model_hparam_overrides": {**HPARAMS["model_hparam_overrides"], "hidden_size": 48}}
    cases = {  # label: (data dir, model name, hparams, extra flags, what the line names)
        "no metadata": (tmp_path / "empty", "bad0", HPARAMS, [], "metadata.json"),
        "config against dataset": (data_dir, "bad1", {**HPARAMS, "max_seq_length": 64}, [], str(data_dir)),
        "damaged shard": (damaged, "bad2", HPARAMS, [], shard.name),
        "init checkpoint of another model": (data_dir, "bad3", wider, ["--init-checkpoint", str(model_dir)],
                                             str(model_dir)),
        "no such init checkpoint": (data_dir, "bad4", HPARAMS, ["--init-checkpoint", str(tmp_path / "none")],
                                    f"--init-checkpoint {tmp_path / 'none'}"),
        # and one that goes: a matching model folder's weights, then two steps (the same process: no second start-up)
        "init checkpoint": (data_dir, "bad5", {**HPARAMS, "num_train_steps": 2}, ["--init-checkpoint", str(model_dir)],
                            f"weights from {model_dir}; fresh optimizer moments"),
        # the trained folder copied without its JAX state: checkpoints this JAX run did not write
        "copied": (data_dir, "copied", {**HPARAMS, "num_train_steps": 8}, [], None),
        "sized": (data_dir, "sized", {**HPARAMS, "num_train_steps": 30, "save_checkpoints_steps": 12,
                                      "keep_checkpoint_max": 0}, ["--max-minutes", "8"], None)}
    shutil.copytree(model_dir, data_dir / "models" / "copied", ignore=shutil.ignore_patterns("jax_work*"))
    argvs = {label: ["--data-dir", str(folder), "--model-name", name, "--hparams", json.dumps(hparams), *flags]
             for label, (folder, name, hparams, flags, _) in cases.items()}
    logs = {label: str(tmp_path / f"{number}.log") for number, label in enumerate(cases)}
    codes = run_each_under_jax("run_pretraining.py", [(logs[label], argvs[label]) for label in cases], REPO_ROOT,
                               XLA_FLAGS=JAX_QUICK_XLA_FLAGS,
                               JAX_COMPILATION_CACHE_DIR=str(model_dir / "jax_work" / "jax_cache"))
    return {label: (code, pathlib.Path(logs[label]).read_text(), argvs[label], cases[label][-1])
            for label, code in zip(cases, codes)}


def test_bad_input_gets_the_tensorflow_runs_one_line_and_exit_code_2(commands, capsys):
    """A dataset folder without metadata.json, a config that does not match the dataset, a damaged shard, and a
    checkpoint to continue from of another model or none there: one line naming the file (or the flag), exit 2,
    under JAX as under TensorFlow (the same line where both resolve the run the same way; a second writer: above).
    Last, --init-checkpoint of a matching folder: the run starts from its weights."""
    import run_pretraining

    bad = ("no metadata", "config against dataset", "damaged shard", "init checkpoint of another model",
           "no such init checkpoint", "init checkpoint")
    for label in bad:
        code, output, argv, named = commands[label]
        last = output.strip().splitlines()[-1]
        if label == "init checkpoint":
            assert code == 0 and named in output and (pathlib.Path(argv[1]) / "models" / argv[3] / "ckpt-2.index"
                                                       ).is_file(), output[-2000:]
            continue
        assert code == 2 and last.startswith("error: ") and named in last and "Traceback" not in output, (label,
                                                                                                        output[-2000:])
        if label in ("no metadata", "config against dataset"):  # resolved by configs.resolve under either backend
            with pytest.raises(SystemExit) as stopped:
                run_pretraining.main(argv)
            assert stopped.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1] == last, label
        assert not (pathlib.Path(argv[1]) / "models" / argv[3] / "checkpoint").exists(), label  # no run it made
