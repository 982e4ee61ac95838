"""Which model a `--model-dir` path or a `--model-name` means, and what it says before any weight is read.

A pretrained model folder by name (`pretrained_folder`: the inspector's and the scorer's). For predictions,
a fine-tuned model folder (finetuning_info.json), a pretrained model folder with a task (its newest
fine-tuned model of that task), an exported SavedModel (electra_serving.json) or an ONNX export folder
(electra_onnx.json): each gives a `ModelSource` with the task, kind, label names, pair or single input and
max_seq_length, read from the folder, never from a list of known tasks. Nothing here imports TensorFlow.
"""
import dataclasses
import json
import pathlib

from common.errors import InputError
from data import paths

FINETUNING_INFO = "finetuning_info.json"  # finetune.saved.INFO_FILE
SERVING_INFO = "electra_serving.json"  # what checkpoints.saved_model writes beside a SavedModel
KINDS = ("classification", "regression", "tagging", "span")


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """What the input must hold and the output says, read from the model's folder before any weight.

    Args:
        path: the folder the predictor loads.
        saved_model: whether `path` is an exported SavedModel.
        task: the task's name (the folder's name where the export does not say).
        kind: one of `KINDS`.
        label_names: the class or tag names, in the head's order (empty for regression and span).
        is_pair: whether a row gives the model two texts.
        max_seq_length: the model's longest input, in tokens.
        onnx: whether `path` is an ONNX export folder (model.onnx).
    """
    path: pathlib.Path
    saved_model: bool
    task: str
    kind: str
    label_names: tuple
    is_pair: bool
    max_seq_length: int
    onnx: bool = False

    @property
    def role(self):
        """What a row gives the model (inference.rows.DEFAULT_FIELDS' keys)."""
        if self.kind == "span":
            return "qa"
        if self.kind == "tagging":
            return "words"
        return "pair" if self.is_pair else "single"


def _read_json(path, fix):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: unreadable ({str(error)[:80]}); {fix}") from None


def newest_finetuned(model_dir, task):
    """The newest `finetuning_models/<task>_model_<trial>/` of a pretrained model folder.

    Newest by the time its finetuning_info.json was written; the higher trial on a tie.

    Args:
        model_dir: the pretrained model folder (`<data-dir>/models/<model-name>/`).
        task: the fine-tuned task's name, as run_finetuning.py's `--task` (a `:` in it reads as `-`).

    Example:

    ```python
    folder = newest_finetuned("electra_data/models/electra_small", "sst")  # .../finetuning_models/sst_model_2
    ```
    """
    folder = pathlib.Path(model_dir) / "finetuning_models"
    stem = task.strip().replace(":", "-")
    found = []
    for candidate in folder.glob(f"{stem}_model_*"):
        trial = candidate.name[len(stem) + len("_model_"):]
        if trial.isdigit() and (candidate / FINETUNING_INFO).is_file():
            found.append(((candidate / FINETUNING_INFO).stat().st_mtime, int(trial), candidate))
    if not found:
        have = sorted({p.name.rsplit("_model_", 1)[0] for p in folder.glob("*_model_*")
                       if p.name.rsplit("_model_", 1)[-1].isdigit()})
        raise InputError(f"{folder}: no fine-tuned model of task {task!r} (it has: {', '.join(have) or 'none'}); "
                         f"fine-tune one with run_finetuning.py --task {task}, or pick another --task")
    return max(found)[2]


def resolve_model(model_dir, task=None) -> ModelSource:
    """The `ModelSource` a path means; InputError naming what is there when it means none.

    Args:
        model_dir: a fine-tuned model folder, its exported SavedModel or ONNX folder, or a pretrained
            model folder (with `task`).
        task: with a pretrained model folder, the task whose newest fine-tuned model to use.

    Example:

    ```python
    source = resolve_model("electra_data/models/electra_small", task="sst")
    source.kind, source.label_names  # ("classification", ("0", "1"))
    ```
    """
    path = pathlib.Path(model_dir)
    if not path.is_dir():
        raise InputError(f"--model-dir {path}: no such folder; pass a fine-tuned model folder "
                         "(<model dir>/finetuning_models/<task>_model_<trial>/) or its exported SavedModel")
    if (path / "model.onnx").is_file():
        from inference.onnx_folder import source_fields

        return ModelSource(path, False, **source_fields(path), onnx=True)
    if (path / "saved_model.pb").is_file():
        return _saved_model_source(path)
    if (path / FINETUNING_INFO).is_file():
        return _folder_source(path)
    if (path / "finetuning_models").is_dir():
        if not task:
            tasks = sorted({p.name.rsplit("_model_", 1)[0] for p in (path / "finetuning_models").glob("*_model_*")
                            if (p / FINETUNING_INFO).is_file()})
            raise InputError(f"--model-dir {path}: a pretrained model folder; name the fine-tuned task with --task "
                             f"(it has: {', '.join(tasks) or 'none'})")
        return _folder_source(newest_finetuned(path, task))
    raise InputError(f"--model-dir {path}: neither a fine-tuned model folder ({FINETUNING_INFO}) nor a SavedModel "
                     "(saved_model.pb) nor a model folder with finetuning_models/; pass the folder run_finetuning.py "
                     "or checkpoints.export wrote")


def _folder_source(folder):
    info = _read_json(folder / FINETUNING_INFO, "re-run the fine-tuning that wrote it")
    try:
        kind, labels = info["kind"], tuple(info["label_names"])
        source = ModelSource(folder, False, info["task"], kind, labels, bool(info["is_pair"]),
                             int(info["max_seq_length"]))
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"{folder / FINETUNING_INFO}: lacks or garbles {error}; re-run the fine-tuning that wrote "
                         "it") from None
    if kind not in KINDS:
        raise InputError(f"{folder / FINETUNING_INFO}: kind {kind!r} is none of {', '.join(KINDS)}; this command "
                         "predicts those")
    if kind in ("classification", "tagging") and not labels:
        raise InputError(f"{folder / FINETUNING_INFO}: a {kind} model without label_names; re-run the fine-tuning")
    return source


def _saved_model_source(path):
    info_path = path / SERVING_INFO
    if not info_path.is_file():
        raise InputError(f"{path}: a SavedModel without {SERVING_INFO}; pass one written by python -m "
                         "checkpoints.export --format saved_model")
    info = _read_json(info_path, "re-export the SavedModel")
    outputs = set(info.get("outputs", []))
    kind = "tagging" if "tags" in outputs else "regression" if "score" in outputs else "classification"
    return ModelSource(path, True, info.get("task") or path.name, kind, tuple(info.get("label_names", [])),
                       bool(info.get("is_pair")), int(info.get("max_seq_length", 0)))


def pretrained_folder(data_dir, name):
    """`<data-dir>/models/<name>`, checked: one line naming what is missing when it is not a model folder.

    A model folder needs its config and at least one checkpoint (run_pretraining.py writes both).

    Args:
        data_dir: the data folder the model was trained in.
        name: the model's `--model-name`.

    Example:

    ```python
    folder = pretrained_folder(paths.default_data_dir(), "electra_tiny")  # electra_data/models/electra_tiny
    ```
    """
    from storage.model_folder import CONFIG_FILE, has_config, latest_checkpoint

    models = paths.models_dir(data_dir)
    folder = models / name
    if not has_config(folder):
        trained = sorted(p.name for p in models.glob("*") if has_config(p))
        where = (f"models there: {', '.join(trained)}" if trained else
                 f"train one with run_pretraining.py --model-name {name}")
        raise InputError(f"--model-name {name}: no model folder {folder} (no {CONFIG_FILE}); {where}, or pass the "
                         "--data-dir it was trained in")
    if latest_checkpoint(folder) is None:
        raise InputError(f"--model-name {name}: {folder} holds no checkpoint yet; let run_pretraining.py save "
                         "one (every save_checkpoints_steps) and run this again")
    return folder
