"""The best ELECTRA a GPU gives in N minutes, in one call: pretrain, fine-tune, write what comes back.

    # where TensorFlow is: the export, with the tasks inside it
    python -m training_jax.export --data-dir electra_data --model-name electra_small --out jax_export \\
        --hparams '{"train_batch_size": 128, "do_eval": true}'
    python -m finetune.arrays --tasks cola,sst,mrpc,sts,rte --finetuning-data-dir glue_data \\
        --vocab-file jax_export/vocab.txt --out jax_export/tasks
    # on the GPU machine (JAX and Keras), one call of at most --minutes
    python -m training_jax.run --export jax_export --out $OUT [--minutes 9.5] [--init-from OLD/weights-N.part1of2.npz]

One process tree, nothing read from an earlier call: the pretraining child (training_jax.pretrain
--fit-minutes) compiles, measures its speed and sizes itself to the minutes left once the fine-tuning's
are reserved; then one fine-tuning child (training_jax.finetune) trains the pretrained discriminator and a
random control ("--weights none") on the exported tasks, the task with the fewest updates first, one seed
each, and again with one more seed while the last round's time is left. Every child is stopped at its
deadline, so the call ends inside --minutes with whatever finished. --out gets at most 8 files of at most
16 MiB (64 MiB in all): the weights (float16 shards), metrics.jsonl, results.json (every fine-tuning
result) and run.json (the config that trained, the device, the steps, the runs before this one); the last
lines printed say what ran, what failed, what came back and the commands that import it back here.

--init-from continues a model from an earlier run's returned weights (its shards, or an .npz): every
weight is taken as it came back, the optimizer's moments start fresh (they are too large to carry back)
with a short warmup, and run.json adds this run's steps to the total of the run.json beside them.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

from common.errors import InputError, exit_on_input_error

RESULTS_FILE, RUN_FILE, METRICS_FILE = "results.json", "run.json", "metrics.jsonl"
STUDY_FILE = "study.json"
EXPORTED_FILES = ("train.npz", "eval.npz", "train.npz.xz", "eval.npz.xz")  # old exports: .npz; newer: .npz.xz
COLLECT_SECONDS = 15.0  # writing what comes back and the summary
CONTINUED_WARMUP_FRACTION = 0.01  # fresh moments after --init-from: the original's warmup share (10k of 1M)
MODELS = ("pretrained", "control")  # the fine-tuned models: the run's discriminator, a random encoder
MOST_FILES, MOST_BYTES = 8, 64 * 2 ** 20


# A device call's line: the wheels the GPU image lacks (keras, namex, optree in .whl/, carried), then the run.
WHEELS_DIR = ".whl"
DEVICE_PRELUDE = ("python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "
                  f"{WHEELS_DIR}/site {WHEELS_DIR}/*.whl && export PYTHONPATH=$PWD/{WHEELS_DIR}/site KERAS_BACKEND=jax "
                  "|| exit;")


def device_line(export, minutes=9.5):
    """The one command of a device call that carries [".whl", export] (timeout_s: the minutes and 20 s)."""
    return f"{DEVICE_PRELUDE} python3 -m training_jax.run --export {export} --out $OUT --minutes {minutes:g}"


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] run: {message}", flush=True)


# ---------------------------------------------------------------- the export and the work folder
def read_export(export):
    """(study.json's content, its one model name); InputError naming the fix."""
    path = pathlib.Path(export) / STUDY_FILE
    if not path.is_file():
        raise InputError(f"{path}: missing; pass the folder python -m training_jax.export wrote (carried in this "
                         "call: nothing stays on the machine from an earlier call)")
    study = json.loads(path.read_text())
    if len(study["arms"]) != 1 or "fit" not in study:
        raise InputError(f"{path}: not a one-model export with a \"fit\" block; export it again with "
                         "python -m training_jax.export")
    return study, next(iter(study["arms"]))


def prepare_work(export, work, study, continued):
    """<work>/export: the export's arrays and config linked, its study.json copied (with a short warmup when
    the run continues earlier weights), so that sizing, states and caches stay out of the carried folder."""
    export, folder = pathlib.Path(export).resolve(), pathlib.Path(work) / "export"
    folder.mkdir(parents=True, exist_ok=True)
    names = list(EXPORTED_FILES) + [entry["config_file"] for entry in study["arms"].values()]
    for name in names:
        if (export / name).is_file() and not (folder / name).exists():
            (folder / name).symlink_to(export / name)
    study = json.loads(json.dumps(study))
    if continued:
        study["fit"]["warmup_fraction"] = CONTINUED_WARMUP_FRACTION
    (folder / STUDY_FILE).write_text(json.dumps(study, indent=1))
    return folder


# ---------------------------------------------------------------- children with deadlines
class Child:
    """A child process whose output is passed on and whose last lines are kept; stopped at `deadline`
    (time.monotonic())."""

    def __init__(self, name, command, deadline):
        self.name, self.command, self.deadline = name, command, deadline
        self.lines, self.stopped, self.seconds, self.code, self.device = [], False, 0.0, None, None

    def run(self):
        env = dict(os.environ, KERAS_BACKEND="jax")
        start = time.monotonic()
        log(f"{self.name}: {' '.join(str(c) for c in self.command[1:])}")
        process = subprocess.Popen([str(c) for c in self.command], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, env=env)
        timer = threading.Timer(max(0.0, self.deadline - start), self._stop, [process])
        timer.start()
        for line in process.stdout:
            print(line, end="", flush=True)
            self.lines = (self.lines + [line.rstrip()])[-20:]
            if self.device is None and ": device " in line:  # training_jax.pretrain's first line
                self.device = line.split(": device ", 1)[1].split(";")[0]
        self.code = process.wait()
        timer.cancel()
        self.seconds = time.monotonic() - start
        return self

    def _stop(self, process):
        self.stopped = True
        process.kill()

    @property
    def failed(self):
        return self.code != 0

    def error_line(self):
        """The child's error in one line (its last "error"/exception line, else its last line)."""
        if self.stopped:
            return f"stopped at its deadline after {self.seconds:.0f} s"
        marked = [line for line in self.lines if line.startswith("error") or "Error" in line]
        return (marked or self.lines or [f"exit status {self.code}"])[-1]


def module(name):
    return [sys.executable, "-m", name]


# ---------------------------------------------------------------- pretraining
def newest_weights(folder):
    """(step, path) of the newest weights-<step>.npz in `folder`, or (0, None)."""
    from training_jax.weights import weights_file_step

    found = [(weights_file_step(p.name), p) for p in pathlib.Path(folder).glob("weights-*.npz")]
    found = [(step, path) for step, path in found if step is not None]
    return max(found) if found else (0, None)


def pretrain(study_dir, arm, work, minutes, init_from, deadline, measure_steps):
    """The pretraining child, sized to end `minutes` after its start; (Child, step, weights path)."""
    command = module("training_jax.pretrain") + [
        "--study", study_dir, "--arm", arm, "--out", work / "pretraining", "--state-dir", work / "state",
        "--fit-minutes", f"{minutes:.3f}", "--measure-steps", str(measure_steps), "--save-every-minutes", "1000"]
    if init_from:
        command += ["--init-from", *init_from]
    child = Child("pretraining", command, deadline).run()
    step, path = newest_weights(work / "pretraining")
    return child, step, path


# ---------------------------------------------------------------- fine-tuning
def finetune(tasks_dir, config, weights, work, seeds, hparams, deadline):
    """Fine-tuning rounds (one seed more per round) of the pretrained model (if any) and the control, while
    the last round's time is left; returns the children."""
    models = ([[weights]] if weights else []) + [["none"]]
    outs = ([work / "finetuning" / MODELS[0]] if weights else []) + [work / "finetuning" / MODELS[1]]
    children = []
    for seed_count in range(1, seeds + 1):
        last = children[-1].seconds if children else 0.0
        if children and time.monotonic() + last > deadline:
            log(f"fine-tuning: {seed_count - 1} seed(s); no time for another round ({last:.0f} s)")
            break
        command = module("training_jax.finetune") + ["--tasks-dir", tasks_dir, "--config", config,
                                                     "--seeds", str(seed_count), "--out", *outs]
        for files in models:
            command += ["--weights", *files]
        if hparams:
            command += ["--hparams", hparams]
        children.append(Child(f"fine-tuning, {seed_count} seed(s)", command, deadline).run())
        if children[-1].failed:
            break
    return children


def read_results(work):
    """{model: {task: results file}} of the fine-tuning folders."""
    found = {}
    for model in MODELS:
        for path in sorted((pathlib.Path(work) / "finetuning" / model).glob("*_results.json")):
            results = json.loads(path.read_text())
            found.setdefault(model, {})[results["task"]] = results
    return found


# ---------------------------------------------------------------- what comes back
def earlier_run(init_from):
    """The run.json beside --init-from's files; without one, the steps the weights file's name says."""
    from training_jax.weights import weights_file_step

    if not init_from:
        return {}
    path = pathlib.Path(init_from[0]).parent / RUN_FILE
    if path.is_file():
        return json.loads(path.read_text())
    steps = weights_file_step(pathlib.Path(init_from[0]).name) or 0
    log(f"no {path}: the steps before this run taken from the weights file's name ({steps})")
    return {"total_steps": steps, "runs": [{"steps": steps, "device": None, "from": "the weights file's name"}]}


def run_record(args, arm, pretraining, step, weights, config_path, finetuning):
    """run.json: what trained (the config as sized), where, how long, and the runs before it."""
    config = json.loads(pathlib.Path(config_path).read_text()) if config_path.is_file() else None
    before = earlier_run(args.init_from)
    steps_before = before.get("total_steps", 0)
    record = {"model": arm, "config": config, "steps": step, "steps_before": steps_before,
              "total_steps": steps_before + step,
              "tokens": step * config["train_batch_size"] * config["max_seq_length"] if config else None,
              "minutes": args.minutes, "seconds": round(time.monotonic() - args.started, 1),
              "init_from": [str(f) for f in args.init_from or []],
              "optimizer": ("fresh moments, warmup " + str(config["num_warmup_steps"]) + " steps, after --init-from"
                            if args.init_from and config else "from the start"),
              "runs": before.get("runs", []) + [{"steps": step, "device": pretraining.device}],
              "device": pretraining.device, "pretraining": outcome(pretraining),
              "finetuning": [outcome(child) for child in finetuning], "weights_file": weights}
    record["total_tokens"] = (before.get("total_tokens") or 0) + (record["tokens"] or 0)
    return record


def outcome(child):
    return {"name": child.name, "ok": not child.failed, "seconds": round(child.seconds, 1),
            "error": child.error_line() if child.failed else None}


def write_back(out, work, record, weights_path, total_steps, results):
    """At most 8 files, each at most 16 MiB, 64 MiB in all, into `out`; returns their paths."""
    import numpy as np

    from training_jax.weights import write_shards

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if weights_path is not None:
        with np.load(weights_path) as arrays:
            values = {key: arrays[key] for key in arrays.files}
        name = f"weights-{total_steps}.npz"
        write_shards(values, out, name)
        record["weights_file"] = name
    metrics = work / "pretraining" / METRICS_FILE
    if metrics.is_file():
        (out / METRICS_FILE).write_bytes(metrics.read_bytes())
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=1))
    (out / RUN_FILE).write_text(json.dumps(record, indent=1))
    files = sorted(p for p in out.iterdir() if p.is_file())
    sizes = [p.stat().st_size for p in files]
    if len(files) > MOST_FILES or max(sizes) > 16 * 2 ** 20 or sum(sizes) > MOST_BYTES:
        log(f"warning: {out} holds {len(files)} files, {sum(sizes) / 2 ** 20:.1f} MiB: more than a call returns")
    return files


def summary(args, record, files, results):
    """The last lines: what ran, what failed, what came back, the commands here."""
    lines = ["", "=" * 20 + " summary"]
    for part in [record["pretraining"], *record["finetuning"]]:
        lines.append(f"{part['name']}: {'ok' if part['ok'] else 'FAILED: ' + part['error']} ({part['seconds']} s)")
    lines.append(f"pretrained {record['steps']} steps on {record['device']} ({record['total_steps']} in all over "
                 f"{len(record['runs'])} run(s)); optimizer: {record['optimizer']}")
    for model, tasks in results.items():
        for task, result in tasks.items():
            metric = result["primary_metric"]
            median = result["summary"].get(metric, {}).get("median")
            lines.append(f"{model} {task}: {metric} {median if median is None else round(median, 2)} over "
                         f"{result['trials_done']} trial(s)")
    lines.append("came back: " + ", ".join(f"{p.name} ({p.stat().st_size / 2 ** 20:.1f} MiB)" for p in files))
    if record["weights_file"]:
        source = (f"--vocab-file {args.export}/vocab.txt" if args.init_from else f"--export {args.export}")
        lines.append("back here (OUT = the folder these files came back to):\n"
                     f"  python -m checkpoints.import_jax {source} --weights OUT/{record['weights_file']} "
                     f"--model-name electra_{record['total_steps']} --data-dir electra_data\n"
                     f"  python run_finetuning.py --data-dir electra_data --model-name electra_{record['total_steps']}"
                     " --task mrpc")
    print("\n".join(lines), flush=True)


# ---------------------------------------------------------------- the call
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=pathlib.Path, required=True,
                        help="the folder python -m training_jax.export wrote (carried in this call)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="what comes back ($OUT on a device)")
    parser.add_argument("--minutes", type=float, default=9.5, help="the whole call, start to summary")
    parser.add_argument("--finetune-minutes", type=float, default=3.0,
                        help="reserved for fine-tuning at the end (0, or no tasks: pretraining gets it all)")
    parser.add_argument("--tasks-dir", type=pathlib.Path, default=None,
                        help="the tasks python -m finetune.arrays wrote (default <export>/tasks, if there)")
    parser.add_argument("--seeds", type=int, default=5, help="the most fine-tuning seeds per task and model")
    parser.add_argument("--finetune-hparams", default="", help="FinetuningConfig overrides, JSON")
    parser.add_argument("--init-from", type=pathlib.Path, nargs="+", default=None, metavar="NPZ",
                        help="continue from an earlier run's returned weights (all shards of one step, or an .npz)")
    parser.add_argument("--work-dir", type=pathlib.Path, default=None,
                        help="scratch space: states, sizing, logs (default <out>/../run_work; never comes back)")
    parser.add_argument("--measure-steps", type=int, default=50, help="updates timed to size the pretraining")
    args = parser.parse_args(argv)
    args.tasks_dir = args.tasks_dir or (args.export / "tasks" if (args.export / "tasks").is_dir() else None)
    args.work_dir = args.work_dir or args.out.resolve().parent / "run_work"
    return args


@exit_on_input_error
def main(argv=None):
    started = time.monotonic()
    args = parse_args(argv)
    args.started = started
    study, arm = read_export(args.export)
    for path in args.init_from or []:
        if not path.is_file():
            raise InputError(f"--init-from {path}: no such file; carry the weights an earlier run returned")
    deadline = started + args.minutes * 60 - COLLECT_SECONDS
    if args.finetune_minutes <= 0:
        args.tasks_dir = None  # no fine-tuning: pretraining gets the whole call
    finetune_seconds = args.finetune_minutes * 60 if args.tasks_dir else 0.0
    pretrain_minutes = (deadline - finetune_seconds - time.monotonic()) / 60
    if pretrain_minutes <= 0.2:
        raise InputError(f"--minutes {args.minutes:g}: leaves {pretrain_minutes:.1f} min to pretrain after "
                         f"{finetune_seconds / 60:g} min of fine-tuning; give more minutes or fewer to fine-tuning")
    work = args.work_dir
    for folder in ("state", "pretraining", "finetuning", "export"):  # nothing from an earlier run in this folder
        shutil.rmtree(work / folder, ignore_errors=True)
    study_dir = prepare_work(args.export, work, study, bool(args.init_from))
    # Stopped only if it overruns its own hard limit (training_jax.fit.RESERVE_SECONDS after its minutes).
    child, step, weights = pretrain(study_dir, arm, work, pretrain_minutes, args.init_from,
                                    deadline - finetune_seconds + 25, args.measure_steps)
    sized = study_dir / f"config_{arm}_sized.json"
    config_path = sized if sized.is_file() else study_dir / study["arms"][arm]["config_file"]
    children = []
    if args.tasks_dir:
        children = finetune(args.tasks_dir, config_path, weights, work, args.seeds, args.finetune_hparams, deadline)
    results = read_results(work)
    record = run_record(args, arm, child, step, weights and weights.name, config_path, children)
    files = write_back(args.out, work, record, weights, record["total_steps"], results)
    summary(args, record, files, results)
    return record


if __name__ == "__main__":
    main()
