"""Fine-tuned models on disk: `<model dir>/finetuning_models/<task>_model_<trial>/`.

The folder holds a TF checkpoint of every weight by path (encoder `electra/...`, head
`task_specific/<task>/...`), `finetuning_info.json` (task, labels, pair or single, max_seq_length, the
encoder's ModelConfig, head settings, casing; for a task of the user's files also its text fields or
word and tag columns and tag scheme) and a copy of the vocabulary, so it is complete on its
own: the SavedModel exporter reads it through `load_finetuned_model`.
"""
import dataclasses
import json
import pathlib
import shutil
import time
from typing import List, Optional

from configs.model_config import ModelConfig
from common.errors import InputError
from storage import model_folder

INFO_FILE = "finetuning_info.json"
CHECKPOINT_PREFIX = "ckpt"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class FinetunedInfo:
    task: str
    kind: str  # "classification" | "regression" | "span" | "tagging"
    label_names: List[str]
    is_pair: bool
    max_seq_length: int
    vocab_file: Optional[str]  # absolute path of the folder's copy (None for SentencePiece)
    do_lower_case: bool
    sp_model: Optional[str]  # absolute path, None for WordPiece
    model_config: dict
    head: dict
    metrics: dict
    # Regression: (min, max) of the scores; the head outputs (score − min) / max. None: raw scores (and
    # every folder written before targets were normalised).
    score_range: Optional[List[float]] = None
    # A task of the user's files (finetune.custom): the fields a row's texts come from (CSV, TSV or JSON
    # lines: the text fields by name; None for built-in tasks) and, for tagging, "span" (BIOES labels over
    # span types) or "tags" (the file's tags as they are).
    text_fields: Optional[List[str]] = None
    tag_scheme: Optional[str] = None


def model_folder_name(task_name, trial):
    return f"{task_name}_model_{trial}"


def set_aside(path):
    """Renames an existing output out of the way instead of deleting it (the user may want it)."""
    path = pathlib.Path(path)
    if path.exists():
        path.rename(path.with_name(f"{path.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6}"))


def save_finetuned_model(folder, encoder, head, task, config, pretrained, metrics=None):
    """Writes the folder under a temporary name and renames it when complete."""
    from finetune.model import SingleTaskModel

    folder = pathlib.Path(folder)
    temp = folder.with_name(folder.name + ".tmp")
    if temp.exists():
        shutil.rmtree(temp)  # our own unfinished write
    temp.mkdir(parents=True)
    model = SingleTaskModel(encoder, head)
    model_folder.write_weights(model, temp / CHECKPOINT_PREFIX)
    vocab_source = pretrained.vocab_file or pretrained.sp_model
    shutil.copyfile(vocab_source, temp / vocab_source.name)
    head_config = {key: value for key, value in head.get_config().items()
                   if key in ("num_outputs", "hidden_size", "dropout", "qa_hidden_size", "beam_size")}
    info = {
        "format_version": FORMAT_VERSION, "task": task.name, "kind": task.kind, "label_names": task.label_names,
        "is_pair": task.is_pair, "max_seq_length": config.max_seq_length,
        "vocab_file": vocab_source.name if pretrained.vocab_file else None,
        "sp_model": vocab_source.name if pretrained.sp_model else None,
        "do_lower_case": pretrained.do_lower_case, "model_config": pretrained.model_config.to_dict(),
        "head": head_config, "metrics": metrics or {}, "pretrained_checkpoint": str(pretrained.checkpoint),
        "score_range": list(task.score_range) if task.kind == "regression" else None,
        **getattr(task, "saved_info", dict)(),  # a task of the user's files: the fields its inputs come from
    }
    (temp / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    set_aside(folder)
    temp.rename(folder)
    return folder


def read_info(folder) -> FinetunedInfo:
    folder = pathlib.Path(folder)
    path = folder / INFO_FILE
    if not path.is_file():
        raise InputError(f"{path}: missing; pass a folder written by run_finetuning.py "
                         "(<model dir>/finetuning_models/<task>_model_<trial>/)")
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: malformed JSON ({error}); re-run the fine-tuning that wrote it") from None
    try:
        return FinetunedInfo(
            task=values["task"], kind=values["kind"], label_names=list(values["label_names"]),
            is_pair=bool(values["is_pair"]), max_seq_length=int(values["max_seq_length"]),
            vocab_file=str(folder.resolve() / values["vocab_file"]) if values.get("vocab_file") else None,
            do_lower_case=bool(values["do_lower_case"]),
            sp_model=str(folder.resolve() / values["sp_model"]) if values.get("sp_model") else None,
            model_config=dict(values["model_config"]), head=dict(values["head"]),
            metrics=dict(values.get("metrics", {})), score_range=values.get("score_range"),
            text_fields=values.get("text_fields"), tag_scheme=values.get("tag_scheme"))
    except KeyError as error:
        raise InputError(f"{path}: lacks the key {error}; re-run the fine-tuning that wrote it") from None


def load_finetuned_model(folder):
    """Returns (keras_model, info): keras_model maps {"input_ids", "input_mask", "segment_ids"} (int32
    [batch, seq]) to the head's output: logits [batch, num_labels] (STS: [batch, 1], the normalised score:
    score = output × max + min with info.score_range); for SQuAD the span head's beam dict; for chunking
    logits [batch, seq, num_labels] (read at each word's first sub-token)."""
    from finetune.heads import ClassificationHead, SpanHead, TaggingHead
    from finetune.model import SingleTaskModel
    from finetune.pretrained import build_encoder, restore_by_path
    from finetune.tasks import layer_name

    folder = pathlib.Path(folder)
    info = read_info(folder)
    model_config = ModelConfig.from_dict(info.model_config, source=str(folder / INFO_FILE))
    encoder = build_encoder(model_config)
    head_config, name = info.head, layer_name(info.task)
    if info.kind == "span":
        head = SpanHead(model_config.hidden_size, head_config["qa_hidden_size"], head_config["beam_size"],
                        dtype=encoder.dtype_policy, name=name)
    elif info.kind == "tagging":
        head = TaggingHead(head_config["num_outputs"], model_config.hidden_size, dtype=encoder.dtype_policy,
                           name=name)
    else:
        head = ClassificationHead(head_config["num_outputs"], model_config.hidden_size,
                                  head_config.get("dropout", 0.1), dtype=encoder.dtype_policy, name=name)
    model = SingleTaskModel(encoder, head)
    if not model_folder.checkpoint_exists(folder / CHECKPOINT_PREFIX):
        raise InputError(f"{folder}: no checkpoint {CHECKPOINT_PREFIX}.index; the folder is incomplete, re-run "
                         "the fine-tuning that wrote it")
    restore_by_path(model, str(folder / CHECKPOINT_PREFIX), what="fine-tuned model")
    return model, info
