"""run_pretraining.py under KERAS_BACKEND=jax: the same command, the same dataset folder, the same model folder.

    KERAS_BACKEND=jax python run_pretraining.py --model-name electra_small [--max-minutes 30] [--devices N]

On a machine with JAX, Keras and NumPy (TensorFlow not needed): the config is resolved exactly as under
TensorFlow (configs.resolve.resolve_run: --model-name, --hparams, the dataset's metadata.json), the dataset's
TFRecord shards are read without TensorFlow (data.record_reader) into device-resident arrays, and the JAX
step trains them (training_jax.pretrain.Run: blocks of updates per dispatch, the device's speed settings,
every local device, resume after a kill) into <data-dir>/models/<model-name>, the folder run_finetuning.py
and checkpoints.export read. The model folder's cadence is the config's: logs every iterations_per_loop steps,
checkpoints every save_checkpoints_steps (and extra_checkpoint_steps) and at the end, evaluations every
eval_every_steps (else at each checkpoint) when do_eval.

What the JAX run keeps beside the model folder's files lives in its jax_work/ folder: the examples as arrays
(made once per dataset), the resolved config, and the resumable state (weights, optimizer slots, step, the
batch order's position), saved at each checkpoint, every few minutes and at the end: the same command continues from
it; over several hosts (--num-processes, --process-id, --coordinator-address) process I > 0 keeps its own in
jax_work.process-I/. --max-minutes sizes the run to end, saved, that many minutes after it starts
(training_jax.fit); --dry-run prints the step's settings for a --platform and builds nothing.
"""
import argparse
import hashlib
import json
import pathlib
import shutil
import sys
import time

from common.errors import InputError, exit_on_input_error

WORK_DIR = "jax_work"  # in the model folder
ARRAYS_RECORD = "arrays.json"  # which shards the arrays were read from
VOCAB_FILE = "vocab.txt"  # the work folder's copy of the dataset's vocabulary
SIZED_WARMUP_FRACTION = 0.1  # --max-minutes: a run shorter than the config warms up for a tenth of it at least
EVALS_PER_SIZED_RUN = 30  # --max-minutes: held-out evaluations along the sized run (the curves' resolution)


def parse_args(argv=None):
    from configs.pretraining_arguments import add_pretraining_arguments
    from training_jax import speed_settings
    from training_jax.pretrain import add_device_arguments

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pretraining_arguments(parser)
    jax_options = parser.add_argument_group("under KERAS_BACKEND=jax")
    jax_options.add_argument("--max-minutes", type=float, default=0.0,
                             help="compile, time the update, and size the run (steps, warmup, decay, checkpoints) "
                                  "to end, saved, this many minutes after it starts; at most the config's steps")
    add_device_arguments(jax_options)
    speed_settings.add_step_flags(jax_options)
    jax_options.add_argument("--dry-run", action="store_true",
                             help="print the step's settings (precision and speed options) as resolved for --platform "
                                  "and stop: nothing is read beyond the dataset's metadata, built or written")
    jax_options.add_argument("--platform", default=None, choices=("cpu", "gpu", "rocm", "tpu"),
                             help="--dry-run: the platform to resolve for (default: this machine's)")
    return parser.parse_args(argv)


def arrays_signature(resolved, eval_count):
    """What the arrays were made from: the shards (names, sizes) and the held-out count."""
    def describe(files):
        return [[pathlib.Path(f).name, pathlib.Path(f).stat().st_size] for f in files]

    record = {"train": describe(resolved.train_files), "eval": describe(resolved.eval_files),
              "eval_count": eval_count}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def write_arrays(work, resolved, eval_count, say):
    """train.npz / eval.npz of the dataset's split, unless the ones there were made from the same shards."""
    import numpy as np

    from data.record_reader import read_examples  # NumPy alone: no TensorFlow
    from training_jax.arrays import pack_examples
    from training_jax.pretrain import EVAL_ARRAYS, TRAIN_ARRAYS

    signature = arrays_signature(resolved, eval_count)
    record = work / ARRAYS_RECORD
    if record.is_file() and json.loads(record.read_text()).get("signature") == signature:
        return
    record.unlink(missing_ok=True)
    for name, files, limit in ((TRAIN_ARRAYS, resolved.train_files, None),
                               (EVAL_ARRAYS, resolved.eval_files, eval_count)):
        start = time.monotonic()
        examples = read_examples(resolved.dataset_dir, resolved.metadata, files, limit=limit) if files else None
        if examples is None or not len(examples["input_ids"]):
            if name == TRAIN_ARRAYS:
                raise InputError(f"{resolved.dataset_dir}: no training examples in its shards; rebuild it with "
                                 "build_pretraining_dataset.py")
            seq = resolved.config.max_seq_length  # no held-out shard: an empty evaluation
            examples = {key: np.zeros((0, seq), "int32") for key in ("input_ids", "input_mask", "segment_ids")}
        packed = pack_examples(examples["input_ids"], examples["input_mask"], examples["segment_ids"])
        np.savez(work / name, **packed)
        say(f"{name}: {len(examples['input_ids'])} examples from {len(files)} shard(s) in "
            f"{time.monotonic() - start:.1f} s")
    record.write_text(json.dumps({"signature": signature}))


def checkpoint_steps(config):
    """The TensorFlow run's: every save_checkpoints_steps, the extra steps, and the last."""
    total, every = config.num_train_steps, config.save_checkpoints_steps
    steps = set(range(every, total, every)) if every else set()
    return sorted(steps | {s for s in config.extra_checkpoint_steps if 0 < s < total} | {total})


def make_plan(work, name, config, resolved, eval_count):
    """The run's plan (training_jax.run_plan) for the config as run_pretraining.py resolved it: its config file and
    vocabulary copied into the work folder, the TensorFlow run's cadence, and how --max-minutes sizes it."""
    from training_jax.pretrain import EVAL_ARRAYS, TRAIN_ARRAYS
    from training_jax.run_plan import RunPlan

    config_file = work / f"config_{name}.json"
    config.save(config_file)
    vocab_file = work / VOCAB_FILE
    shutil.copyfile(resolved.vocab_file, vocab_file)
    total = config.num_train_steps
    eval_every = (config.eval_every_steps or config.save_checkpoints_steps) if config.do_eval and eval_count else 0
    return RunPlan(model=name, work=work, config_file=config_file, train_arrays=work / TRAIN_ARRAYS,
                   eval_arrays=work / EVAL_ARRAYS, log_every=config.iterations_per_loop,
                   eval_every=eval_every or total, checkpoint_steps=tuple(checkpoint_steps(config)),
                   vocab_file=vocab_file, fit=fit_block(name, config))


def fit_block(name, config):
    """How --max-minutes sizes the run (training_jax.fit): this model alone, at most the config's steps, evaluations
    spread as EVALS_PER_SIZED_RUN, a checkpoint every save_checkpoints_steps and at the end, and the warmup of
    sized_warmup."""
    fraction, most = sized_warmup(config)
    return {"models": [name], "steps_per_unit": {name: 1.0}, "budgets": 1,
            "warmup_fraction": fraction, "most_warmup": most, "evals": EVALS_PER_SIZED_RUN,
            "max_units": config.num_train_steps,
            "checkpoint_every": config.save_checkpoints_steps or config.num_train_steps}


def sized_warmup(config):
    """(fraction, most steps) of a sized run's warmup: the config's warmup steps where they fit in
    SIZED_WARMUP_FRACTION of the run, else that fraction of it. What protects the first updates is the warmup's
    length in steps, not its share: scaled down with the run, the original's 1% (10,000 of 1,000,000 steps) gave a
    10,800-step H200 run 108 steps to the peak learning rate, and its discriminator collapsed (AUC 0.50 from step
    2,000 on, every token's hidden state alike from layer 2 on: docs/jax_gpu.md), where a 10% warmup on the same
    data and model reached AUC 0.77 in as many steps. A run as long as the config keeps the config's warmup."""
    fraction = config.num_warmup_steps / config.num_train_steps
    return max(fraction, SIZED_WARMUP_FRACTION), config.num_warmup_steps


def refuse_tensorflow_checkpoints(model_dir, state_dir):
    """A model folder with a TensorFlow run's checkpoints and no JAX state: continuing it here would start over
    and overwrite its metrics."""
    from storage import model_folder
    from training_jax import state as state_lib

    if model_folder.saved_checkpoints(model_dir) and not (state_dir / state_lib.STATE_FILE).is_file():
        raise InputError(f"{model_dir}: holds checkpoints of a run this JAX run did not write; resume it as it was "
                         "run (under TensorFlow), or start a new --model-name with --init-checkpoint "
                         f"{model_dir}")


def run_options(args, work, model_dir, keep_checkpoints):
    """training_jax.pretrain.Run's options for this run: its state kept in the work folder and saved at each
    checkpoint (a kill -9 resumes from the last one, as under TensorFlow), the command's device and step flags."""
    from training_jax import pretrain
    from training_jax.speed_settings import STEP_FLAG_NAMES

    return pretrain.run_options(
        model_dir, state_dir=work / "state", state_at_checkpoints=True, keep_checkpoints=keep_checkpoints,
        fit_minutes=args.max_minutes, init_from=[pathlib.Path(args.init_checkpoint)] if args.init_checkpoint else None,
        init_flag="--init-checkpoint",
        **{name: getattr(args, name) for name in ("devices", "num_processes", "process_id", "coordinator_address")},
        **{name: getattr(args, name) for name in STEP_FLAG_NAMES})


def dry_run(args):
    """--dry-run: the step's settings on --platform (default: this machine's), printed as one line and returned."""
    import jax

    from configs.resolve import resolve_run
    from data import paths
    from training_jax.speed_settings import platform_of, resolve_from_args

    config = resolve_run(args.model_name, args.hparams, args.data_dir or paths.default_data_dir()).config
    settings = resolve_from_args(args, args.platform or platform_of(jax.devices()[0]), config.mixed_precision)
    print(f"pretraining {args.model_name}: {settings.describe()}", flush=True)
    return settings


@exit_on_input_error
def main(argv=None):
    started = time.monotonic()
    args = parse_args(argv)
    if args.tpu:
        raise InputError("--tpu: under KERAS_BACKEND=jax the TPU's devices are found by JAX itself; drop --tpu")
    from training_jax import pretrain

    pretrain.without_tensorflow()
    if args.dry_run:  # before Keras: the config resolved, nothing built
        return dry_run(args)
    import keras

    if keras.backend.backend() != "jax":
        sys.exit(f"run with KERAS_BACKEND=jax (got {keras.backend.backend()})")
    from configs.resolve import resolve_run
    from data import paths
    from storage import folder_lock
    from training_jax import data_parallel

    resolved = resolve_run(args.model_name, args.hparams, args.data_dir or paths.default_data_dir())
    config = resolved.config
    model_dir = pathlib.Path(config.model_dir)
    data_parallel.initialize_processes(args.coordinator_address, args.num_processes, args.process_id)
    import jax

    chief = jax.process_index() == 0
    work = model_dir / (WORK_DIR if chief else f"{WORK_DIR}.process-{jax.process_index()}")
    lock = folder_lock.acquire(model_dir, "pretraining") if chief else folder_lock.shared()
    with lock:
        if chief:  # the model folder is process 0's; the others keep only their own state
            refuse_tensorflow_checkpoints(model_dir, work / "state")
        return open_run(args, resolved, work).run(started)


def open_run(args, resolved, work):
    """The run (training_jax.pretrain.Run) of the resolved config into its model folder, its examples' arrays made
    in `work` (once per dataset) and its programs cached there."""
    from training_jax import fit, pretrain
    from training_jax.compiles import use_compile_cache

    config = resolved.config
    work.mkdir(parents=True, exist_ok=True)
    eval_count = config.eval_batch_size * config.num_eval_steps if config.do_eval else 0
    write_arrays(work, resolved, eval_count, lambda line: print(line, flush=True))
    plan = fit.sized_plan(make_plan(work, args.model_name, config, resolved, eval_count))  # a sized run: as sized
    use_compile_cache(work / pretrain.COMPILE_CACHE)
    return pretrain.Run(run_options(args, work, pathlib.Path(config.model_dir), config.keep_checkpoint_max), plan)
