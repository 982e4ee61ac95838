"""Dataclass configs from JSON, with unknown keys rejected.

Typos in hyperparameters are the costliest bugs in pretraining (a run of days with the default where an
override was meant), so every key must name a field; errors are `InputError`s naming the source.
"""
import dataclasses
import json
import pathlib
import typing

from common import atomic
from common.errors import InputError


def parse_hparams(text_or_path, source="--hparams"):
    """Returns a dict from inline JSON or from the path of a .json file ("" or None → {})."""
    if text_or_path is None:
        return {}
    if isinstance(text_or_path, dict):
        return dict(text_or_path)
    text = str(text_or_path).strip()
    if not text:
        return {}
    if not text.startswith("{"):
        path = pathlib.Path(text)
        if not path.is_file():
            raise InputError(
                f"{source}: {text!r} is neither inline JSON (starting with '{{') nor an existing .json "
                "file; pass a JSON object or the path of one")
        source = str(path)
        text = path.read_text(encoding="utf-8")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{source}: malformed JSON ({error}); fix the JSON syntax") from None
    if not isinstance(value, dict):
        raise InputError(f"{source}: expected a JSON object of hyperparameters, got {type(value).__name__}")
    return value


def read_json_file(path):
    """Reads a JSON object from a file, with errors as InputError naming the file."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found; check the path")
    return parse_hparams(str(path), source=str(path))


def check_known_keys(cls, values, source):
    """Raises InputError listing keys of `values` that are not fields of dataclass `cls`."""
    known = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise InputError(
            f"{source}: unknown key(s) {', '.join(unknown)} for {cls.__name__}; "
            f"valid keys are: {', '.join(sorted(known))}")


def _coerce(value, field_type, key, source):
    """Light type check so that e.g. "1e-4" as a string or a list for a float is caught early."""
    origin = typing.get_origin(field_type)
    args = typing.get_args(field_type)
    if origin is typing.Union:  # Optional[X]
        if value is None:
            return None
        field_type = next(a for a in args if a is not type(None))
    if field_type is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if field_type is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if field_type is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if field_type is bool and isinstance(value, bool):
        return value
    if field_type is str and isinstance(value, str):
        return value
    if field_type is dict and isinstance(value, dict):
        return dict(value)
    if field_type is tuple and isinstance(value, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)  # of ints: the only tuple fields are lists of steps
    raise InputError(
        f"{source}: {key} must be {getattr(field_type, '__name__', field_type)}, got {value!r}")


def update_dataclass(instance, values, source):
    """Returns a copy of `instance` with `values` applied; unknown keys and wrong types are InputErrors."""
    check_known_keys(type(instance), values, source)
    hints = typing.get_type_hints(type(instance))
    coerced = {key: _coerce(value, hints[key], key, source) for key, value in values.items()}
    return dataclasses.replace(instance, **coerced)


def dataclass_from_dict(cls, values, source):
    """Builds `cls` from a dict: defaults for missing keys, InputError for unknown ones."""
    return update_dataclass(cls(), values, source)


def save_json(values, path):
    """Writes a JSON object atomically (a crash never leaves half a config)."""
    atomic.write_json(path, values)
