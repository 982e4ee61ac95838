"""A pretraining run resolved once: model name, --hparams and the dataset → config, shards, vocabulary.

The dataset's metadata.json decides the vocabulary size, special-token ids, casing and sequence length;
--hparams that contradict it stop the run with one line (InputError → exit 2) before anything is written.
run_pretraining.py, the JAX export (studies.device_path.export) and the studies all start from `resolve_run`, so
that a run means the same thing on every backend. Whether a model folder may be resumed with it is the
storage layer's question (storage/resume.py).
"""
import dataclasses
import pathlib
from typing import List

from common.errors import InputError
from configs import loading
from configs.model_config import available_model_sizes
from configs.pretraining_config import PretrainingConfig
from data import paths, tfrecords
from data.tokenization import file_sha256

# What must agree between a saved run and the resumed one (the variables' shapes and meaning).
SHAPE_FIELDS = ("electra_objective", "uniform_generator", "untied_generator", "untied_generator_embeddings",
                "gdes_embeddings", "two_tower_generator", "electric_objective", "vocab_size", "max_seq_length")


@dataclasses.dataclass(frozen=True)
class ResolvedRun:
    """Everything a pretraining run reads, checked: the config as the dataset completes it, the dataset
    folder and its metadata, the shards for training and for held-out evaluation, the vocabulary file."""
    config: PretrainingConfig
    dataset_dir: pathlib.Path
    metadata: dict
    train_files: List[str]
    eval_files: List[str]
    vocab_file: pathlib.Path


def resolve_run(model_name, hparams, data_dir) -> ResolvedRun:
    """The one way every entry point builds a pretraining run from --model-name, --hparams and a data dir."""
    config, dataset_dir, metadata = resolve_with_dataset(model_name, hparams, data_dir)
    vocab_file = vocab_source(metadata, dataset_dir)
    train_files, eval_files = split_shards(config, dataset_dir, metadata)
    return ResolvedRun(config, dataset_dir, metadata, train_files, eval_files, vocab_file)


def resolve_config(model_name, hparams, data_dir):
    """(config, overrides): the model name picks a size when it names one; else --hparams must."""
    overrides = loading.parse_hparams(hparams, "--hparams")
    loading.check_known_keys(PretrainingConfig, overrides, "--hparams")
    for key in ("model_name", "data_dir"):
        if key in overrides:
            raise InputError(f"--hparams: set {key} with --{key.replace('_', '-')}, not in --hparams")
    sizes = available_model_sizes()
    if "model_size" not in overrides:
        if model_name not in sizes:
            raise InputError(f"--model-name {model_name!r} is not a model size ({', '.join(sizes)}); pass "
                             f"--hparams '{{\"model_size\": \"electra_small\"}}' (or another size) to name a "
                             "new model")
        overrides["model_size"] = model_name
    if not model_name or "/" in model_name or model_name in (".", ".."):
        raise InputError(f"--model-name {model_name!r}: use a plain folder name such as electra_small")
    overrides.update(model_name=model_name, data_dir=str(data_dir))
    return PretrainingConfig.create(overrides), overrides


def resolve_with_dataset(model_name, hparams, data_dir):
    """(config, dataset_dir, metadata): the run's config resolved against its dataset."""
    config, overrides = resolve_config(model_name, hparams, data_dir)
    dataset_dir, metadata = load_dataset(config)
    return apply_dataset(config, overrides, metadata, dataset_dir), dataset_dir, metadata


def apply_dataset(config, overrides, metadata, dataset_dir):
    """The config with vocab size, special ids, casing and max_seq_length from the dataset."""
    vocab = metadata["vocab"]
    special = vocab["special_ids"]
    from_data = {"vocab_size": vocab["size"], "cls_token_id": special["cls"], "sep_token_id": special["sep"],
                 "mask_token_id": special["mask"], "max_seq_length": metadata["max_seq_length"],
                 "do_lower_case": bool(vocab.get("lower_case", config.do_lower_case))}
    for key, value in from_data.items():
        if key in overrides and overrides[key] != value:
            hint = ("rebuild the dataset with --max-seq-length " f"{overrides[key]}" if key == "max_seq_length"
                    else "rebuild the dataset with the model's vocabulary")
            raise InputError(f"{dataset_dir}: the dataset has {key}={value!r} but --hparams says "
                             f"{overrides[key]!r}; drop it from --hparams or {hint}")
    values = {**config.to_dict(), **from_data}
    if "max_predictions_per_seq" not in overrides:
        values["max_predictions_per_seq"] = None  # derive again from the dataset's length
    config = loading.dataclass_from_dict(PretrainingConfig, values, "--hparams").with_derived_values()
    positions = config.model_config().max_position_embeddings
    if config.max_seq_length > positions:
        raise InputError(f"{dataset_dir}: examples are {config.max_seq_length} tokens long but the model has "
                         f"{positions} positions; rebuild the dataset with --max-seq-length {positions} or "
                         "less")
    return config


def load_dataset(config):
    dataset_dir = paths.pretrain_tfrecords_dir(config.data_dir)
    metadata = tfrecords.load_metadata(dataset_dir)
    return dataset_dir, metadata


def split_shards(config, dataset_dir, metadata):
    """(train files, eval files) as the config's do_eval and eval_holdout_shards split the dataset."""
    return tfrecords.split_shards(dataset_dir, metadata, config.do_eval, config.eval_holdout_shards)


def vocab_source(metadata, dataset_dir):
    """The dataset folder's own copy of the vocabulary when it is there and unchanged (a folder built on another
    machine, or carried to one), else the file the build read."""
    vocab = metadata["vocab"]
    if vocab.get("copy"):
        copy = pathlib.Path(dataset_dir) / vocab["copy"]
        if copy.is_file() and file_sha256(copy) == vocab["sha256"]:
            return copy
    path = pathlib.Path(vocab["file"])
    if not path.is_file():
        where = f"neither its copy {vocab['copy']} there nor " if vocab.get("copy") else ""
        raise InputError(f"{dataset_dir}/metadata.json: {where}its vocabulary {path} is there; restore it or "
                         "rebuild the dataset")
    return path


def check_batch(config, num_replicas):
    unit = num_replicas * config.gradient_accumulation_steps
    if config.train_batch_size % unit:
        raise InputError(f"train_batch_size {config.train_batch_size} is not divisible by {num_replicas} "
                         f"replica(s) × {config.gradient_accumulation_steps} accumulation step(s); choose a "
                         f"multiple of {unit}")


def shape_signature(config):
    values = {key: getattr(config, key) for key in SHAPE_FIELDS}
    values["model"] = config.model_config().to_dict()
    values["generator"] = config.generator_model_config().to_dict() if config.electra_objective else None
    return values


def changed_fields(saved, config):
    if saved is None:
        return []
    old, new = saved.to_dict(), config.to_dict()
    return sorted(k for k in new if old.get(k) != new[k] and k not in ("data_dir",))
