"""Featurised fine-tuning tasks as NumPy arrays, for a machine without TensorFlow (the JAX path).

Here, where TensorFlow runs the tokenizer, `export_tasks` reads and featurises the tasks exactly as
run_finetuning.py does (finetune.trials.prepare_tasks) and `save_task_data` writes them; on the
accelerator `load_task_data` gives back TaskData that TrialRunner trains and scores with NumPy alone:

    python -m studies.device_path.task_arrays --tasks cola,sst,mrpc,sts,rte --finetuning-data-dir DIR \\
        --vocab-file VOCAB.txt --out TASKS_DIR          # or --model-folder MODEL (its vocabulary, casing)

<out>/<task>.npz  per part (train, eval0.., test0..): each sequence (input_ids, segment_ids) of all its
                  features as one flat array plus offsets (ragged → flat, in the smallest unsigned type
                  that holds them), the training targets, and for evaluated and test splits every
                  example's guid and label: what GLUE's scores and submission files read (the texts are
                  left out)
<out>/tasks.json  the index: per task its file, parts (split, metric suffix, count), majority baseline
                  and featurisation (max_seq_length, double_unordered, the vocabulary's size, sha256
                  and casing), and an export id that its npz holds too
Files are written under temporary names and renamed, the index last, so an interrupted export leaves
either no index or one whose entries all match their files. GLUE's tasks and chunking (scored from its
tag_ids and tag_mask sequences) are supported; span tasks (SQuAD, MRQA) are refused: their scoring needs
the tokenizer and the raw examples.
"""
import argparse
import json
import pathlib
import time

import numpy as np

from common import atomic
from common.errors import InputError, exit_on_input_error
from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
from finetune.registry import get_task  # noqa: E402
from finetune.tasks import SPAN, Example  # noqa: E402

INDEX_FILE = "tasks.json"
FORMAT_VERSION = 1


def check_supported(task):
    if task.kind == SPAN:
        raise InputError(f"task {task.name}: not supported on the JAX path yet (its scoring needs the "
                         "tokenizer and the raw examples); fine-tune it with run_finetuning.py")


# ---------------------------------------------------------------- writing
def _smallest_unsigned(values):
    top = int(values.max()) if values.size else 0
    if values.size and values.min() < 0:
        return np.int32
    return np.uint8 if top < 2 ** 8 else np.uint16 if top < 2 ** 16 else np.int32


def _part_arrays(part, features, with_examples):
    arrays = {}
    first = next(iter(features["sequences"].values()))
    arrays[f"{part}.offsets"] = np.concatenate([[0], np.cumsum([len(s) for s in first])]).astype(np.int64)
    for name, sequences in features["sequences"].items():
        flat = np.concatenate(sequences) if len(sequences) else np.zeros(0, np.int32)
        arrays[f"{part}.seq.{name}"] = flat.astype(_smallest_unsigned(flat))
    for name, values in features["scalars"].items():
        arrays[f"{part}.scalar.{name}"] = np.asarray(values)
    if with_examples:
        examples = features["examples"]
        arrays[f"{part}.guids"] = np.array([str(e.guid) for e in examples], dtype=str)
        if examples and all(e.label is not None for e in examples):
            arrays[f"{part}.labels"] = np.array([e.label for e in examples])
    return arrays


def read_index(folder):
    """The folder's index ({"format", "tasks": {name: entry}}); InputError for a folder without one."""
    path = pathlib.Path(folder) / INDEX_FILE
    if not path.is_file():
        raise InputError(f"{path}: missing; the folder holds no finished task export (run python -m "
                         "studies.device_path.task_arrays on the TensorFlow machine and copy its --out folder whole)")
    index = json.loads(path.read_text(encoding="utf-8"))
    if index.get("format") != FORMAT_VERSION:
        raise InputError(f"{path}: format {index.get('format')!r}, this code reads {FORMAT_VERSION}; export "
                         "the tasks again with this version")
    return index


def task_entry(index, folder, name):
    if name not in index["tasks"]:
        raise InputError(f"{pathlib.Path(folder) / INDEX_FILE}: no task {name!r} (exported: "
                         f"{', '.join(index['tasks']) or 'none'}); export it or drop it from --tasks")
    return index["tasks"][name]


def save_task_data(task_data_list, folder, featurization=None):
    """Writes each TaskData as <task>.npz and adds it to the folder's index (written last)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    index = read_index(folder) if (folder / INDEX_FILE).is_file() else {"format": FORMAT_VERSION, "tasks": {}}
    for data in task_data_list:
        check_supported(data.task)
        export_id = f"{time.time_ns():x}"
        arrays, parts = {"export_id": np.array(export_id)}, []
        if data.train is not None:
            arrays.update(_part_arrays("train", data.train, with_examples=False))
            parts.append({"part": "train", "split": "train", "count": data.train["count"]})
        splits = dict(zip(data.evals, data.task.eval_splits()))  # metric suffix → split (prepare_tasks' order)
        for number, (suffix, features) in enumerate(data.evals.items()):
            arrays.update(_part_arrays(f"eval{number}", features, with_examples=True))
            parts.append({"part": f"eval{number}", "split": splits[suffix], "suffix": suffix,
                          "count": features["count"]})
        for number, (split, features) in enumerate(data.tests.items()):
            arrays.update(_part_arrays(f"test{number}", features, with_examples=True))
            parts.append({"part": f"test{number}", "split": split, "test": True, "count": features["count"]})
        file_name = f"{data.task.file_stem}.npz"
        with atomic.atomic_path(folder / file_name, suffix=".npz") as temp:
            np.savez_compressed(temp, **arrays)
        index["tasks"][data.task.name] = {"file": file_name, "export_id": export_id, "parts": parts,
                                          "majority_baseline": data.baseline,
                                          "featurization": dict(featurization or {})}
    atomic.write_json(folder / INDEX_FILE, index)
    return folder / INDEX_FILE


# ---------------------------------------------------------------- reading
def _part_features(arrays, part, path):
    offsets = arrays[f"{part}.offsets"]
    cuts = offsets[1:-1]
    sequences = {}
    for key in arrays.files:
        if key.startswith(f"{part}.seq."):
            flat = arrays[key].astype(np.int32)
            if len(flat) != offsets[-1]:
                raise InputError(f"{path}: {key} holds {len(flat)} values, its offsets say {offsets[-1]}; "
                                 "export the tasks again")
            sequences[key[len(f"{part}.seq."):]] = np.split(flat, cuts)
    scalars = {key[len(f"{part}.scalar."):]: arrays[key] for key in arrays.files
               if key.startswith(f"{part}.scalar.")}
    features = {"sequences": sequences, "scalars": scalars, "count": len(offsets) - 1}
    if f"{part}.guids" in arrays.files:
        guids = arrays[f"{part}.guids"]
        labels = arrays[f"{part}.labels"] if f"{part}.labels" in arrays.files else [None] * len(guids)
        features["examples"] = [Example(str(guid), "", None, label.item() if label is not None else None)
                                for guid, label in zip(guids, labels)]
    return features


def load_task_data(folder, names=None):
    """TaskData for `names` (default: every exported task), with their Task from the registry."""
    from finetune.trials import TaskData  # (Keras comes with it; this module is NumPy otherwise)

    folder = pathlib.Path(folder)
    index = read_index(folder)
    names = list(index["tasks"]) if names is None else [get_task(name).name for name in names]
    loaded = []
    for name in names:
        entry, task = task_entry(index, folder, name), get_task(name)
        check_supported(task)
        path = folder / entry["file"]
        if not path.is_file():
            raise InputError(f"{path}: missing, though {INDEX_FILE} lists it; copy the export folder whole")
        with np.load(path, allow_pickle=False) as arrays:
            if str(arrays["export_id"]) != entry["export_id"]:
                raise InputError(f"{path}: not the file {INDEX_FILE} describes (another export's); export "
                                 "the tasks again into an empty folder")
            parts = {p["part"]: (p, _part_features(arrays, p["part"], path)) for p in entry["parts"]}
        for part, features in parts.values():
            if features["count"] != part["count"]:
                raise InputError(f"{path}: {part['part']} holds {features['count']} features, {INDEX_FILE} "
                                 f"says {part['count']}; export the tasks again")
        loaded.append(TaskData(
            task=task, train=parts["train"][1] if "train" in parts else None,
            evals={p["suffix"]: f for p, f in parts.values() if "suffix" in p},
            tests={p["split"]: f for p, f in parts.values() if p.get("test")},
            baseline=entry["majority_baseline"]))
    return loaded


# ---------------------------------------------------------------- the recipe for exported tasks
def task_config(folder, task_name, pretraining_config, hparams=None):
    """run_finetuning.prepare's FinetuningConfig for one exported task fine-tuned alone: the recipe for the
    model's size, `hparams` (--hparams, already parsed) over it; InputError where they contradict how the
    task was featurised or the model (another vocabulary, more positions than it has)."""
    from configs.finetuning_config import FinetuningConfig, size_of

    hparams, index = dict(hparams or {}), pathlib.Path(folder) / INDEX_FILE
    featurized = task_entry(read_index(folder), folder, task_name)["featurization"]
    if not {"max_seq_length", "double_unordered", "vocab_size"} <= set(featurized):
        raise InputError(f"{index}: {task_name} has no record of its featurisation; export it with export_tasks "
                         "(python -m studies.device_path.task_arrays)")
    for key in ("max_seq_length", "double_unordered"):
        if key in hparams and hparams[key] != featurized[key]:
            raise InputError(f"{index}: {task_name} was featurised with {key} {featurized[key]}, --hparams "
                             f"asks for {hparams[key]}; export the task again with it")
    model_config = pretraining_config.model_config()
    if featurized["vocab_size"] != model_config.vocab_size:
        raise InputError(f"{index}: {task_name} was tokenised with a vocabulary of {featurized['vocab_size']} "
                         f"entries, the model has {model_config.vocab_size}; export it with the model's vocabulary")
    if featurized["max_seq_length"] > model_config.max_position_embeddings:
        raise InputError(f"{index}: {task_name}'s max_seq_length {featurized['max_seq_length']} exceeds the "
                         f"model's {model_config.max_position_embeddings} positions; export it with at most that")
    hparams = {**hparams, "max_seq_length": featurized["max_seq_length"],
               "double_unordered": featurized["double_unordered"]}
    size = size_of(pretraining_config.model_size, model_config.hidden_size)
    return FinetuningConfig.create(hparams, size, [task_name])


def updates_per_trial(folder, pretraining_config, hparams=None, names=None):
    """{task: updates in one trial} of the exported tasks under their recipe (for planning a run's time)."""
    from finetune.loop import count_steps

    index = read_index(folder)
    updates = {}
    for name in names or list(index["tasks"]):
        train = [part["count"] for part in task_entry(index, folder, name)["parts"] if part["part"] == "train"]
        updates[name] = count_steps(train, task_config(folder, name, pretraining_config, hparams))
    return updates


# ---------------------------------------------------------------- the export (TensorFlow's side)
def export_tasks(task_names, data_root, tokenizer, out_folder, hparams=None, say=print):
    """Reads and featurises the tasks as run_finetuning.py would (FinetuningConfig from `hparams`: its
    max_seq_length and double_unordered are what matter here) and saves them under `out_folder`."""
    from configs.finetuning_config import FinetuningConfig
    from finetune.trials import prepare_tasks

    tasks = [get_task(name) for name in task_names]
    for task in tasks:
        check_supported(task)
    config = FinetuningConfig.create(hparams, "small", [t.name for t in tasks])
    task_data = prepare_tasks(tasks, data_root, tokenizer, config, say=say)
    described = {"max_seq_length": config.max_seq_length, "double_unordered": config.double_unordered,
                 "vocab_size": tokenizer.vocab_size, "vocab_sha256": tokenizer.fingerprint,
                 "lower_case": tokenizer.lower_case}
    index = save_task_data(task_data, out_folder, described)
    say(f"wrote {', '.join(t.name + '.npz' for t in tasks)} and {index}")
    return index


@exit_on_input_error
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", required=True, help="GLUE task names separated by commas")
    parser.add_argument("--finetuning-data-dir", type=pathlib.Path, required=True)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    vocab = parser.add_mutually_exclusive_group(required=True)
    vocab.add_argument("--model-folder", type=pathlib.Path, help="a pretrained model folder: its vocabulary "
                                                                 "and casing")
    vocab.add_argument("--vocab-file", type=pathlib.Path)
    vocab.add_argument("--spm-model", type=pathlib.Path)
    parser.add_argument("--no-lower-case", action="store_true", help="with --vocab-file or --spm-model")
    parser.add_argument("--hparams", default="", help="FinetuningConfig overrides (max_seq_length, "
                                                      "double_unordered)")
    parser.add_argument("--skip-bad-rows", action="store_true", help="skip rows that cannot be parsed, with a "
                                                                      "count per file (as run_finetuning.py)")
    args = parser.parse_args(argv)
    from data.tokenization import load_tokenizer

    if args.model_folder is not None:
        from finetune.pretrained import read_model_folder

        tokenizer = read_model_folder(args.model_folder).tokenizer()
    else:
        tokenizer = load_tokenizer(vocab_file=args.vocab_file, spm_model=args.spm_model,
                                   lower_case=not args.no_lower_case)
    names = [name for name in args.tasks.split(",") if name.strip()]
    hparams = args.hparams
    if args.skip_bad_rows:
        from configs.loading import parse_hparams

        hparams = {**parse_hparams(hparams), "skip_bad_rows": True}
    return export_tasks(names, args.finetuning_data_dir, tokenizer, args.out, hparams)


if __name__ == "__main__":
    main()
