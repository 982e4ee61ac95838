"""May this model folder be resumed by this run? Its saved config must build the same variables, and
the dataset must be built with the vocabulary copied into the folder."""
import pathlib

from common.errors import InputError
from configs.resolve import shape_signature
from data import tfrecords
from storage import model_folder


def check_resume(config, model_dir, has_checkpoint):
    """Refuses to resume a folder whose saved config builds other variables than this one."""
    saved_path = pathlib.Path(model_dir) / model_folder.CONFIG_FILE
    if not has_checkpoint:
        return None
    if not saved_path.is_file():
        raise InputError(f"{model_dir}: holds checkpoints but no {model_folder.CONFIG_FILE}; choose another "
                         "--model-name")
    saved = model_folder.read_config(model_dir)
    old, new = shape_signature(saved), shape_signature(config)
    if old != new:
        diffs = [k for k in old if old[k] != new[k]]
        detail = []
        for key in diffs:
            if isinstance(old[key], dict) and isinstance(new[key], dict):
                detail += [f"{key}.{f}: {old[key][f]} → {new[key][f]}" for f in old[key] if old[key][f] != new[key][f]]
            else:
                detail.append(f"{key}: {old[key]} → {new[key]}")
        raise InputError(f"{saved_path}: the saved model differs from this config ({'; '.join(detail)}); resume "
                         "with the same shapes or choose another --model-name")
    return saved


def check_resume_vocabulary(model_dir, metadata, dataset_dir):
    """A resumed model must keep its vocabulary: the dataset must be built with the copy in its folder."""
    from data.tokenization import file_sha256

    for copy in model_folder.vocab_copies(model_dir):
        tfrecords.check_dataset_matches(metadata, dataset_dir, vocab_sha256=file_sha256(copy))
