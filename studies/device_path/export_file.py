"""The export's plan file, export.json: which models it trains (config file, steps, checkpoint steps), how
often to log and evaluate, and (for --fit-minutes) how to size a run. Written last: a folder without it is
not an export.

Exports written before the product had its own words hold the same content as study.json, with "arms"
where export.json says "models" (in the file and in its "fit" block); they are read as they are, so the
studies' earlier exports and the plans of earlier GPU runs still train and import.
"""
import json
import pathlib

from common import atomic
from common.errors import InputError

EXPORT_FILE = "export.json"
OLD_EXPORT_FILE = "study.json"  # the old name, still read
OLD_MODELS_KEY = "arms"  # the old key of the models, still read
VOCAB_FILE = "vocab.txt"  # the export's copy of the dataset's vocabulary


def export_path(folder):
    """export.json in `folder`, or the old study.json where only that is there."""
    folder = pathlib.Path(folder)
    new, old = folder / EXPORT_FILE, folder / OLD_EXPORT_FILE
    return old if old.is_file() and not new.is_file() else new


def has_export(folder):
    return export_path(folder).is_file()


def from_old_format(record):
    """The record with the old key "arms" renamed "models" (at the top and in its "fit" block)."""
    record = dict(record)
    if OLD_MODELS_KEY in record and "models" not in record:
        record["models"] = record.pop(OLD_MODELS_KEY)
    fit = record.get("fit")
    if isinstance(fit, dict) and OLD_MODELS_KEY in fit and "models" not in fit:
        record["fit"] = {("models" if key == OLD_MODELS_KEY else key): value for key, value in fit.items()}
    return record


def read_export_file(folder, missing_fix="pass the folder python -m studies.device_path.export wrote"):
    """The plan of the export in `folder` (export.json, or an old study.json), "models" keyed; InputError
    naming the file and `missing_fix` when there is none."""
    path = export_path(folder)
    if not path.is_file():
        raise InputError(f"{path}: missing; {missing_fix}")
    return from_old_format(json.loads(path.read_text()))


def write_export_file(folder, record):
    """export.json in `folder` (atomically); read before any old study.json beside it."""
    atomic.write_json(pathlib.Path(folder) / EXPORT_FILE, record, sort_keys=False)


def model_entry(record, folder, model):
    """The export's entry for `model` (config file, steps, checkpoints); InputError naming the models it has.
    Each export lists its own (studies.device_path.export: one; the RTD-vs-MLM study: electra and mlm)."""
    if model not in record["models"]:
        raise InputError(f"--model {model}: {export_path(folder)} has no such model; give one of "
                         f"{', '.join(sorted(record['models']))}")
    return record["models"][model]
