"""The best ELECTRA a GPU gives in N minutes, in one command: pretrain, fine-tune, write what comes back.

    # where TensorFlow is: the export, with the tasks inside it
    python -m studies.device_path.export --data-dir electra_data --model-name electra_small --out jax_export \\
        --hparams '{"train_batch_size": 128, "do_eval": true}'
    python -m studies.device_path.task_arrays --tasks cola,sst,mrpc,sts,rte --finetuning-data-dir glue_data \\
        --vocab-file jax_export/vocab.txt --out jax_export/tasks
    # on the GPU machine (JAX and Keras), one command of at most --minutes
    python -m studies.device_path.run --export jax_export --out $OUT [--minutes 9.5] [--init-from OLD/models.tar/pretrained]

One process tree, nothing read from an earlier run: the pretraining child (training_jax.pretrain
--fit-minutes) compiles, measures its speed and sizes itself to the minutes left once the fine-tuning's
are reserved; then one fine-tuning child (studies.device_path.finetune) trains the pretrained discriminator and a
random control ("--weights none") on the exported tasks, the task with the fewest updates first, one seed
each, and again with one more seed while the last round's time is left. Every child is stopped at its
deadline, so the run ends inside --minutes with whatever finished. --out gets at most 8 files of at most
16 MiB (64 MiB in all, so that it is small to copy back): the model folders (float16 weights) in the parts
of one archive (studies.device_path.returned), metrics.jsonl, results.json (every fine-tuning result) and run.json
(the config that trained, the device, the steps, the runs before this one); the last lines printed say what
ran, what failed, what came back and the commands that import it back here.

--also-mlm trains the MLM baseline beside it (the same encoder, masked-LM objective, BERT's way) at the same
pretraining FLOPs (configs/flops.py), in a second child at the same time: the two size together, as
training_jax.fit sizes models that share a device; it is fine-tuned with the others, and its model folder
comes back in the archive (mlm), its metrics in mlm/.

--init-from continues a model from an earlier run's returned weights (OLD/models.tar/pretrained: the folder
in its archive's parts; a model folder; an older run's .npz shards): every weight is taken as it came back,
the optimizer's moments start fresh (they are too large to copy back) with a short warmup, and run.json adds
this run's steps to the total of the run.json beside them.
"""
import argparse
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import threading
import time

from bench.gpu_window import DEVICE_PRELUDE
from common.errors import InputError, exit_on_input_error
from pretrain_loop.metrics_file import METRICS_FILE
from training_jax import speed_settings
from studies.device_path.export_file import VOCAB_FILE, read_export_file, write_export_file
from studies.device_path.returned import ARCHIVE, archived_member, extract_member, write_archive

RESULTS_FILE, RUN_FILE = "results.json", "run.json"
EXPORTED_FILES = ("train.npz", "eval.npz", "train.npz.xz", "eval.npz.xz")  # old exports: .npz; newer: .npz.xz
COLLECT_SECONDS = 15.0  # writing what comes back and the summary
CONTINUED_WARMUP_FRACTION = 0.01  # fresh moments after --init-from: the original's warmup share (10k of 1M)
MODELS = ("pretrained", "mlm", "control")  # the fine-tuned models: the run's, the MLM baseline's, a random encoder
MLM = "mlm"  # the MLM baseline's model name, and its folder in what comes back
SHARED_DEVICE_MEMORY = ".45"  # XLA_PYTHON_CLIENT_MEM_FRACTION of each of two pretraining children
MOST_FILES, MOST_BYTES = 8, 64 * 2 ** 20


# The GPU machine's line: the wheels its image lacks (keras, namex, optree, copied there in .whl/), then the run.


def device_line(export, minutes=9.5, also_mlm=False):
    """The one command a GPU machine runs, with .whl/ and the export copied into its repository (it ends within
    the minutes and about 20 s)."""
    return (f"{DEVICE_PRELUDE} python3 -m studies.device_path.run --export {export} --out $OUT --minutes {minutes:g}"
            + (" --also-mlm" if also_mlm else ""))


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] run: {message}", flush=True)


# ---------------------------------------------------------------- the export and the work folder
def read_export(export):
    """(export.json's content, its one model name); InputError naming the fix."""
    plan = read_export_file(export, "pass the folder python -m studies.device_path.export wrote (copied to this "
                                    "machine with the repository)")
    if len(plan["models"]) != 1 or "fit" not in plan:
        raise InputError(f"{export}: not a one-model export with a \"fit\" block; export it again with "
                         "python -m studies.device_path.export")
    return plan, next(iter(plan["models"]))


def add_mlm_baseline(folder, plan, model):
    """config_mlm.json (the export's config with the masked-LM objective) and its entry in `plan`: trained
    beside `model`, sized with it at equal pretraining FLOPs (steps_per_unit: MLM steps per step of `model`)."""
    from configs import flops
    from configs.pretraining_config import PretrainingConfig
    from training_jax import fit

    config = PretrainingConfig.load(folder / plan["models"][model]["config_file"])
    masked_lm = PretrainingConfig.create({**config.to_dict(), "electra_objective": False})
    ratio = flops.steps_at_equal_flops(config, masked_lm)
    block = plan["fit"]
    steps = fit.model_steps(config.num_train_steps, ratio, block["budgets"])
    fields = fit.sized_fields(steps, block["budgets"], block["warmup_fraction"], block["evals"])
    mlm = PretrainingConfig.create({**config.to_dict(), **fields["config"], "electra_objective": False})
    mlm.save(folder / f"config_{MLM}.json")
    plan["models"][MLM] = {"config_file": f"config_{MLM}.json", "num_train_steps": steps,
                           "checkpoint_steps": fields["checkpoint_steps"]}
    plan["eval_every"][MLM] = fields["eval_every"]
    block["models"] = [model, MLM]
    block["steps_per_unit"] = {model: 1.0, MLM: ratio}
    log(f"MLM baseline: {ratio:.4f} of its steps per step of {model} (equal training FLOPs, configs/flops.py)")


def prepare_work(export, work, plan, continued, also_mlm=False):
    """<work>/export: the export's arrays, vocabulary and config linked, its export.json copied (with a short
    warmup when the run continues earlier weights; with the MLM baseline's config and entry under --also-mlm),
    so that sizing, states and caches stay out of the export folder that was copied here."""
    export, folder = pathlib.Path(export).resolve(), pathlib.Path(work) / "export"
    folder.mkdir(parents=True, exist_ok=True)
    names = list(EXPORTED_FILES) + [VOCAB_FILE] + [entry["config_file"] for entry in plan["models"].values()]
    for name in names:
        if (export / name).is_file() and not (folder / name).exists():
            (folder / name).symlink_to(export / name)
    plan = json.loads(json.dumps(plan))
    if continued:
        plan["fit"]["warmup_fraction"] = CONTINUED_WARMUP_FRACTION
    if also_mlm:
        add_mlm_baseline(folder, plan, next(iter(plan["models"])))
    write_export_file(folder, plan)
    return folder


# ---------------------------------------------------------------- children with deadlines
class Child:
    """A child process whose output is passed on and whose last lines are kept; stopped at `deadline`
    (time.monotonic())."""

    def __init__(self, name, command, deadline, env=None, prefix=""):
        self.name, self.command, self.deadline, self.env, self.prefix = name, command, deadline, env or {}, prefix
        self.lines, self.stopped, self.seconds, self.code, self.device = [], False, 0.0, None, None

    def run(self):
        env = dict(os.environ, KERAS_BACKEND="jax", **self.env)
        start = time.monotonic()
        log(f"{self.name}: {' '.join(str(c) for c in self.command[1:])}")
        process = subprocess.Popen([str(c) for c in self.command], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, env=env)
        timer = threading.Timer(max(0.0, self.deadline - start), self._stop, [process])
        timer.start()
        for line in process.stdout:
            print(self.prefix + line, end="", flush=True)
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
    """(step, checkpoint prefix) of the newest ckpt-<step> in the model folder a pretraining child wrote, or
    (0, None)."""
    from storage.model_folder import checkpoint_prefix
    from training_jax.weights import checkpoint_steps

    steps = checkpoint_steps(folder)
    return (steps[-1], pathlib.Path(checkpoint_prefix(folder, steps[-1]))) if steps else (0, None)


def speed_flags(text):
    """--pretrain-flags as arguments; InputError naming a flag that is not one of the step's settings
    (training_jax.speed_settings.add_step_flags: the precision and the speed options)."""
    flags = shlex.split(text)
    parser = argparse.ArgumentParser(add_help=False)
    speed_settings.add_step_flags(parser)
    known = {option.split("=")[0] for action in parser._actions for option in action.option_strings}
    unknown = [flag for flag in flags if flag.startswith("--") and flag.split("=")[0] not in known]
    if unknown:
        raise InputError(f"--pretrain-flags: {' '.join(unknown)} is not one of {', '.join(sorted(known))} (the rest "
                         "of the run's settings come from the export)")
    try:
        parser.parse_args(flags)
    except SystemExit:
        raise InputError(f"--pretrain-flags {text!r}: not valid (above); see python -m studies.device_path.pretrain_export --help")
    return flags


def dry_run(args, export_dir, model, flags):
    """--dry-run: each child's resolved settings on --platform (default: this machine's) and the run's plan,
    printed; nothing compiled or trained."""
    from studies.device_path import pretrain_export as pretrain_lib

    platform = args.platform or pretrain_lib.default_platform()
    for name in [model] + ([MLM] if args.also_mlm else []):
        pretrain_lib.main(["--export", str(export_dir), "--model", name, "--out", str(args.work_dir / "dry_run"),
                           "--dry-run", "--platform", platform, *flags])
    if args.tasks_dir:
        from training_jax import finetune_settings

        defaults = argparse.Namespace(bf16=None, length_buckets=None, bucket_lengths="", steps_per_dispatch=None,
                                      vmap_models=None)
        print(f"fine-tuning: {finetune_settings.resolve(defaults, platform).describe()} (defaults); tasks from "
              f"{args.tasks_dir}", flush=True)
    log(f"dry run on {platform}: nothing compiled; the run would pretrain for about the minutes left after "
        f"{args.finetune_minutes:g} min of fine-tuning, inside --minutes {args.minutes:g}")


def pretrain(export_dir, models, work, minutes, init_from, deadline, measure_steps, flags=()):
    """The pretraining children, one per model in `models` (the first continued from `init_from`), at the same
    time, each sized to end `minutes` after its start, each with the speed `flags`; {model: (Child, step, weights
    path)}."""
    children = {}
    for index, model in enumerate(models):
        command = module("studies.device_path.pretrain_export") + [
            "--export", export_dir, "--model", model, "--out", work / "pretraining" / model, "--state-dir",
            work / "state" / model, "--fit-minutes", f"{minutes:.3f}", "--measure-steps", str(measure_steps),
            "--save-every-minutes", "1000", *flags]
        if init_from and index == 0:
            command += ["--init-from", *init_from]
        shared = {"XLA_PYTHON_CLIENT_MEM_FRACTION": SHARED_DEVICE_MEMORY} if len(models) > 1 else {}
        children[model] = Child("pretraining" + (f" ({model})" if index else ""), command, deadline, shared,
                                f"[{model}] " if len(models) > 1 else "")
    threads = [threading.Thread(target=child.run) for child in children.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {model: (child, *newest_weights(work / "pretraining" / model)) for model, child in children.items()}


# ---------------------------------------------------------------- fine-tuning
def finetune(tasks_dir, config, weights, work, seeds, hparams, deadline):
    """Fine-tuning rounds (one seed more per round) of the pretrained models ({model: weights path or None})
    and the control, while the last round's time is left; returns the children."""
    trained = {model: path for model, path in weights.items() if path}
    models = [[path] for path in trained.values()] + [["none"]]
    outs = [work / "finetuning" / model for model in trained] + [work / "finetuning" / MODELS[-1]]
    children = []
    for seed_count in range(1, seeds + 1):
        last = children[-1].seconds if children else 0.0
        if children and time.monotonic() + last > deadline:
            log(f"fine-tuning: {seed_count - 1} seed(s); no time for another round ({last:.0f} s)")
            break
        command = module("studies.device_path.finetune") + ["--tasks-dir", tasks_dir, "--config", config,
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
    first = pathlib.Path(init_from[0])
    folder = first.parent.parent if archived_member(first) else first if first.is_dir() else first.parent
    path = folder / RUN_FILE
    if path.is_file():
        return json.loads(path.read_text())
    steps = weights_file_step(pathlib.Path(init_from[0]).name) or 0
    log(f"no {path}: the steps before this run taken from the weights file's name ({steps})")
    return {"total_steps": steps, "runs": [{"steps": steps, "device": None, "from": "the weights file's name"}]}


def versions():
    """The Python and the packages this run ran with (the GPU machine's and the copied wheels')."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "numpy", "keras"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def read_config(path):
    return json.loads(pathlib.Path(path).read_text()) if pathlib.Path(path).is_file() else None


def pretraining_flops(config_path, steps):
    """(per step, `steps` steps) of training FLOPs (configs/flops.py) of the config at `config_path`."""
    from configs import flops
    from configs.pretraining_config import PretrainingConfig

    if not pathlib.Path(config_path).is_file():
        return None, None
    per_step = flops.train_flops_per_step(PretrainingConfig.load(config_path))
    return per_step, per_step * steps


def run_record(args, model, trained, config_path, finetuning):
    """run.json: what trained (the config as sized), where, how long, and the runs before it; the MLM
    baseline's own entry under "mlm" (its config, steps, FLOPs, weights) when it ran."""
    pretraining, step, weights = trained[model]
    config = read_config(config_path)
    before = earlier_run(args.init_from)
    steps_before = before.get("total_steps", 0)
    per_step, flops = pretraining_flops(config_path, step)
    record = {"model": model, "config": config, "steps": step, "steps_before": steps_before,
              "total_steps": steps_before + step,
              "tokens": step * config["train_batch_size"] * config["max_seq_length"] if config else None,
              "flops_per_step": per_step, "flops": flops,
              "total_flops": (before.get("total_flops") or (per_step or 0) * steps_before) + (flops or 0),
              "minutes": args.minutes, "seconds": round(time.monotonic() - args.started, 1),
              "init_from": [str(f) for f in args.init_from or []],
              "optimizer": ("fresh moments, warmup " + str(config["num_warmup_steps"]) + " steps, after --init-from"
                            if args.init_from and config else "from the start"),
              "runs": before.get("runs", []) + [{"steps": step, "device": pretraining.device}],
              "device": pretraining.device, "versions": versions(), "pretraining": outcome(pretraining),
              "finetuning": [outcome(child) for child in finetuning], "weights_file": weights and weights.name}
    record["total_tokens"] = (before.get("total_tokens") or 0) + (record["tokens"] or 0)
    if MLM in trained:
        child, mlm_step, mlm_weights = trained[MLM]
        mlm_config = pathlib.Path(config_path).parent / f"config_{MLM}_sized.json"
        mlm_config = mlm_config if mlm_config.is_file() else mlm_config.with_name(f"config_{MLM}.json")
        record[MLM] = {"config": read_config(mlm_config), "steps": mlm_step,
                       "flops": pretraining_flops(mlm_config, mlm_step)[1], "pretraining": outcome(child),
                       "weights_file": mlm_weights and f"{MLM}/{mlm_weights.name}"}
    return record


def outcome(child):
    return {"name": child.name, "ok": not child.failed, "seconds": round(child.seconds, 1),
            "error": child.error_line() if child.failed else None}


def write_model(out, work, model, weights_path, steps, name):
    """A model's metrics.jsonl into `out`, and its model folder with only its newest checkpoint (as ckpt-<steps>)
    and metrics.jsonl staged as <work>/back/<name> for the archive; that folder, or None when it saved none."""
    from storage import model_folder

    out.mkdir(parents=True, exist_ok=True)
    child = work / "pretraining" / model
    metrics = child / METRICS_FILE
    if metrics.is_file():
        (out / METRICS_FILE).write_bytes(metrics.read_bytes())
    if weights_path is None:
        return None
    staged = model_folder.copy_checkpoint_folder(weights_path, work / "back" / name, model_folder.read_config(child),
                                                 model_folder.require_vocab(child), steps)
    if metrics.is_file():
        shutil.copyfile(metrics, staged / METRICS_FILE)
    return staged


def write_back(out, work, record, trained, results):
    """At most 8 files, each at most 16 MiB, 64 MiB in all, into `out`: run.json, results.json, the models'
    metrics.jsonl (the MLM baseline's in out/mlm/), and their model folders in the parts of models.tar
    (studies.device_path.returned); returns their paths."""
    out = pathlib.Path(out)
    staged = {"pretrained": write_model(out, work, record["model"], trained[record["model"]][2],
                                        record["total_steps"], "pretrained")}
    if MLM in record:
        staged[MLM] = write_model(out / MLM, work, MLM, trained[MLM][2], record[MLM]["steps"], MLM)
    staged = {name: folder for name, folder in staged.items() if folder}
    if staged:
        write_archive(out, staged, work)
    record["weights_file"] = f"{ARCHIVE}/pretrained" if "pretrained" in staged else None
    if MLM in record:
        record[MLM]["weights_file"] = f"{ARCHIVE}/{MLM}" if MLM in staged else None
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=1))
    (out / RUN_FILE).write_text(json.dumps(record, indent=1))
    files = sorted(p for p in out.rglob("*") if p.is_file())
    sizes = [p.stat().st_size for p in files]
    if len(files) > MOST_FILES or max(sizes) > 16 * 2 ** 20 or sum(sizes) > MOST_BYTES:
        log(f"warning: {out} holds {len(files)} files, {sum(sizes) / 2 ** 20:.1f} MiB: more than a run brings back "
            "(8 files, 64 MiB)")
    return files


def summary(args, record, files, results):
    """The last lines: what ran, what failed, what came back, the commands here."""
    lines = ["", "=" * 20 + " summary"]
    parts = [record["pretraining"]] + ([record[MLM]["pretraining"]] if MLM in record else []) + record["finetuning"]
    for part in parts:
        lines.append(f"{part['name']}: {'ok' if part['ok'] else 'FAILED: ' + part['error']} ({part['seconds']} s)")
    lines.append(f"pretrained {record['steps']} steps on {record['device']} ({record['total_steps']} in all over "
                 f"{len(record['runs'])} run(s), {record['total_flops'] or 0:.3g} FLOPs); optimizer: "
                 f"{record['optimizer']}")
    if MLM in record:
        lines.append(f"MLM baseline: {record[MLM]['steps']} steps, {record[MLM]['flops'] or 0:.3g} FLOPs")
    for model, tasks in results.items():
        for task, result in tasks.items():
            metric = result["primary_metric"]
            median = result["summary"].get(metric, {}).get("median")
            lines.append(f"{model} {task}: {metric} {median if median is None else round(median, 2)} over "
                         f"{result['trials_done']} trial(s)")
    lines.append("came back: " + ", ".join(f"{p.relative_to(args.out)} ({p.stat().st_size / 2 ** 20:.1f} MiB)"
                                           for p in files))
    source = f"--vocab-file {args.export}/vocab.txt" if args.init_from else f"--export {args.export}"
    imports = []
    if record["weights_file"]:
        imports.append(f"  python -m studies.device_path.import_jax {source} --weights OUT/{record['weights_file']} "
                       f"--model-name electra_{record['total_steps']} --data-dir electra_data")
    if MLM in record and record[MLM]["weights_file"]:
        imports.append(f"  python -m studies.device_path.import_jax --vocab-file {args.export}/vocab.txt --metrics "
                       f"OUT/{MLM}/{METRICS_FILE} --weights OUT/{record[MLM]['weights_file']} --model-name "
                       f"mlm_{record[MLM]['steps']} --data-dir electra_data")
    if imports:
        lines.append("back here (OUT = the folder these files came back to):\n" + "\n".join(imports) + "\n"
                     f"  python run_finetuning.py --data-dir electra_data --model-name electra_{record['total_steps']}"
                     " --task mrpc")
    print("\n".join(lines), flush=True)


# ---------------------------------------------------------------- the command
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=pathlib.Path, required=True,
                        help="the folder python -m studies.device_path.export wrote (copied to this machine)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="the folder to copy back ($OUT)")
    parser.add_argument("--minutes", type=float, default=9.5, help="the whole run, start to summary")
    parser.add_argument("--finetune-minutes", type=float, default=3.0,
                        help="reserved for fine-tuning at the end (0, or no tasks: pretraining gets it all)")
    parser.add_argument("--tasks-dir", type=pathlib.Path, default=None,
                        help="the tasks python -m studies.device_path.task_arrays wrote (default <export>/tasks, if "
                             "there)")
    parser.add_argument("--seeds", type=int, default=5, help="the most fine-tuning seeds per task and model")
    parser.add_argument("--finetune-hparams", default="", help="FinetuningConfig overrides, JSON")
    parser.add_argument("--init-from", type=pathlib.Path, nargs="+", default=None, metavar="WEIGHTS",
                        help="continue from an earlier run's returned weights (OLD/models.tar/pretrained, a model "
                             "folder or checkpoint prefix, or an older run's .npz shards)")
    parser.add_argument("--work-dir", type=pathlib.Path, default=None,
                        help="scratch space: states, sizing, logs (default <out>/../run_work; never comes back)")
    parser.add_argument("--measure-steps", type=int, default=50, help="updates timed to size the pretraining")
    parser.add_argument("--pretrain-flags", default="",
                        help="the pretraining step's settings (training_jax.pretrain's --precision, --flat-update, "
                             "--scan-layers, --bf16-attention, --fused-attention, --prng, --steps-per-dispatch and "
                             "their --no- forms), e.g. \"--precision float32\"; unset, each takes the device's "
                             "default: mixed_bfloat16 and the proven speed options on a GPU (training_jax.speed_settings)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the settings each child would run with, and stop: nothing compiled or trained")
    parser.add_argument("--platform", default=None, choices=("cpu", "gpu", "tpu"),
                        help="--dry-run: resolve the settings for this platform (default: this machine's)")
    parser.add_argument("--also-mlm", action="store_true",
                        help="pretrain the MLM baseline beside the model at the same FLOPs, fine-tune it too")
    args = parser.parse_args(argv)
    args.tasks_dir = args.tasks_dir or (args.export / "tasks" if (args.export / "tasks").is_dir() else None)
    args.work_dir = args.work_dir or args.out.resolve().parent / "run_work"
    return args


@exit_on_input_error
def main(argv=None):
    started = time.monotonic()
    args = parse_args(argv)
    args.started = started
    plan, model = read_export(args.export)
    for path in args.init_from or []:
        if not (path.exists() or pathlib.Path(f"{path}.index").is_file() or archived_member(path)):
            raise InputError(f"--init-from {path}: no such file; copy here the weights an earlier run returned")
    deadline = started + args.minutes * 60 - COLLECT_SECONDS
    if args.finetune_minutes <= 0:
        args.tasks_dir = None  # no fine-tuning: pretraining gets the whole run
    finetune_seconds = args.finetune_minutes * 60 if args.tasks_dir else 0.0
    pretrain_minutes = (deadline - finetune_seconds - time.monotonic()) / 60
    if pretrain_minutes <= 0.2:
        raise InputError(f"--minutes {args.minutes:g}: leaves {pretrain_minutes:.1f} min to pretrain after "
                         f"{finetune_seconds / 60:g} min of fine-tuning; give more minutes or fewer to fine-tuning")
    flags = speed_flags(args.pretrain_flags)
    work = args.work_dir
    if args.dry_run:
        return dry_run(args, args.export, model, flags)
    for folder in ("state", "pretraining", "finetuning", "export", "init_from", "back"):  # nothing from an earlier run
        shutil.rmtree(work / folder, ignore_errors=True)
    export_dir = prepare_work(args.export, work, plan, bool(args.init_from), args.also_mlm)
    # One compilation cache for every child (training_jax.compiles.use_compile_cache): the fine-tuning jobs
    # read the programs the pretraining compiled (the weight initializers' at least), and a later run here too.
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(work / "jax_cache"))
    # Stopped only if it overruns its own hard limit (training_jax.fit.RESERVE_SECONDS after its minutes).
    init_from = [extract_member(path, work / "init_from") if archived_member(path) else path
                 for path in args.init_from or []]
    trained = pretrain(export_dir, [model] + ([MLM] if args.also_mlm else []), work, pretrain_minutes,
                       init_from, deadline - finetune_seconds + 25, args.measure_steps, flags)
    sized = export_dir / f"config_{model}_sized.json"
    config_path = sized if sized.is_file() else export_dir / plan["models"][model]["config_file"]
    children = []
    if args.tasks_dir:
        weights = {"pretrained": trained[model][2], MLM: trained.get(MLM, (None, 0, None))[2]}
        children = finetune(args.tasks_dir, config_path, weights, work, args.seeds, args.finetune_hparams, deadline)
    results = read_results(work)
    record = run_record(args, model, trained, config_path, children)
    files = write_back(args.out, work, record, trained, results)
    summary(args, record, files, results)
    return record


if __name__ == "__main__":
    main()
