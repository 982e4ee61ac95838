"""The config a JAX pretraining run trained with, from what came back, checked against the config an import
expects. A device run can end three ways the import has to take: sized shorter than planned (--fit-minutes
sets the length after compiling), stopped at its hard limit (weights at a step that is no planned checkpoint,
no run record, maybe half a last metrics line), or recorded by an older trainer whose run record holds the
exported, unsized config (the H200 run of 2026-11-27). A run of another config is refused with one line.
"""
import json
import pathlib

from common.errors import InputError
from training_jax.weights import weights_file_step  # noqa: F401  (import_jax and the study read it here)

# What a sizing (training_jax.fit.sized_fields) changes: the length and the schedule that follows from it.
STEP_FIELDS = ("num_train_steps", "num_warmup_steps", "save_checkpoints_steps", "eval_every_steps",
               "extra_checkpoint_steps")
PLACE_FIELDS = ("model_name", "data_dir")  # where the run's files were, not what it trained
PLAN_FILE = "plan.json"  # what a device call's collect writes beside <arm>/: the sized runs, how each ended


def read_run(metrics_file):
    """(records, the run record or None, a note or None) of a metrics.jsonl, as far as it is whole: a run killed
    at its hard limit can leave half a last line, which is dropped (the note says so)."""
    from pretrain_loop.metrics_file import LEGACY_RUN_FILE

    path = pathlib.Path(metrics_file)
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    records, note = [], None
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines):
                raise InputError(f"{path}: line {number} is not JSON; copy the file back again") from None
            note = f"{path}: its last line is cut off (the run was killed while writing it); read without it"
    runs = [record for record in records if record.get("split") == "run"]
    legacy = path.parent / LEGACY_RUN_FILE
    run = runs[-1] if runs else json.loads(legacy.read_text()) if legacy.is_file() else None
    return records, run, note


def plain(value):
    """As JSON holds it (tuples as lists), so that a config from a file and one from a dataclass compare."""
    return json.loads(json.dumps(value))


def sized(config, steps, budgets, warmup_fraction=None):
    """`config` (a dict) as training_jax.fit sizes it to `steps` with `budgets` evenly spaced checkpoints; the
    warmup fraction is the config's own unless given (sizing keeps the planned one)."""
    from training_jax import fit

    fraction = config["num_warmup_steps"] / config["num_train_steps"] if warmup_fraction is None else warmup_fraction
    return plain({**config, **fit.sized_fields(steps, budgets, fraction, evals=1)["config"]})


def used_config(run, warmup_fraction=None):
    """(the config the run trained with, a note or None) from its run record. An older trainer recorded the
    exported config even when --fit-minutes had sized the run shorter: then the record's steps and checkpoints
    are the run's, and the config is sized to them by the sizing's own rule."""
    config, steps = plain(run["config"]), run["num_train_steps"]
    if config["num_train_steps"] == steps:
        return config, None
    resized = sized(config, steps, len(run["checkpoint_steps"]), warmup_fraction)
    changed = ", ".join(f"{key} {config[key]} -> {resized[key]}" for key in STEP_FIELDS if config[key] != resized[key])
    return resized, ("its run record holds the exported (unsized) config, as older runs wrote it; taking the "
                     f"step counts the sizing gave it: {changed}")


def with_defaults(config):
    """The config dict with every PretrainingConfig field it lacks at its default: a run recorded before a field
    existed (the H200 run of 2026-11-27 has no matmul_dtype) trained with the field's default."""
    import dataclasses

    from configs.pretraining_config import PretrainingConfig

    defaults = {field.name: field.default for field in dataclasses.fields(PretrainingConfig)
                if field.default is not dataclasses.MISSING}
    return {**plain(defaults), **plain(config)}


def differences(used, expected, ignore=()):
    """The fields (places aside) in which two config dicts differ, a field one of them lacks at its default."""
    used, expected = with_defaults(used), with_defaults(expected)
    keys = sorted((set(used) | set(expected)) - set(PLACE_FIELDS) - set(ignore))
    return [key for key in keys if used.get(key) != expected.get(key)]


def check_config(used, expected, source, what, sizing=None, fix="import it with the config it was trained with"):
    """InputError, one line naming `source` and ending in `fix`, unless `used` is `expected` (places aside)
    or, with `sizing` ({"budgets", "warmup_fraction"}: the export's fit block), a sizing of it to as many
    steps or fewer (a sizing that reaches the planned steps still moves the checkpoints and evaluations).
    Returns a note for a sized run, else None."""
    other = differences(used, expected, ignore=STEP_FIELDS)
    if other:
        raise InputError(f"{source}: trained with another config than {what} ({shown(other, used, expected)}); {fix}")
    schedule = differences(used, expected)
    if not schedule:
        return None
    steps, planned = used["num_train_steps"], expected["num_train_steps"]
    if sizing and steps <= planned and not differences(
            used, sized(expected, steps, sizing["budgets"], sizing["warmup_fraction"])):
        return f"{source}: the run was sized to {steps} of the planned {planned} steps (its schedule as sized)"
    raise InputError(f"{source}: trained another schedule than {what} ({shown(schedule, used, expected)}), and not "
                     f"one a sizing to fewer steps gives; {fix}")


def shown(keys, used, expected, most=3):
    """"key value, expected value; ..." of the first `most` keys."""
    text = "; ".join(f"{key} {plain(used.get(key))!r}, expected {plain(expected.get(key))!r}" for key in keys[:most])
    return text + ("; ..." if len(keys) > most else "")


def sized_entry(results_dir, arm):
    """The arm's sized entry ({num_train_steps, checkpoint_steps, ...}) in the collect's plan.json in
    `results_dir`, or None (not sized, or no plan.json came back)."""
    path = pathlib.Path(results_dir) / PLAN_FILE
    if not path.is_file():
        return None
    return (json.loads(path.read_text()).get("arms", {}).get(arm) or {}).get("sized")
