"""The JAX trainer (training_jax.pretrain.Run) on an export folder: how the device studies pretrain on a GPU machine
that has no TensorFlow and no dataset folder, from the arrays studies.device_path.export wrote.

    python -m studies.device_path.export --data-dir electra_data --model-name electra_small --out jax_export
    KERAS_BACKEND=jax python -m studies.device_path.pretrain_export --export jax_export --model electra_small \\
        --out jax_runs/electra_small --time-limit-minutes 8.5

The product's own command is run_pretraining.py under KERAS_BACKEND=jax (training_jax.from_dataset), which reads the
dataset folder itself; this reads export.json (its models, their config files and checkpoint steps, the cadence and
the "fit" block) into the same run plan (training_jax.run_plan). --dry-run prints the step's settings for a named
--platform without building anything; --measure times the update alone.
"""
import argparse
import json
import os
import pathlib
import sys
import time

from common.errors import exit_on_input_error
from studies.device_path.export_file import VOCAB_FILE, model_entry, read_export_file
from training_jax import data_parallel, fit
from training_jax.pretrain import (COMPILE_CACHE, EVAL_ARRAYS, TRAIN_ARRAYS, Run, add_run_arguments, step_settings,
                                   without_tensorflow)
from training_jax.run_plan import RunPlan

MISSING_FIX = "pass the folder python -m studies.device_path.export wrote"


def plan_from_export(export_dir, model, config_file=None):
    """The run plan of `model` in the export (its sized one once a --fit-minutes run sized itself)."""
    export_dir = pathlib.Path(export_dir)
    record = read_export_file(export_dir, MISSING_FIX)
    entry = model_entry(record, export_dir, model)
    block = record.get("fit")
    if block:  # the models of the block this export trains (a study's block may name more)
        block = {**block, "models": [m for m in block["models"] if m in record["models"]]}
    plan = RunPlan(model=model, work=export_dir, config_file=export_dir / (config_file or entry["config_file"]),
                   train_arrays=export_dir / TRAIN_ARRAYS, eval_arrays=export_dir / EVAL_ARRAYS,
                   log_every=record["log_every"], eval_every=record["eval_every"][model],
                   checkpoint_steps=tuple(entry["checkpoint_steps"]), vocab_file=export_dir / VOCAB_FILE, fit=block)
    return plan if config_file else fit.sized_plan(plan)


def open_run(args, config_file=None):
    import jax

    plan = plan_from_export(args.export, args.model, config_file)
    if jax.process_index():  # each process resumes from its own copy of the (replicated) state
        state_dir = args.state_dir or plan.work / f"state_{plan.model}"
        args.state_dir = state_dir.with_name(f"{state_dir.name}.process-{jax.process_index()}")
    return Run(args, plan)


def measure(export_dir, config_file, model, steps=30):
    """(steps/s, compile seconds) of one model's update at `config_file` of the export (nothing is written)."""
    args = parse_args(["--export", str(export_dir), "--model", model, "--out", str(export_dir)])
    return open_run(args, config_file).measure(steps)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=pathlib.Path, default=None,
                        help="the folder python -m studies.device_path.export (or a study's device export) wrote")
    parser.add_argument("--model", default=None, help="one of the models its export.json lists")
    parser.add_argument("--out", type=pathlib.Path, required=True)
    add_run_arguments(parser)
    parser.add_argument("--dry-run", action="store_true",
                        help="print the step's resolved settings (precision and speed options) and stop: nothing is "
                             "built, compiled or written")
    parser.add_argument("--platform", default=None, choices=("cpu", "gpu", "tpu"),
                        help="--dry-run: the platform to resolve the settings for (default: this machine's)")
    parser.add_argument("--measure", type=int, default=0, metavar="STEPS",
                        help="train nothing: time this many updates of the model's config on its initial state and "
                             "write <out>/throughput.json")
    args = parser.parse_args(argv)
    missing = [f"--{name}" for name in ("export", "model") if getattr(args, name) is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    return args


@exit_on_input_error
def main(argv=None):
    started = time.monotonic()
    args = parse_args(argv)
    if args.dry_run:  # before Keras: it reads the export and resolves, nothing more
        return dry_run(args)
    os.environ.setdefault("KERAS_BACKEND", "jax")  # here, not at import: a TensorFlow process imports this module
    without_tensorflow()
    import keras

    if keras.backend.backend() != "jax":
        sys.exit(f"run with KERAS_BACKEND=jax (got {keras.backend.backend()})")
    from training_jax.compiles import use_compile_cache

    data_parallel.initialize_processes(args.coordinator_address, args.num_processes, args.process_id)
    use_compile_cache(args.export / COMPILE_CACHE)
    if args.measure:
        return write_throughput(open_run(args), args.measure)
    import jax

    from storage import folder_lock

    if jax.process_index():  # a process other than 0 writes no model folder
        return open_run(args).run(started)
    with folder_lock.acquire(args.out, "pretraining"):  # --out is a model folder: one writer at a time
        return open_run(args).run(started)


def dry_run(args):
    """--dry-run: the settings this command would train with on --platform (default: this machine's), printed as
    one line and returned; nothing built or compiled."""
    plan = plan_from_export(args.export, args.model)
    platform = args.platform or default_platform()
    settings = step_settings(args, platform, plan.config_file)
    print(f"pretraining {args.model}: {settings.describe()}", flush=True)
    return settings


def default_platform():
    import jax

    return jax.devices()[0].platform


def write_throughput(run, steps):
    """--measure: the update's steps/s alone on the device at the model's config, into <out>/throughput.json."""
    rate, compile_seconds = run.measure(steps)
    config = run.config
    record = {"model": run.plan.model, "model_size": config.model_size, "train_batch_size": config.train_batch_size,
              "max_seq_length": config.max_seq_length, "mixed_precision": config.mixed_precision,
              "steps_per_second": round(rate, 3), "compile_seconds": round(compile_seconds, 1), "timed_steps": steps,
              "device": f"{run.device.platform} {run.device.device_kind}", "step_settings": run.settings.to_dict()}
    run.args.out.mkdir(parents=True, exist_ok=True)
    (run.args.out / "throughput.json").write_text(json.dumps(record))
    run.log(f"throughput: {rate:.2f} steps/s of batch {config.train_batch_size} alone on the device")
    return record


if __name__ == "__main__":
    main()
