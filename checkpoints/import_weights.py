"""Imports official TF1 ELECTRA checkpoints, Hugging Face ELECTRA folders and keras-hub ELECTRA presets as one
of our model folders.

    python -m checkpoints.import_weights --source electra_small/ --model-name electra_small_official
    python -m checkpoints.import_weights --source hf/electra-base-discriminator \\
        --generator hf/electra-base-generator --model-name electra_base_hf

--source: a TF1 checkpoint prefix (…/model.ckpt-N) or a folder holding one (the official release's
folders), or a Hugging Face ELECTRA folder (config.json + model.safetensors): a discriminator folder,
optionally with --generator, or a folder with discriminator/ and generator/ subfolders (what
`checkpoints.export --format hf` writes), or a keras-hub ElectraBackbone preset (config.json +
model.weights.h5, with tokenizer.json and assets/tokenizer/vocabulary.txt; the encoder alone, so the
discriminator head and the generator start fresh; needs keras-hub). The model's sizes are read from the
tensors and checked against --hparams when given (else inferred; attention heads from the Hugging Face or
keras-hub config, or from the electra_config.json our TF1 export writes, or hidden / 64 as in the
original). Optimizer slots and global_step are ignored.

Writes <data-dir>/models/<model-name>/: config.json, the vocabulary (vocab.txt beside the checkpoint, or
--vocab-file / --spm-model) and a checkpoint in our format, which `run_pretraining.py --init-checkpoint`
and fine-tuning read like any pretrained model folder. Bad input stops with one line and exit code 2.
"""
import argparse
import json
import os
import sys

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import pathlib

from data import paths
from common.errors import InputError, exit_on_input_error


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, type=pathlib.Path,
                        help="TF1 checkpoint prefix or folder, Hugging Face ELECTRA folder, or keras-hub preset")
    parser.add_argument("--generator", type=pathlib.Path, default=None,
                        help="the generator's Hugging Face folder (when --source is the discriminator's)")
    parser.add_argument("--model-name", required=True, help="the folder to write under <data-dir>/models/")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    vocab = parser.add_mutually_exclusive_group()
    vocab.add_argument("--vocab-file", type=pathlib.Path, default=None,
                       help="WordPiece vocab.txt (default: the one beside the checkpoint)")
    vocab.add_argument("--spm-model", type=pathlib.Path, default=None, help="SentencePiece model instead")
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=None,
                        help="the vocabulary's casing (default: the Hugging Face or keras-hub tokenizer config's, "
                             "else on)")
    parser.add_argument("--hparams", default="",
                        help="JSON (inline or a .json file) of PretrainingConfig fields the model was trained "
                             "with, e.g. '{\"model_size\": \"electra_small_plus\"}'; checked against the tensors")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing model folder's files")
    return parser.parse_args(argv)


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    name = args.model_name
    if not name or "/" in name or name in (".", ".."):
        raise InputError(f"--model-name {name!r}: use a plain folder name such as electra_small_official")
    model_dir = paths.models_dir(args.data_dir or paths.default_data_dir()) / name
    from checkpoints import source_model
    from common.atomic import check_output_dir
    from data.tokenization import load_tokenizer

    check_output_dir(model_dir, args.overwrite, flag="--model-name")
    source = open_source(args.source, args.generator)
    vocab_file, spm_model = source_model.resolve_vocab(source, args.vocab_file, args.spm_model)
    lower_case = source_model.source_lower_case(source) if args.lower_case is None else args.lower_case
    tokenizer = load_tokenizer(vocab_file=vocab_file, spm_model=spm_model, lower_case=lower_case)
    config, _ = source_model.import_weights(source, model_dir, tokenizer, args.hparams, args.overwrite)
    print(f"Wrote {model_dir} (step {source.step}). Continue pretraining on a dataset built with its "
          f"vocabulary:\n  python run_pretraining.py --model-name {name}_continued --init-checkpoint {model_dir} "
          f"--hparams '{json.dumps(source_model.continue_hparams(config))}'")
    return model_dir


def open_source(path, generator=None):
    """The format of --source (and --generator, Hugging Face only) and its reader: a keras-hub preset's
    KerasHubSource, a Hugging Face folder's HFSource, else a TF1 checkpoint's TF1Source."""
    from checkpoints import hf, keras_hub_preset, tf1

    path = pathlib.Path(path)
    if keras_hub_preset.is_keras_hub_preset(path):
        if generator is not None:
            raise InputError("--generator is for Hugging Face folders; a keras-hub preset holds one encoder")
        return keras_hub_preset.KerasHubSource(path)
    if hf.is_hf_folder(path) or hf.is_hf_folder(path / "discriminator"):
        discriminator, paired = hf.split_pair(path)
        if generator is not None and not hf.is_hf_folder(generator):
            raise InputError(f"--generator {generator}: not a Hugging Face folder (config.json + "
                             "model.safetensors); pass the generator's folder")
        return hf.HFSource(discriminator, generator or paired)
    if hf.is_hf_folder(path / "generator"):
        raise InputError(f"--source {path}: holds a generator folder but no discriminator/ beside it; the "
                         "import needs the discriminator (pass its folder, with --generator for the generator)")
    if generator is not None:
        raise InputError("--generator is for Hugging Face folders; a TF1 checkpoint holds both towers")
    if not path.exists() and not pathlib.Path(f"{path}.index").exists():
        raise InputError(f"--source {path}: no such file or folder; pass a TF1 checkpoint prefix or folder, "
                         "or a Hugging Face ELECTRA folder")
    return tf1.TF1Source(tf1.resolve_tf1_prefix(path))


if __name__ == "__main__":
    main()
    sys.exit(0)
