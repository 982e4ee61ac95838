"""The study's stages, each a run of the project's own scripts (build_pretraining_dataset.py,
run_pretraining.py, run_finetuning.py) skipped when its output is complete, so a rerun continues."""
import fcntl
import json
import os
import pathlib
import subprocess
import sys
import time

from studies.rtd_vs_mlm.plan import ARMS, CONTROL, pretraining_hparams
from common import atomic
from configs.pretraining_config import PretrainingConfig
from storage import model_folder

REPO = pathlib.Path(__file__).resolve().parents[2]

def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


TIMINGS = "timings.json"


def run(command, log_file, stage):
    """A stage's subprocess, its output appended to log_file; a failure stops the study (rerun continues).

    Its wall-clock seconds are added to <work>/timings.json under `stage`."""
    log(" ".join(str(c) for c in command))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(REPO))
    start = time.monotonic()
    with open(log_file, "a") as out:
        status = subprocess.run([sys.executable, *map(str, command)], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT).returncode
    if status:
        raise SystemExit(f"stopped: {command[0]} exited with {status}; see {log_file}, fix it and run the study "
                         "again (finished stages are kept)")
    seconds = time.monotonic() - start
    add_timing(pathlib.Path(log_file).parent, stage, seconds)
    log(f"{stage}: {seconds / 60:.1f} min")


def add_timing(work_dir, stage, seconds):
    """Locked, because the arms may run as separate processes at once (--pretrain-only, --finetune-ready)."""
    path = work_dir / TIMINGS
    with open(work_dir / (TIMINGS + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        timings = json.loads(path.read_text()) if path.is_file() else {}
        timings[stage] = round(timings.get(stage, 0.0) + seconds, 1)
        atomic.write_json(path, timings)


def build_dataset(plan):
    if (plan.data_dir / "pretrain_tfrecords" / "metadata.json").is_file():
        return
    run(["build_pretraining_dataset.py", "--corpus-dir", plan.shared_data / "corpus" / "enwiki_wikiextractor",
         "--corpus-format", "wikiextractor", "--vocab-file",
         plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt", "--data-dir", plan.data_dir,
         "--max-seq-length", "128", "--num-processes", "2", "--overwrite"], plan.work_dir / "build.log", "dataset")


def pretrain(plan, arm):
    folder = plan.data_dir / "models" / arm
    if all(model_folder.checkpoint_exists(model_folder.checkpoint_prefix(folder, s)) for s in plan.checkpoint_steps(arm)):
        return
    run(["run_pretraining.py", "--model-name", arm, "--data-dir", plan.data_dir, "--hparams",
         json.dumps(pretraining_hparams(plan, arm))], plan.work_dir / f"pretrain_{arm}.log", f"pretrain {arm}")


def budget_folder(plan, arm, step):
    """A model folder holding just checkpoint `step` of the arm's run (hard links), for run_finetuning.py."""
    return model_folder.link_checkpoint(plan.data_dir / "models" / arm, step,
                                        plan.data_dir / "models" / f"{arm}_step{step}")


def control_folder(plan):
    """A model folder with the study's discriminator at random initialisation (keras seed 0)."""
    folder = plan.data_dir / "models" / CONTROL
    if model_folder.is_complete(folder):
        return folder
    import keras

    from pretrain.builder import build_pretrainer

    keras.utils.set_random_seed(0)
    config = PretrainingConfig.create({**plan.arm_hparams("electra"), "model_name": CONTROL,
                                       "data_dir": str(plan.data_dir)})
    model_folder.write_model_folder(folder, config, build_pretrainer(config),
                       plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt", step=0, overwrite=True)
    return folder


def ready_budgets(plan):
    """[(arm, step)] of the budget checkpoints pretraining has saved so far, the last budget first (when time
    runs out, the most-trained checkpoints are the ones measured)."""
    ready = []
    for budget in reversed(range(len(plan.checkpoint_steps("electra")))):
        for arm in ARMS:
            step = plan.checkpoint_steps(arm)[budget]
            if model_folder.checkpoint_exists(model_folder.checkpoint_prefix(plan.data_dir / "models" / arm, step)):
                ready.append((arm, step))
    return ready


def results_file(folder, task):
    return folder / "results" / f"{task}_results.json"


def finetuned(folder, task):
    path = results_file(folder, task)
    return path.is_file() and json.loads(path.read_text()).get("complete", False)


def finetune(plan, folder, task, log_name):
    if finetuned(folder, task):
        return
    # Bucketed batches, as every CPU result of this study was measured (docs/reproduction.md: not the original's
    # fixed batches, and 2.7-7.6x faster on a CPU).
    hparams = {"save_finetuned_models": False, "length_bucketing": True}
    if plan.finetune_max_steps:
        hparams["max_train_steps"] = plan.finetune_max_steps
    run(["run_finetuning.py", "--model-name", folder.name, "--data-dir", plan.data_dir, "--task", task,
         "--finetuning-data-dir", plan.shared_data / "glue", "--num-trials", plan.seeds,
         "--hparams", json.dumps(hparams)], plan.work_dir / f"finetune_{log_name}.log",
        f"finetune {folder.name} {task}")


