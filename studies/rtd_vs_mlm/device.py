"""The RTD-vs-MLM study with its pretraining and fine-tuning on an accelerator that holds JAX but no
TensorFlow (the --device-* stages of python -m studies.rtd_vs_mlm). The training itself is training_jax's;
this module only moves the study's work there and back.

Here (TensorFlow):
  export   the dataset's examples as arrays, each arm's resolved config, the study's plan, and the
           fine-tuning tasks featurised as arrays; prints the accelerator's commands, one shell line each,
           with their expected minutes
There (JAX only; every command resumes, so each may be cut off and run again):
  size     measures both arms' steps/s and compile time, and sets the ELECTRA steps (the MLM steps follow at
           equal FLOPs) so that both arms finish in the minutes given
  pretrain studies.device_path.pretrain_export for both arms at once, in pieces under a time limit
  finetune studies.device_path.finetune on each arm's last checkpoint and the randomly initialised control
  collect  what comes back, in at most 8 files of at most 15 MiB
Here again:
  import   model folders from the weights that came back, the fine-tuning results into the study's
           folders, the curves as TensorBoard logs; then the summary as for a CPU study
"""
import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys
import time

from checkpoints import run_record as jax_run
from checkpoints.run_record import PLAN_FILE
from common import atomic
from studies.rtd_vs_mlm.plan import ARMS, CONTROL, WARMUP_FRACTION, Plan, pretraining_hparams
from studies.rtd_vs_mlm.stages import REPO, add_timing, log
from common.errors import InputError
from pretrain_loop.metrics_file import METRICS_FILE
from storage import model_folder
from training_jax import fit
from bench.gpu_window import DEVICE_PRELUDE, WHEELS_DIR
from training_jax.weights import (checkpoint_steps, pretrainer_with_weights, read_checkpoint, read_weights,
                                  shard_name, weights_file, write_shards)

EVALS_PER_RUN = 30  # held-out evaluations along each device run (the curves' resolution)
DEVICE_LOG_EVERY = 100
FINETUNE_DIR = "finetune_tasks"  # in the export: the tasks' featurised arrays
PIECE_MINUTES = 8.5  # one accelerator command is at most 10 minutes here: a piece, its start and its copies
RUNS = "runs"  # on the accelerator, beside the export: <export>/runs/<arm>/, <export>/runs/finetune/<model>/
# The 15-minute plan: two calls back to back on one warm machine (studies/rtd_vs_mlm/DEVICE.md).
CALL_MINUTES = (9.0, 3.0)
PRETRAIN_RESERVE_MINUTES = 1.0  # call 1: the wheels before, the collect and the summary after the pretraining
FINETUNE_RESERVE_MINUTES = 0.6  # call 2: the wheels before, the collect and the summary after the fine-tuning
THROUGHPUT_SECONDS = 45  # call 2: the throughput line runs when this much is left after one seed of everything
WHEELS = ("keras", "namex", "optree")  # what the accelerator's image lacks of what the JAX path imports
RETURNED = "returned"  # on a fresh machine, what call 1 brought back, carried in: <export>/returned/<arm>/


def resolved_config(plan, arm):
    """The arm's config exactly as run_pretraining.py resolves it (size, --hparams, the dataset)."""
    from configs.resolve import resolve_with_dataset

    return resolve_with_dataset(arm, json.dumps(pretraining_hparams(plan, arm)), plan.data_dir)


# ---------------------------------------------------------------- here: export
def plan_record(plan):
    """What the accelerator needs of the plan to size the runs again (no paths: they are this machine's)."""
    return {"electra_steps": plan.electra_steps, "budgets": plan.budgets, "extra_budgets": plan.extra_budgets,
            "model": plan.model, "pretraining": plan.pretraining, "tasks": plan.tasks, "seeds": plan.seeds,
            "finetune_max_steps": plan.finetune_max_steps}


def plan_from_record(record, folder):
    return Plan(work_dir=folder, shared_data=folder, electra_steps=record["electra_steps"],
                budgets=record["budgets"], tasks=record["tasks"], seeds=record["seeds"],
                finetune_max_steps=record["finetune_max_steps"],
                extra_budgets=record["extra_budgets"], model=record["model"], pretraining=record["pretraining"])


def arm_entry(plan, arm, config, config_file):
    return {"config_file": config_file, "num_train_steps": config.num_train_steps,
            "checkpoint_steps": plan.checkpoint_steps(arm)}


def export_for_device(plan, out_dir, finetune_tasks=True, minutes=None, shown_as=None, wheels_dir=None,
                      wheels=True, throughput_seconds=THROUGHPUT_SECONDS):
    """What the accelerator needs: each arm's resolved config, the training and held-out examples as
    compact arrays, the fine-tuning tasks as arrays, and the study's plan (the product's export.json, last). The printed
    commands name the folder `shown_as` (as the user gave it: relative to the repository's root, it is the
    same path in the accelerator's copy of the repository). Call 2 measures the throughput when
    `throughput_seconds` are left after one seed of every job (a CPU proof, whose compiles are slow, exports
    more than its call lasts, so that it does not pay for a measurement it does not check)."""
    from studies.device_path import export as jax_export

    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = {arm: resolved_config(plan, arm) for arm in ARMS}
    config, dataset_dir, metadata = resolved["electra"]  # both arms read the same dataset and held-out shards
    eval_count = jax_export.export_examples(out_dir, config, dataset_dir, metadata)
    extra = {"plan": plan_record(plan), "call_minutes": list(minutes or CALL_MINUTES), "fit": fit_record(plan),
             "throughput_seconds": throughput_seconds}
    if finetune_tasks:
        extra["finetune_updates"] = export_finetune_tasks(plan, config, out_dir / FINETUNE_DIR)
    study = jax_export.write_export(out_dir, {arm: (arm_config, plan.checkpoint_steps(arm))
                                              for arm, (arm_config, _, _) in resolved.items()}, eval_count, extra)
    log(f"wrote {out_dir}")
    if wheels:
        fetch_wheels(wheels_dir or REPO / WHEELS_DIR)
    show_commands(out_dir, device_commands(shown_as or out_dir, study))


def fit_record(plan):
    """export.json's "fit" block: how studies.device_path.pretrain_export --fit-minutes sizes both arms together (ELECTRA
    the unit, MLM at equal FLOPs: bench/flops.py, the ratio Plan.steps uses) by the plan's own rules, at most
    the plan's ELECTRA steps (the GPU plan exports 1,000,000, ELECTRA-Small's; a test a few)."""
    return {"models": list(ARMS), "steps_per_unit": {arm: plan.steps_per_electra_step(arm) for arm in ARMS},
            "budgets": plan.budgets, "warmup_fraction": WARMUP_FRACTION, "evals": EVALS_PER_RUN,
            "max_units": plan.electra_steps}


def wheel_requirements():
    """NAME==VERSION of each wheel the accelerator needs, at this machine's versions (the ones tested here)."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in WHEELS]


def fetch_wheels(folder=WHEELS_DIR):
    """The wheels for the accelerator's Python 3.12 into `folder` (pip download), unless they are there."""
    folder = pathlib.Path(folder)
    wanted = [r for r in wheel_requirements() if not list(folder.glob(r.replace("==", "-") + "-*.whl"))]
    if not wanted:
        return
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "-d", str(folder), *wanted]
    for platform in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"):
        command[6:6] = ["--platform", platform]
    log(f"downloading {', '.join(wanted)} into {folder}/")
    if subprocess.run(command).returncode:
        raise InputError(f"pip download of {', '.join(wanted)} failed; download them into {folder}/ by hand")


def show_commands(out_dir, commands):
    """[(note, shell line)] printed and kept in <out_dir>/COMMANDS.txt, which travels with the export (a
    test runs its lines as they are written there)."""
    (out_dir / "COMMANDS.txt").write_text("".join(f"# {note}\n{line}\n" for note, line in commands))
    print("On the accelerator, from the repository's root (each line one command; each resumes when run again):")
    for note, line in commands:
        print(f"  # {note}\n  {line}")


def export_finetune_tasks(plan, config, folder):
    """The study's tasks featurised with the study's vocabulary (the shared GLUE files), as arrays; returns
    {task: updates per fine-tuning trial} of the recipe for the arms' size."""
    from data.tokenization import load_tokenizer
    from studies.device_path.task_arrays import export_tasks, updates_per_trial

    tokenizer = load_tokenizer(vocab_file=plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt",
                               lower_case=config.do_lower_case)
    export_tasks(plan.tasks, plan.shared_data / "glue", tokenizer, folder, finetune_hparams(plan.finetune_max_steps))
    return updates_per_trial(folder, config, finetune_hparams(plan.finetune_max_steps))


def finetune_hparams(max_steps):
    """The study's fine-tuning overrides: the cap on updates, when the study sets one (as rtd_vs_mlm.finetune)."""
    return {"max_train_steps": max_steps} if max_steps else None


PRELUDE = DEVICE_PRELUDE  # the product's: the carried wheels installed, then KERAS_BACKEND=jax


def device_commands(study_dir, study):
    """[(note, shell line)]: the two calls of the 15-minute plan, each one line of at most 2,000 characters
    that starts with the wheels' install and ends with the collect and its summary, whatever happened in
    between. The calls' lengths are the export's (CALL_MINUTES; a test gives seconds' worth)."""
    study_dir = pathlib.Path(study_dir)
    first, second = study.get("call_minutes", CALL_MINUTES)
    runs, collect = f"$S/{RUNS}", "python3 -m studies.rtd_vs_mlm --device-collect $S --out $OUT --part"
    pretrain = (f"{PRELUDE} S={study_dir}; mkdir -p {runs}; for arm in {' '.join(ARMS)}; do "
                f"XLA_PYTHON_CLIENT_MEM_FRACTION=.45 python3 -m studies.device_path.pretrain_export --export $S --model $arm "
                f"--out {runs}/$arm --fit-minutes {first - PRETRAIN_RESERVE_MINUTES:g} > {runs}/$arm.log 2>&1 & "
                f"done; wait; {collect} pretraining")
    finetune = (f"{PRELUDE} S={study_dir}; python3 -m studies.rtd_vs_mlm --device-finetune $S --minutes "
                f"{second - FINETUNE_RESERVE_MINUTES:g}; {collect} finetuning")
    seeds = study["plan"]["seeds"]
    return [(f"call 1 (timeout_s {round(first * 60 + 30)}; carry [\"{WHEELS_DIR}\", \"{study_dir}\"]): both arms "
             f"pretrained at once, each sized after compiling to end {first - PRETRAIN_RESERVE_MINUTES:g} min after "
             "its start; then the weights, metrics and sized plan come back", pretrain),
            (f"call 2 (timeout_s {round(second * 60 + 30)}; carry nothing on the warm machine): each arm's last "
             f"checkpoint and the control fine-tuned on {', '.join(study['plan']['tasks'])}, one seed each, then "
             f"up to {seeds} if time is left (the throughput line first); then the results come back", finetune)]


# ---------------------------------------------------------------- there: size, fine-tune, collect
def read_study(study_dir, exporter="python -m studies.rtd_vs_mlm --device-export"):
    """The plan of an export folder (the product's export.json, or an older export's study.json), its arms
    under "models"; InputError naming the command that writes it when it is missing."""
    from studies.device_path.export_file import read_export_file

    return read_export_file(study_dir, f"export the study first ({exporter})")


def write_study(study_dir, study):
    from studies.device_path.export_file import write_export_file

    write_export_file(study_dir, study)


def size_on_device(study_dir, minutes, measure_steps=30):
    """Measures both arms (steps/s and compile seconds of the exported configs) and sets the ELECTRA steps
    so that both arms, run one after the other, finish within `minutes` including one compile per piece:
    a bound that running them at once only improves. Rewrites the arms' configs (config_<arm>_sized.json,
    the exported ones kept) and export.json; prints the --electra-steps the import here must be given."""
    from configs.pretraining_config import PretrainingConfig
    from studies.device_path.pretrain_export import measure

    study_dir = pathlib.Path(study_dir)
    study = read_study(study_dir)
    refuse_resizing(study_dir)
    plan = plan_from_record(study["plan"], study_dir)
    exported = {arm: study["models"][arm].get("exported_config_file", study["models"][arm]["config_file"])
                for arm in ARMS}
    configs = {arm: PretrainingConfig.load(study_dir / exported[arm]) for arm in ARMS}
    measured = {arm: measure(study_dir, exported[arm], arm, measure_steps) for arm in ARMS}
    for arm, (rate, compile_seconds) in measured.items():
        log(f"{arm}: {rate:.2f} steps/s of batch {configs[arm].train_batch_size} after a {compile_seconds:.0f} s "
            f"compile; 1M steps would take {1e6 / rate / 3600:.1f} h")
    steps, expected_seconds = steps_that_fit(plan, measured, minutes)
    sized = dataclasses.replace(plan, electra_steps=steps,
                                extra_budgets=[s for s in plan.extra_budgets if s < steps])
    for arm, config in configs.items():
        step_fields = {key: value for key, value in pretraining_hparams(sized, arm).items()
                       if key in ("num_train_steps", "num_warmup_steps", "save_checkpoints_steps",
                                  "eval_every_steps", "extra_checkpoint_steps")}
        step_fields["extra_checkpoint_steps"] = tuple(step_fields["extra_checkpoint_steps"])
        config = dataclasses.replace(config, **step_fields)
        config.save(study_dir / f"config_{arm}_sized.json")
        study["models"][arm] = {**arm_entry(sized, arm, config, f"config_{arm}_sized.json"),
                                "exported_config_file": exported[arm],
                                "measured_steps_per_second": round(measured[arm][0], 3),
                                "measured_compile_seconds": round(measured[arm][1], 1)}
        study["eval_every"][arm] = max(1, config.num_train_steps // EVALS_PER_RUN)
    study["plan"] = plan_record(sized)
    study["sized_for_minutes"] = minutes
    write_study(study_dir, study)
    log(f"sized: ELECTRA {sized.steps('electra')} steps, MLM {sized.steps('mlm')} steps (checkpoints "
        f"{sized.checkpoint_steps('electra')} / {sized.checkpoint_steps('mlm')}); expected "
        f"{expected_seconds / 60:.1f} min one arm after the other. Back here, give the study --electra-steps {steps}")
    return steps


def refuse_resizing(study_dir):
    """Sizing changes the schedule (steps, warmup, checkpoints), so it must come before any pretraining."""
    if any(study_dir.glob("state_*")) or (study_dir / RUNS).exists():
        raise InputError(f"{study_dir}: pretraining has begun with the current size; sizing again would change "
                         f"a running schedule (delete {study_dir / RUNS} and the state_* folders to start over)")


def steps_within(minutes, seconds_per_step, compile_seconds, multiple):
    """The most steps, a multiple of `multiple`, that take at most 90% of `minutes` after `compile_seconds`
    (the margin: saves, the machine's own start of each piece); 0 when not even `multiple` fit."""
    return max(0, int((0.9 * minutes * 60 - compile_seconds) / seconds_per_step) // multiple * multiple)


def steps_that_fit(plan, measured, minutes):
    """(ELECTRA steps, expected seconds): the most steps, a multiple of the budget count, for which both arms
    (MLM at equal FLOPs), one after the other, take at most 90% of `minutes` with a compile per piece and
    5% for held-out evaluations. measured: {arm: (steps/s, compile seconds)}."""
    ratio = plan.steps("mlm") / plan.steps("electra")
    pieces = -(-minutes // PIECE_MINUTES)
    compile_seconds = pieces * sum(seconds for _, seconds in measured.values())
    seconds_per_electra_step = 1.05 * (1 / measured["electra"][0] + ratio / measured["mlm"][0])
    steps = steps_within(minutes, seconds_per_electra_step, compile_seconds, plan.budgets)
    if steps < plan.budgets:
        raise InputError(f"--minutes {minutes:g}: too short for one step per budget at the measured speed "
                         f"({measured['electra'][0]:.1f} ELECTRA steps/s); give more minutes")
    return steps, steps * seconds_per_electra_step + compile_seconds


def last_step(study_dir, arm):
    """The arm's last checkpoint step as it trains (sized on the accelerator, or as exported)."""
    from studies.device_path.pretrain_export import plan_from_export

    return plan_from_export(study_dir, arm).checkpoint_steps[-1]


def weights_files(study_dir, arm, step):
    """The files holding the arm's weights of `step`: the run's own checkpoint, or on a fresh machine the
    shards call 1 brought back, carried in under <export>/returned/<arm>/; [] when neither is there."""
    own = pathlib.Path(model_folder.checkpoint_prefix(pathlib.Path(study_dir) / RUNS / arm, step))
    if model_folder.checkpoint_exists(own):
        return [own]
    return sorted((pathlib.Path(study_dir) / RETURNED / arm).glob(shard_name(weights_file(step), "*", "*")))


def newest_weights_step(study_dir, arm):
    """The newest step whose weights the arm's run wrote (a run stopped at its limit writes them too)."""
    return max(checkpoint_steps(pathlib.Path(study_dir) / RUNS / arm), default=None)


def finetune_jobs(study_dir, study):
    """[(model name, weights files or [] for the control, task)] of the fine-tuning the accelerator runs:
    each arm's last checkpoint and the control, every task."""
    jobs = []
    for arm in ARMS:
        last = last_step(study_dir, arm)
        jobs += [(f"{arm}_step{last}", weights_files(study_dir, arm, last), task) for task in study["plan"]["tasks"]]
    return jobs + [(CONTROL, [], task) for task in study["plan"]["tasks"]]


def finetuned_on_device(study_dir, model, task, seeds=None):
    """Whether the job's results file is complete (with at least `seeds` trials when given)."""
    path = pathlib.Path(study_dir) / RUNS / "finetune" / model / f"{task}_results.json"
    if not path.is_file():
        return False
    results = json.loads(path.read_text())
    return results.get("complete", False) and (seeds is None or results.get("trials_done", 0) >= seeds)


def finetune_on_device(study_dir, minutes, parallel=3):
    """Runs the fine-tuning jobs, `parallel` at a time (the GPU is far from full with one small model), each
    a studies.device_path.finetune process, the longest tasks first: one seed of every job first; then, with the
    export's throughput_seconds (THROUGHPUT_SECONDS before it recorded them) left, the throughput line; then
    up to the plan's seeds. At `minutes` the running jobs are stopped: their finished trials are in their
    results files, and the next call continues from them (a job resumes between trials). Returns True when
    every job has all its seeds."""
    study_dir = pathlib.Path(study_dir).resolve()  # the jobs run from the repository's root
    study = read_study(study_dir)
    updates = study.get("finetune_updates", {})
    jobs = sorted(finetune_jobs(study_dir, study), key=lambda job: -updates.get(job[2], 0))
    missing = sorted({f"{model} (no weights-{model.rsplit('_step', 1)[-1]}.npz in {RUNS}/ or {RETURNED}/)"
                      for model, files, _ in jobs if model != CONTROL and not files})
    if missing:
        raise InputError(f"{study_dir}: no weights for {', '.join(missing)}; pretrain both arms first (call 1), "
                         f"or carry what call 1 brought back as {study_dir / RETURNED}/<arm>/")
    deadline = time.monotonic() + minutes * 60
    seeds = study["plan"]["seeds"]
    for pass_seeds in sorted({1, seeds}):
        pending = [job for job in jobs if not finetuned_on_device(study_dir, job[0], job[2], pass_seeds)]
        log(f"{len(pending)} fine-tuning jobs to run with {pass_seeds} seed(s), {parallel} at a time, "
            f"{(deadline - time.monotonic()) / 60:.1f} min left")
        if not run_jobs(study_dir, study, pending, pass_seeds, deadline, parallel):
            return False
        if pass_seeds == 1 and deadline - time.monotonic() > study.get("throughput_seconds", THROUGHPUT_SECONDS):
            measure_throughput(study_dir, study, deadline)
    log("done: every fine-tuning job has its results")
    return True


def run_jobs(study_dir, study, pending, seeds, deadline, parallel):
    """Runs `pending` jobs with `seeds` seeds until `deadline` (time.monotonic()); False when it stopped them."""
    import os

    from studies.device_path.pretrain_export import plan_from_export

    running = []
    # One compile cache for all jobs: the models share their shapes, so most jobs find their programs there.
    env = dict(os.environ, KERAS_BACKEND="jax", XLA_PYTHON_CLIENT_MEM_FRACTION=f"{0.9 / parallel:.2f}",
               JAX_COMPILATION_CACHE_DIR=str(study_dir / RUNS / "jax_cache"))
    hparams = finetune_hparams(study["plan"]["finetune_max_steps"])
    config_file = plan_from_export(study_dir, "electra").config_file
    while pending or running:
        for entry in list(running):
            process, (model, _, task), began, log_file = entry
            if process.poll() is not None:
                running.remove(entry)
                outcome = "done" if not process.returncode else f"FAILED (exit {process.returncode}; see {log_file})"
                log(f"{model} {task}: {outcome} in {(time.monotonic() - began) / 60:.1f} min")
        left = deadline - time.monotonic()
        if left <= 0:
            for process, (model, _, task), _, _ in running:
                process.terminate()
                process.wait()
                log(f"{model} {task}: stopped at the time limit (its finished trials are kept)")
            log(f"{len(running) + len(pending)} jobs left; run the same command again to continue")
            return False
        while pending and len(running) < parallel and left > 30:
            model, files, task = job = pending.pop(0)
            out = study_dir / RUNS / "finetune" / model
            out.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "studies.device_path.finetune",
                       "--tasks-dir", str(study_dir / FINETUNE_DIR),
                       "--config", str(config_file), "--weights", *([str(f) for f in files] or ["none"]),
                       "--out", str(out), "--tasks", task, "--seeds", str(seeds)]
            if hparams:
                command += ["--hparams", json.dumps(hparams)]
            log_file = out / f"{task}.log"
            with open(log_file, "a") as log_out:
                process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log_out, stderr=subprocess.STDOUT)
            running.append((process, job, time.monotonic(), log_file))
        if not pending and not running:
            break
        time.sleep(0.5)
    return True


def measure_throughput(study_dir, study, deadline, steps=30):
    """The ELECTRA arm's update alone on the device (steps/s at its config: electra_small at batch 128 in the
    GPU plan), as <export>/runs/throughput.json; stopped at the deadline."""
    out = study_dir / RUNS / "throughput"
    command = [sys.executable, "-m", "studies.device_path.pretrain_export", "--export", str(study_dir), "--model", "electra",
               "--out", str(out), "--measure", str(steps)]
    log(f"throughput: {steps} updates of the ELECTRA arm's config alone on the device")
    try:
        subprocess.run(command, cwd=REPO, timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        log("throughput: stopped at the time limit")


def collect_from_device(study_dir, out, part="pretraining"):
    """What comes back after a call, at most 8 files: plan.json (the study, the sized runs, how each ended)
    always; after pretraining each arm's metrics.jsonl and newest weights in shards of at most 15 MiB;
    after fine-tuning one JSON per fine-tuned model holding its tasks' results files. Whatever exists so
    far; then the call's summary, the last lines the call prints."""

    study_dir, out = pathlib.Path(study_dir), pathlib.Path(out)
    study = read_study(study_dir)
    out.mkdir(parents=True, exist_ok=True)
    record = run_record(study_dir, study)
    atomic.write_json(out / PLAN_FILE, record, sort_keys=False)
    if part == "pretraining":
        for arm in ARMS:
            copy_run_file(study_dir, out, arm, METRICS_FILE)
            step = record["arms"][arm]["newest_weights"]
            if step is not None:
                copy_weights_in_shards(study_dir, out, arm, step)
    else:
        for model in sorted({job[0] for job in finetune_jobs(study_dir, study)}):
            folder = study_dir / RUNS / "finetune" / model
            results = {path.name: json.loads(path.read_text()) for path in sorted(folder.glob("*_results.json"))}
            if results:
                (out / "finetune").mkdir(parents=True, exist_ok=True)
                (out / "finetune" / f"{model}.json").write_text(json.dumps(results))
    print_summary(study_dir, study, record, out, part)


def run_record(study_dir, study):
    """plan.json: the exported study, each arm's sized entry and how its run stands (done, stopped at a step,
    or failed with its log's last line), the fine-tuning jobs' states, the throughput when measured."""
    from pretrain_loop.metrics_file import read_metrics

    arms = {}
    for arm in ARMS:
        folder, log_file = study_dir / RUNS / arm, study_dir / RUNS / f"{arm}.log"
        run = read_metrics(folder)[1] if (folder / "metrics.jsonl").is_file() else None
        lines = [line for line in log_file.read_text().splitlines() if line.strip()] if log_file.is_file() else []
        status = ("done" if run else "not started" if not lines else
                  "stopped" if "stopped at step" in lines[-1] or "paused at step" in lines[-1] else "failed")
        arms[arm] = {"status": status, "sized": fit.read_sized(study_dir, arm), "last_log_line": lines[-1] if lines
                     else None, "newest_weights": newest_weights_step(study_dir, arm),
                     "run": {k: v for k, v in (run or {}).items() if k != "config"} or None}
    jobs = {}
    for model, _, task in finetune_jobs(study_dir, study):
        path = study_dir / RUNS / "finetune" / model / f"{task}_results.json"
        results = json.loads(path.read_text()) if path.is_file() else None
        log_file = path.parent / f"{task}.log"
        tail = [line for line in log_file.read_text().splitlines() if line.strip()] if log_file.is_file() else []
        jobs[f"{model} {task}"] = {
            "trials_done": results["trials_done"] if results else 0,
            "score": results["summary"].get(results["primary_metric"], {}).get("median") if results else None,
            "last_log_line": tail[-1] if tail else None}
    throughput = study_dir / RUNS / "throughput" / "throughput.json"
    return {"study": study, "arms": arms, "finetune": jobs,
            "throughput": json.loads(throughput.read_text()) if throughput.is_file() else None}


def print_summary(study_dir, study, record, out, part):
    """The call's last lines: what ran, what failed and why, what came back, what to run next."""
    print(f"\n==== summary of the {part} call ====")
    if part == "pretraining":
        for arm, entry in record["arms"].items():
            sized, run = entry["sized"] or {}, entry["run"] or {}
            line = f"{arm}: {entry['status']}"
            if sized:
                rate = sized["measured"].get(arm, {}).get("steps_per_second")
                line += (f"; sized to {sized['num_train_steps']} steps ({sized['units']} ELECTRA-step units)"
                         + (f" at {rate:.2f} steps/s measured" if rate else ""))
            if run:
                line += (f"; trained {run['num_train_steps']} steps in {run['wall_clock_seconds']:.0f} s, "
                         f"{run['steps_per_second']} steps/s after a {run['compile_seconds']:.0f} s compile")
            if entry["status"] != "done" and entry["last_log_line"]:
                line += f"; its log ends: {entry['last_log_line']}"
            print(line)
    else:
        for job, entry in record["finetune"].items():
            score = f"{entry['score']:.2f}" if entry["score"] is not None else "-"
            tail = "" if entry["trials_done"] else f"; log: {entry['last_log_line']}"
            print(f"{job}: {entry['trials_done']} trial(s), median {score}{tail}")
        if record["throughput"]:
            print(f"throughput: {record['throughput']}")
    files = sorted(p for p in pathlib.Path(out).rglob("*") if p.is_file())
    print(f"came back: {len(files)} files, {sum(p.stat().st_size for p in files) / 2 ** 20:.1f} MiB: "
          + ", ".join(str(p.relative_to(out)) for p in files))
    commands = dict(device_commands(study_dir, study))
    if part == "pretraining":
        done = all(entry["status"] == "done" for entry in record["arms"].values())
        print("next: " + ("call 2, at once on the warm machine: " + list(commands.values())[1] if done else
                          "call 1 again (each run continues from its saved state, or starts over on a fresh "
                          "machine); with under 4 minutes of device time left, import what came back instead"))
    else:
        print("next: back where TensorFlow is: python -m studies.rtd_vs_mlm <the export's flags> --device-results OUT "
              "(OUT: the folder the two calls' files came back to)")


def copy_run_file(study_dir, out, arm, name):
    """<study>/runs/<arm>/<name> → <out>/<arm>/<name>; False when the run has not written it yet."""
    source = pathlib.Path(study_dir) / RUNS / arm / name
    if not source.is_file():
        return False
    (pathlib.Path(out) / arm).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, pathlib.Path(out) / arm / name)
    return True


def copy_weights_in_shards(study_dir, out, arm, step):
    """The arm's weights of `step` into <out>/<arm>/ in shards of at most SHARD_BYTES (what the copy back
    takes); False when that checkpoint is not written yet."""
    weights = pathlib.Path(model_folder.checkpoint_prefix(pathlib.Path(study_dir) / RUNS / arm, step))
    if not model_folder.checkpoint_exists(weights):
        return False
    (pathlib.Path(out) / arm).mkdir(parents=True, exist_ok=True)
    write_shards(read_checkpoint(weights), pathlib.Path(out) / arm, weights_file(step))
    return True


def log_collected(out, missing):
    """One line: what is in `out` now (files and MiB, against the copy's limits) and what is not there yet."""
    files = sorted(p for p in pathlib.Path(out).rglob("*") if p.is_file())
    log(f"collected {len(files)} files, {sum(p.stat().st_size for p in files) / 2 ** 20:.1f} MiB: "
        + ", ".join(str(p.relative_to(out)) for p in files) + (f"; not yet: {', '.join(missing)}" if missing else ""))


# ---------------------------------------------------------------- here: import
def import_device_run(plan, arm, results_dir):
    """Model folders <arm>_step<N> from every weights file that came back, and the run's curves as TensorBoard
    logs under models/<arm>/logs. Takes every run a device can produce: sized shorter than planned (the plan
    here has the sized steps), stopped at its hard limit (no run record, weights at a step that is no
    checkpoint, half a last metrics line), recorded by an older trainer (the exported config in its record)."""
    source = pathlib.Path(results_dir) / arm
    steps = returned_steps(source)
    if not steps:
        raise InputError(f"{source}: no weights-<step>.npz (whole or in shards) came back for the {arm} run; run "
                         "studies.device_path.pretrain_export for it again, or copy its files back")
    config, _, _ = resolved_config(plan, arm)
    records, device_run = read_device_run(source, arm, config.to_dict(), results_dir)
    vocab_file = plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt"
    planned = plan.checkpoint_steps(arm)
    for step in steps:
        folder = plan.data_dir / "models" / f"{arm}_step{step}"
        if model_folder.is_complete(folder):
            continue
        weights = read_weights(source, weights_file(step))
        pretrainer = pretrainer_with_weights(config, weights, source / weights_file(step))
        write_model_folder_for(folder, config, pretrainer, vocab_file, step)
        log(f"imported {folder.name}" + ("" if step in planned else
                                         f" (the run stopped at step {step}, before its checkpoint(s) {planned}; "
                                         "run_finetuning.py takes the folder, the study's table only checkpoints)"))
    curves_folder = plan.data_dir / "models" / arm
    if records and not (curves_folder / METRICS_FILE).is_file():
        write_curves(records, curves_folder / "logs")
        curves_folder.mkdir(parents=True, exist_ok=True)
        atomic.write_text(curves_folder / METRICS_FILE,  # last: the import is complete
                          "".join(json.dumps(record) + "\n" for record in records))
        if device_run:
            add_timing(plan.work_dir, f"pretrain {arm} (device)", device_run["wall_clock_seconds"])


def returned_steps(source):
    """The steps of the weights files in `source` (whole, or shards of one)."""
    steps = (jax_run.weights_file_step(path.name) for path in pathlib.Path(source).glob("weights-*.npz"))
    return sorted({step for step in steps if step is not None})


def read_device_run(source, arm, expected, results_dir):
    """(the metrics records, the run record or None) of a device run that came back into `source`, after
    checking that it trained `expected` (this study's config of the arm, at its sized steps). With no run
    record (the run was stopped at its limit), the collect's plan.json must have sized it to the same steps."""
    metrics_file = pathlib.Path(source) / METRICS_FILE
    records, device_run, note = jax_run.read_run(metrics_file) if metrics_file.is_file() else ([], None, None)
    if note:
        log(note)
    if device_run is None:
        sized = jax_run.sized_entry(results_dir, arm) or {}
        steps = sized.get("num_train_steps", expected["num_train_steps"])
        if steps != expected["num_train_steps"]:
            raise InputError(f"{pathlib.Path(results_dir) / PLAN_FILE}: the device sized the {arm} run to "
                             f"{steps} steps, this study {expected['num_train_steps']}; give the study the "
                             "--electra-steps the device sized (or leave the flag out)")
        log(f"{metrics_file}: {'no run record' if records else 'missing'}, so the {arm} run did not finish (stopped "
            "at its limit): importing the weights that came back with this study's config")
        return records, None
    used, note = jax_run.used_config(device_run, WARMUP_FRACTION)
    if note:
        log(f"{metrics_file}: {note}")
    if used["num_train_steps"] != expected["num_train_steps"]:
        raise InputError(f"{metrics_file}: the {arm} run trained {used['num_train_steps']} steps, this study "
                         f"{expected['num_train_steps']}; give the study the --electra-steps the device sized (its "
                         "plan.json says them), or leave the flag out")
    jax_run.check_config(used, expected, metrics_file, f"this study's {arm} arm",
                         fix="export the study again with the same flags and rerun the device runs")
    return records, device_run


def import_device_finetuning(plan, results_dir):
    """finetune/<model>.json (the results files of each model fine-tuned on the device) → the study's
    <work>/data/models/<model>/results/, where the summary reads them. Results already here are kept."""
    for bundle in sorted((pathlib.Path(results_dir) / "finetune").glob("*.json")):
        folder = plan.data_dir / "models" / bundle.stem / "results"
        for name, result in json.loads(bundle.read_text()).items():
            path = folder / name
            if not path.is_file():
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(result, indent=2))
                log(f"imported {bundle.stem} {name}")


def write_model_folder_for(folder, config, pretrainer, vocab_file, step):
    config = dataclasses.replace(config, model_name=folder.name)
    model_folder.write_model_folder(folder, config, pretrainer, vocab_file, step=step, overwrite=True)


def write_curves(records, logs_dir):
    """training_jax.pretrain's metrics.jsonl records → TensorBoard scalars in logs/train and logs/eval."""
    import tensorflow as tf

    for split in ("train", "eval"):
        writer = tf.summary.create_file_writer(str(logs_dir / split))
        with writer.as_default():
            for record in (r for r in records if r.get("split") == split):
                for name, value in record.items():
                    if name not in ("split", "step"):
                        tf.summary.scalar(name, value, step=record["step"])
        writer.close()
