"""Weights trained under JAX (training_jax.pretrain's weights-<step>.npz, whole or in shards) as a normal
model folder, which run_finetuning.py, run_pretraining.py --init-checkpoint and checkpoints.export read.

    python -m checkpoints.import_jax --export jax_export --weights jax_runs/electra_small/weights-1000.npz \
        --data-dir electra_data --model-name electra_small_jax [--arm electra_small]

--export is the folder training_jax.export wrote (the config that trained and the vocabulary);
--weights a weights file, or the name of one whose shards (weights-<step>.part<k>of<n>.npz) lie beside it.
"""
import argparse
import dataclasses
import json
import pathlib
import re

from common.errors import InputError, exit_on_input_error


def read_export(export, arm=None):
    """(arm, its config path, vocab path) of an export folder; InputError naming what is missing."""
    from training_jax.export import VOCAB_FILE
    from training_jax.pretrain import STUDY_FILE

    export = pathlib.Path(export)
    if not (export / STUDY_FILE).is_file():
        raise InputError(f"{export / STUDY_FILE}: missing; pass the folder python -m training_jax.export wrote")
    arms = json.loads((export / STUDY_FILE).read_text())["arms"]
    if arm is None and len(arms) != 1:
        raise InputError(f"{export}: holds the arms {', '.join(sorted(arms))}; say which with --arm")
    arm = arm or next(iter(arms))
    if arm not in arms:
        raise InputError(f"--arm {arm}: {export / STUDY_FILE} has {', '.join(sorted(arms))}")
    vocab = export / VOCAB_FILE
    if not vocab.is_file():
        raise InputError(f"{vocab}: missing; export again with python -m training_jax.export")
    return arm, export / arms[arm]["config_file"], vocab


def weights_step(path, step=None):
    match = re.match(r"weights-(\d+)(\.part\d+of\d+)?\.npz$", pathlib.Path(path).name)
    if step is None and match is None:
        raise InputError(f"--weights {path}: not named weights-<step>.npz; give the step with --step")
    return step if step is not None else int(match.group(1))


def import_jax_weights(config, weights_path, vocab_file, folder, step, overwrite=False):
    """The model folder `folder` from JAX weights: config (its model_name the folder's), the vocabulary, and
    ckpt-<step> holding exactly the weights read (float16 ones widened to float32)."""
    from storage import model_folder
    from training_jax.weights import pretrainer_with_weights, read_weights

    weights_path = pathlib.Path(weights_path)
    weights = read_weights(weights_path.parent, weights_path.name)
    if weights is None:
        raise InputError(f"--weights {weights_path}: no such file and no shards of it beside; copy them here")
    pretrainer = pretrainer_with_weights(config, weights, weights_path)
    config = dataclasses.replace(config, model_name=pathlib.Path(folder).name)
    return model_folder.write_model_folder(folder, config, pretrainer, vocab_file, step=step, overwrite=overwrite)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=pathlib.Path, required=True, help="the folder training_jax.export wrote")
    parser.add_argument("--weights", type=pathlib.Path, required=True, help="weights-<step>.npz (or its shards)")
    parser.add_argument("--arm", default=None, help="the export's arm (needed when it holds several)")
    parser.add_argument("--step", type=int, default=None, help="the checkpoint's step (default: from the name)")
    parser.add_argument("--model-name", required=True, help="the folder to write under <data-dir>/models/")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help="the data directory (default: $ELECTRA_DATA_DIR or electra_data)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing model folder's files")
    return parser.parse_args(argv)


@exit_on_input_error
def main(argv=None):
    from common.quiet import quiet_tensorflow

    quiet_tensorflow()
    args = parse_args(argv)
    from data import paths
    from configs.pretraining_config import PretrainingConfig

    name = args.model_name
    if not name or "/" in name or name in (".", ".."):
        raise InputError(f"--model-name {name!r}: use a plain folder name such as electra_small_jax")
    arm, config_path, vocab = read_export(args.export, args.arm)
    step = weights_step(args.weights, args.step)
    folder = paths.models_dir(args.data_dir or paths.default_data_dir()) / name
    import_jax_weights(PretrainingConfig.load(config_path), args.weights, vocab, folder, step, args.overwrite)
    print(f"Wrote {folder} (the {arm} arm's weights of step {step}). Fine-tune it:\n  python run_finetuning.py "
          f"--data-dir {args.data_dir or paths.default_data_dir()} --model-name {name} --task mrpc")
    return folder


if __name__ == "__main__":
    main()
