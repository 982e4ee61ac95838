"""A run that sets its own length from its measured speed, so that it ends, saved, by a deadline.

A GPU hired by the minute gives minutes, not steps, and the speed of a model on it is unknown until it has
compiled. So `training_jax.pretrain --fit-minutes M` compiles, measures its steps/s on a copy of its
initial state, and only then fixes the number of steps (and so the warmup and the linear decay to 0) that
end M minutes after the process started, with the held-out evaluations and saves counted in. The step
was compiled with the schedule's step counts as inputs (training_jax.step.SizedSchedule), so nothing is
compiled twice, and the run then is exactly a run of that many steps from step 0.

Several models that train at once on one device (studies.device_path.run --also-mlm: ELECTRA, and MLM at equal
FLOPs) size together: each measures while the others run too (a barrier after compiling), writes its rate
to <work>/fit/<model>.rate.json, and all compute the same length in "units" (the first model's steps) from
all rates, each model taking its `steps_per_unit` of them. The run plan's "fit" block (training_jax.run_plan: made
by run_pretraining.py, or by a study's plan) says which models, their ratios, the multiple the steps are rounded to,
the warmup fraction, the number of evaluations, and the most units to train (the planned length: a run that could do
more in the minutes ends early).
"""
import json
import pathlib
import time

from common import atomic
from common.errors import InputError

FIT_DIR = "fit"
BARRIER_SECONDS = 300.0  # how long a model waits for the others to compile (one that died is left out)
RESERVE_SECONDS = 20.0  # the last save, the run record, the process's exit
SPEED_MARGIN = 0.95  # the rate measured in a few dozen steps is a little better than a long run's


def warmup_steps(steps, fraction, most=None):
    """The warmup of a `steps` run: `fraction` of it, at least one step (steps // 10 for 0.1), at most `most`."""
    return min(steps if most is None else max(1, most), max(1, int(steps * fraction + 1e-9)))


def steps_list(steps, shown=3):
    """A list of steps for a log line: whole when short, else its first and last (a 1M-step config checkpoints
    1,000 times)."""
    steps = list(steps)
    if len(steps) <= 2 * shown:
        return str(steps)
    return f"[{', '.join(map(str, steps[:shown]))}, ... {', '.join(map(str, steps[-shown:]))}] ({len(steps)})"


def model_steps(units, steps_per_unit, multiple):
    """A model's steps for `units` of the first model's: the same compute, a multiple of `multiple`."""
    return max(1, round(units * steps_per_unit / multiple)) * multiple


def units_that_fit(rates, steps_per_unit, seconds, multiple):
    """The most units (a multiple of `multiple`) every model can train in `seconds` at its rate (steps/s);
    0 when not even `multiple` fit."""
    per_unit = max(steps_per_unit[model] / rate for model, rate in rates.items())
    return max(0, int(seconds / per_unit) // multiple * multiple)


def sized_fields(steps, budgets, warmup_fraction, evals, block_steps=1, checkpoint_every=None, most_warmup=None):
    """The config fields and the run's checkpoint and evaluation steps for a `steps`-step run with
    `budgets` evenly spaced checkpoints (the rule of studies/rtd_vs_mlm/plan.py pretraining_hparams);
    evaluations every a multiple of `block_steps` (the updates per dispatch), so that they end blocks.
    `checkpoint_every` (run_pretraining.py --max-minutes: the config's save_checkpoints_steps): a checkpoint every
    that many steps and at the end, whatever the length, instead of `budgets` spread over it (1,000 checkpoints of
    a default 1M-step config would otherwise be spread over the few thousand steps that fit). `most_warmup`: the
    warmup's most steps (run_pretraining.py --max-minutes: the config's own, training_jax.from_dataset.fit_block)."""
    if checkpoint_every:
        every = min(checkpoint_every, steps)
        checkpoints = sorted(set(range(every, steps, every)) | {steps})
    else:
        every = steps // budgets
        checkpoints = [every * (k + 1) for k in range(budgets)]
    return {"config": {"num_train_steps": steps, "num_warmup_steps": warmup_steps(steps, warmup_fraction, most_warmup),
                       "save_checkpoints_steps": every, "eval_every_steps": every, "extra_checkpoint_steps": ()},
            "checkpoint_steps": checkpoints,
            "eval_every": max(block_steps, steps // evals // block_steps * block_steps)}


def fit_block(plan):
    if not plan.fit:
        raise InputError(f"{plan.work}: its plan for {plan.model} says nothing of sizing, so --fit-minutes cannot "
                         "size this run; give its steps instead")
    return plan.fit


def sized_file(work, model):
    return pathlib.Path(work) / FIT_DIR / f"{model}.sized.json"


def read_sized(work, model):
    """The sized entry of `model` ({config_file, checkpoint_steps, eval_every, ...}) or None before sizing."""
    path = sized_file(work, model)
    return json.loads(path.read_text()) if path.is_file() else None


def sized_plan(plan):
    """The plan as it trains: the sized one once the run has sized itself (a rerun of a sized run), else `plan`."""
    entry = read_sized(plan.work, plan.model)
    if entry is None:
        return plan
    return plan.replace(config_file=pathlib.Path(plan.work) / entry["config_file"], sized=True,
                        checkpoint_steps=tuple(entry["checkpoint_steps"]), eval_every=entry["eval_every"])


def _wait_for(paths, seconds, log):
    """Waits until every path exists or `seconds` pass; returns those that exist."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not all(p.is_file() for p in paths):
        time.sleep(0.2)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        log(f"waited {seconds:.0f} s for {', '.join(p.name for p in missing)}: going on without them")
    return [p for p in paths if p.is_file()]


def size_run(run, started, fit_minutes, measure_steps):
    """Measures `run` (training_jax.pretrain.Run, at step 0) beside the other models and returns its sized
    entry, also written to <work>/fit/<model>.sized.json; `started` is the process's time.monotonic() start."""
    work, model = pathlib.Path(run.plan.work), run.plan.model
    block = fit_block(run.plan)
    models = block["models"]
    folder = work / FIT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + fit_minutes * 60 - (time.monotonic() - started)  # wall clock: shared by the models
    compile_seconds, eval_seconds = run.compile_and_time_evaluation()
    (folder / f"{model}.ready").write_text("")
    _wait_for([folder / f"{m}.ready" for m in models], BARRIER_SECONDS, run.log)
    rate = run.measure_rate(measure_steps)
    record = {"model": model, "steps_per_second": rate, "compile_seconds": compile_seconds,
              "eval_seconds": eval_seconds, "measured_at": time.time(), "deadline": deadline}
    atomic.write_json(folder / f"{model}.rate.json", record, sort_keys=False)
    found = _wait_for([folder / f"{m}.rate.json" for m in models], BARRIER_SECONDS, run.log)
    records = [json.loads(p.read_text()) for p in found]
    # Every model computes the same length from the same records: the latest measurement, the earliest deadline.
    start, end = max(r["measured_at"] for r in records), min(r["deadline"] for r in records)
    evals = block["evals"] + block["budgets"] + 1
    seconds = (end - start - RESERVE_SECONDS - evals * max(r["eval_seconds"] for r in records)) * SPEED_MARGIN
    rates = {r["model"]: r["steps_per_second"] for r in records}
    # Checkpoints fall on block boundaries when the steps are a multiple of budgets × updates per dispatch.
    multiple = block["budgets"] * run.block_steps
    fitting = units_that_fit(rates, block["steps_per_unit"], seconds, multiple)
    units = min(fitting, block.get("max_units") or fitting)
    if units < block["budgets"]:
        raise InputError(f"--fit-minutes {fit_minutes:g}: {max(0.0, seconds):.0f} s are left after compiling, "
                         f"too few for {block['budgets']} step(s) at {rate:.2f} steps/s; give more minutes")
    steps = model_steps(units, block["steps_per_unit"][model], multiple if units >= multiple else block["budgets"])
    fields = sized_fields(steps, block["budgets"], block["warmup_fraction"], block["evals"], run.block_steps,
                          block.get("checkpoint_every"), block.get("most_warmup"))
    entry = {"config_file": f"config_{model}_sized.json", "num_train_steps": steps, "units": units,
             "checkpoint_steps": fields["checkpoint_steps"], "eval_every": fields["eval_every"],
             "measured": {r["model"]: {k: round(v, 3) for k, v in r.items() if k in (
                 "steps_per_second", "compile_seconds", "eval_seconds")} for r in records},
             "seconds_planned": round(seconds, 1), "expected_seconds": round(steps / rate, 1),
             "fit_minutes": fit_minutes}
    run.resize(fields, work / entry["config_file"])
    atomic.write_json(sized_file(work, model), entry, sort_keys=False)
    most = " (the most planned)" if units < fitting else ""
    run.log(f"sized: {steps} steps ({units} units{most} of {', '.join(sorted(rates))} together; {rate:.2f} steps/s "
            f"measured, {seconds / 60:.1f} min to train, warmup {fields['config']['num_warmup_steps']}, "
            f"checkpoints {steps_list(fields['checkpoint_steps'])})")
    return entry

