"""What training_jax.pretrain reads, written where TensorFlow is: a dataset's examples as compact arrays and
the run's config exactly as run_pretraining.py resolves it.

    python -m studies.device_path.export --data-dir electra_data --model-name electra_small --out jax_export \
        [--hparams '{"train_batch_size": 128}'] [--checkpoints 4]
    # then, on a machine with JAX and Keras (no TensorFlow needed):
    KERAS_BACKEND=jax python -m studies.device_path.pretrain_export --export jax_export --model electra_small \
        --out jax_runs/electra_small
    # and back here, the weights as a normal model folder:
    python -m studies.device_path.import_jax --export jax_export --weights jax_runs/electra_small/weights-N.npz \
        --data-dir electra_data --model-name electra_small_jax

The folder holds config_<model>.json (the resolved config), train.npz.xz and eval.npz (the training and
held-out shards as run_pretraining.py splits them: training_jax.arrays' packing), vocab.txt (the dataset's
vocabulary, so that the import needs nothing else) and export.json (studies.device_path.export_file), written
last: the models, their checkpoint steps, how often to log and evaluate, and (for --fit-minutes) how to size
a run. Fine-tuning tasks are exported by `python -m studies.device_path.task_arrays`.
"""
import argparse
import pathlib
import shutil

from common.errors import InputError, exit_on_input_error
from studies.device_path.export_file import EXPORT_FILE, OLD_EXPORT_FILE, VOCAB_FILE, write_export_file
from training_jax.pretrain import EVAL_ARRAYS, TRAIN_ARRAYS

LOG_EVERY = 100  # training metrics averaged over this many steps
EVALS_PER_RUN = 30  # held-out evaluations along a run (the curves' resolution)


def say(message):
    print(message, flush=True)


def read_examples(dataset_dir, metadata, files, limit=None):
    """{input_ids, input_mask, segment_ids} NumPy arrays of the shards' examples, in file order (at most
    `limit`), read by the evaluation reader (every record once, in order)."""
    import numpy as np

    from data import tfrecords

    parts, count = {}, 0
    for batch in tfrecords.pretraining_dataset(dataset_dir, 4096, files=files, training=False, metadata=metadata):
        for name, value in batch.items():
            parts.setdefault(name, []).append(value.numpy())
        count += len(parts["input_ids"][-1])
        if limit and count >= limit:
            break
    return {name: np.concatenate(chunks)[:limit] for name, chunks in parts.items()}


def save_examples(path, examples, source, xz=False):
    """{input_ids, input_mask, segment_ids} as training_jax's compact arrays in one compressed .npz, or with
    `xz` in <path>.xz (smaller, slower to write: for the training arrays, most of what is copied to the GPU machine)."""
    import numpy as np

    from training_jax.arrays import pack_examples, save_packed

    packed = pack_examples(examples["input_ids"], examples["input_mask"], examples["segment_ids"])
    if xz:
        path = save_packed(path, packed)
    else:
        np.savez_compressed(path, **packed)
    say(f"{path.name}: {len(packed['input_ids'])} examples from {source}, {path.stat().st_size / 1e6:.1f} MB")


def export_examples(out_dir, config, dataset_dir, metadata):
    """train.npz.xz (the training shards) and eval.npz (the first eval_batch_size × num_eval_steps examples of
    the held-out shards), split as run_pretraining.py splits them; returns the held-out count."""
    from configs.resolve import split_shards

    train_files, eval_files = split_shards(config, dataset_dir, metadata)
    if not eval_files:
        raise InputError(f"{dataset_dir}: no held-out shard for the JAX trainer's evaluations (do_eval is off, or "
                         "the dataset has one shard); give --hparams '{\"do_eval\": true}' and a dataset of 2 or "
                         "more shards")
    eval_count = config.eval_batch_size * config.num_eval_steps
    (out_dir / TRAIN_ARRAYS).unlink(missing_ok=True)  # an earlier export's, which the reader would not take
    save_examples(out_dir / TRAIN_ARRAYS, read_examples(dataset_dir, metadata, train_files),
                  f"{len(train_files)} shard(s)", xz=True)
    save_examples(out_dir / EVAL_ARRAYS, read_examples(dataset_dir, metadata, eval_files, eval_count),
                  f"{len(eval_files)} held-out shard(s)")
    return eval_count


def evenly_spaced(steps, count):
    """`count` checkpoint steps ending at `steps` (fewer when steps < count)."""
    every = max(1, steps // count)
    return sorted({min(steps, every * (k + 1)) for k in range(count)} | {steps})


def model_record(config, config_file, checkpoint_steps):
    return {"config_file": config_file, "num_train_steps": config.num_train_steps,
            "checkpoint_steps": list(checkpoint_steps)}


def write_export(out_dir, models, eval_examples, extra=None):
    """config_<model>.json for each model and export.json (last: a folder without it is not an export).
    models: {model: (config, checkpoint steps)}."""
    record = {"log_every": LOG_EVERY, "eval_every": {}, "models": {}, "eval_examples": eval_examples,
              **(extra or {})}
    for model, (config, checkpoint_steps) in models.items():
        config.save(out_dir / f"config_{model}.json")
        record["models"][model] = model_record(config, f"config_{model}.json", checkpoint_steps)
        record["eval_every"][model] = max(1, config.num_train_steps // EVALS_PER_RUN)
    write_export_file(out_dir, record)
    return record


def export_pretraining(model_name, hparams, data_dir, out_dir, checkpoints=1):
    """One model, named `model_name`, resolved as run_pretraining.py --model-name model_name --hparams
    hparams resolves it; returns export.json's content."""
    from configs.resolve import resolve_run

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (EXPORT_FILE, OLD_EXPORT_FILE):  # an export is complete only once it is written again
        (out_dir / name).unlink(missing_ok=True)
    resolved = resolve_run(model_name, hparams, data_dir)
    config = resolved.config
    eval_count = export_examples(out_dir, config, resolved.dataset_dir, resolved.metadata)
    shutil.copyfile(resolved.vocab_file, out_dir / VOCAB_FILE)
    return write_export(out_dir, {model_name: (config, evenly_spaced(config.num_train_steps, checkpoints))},
                       eval_count, {"fit": fit_record(model_name, config, checkpoints)})


def fit_record(model_name, config, checkpoints, checkpoint_every=None):
    """export.json's "fit" block (training_jax.fit): one model, sized by --fit-minutes to what the minutes allow, at
    most the config's steps, with the config's own warmup fraction and `checkpoints` evenly spaced weights, or with
    `checkpoint_every` given, a checkpoint every that many steps and at the end (training_jax.fit.sized_fields)."""
    return {"models": [model_name], "steps_per_unit": {model_name: 1.0}, "budgets": checkpoints,
            "warmup_fraction": config.num_warmup_steps / config.num_train_steps, "evals": EVALS_PER_RUN,
            "max_units": config.num_train_steps,
            **({"checkpoint_every": checkpoint_every} if checkpoint_every else {})}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-name", required=True, help="the run's name (run_pretraining.py's): the export's model")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help="the data directory of build_pretraining_dataset.py (default: $ELECTRA_DATA_DIR)")
    parser.add_argument("--hparams", default="", help="PretrainingConfig overrides, JSON inline or a .json file, "
                                                      "as for run_pretraining.py")
    parser.add_argument("--checkpoints", type=int, default=1, help="evenly spaced weights files the run writes")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="the export folder (copy it to the GPU)")
    return parser.parse_args(argv)


@exit_on_input_error
def main(argv=None):
    from common.quiet import quiet_tensorflow

    quiet_tensorflow()
    args = parse_args(argv)
    if args.checkpoints < 1:
        raise InputError(f"--checkpoints {args.checkpoints}: must be at least 1")
    record = export_pretraining(args.model_name, args.hparams, args.data_dir, args.out, args.checkpoints)
    model = record["models"][args.model_name]
    from studies.device_path.run import device_line

    say(f"wrote {args.out}: {model['num_train_steps']} steps, weights at {model['checkpoint_steps']}. On a machine "
        f"with JAX:\n  KERAS_BACKEND=jax python -m studies.device_path.pretrain_export --export {args.out} --model "
        f"{args.model_name} --out {args.out}/runs/{args.model_name}\nor the time-boxed run as one command on a GPU "
        f"machine (tasks from python -m studies.device_path.task_arrays in {args.out}/tasks; copy .whl/ and "
        f"{args.out}/ into the "
        f"repository there, set OUT to the folder to bring back, allow about 10 minutes; add --also-mlm for the MLM "
        f"baseline at equal FLOPs):\n  {device_line(args.out)}")
    return record


if __name__ == "__main__":
    main()
