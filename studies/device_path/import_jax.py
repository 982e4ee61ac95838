"""A JAX pretraining run's weights as a model folder under <data-dir>/models/, which run_finetuning.py,
run_pretraining.py --init-checkpoint and checkpoints.export read.

    python -m studies.device_path.import_jax --export jax_export --weights jax_runs/electra_small \
        --data-dir electra_data --model-name electra_small_jax [--model electra_small]
    # an older run's npz weights, without the export: the config from the run's record, the vocabulary given
    python -m studies.device_path.import_jax --metrics OUT/electra/metrics.jsonl --vocab-file vocab.txt \
        --weights OUT/electra/weights-11144.npz --data-dir electra_data --model-name electra_gpu

--export is the folder studies.device_path.export wrote (the config that trained and the vocabulary). --weights is
what training_jax.pretrain wrote, a model folder (its newest ckpt-<step>) or one of its checkpoint prefixes,
or the folder in what studies.device_path.run brought back (OUT/models.tar/pretrained, read from its parts): its
files are copied as they are once their weights restore into the config's model (a copy and a check).
The older format, weights converted: a weights-<step>.npz file, or the name of one whose shards
(weights-<step>.part<k>of<n>.npz) lie beside it (what runs wrote before, and the studies' collects bring back).
The run's metrics.jsonl (--metrics, default: the one beside the weights) gives the config the run trained
with; with --export it is checked against the export's: a run sized shorter than planned (--fit-minutes)
is taken, a run of another config refused. A run stopped at its limit (no run record, weights at a step
that is no checkpoint) imports with the export's config, as sized when the collect's plan.json says so.
The run's metrics up to the weights' step come too: metrics.jsonl (the format run_pretraining.py writes),
TensorBoard scalars and logs/curves.png in the model folder.
"""
import argparse
import dataclasses
import pathlib

from checkpoints import run_record
from common.errors import InputError, exit_on_input_error


def read_export(export, model=None, vocab_file=None):
    """(model, its config path, vocab path: vocab_file, else the export's) of an export folder; InputError naming
    what is missing."""
    from studies.device_path.export import VOCAB_FILE
    from studies.device_path.export_file import export_path

    models = read_plan(export)["models"]
    if model is None and len(models) != 1:
        raise InputError(f"{export}: holds the models {', '.join(sorted(models))}; say which with --model")
    model = model or next(iter(models))
    if model not in models:
        raise InputError(f"--model {model}: {export_path(export)} has {', '.join(sorted(models))}")
    vocab = vocab_file or pathlib.Path(export) / VOCAB_FILE
    if not vocab.is_file():
        raise InputError(f"{vocab}: missing; export again with python -m studies.device_path.export, or give --vocab-file")
    return model, pathlib.Path(export) / models[model]["config_file"], vocab


def read_plan(export):
    """The export's plan (export.json, or an older export's study.json), "models" keyed."""
    from studies.device_path.export_file import read_export_file

    return read_export_file(export)


def weights_step(path, step=None):
    from storage.model_folder import checkpoint_step

    path = pathlib.Path(path)
    named = run_record.weights_file_step(path.name) if path.suffix == ".npz" else checkpoint_step(path) or None
    if step is None and named is None:
        raise InputError(f"--weights {path}: not named weights-<step>.npz or ckpt-<step>; give the step with --step")
    return step if step is not None else named


def weights_source(path, scratch):
    """--weights as given → an .npz path (the older format, as given) or the checkpoint prefix of a model
    folder, one in a run's archive (OUT/models.tar/<name>) extracted into `scratch` first; InputError when it
    is none of these."""
    from studies.device_path.returned import archived_member, extract_member
    from training_jax.weights import checkpoint_of

    path = pathlib.Path(path)
    if path.suffix == ".npz":
        return path
    if archived_member(path):
        path = extract_member(path, scratch)
    return pathlib.Path(checkpoint_of(path, "--weights"))


def config_from_dict(values, source):
    from configs import loading
    from configs.pretraining_config import PretrainingConfig

    return loading.dataclass_from_dict(PretrainingConfig, values, str(source)).with_derived_values()


def trained_config(weights, metrics=None, exported=None, model=None, sizing=None, say=print):
    """The config the weights were trained with (a dict): the run record's in `metrics` (checked against
    `exported`, the export's config dict, when given; `sizing` the export's fit block), else the export's, as
    the collect's plan.json beside the weights sized it. One line is said for anything taken on trust."""
    weights = pathlib.Path(weights)
    run = None
    if metrics is not None:
        _, run, note = run_record.read_run(metrics)
        if note:
            say(note)
    if run is not None:
        config, note = run_record.used_config(run, (sizing or {}).get("warmup_fraction"))
        if note:
            say(f"{metrics}: {note}")
        if exported is not None:
            note = run_record.check_config(config, exported, metrics, f"the export's model {model}", sizing)
            if note:
                say(note)
        return config
    if exported is None:
        raise InputError(f"--weights {weights}: no run record to take the config from (no metrics.jsonl beside it "
                         "ending in its {\"split\": \"run\"} line); give --export, or --metrics of the finished run")
    entry = next(filter(None, (run_record.sized_entry(folder, model) for folder in (weights.parent.parent,
                                                                                   weights.parent))), None)
    if entry and sizing:
        say(f"--weights {weights}: no run record (the run did not finish); its config is the export's as the "
            f"device sized it ({entry['num_train_steps']} steps, plan.json)")
        return run_record.sized(exported, entry["num_train_steps"], sizing["budgets"], sizing["warmup_fraction"])
    say(f"--weights {weights}: no run record (the run did not finish); its config is the export's as exported")
    return exported


def import_jax_weights(config, weights_path, vocab_file, folder, step, overwrite=False):
    """The model folder `folder` from a JAX run's weights: config (its model_name the folder's), the
    vocabulary, and ckpt-<step>. A checkpoint is copied as it is (float16 stays float16: readers widen it)
    after its weights restored into the config's model; older .npz weights are converted (widened to float32)."""
    from pretrain.builder import build_pretrainer
    from storage import model_folder

    weights_path = pathlib.Path(weights_path)
    config = dataclasses.replace(config, model_name=pathlib.Path(folder).name)
    if weights_path.suffix == ".npz":
        return import_npz_weights(config, weights_path, vocab_file, folder, step, overwrite)
    model_folder.restore_weights(build_pretrainer(config, dtype="float32"), str(weights_path), label="--weights",
                                 fix="pass the export or run record of the run that wrote it",
                                 use_other="pass --weights {prefix}")
    return model_folder.copy_checkpoint_folder(weights_path, folder, config, vocab_file, step, overwrite)


def import_npz_weights(config, weights_path, vocab_file, folder, step, overwrite=False):
    """The older format: weights-<step>.npz (or its shards) converted into ckpt-<step>."""
    from storage import model_folder
    from training_jax.weights import pretrainer_with_weights, read_checkpoint

    pretrainer = pretrainer_with_weights(config, read_checkpoint(weights_path), weights_path)
    return model_folder.write_model_folder(folder, config, pretrainer, vocab_file, step=step, overwrite=overwrite)


def import_history(metrics, folder, step):
    """The run's metrics up to `step` into the model folder, as run_pretraining.py writes them there (metrics.jsonl,
    TensorBoard scalars, logs/curves.png); the line that says what came."""
    from pretrain_loop.curves import write_run_curves
    from pretrain_loop.metrics_file import copy_history

    kept = copy_history(run_record.read_run(metrics)[0], folder, step)
    path, reason = write_run_curves(folder, pathlib.Path(folder).name)
    complete = any(record["split"] == "run" for record in kept)
    return (f"{folder}: {len(kept)} lines of {metrics} up to step {step}{' (the run complete)' if complete else ''} "
            f"in metrics.jsonl and logs/; curves {path or 'not drawn: ' + reason}")


def check_vocab(vocab_file, config):
    """The vocabulary must be the one the run's ids index: as many entries as its vocab_size."""
    if not pathlib.Path(vocab_file).is_file():
        raise InputError(f"--vocab-file {vocab_file}: no such file; give the vocabulary the run was trained with")
    size = sum(1 for line in pathlib.Path(vocab_file).read_text(encoding="utf-8").splitlines() if line.strip())
    if size != config.vocab_size:
        raise InputError(f"--vocab-file {vocab_file}: {size} entries, the run's model {config.vocab_size}; give "
                         "the vocabulary the run was trained with")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=pathlib.Path, default=None,
                        help="the folder studies.device_path.export wrote (else --metrics and --vocab-file)")
    parser.add_argument("--weights", type=pathlib.Path, required=True,
                        help="the run's model folder, a checkpoint prefix in it (…/ckpt-N), OUT/models.tar/<name> "
                             "(studies.device_path.run), or the older weights-<step>.npz (or its shards)")
    parser.add_argument("--metrics", type=pathlib.Path, default=None,
                        help="the run's metrics.jsonl (default: the one beside the weights, if there)")
    parser.add_argument("--vocab-file", type=pathlib.Path, default=None,
                        help="the run's vocabulary (default: the export's)")
    parser.add_argument("--model", default=None, help="the export's model (needed when it holds several)")
    parser.add_argument("--step", type=int, default=None, help="the checkpoint's step (default: from the name)")
    parser.add_argument("--model-name", required=True, help="the folder to write under <data-dir>/models/")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help="the data directory (default: $ELECTRA_DATA_DIR or electra_data)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing model folder's files")
    return parser.parse_args(argv)


@exit_on_input_error
def main(argv=None):
    import tempfile

    from common.quiet import quiet_tensorflow

    quiet_tensorflow()
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="import_jax-") as scratch:
        return import_run(args, scratch)


def import_run(args, scratch):
    """main's work, with a scratch folder for a model folder extracted from a run's archive."""
    from data import paths
    from configs.pretraining_config import PretrainingConfig
    from storage.model_folder import find_vocab

    name = args.model_name
    if not name or "/" in name or name in (".", ".."):
        raise InputError(f"--model-name {name!r}: use a plain folder name such as electra_small_jax")
    args.weights = weights_source(args.weights, scratch)
    metrics = args.metrics or args.weights.parent / "metrics.jsonl"
    if not metrics.is_file():
        if args.metrics:
            raise InputError(f"--metrics {metrics}: no such file; copy the run's metrics.jsonl back")
        metrics = None
    model, exported, vocab, sizing = args.model, None, args.vocab_file, None
    if args.export:
        model, config_path, vocab = read_export(args.export, args.model, args.vocab_file)
        exported = PretrainingConfig.load(config_path).to_dict()
        sizing = read_plan(args.export).get("fit")
    elif vocab is None and args.weights.suffix != ".npz":
        vocab = find_vocab(args.weights.parent)
    if vocab is None:
        raise InputError("--vocab-file: needed without --export (the vocabulary the run was trained with)")
    step = weights_step(args.weights, args.step)
    values = trained_config(args.weights, metrics, exported, model, sizing)
    config = config_from_dict(values, metrics or args.export)
    check_vocab(vocab, config)
    folder = paths.models_dir(args.data_dir or paths.default_data_dir()) / name
    import_jax_weights(config, args.weights, vocab, folder, step, args.overwrite)
    if metrics is not None:
        print(import_history(metrics, folder, step))
    print(f"Wrote {folder} (the {model or values['model_name']} weights of step {step}). Fine-tune it:\n  python "
          f"run_finetuning.py --data-dir {args.data_dir or paths.default_data_dir()} --model-name {name} --task mrpc")
    return folder


if __name__ == "__main__":
    main()
