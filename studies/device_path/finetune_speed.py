"""JAX fine-tuning speed, side by side in one run: today's path against the new one (issue 42), and, on request,
the way before issue 33.

    python -m studies.device_path.finetune_speed                       # CPU: electra_tiny, synthetic GLUE-shaped tasks
    python -m studies.device_path.finetune_speed --model-size electra_small --tasks-dir TASKS   # GPU: exported tasks

today: one `python -m studies.device_path.finetune` process for every model and task as the CPU runs it by default:
float32, every batch max_seq_length long in the original's order, one update per dispatch (each batch padded
and sent by the host), one model after another. new: the same process with what an accelerator gets by default
(training_jax.finetune_settings): length buckets, --steps-per-dispatch K updates per dispatch from
device-resident examples, the models of a task vmapped, and bfloat16 on an accelerator (float32 on the CPU,
where bfloat16 is emulated). blocks (--ways today,blocks,new): new without length buckets, every batch
max_seq_length long (what buckets add: fewer padded tokens, more programs to compile). ahead
(--ways new,ahead): new with its training programs compiled before training, in threads at once
(--compile-ahead), instead of each on its first use, one after another.
before (--ways before,...): issue 33's baseline, one process per (model, task) job for the first
--before-models models (--no-fixed-shapes --no-shared-programs --no-sized-steps). Every way
starts from an empty compilation cache. Printed per way: wall time (process start-ups, compiles and
evaluation included) in all and per model, updates/s per model in its training loops (their compiles
included; vmapped models train at once, so each one's rate is its updates over the shared loop's time),
updates/s of all models together, the same once compiled (the trainings that compiled no training program),
compiles (jax.monitoring, all processes) and among them the training programs (those compiled ahead, at once,
included: training_jax.compile_ahead; the compile time adds up each program's seconds, and the phase's wall
time is beside it), and the ratios between the ways. `measure(...)` returns the same as a dict; the device is printed.

The models: --models - 1 weights files of randomly initialised encoders (different seeds) and the random
control (`--weights none`); speed does not depend on what the weights learned. Without --tasks-dir, the
five GLUE tasks' training features and dev examples (GLUE_SIZES) times --scale, with random token ids and
labels, and lengths drawn like GLUE's (--lengths glue, GLUE_LENGTHS: a log-normal of each task's median and
90th percentile) or uniform between 8 and --synthetic-length (--lengths uniform); at --scale 1 each task has
the real one's updates.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

from studies.device_path.synthetic_tasks import GLUE_SIZES, SYNTHETIC_VOCAB, synthetic_tasks

REPO = pathlib.Path(__file__).resolve().parents[1]
TODAY_FLAGS = ["--no-bf16", "--no-length-buckets", "--steps-per-dispatch", "1", "--no-vmap-models"]
BEFORE_FLAGS = TODAY_FLAGS + ["--no-fixed-shapes", "--no-shared-programs", "--no-sized-steps"]
WAYS = ("before", "today", "blocks", "new", "ahead")
TRAIN_PROGRAMS = ("jit(update)", "jit(block)")  # the compiled names of a training step (vmapped or not)


def new_flags(block_steps, buckets=True):
    """The accelerator's defaults, forced on (bfloat16 left to the platform); the blocks way without buckets."""
    return ["--length-buckets" if buckets else "--no-length-buckets", "--steps-per-dispatch", str(block_steps),
            "--vmap-models"]


def write_models(work, model_size, vocab_size, models, model_hparams=None):
    """config.json and models - 1 weights files of random encoders (seeds 1, 2, ...); returns (config,
    the --weights of each model: files, then "none" for the control). model_hparams: the size's
    model_hparam_overrides."""
    from configs.pretraining_config import PretrainingConfig

    PretrainingConfig.create({"model_size": model_size, "vocab_size": vocab_size,
                              "model_hparam_overrides": model_hparams or {}}).save(work / "config.json")
    script = f"""
import sys
sys.modules["tensorflow"] = None
import keras, numpy as np
from configs.pretraining_config import PretrainingConfig
from finetune.pretrained import build_encoder
config = PretrainingConfig.load({str(work / "config.json")!r})
for seed in range(1, {models}):
    keras.utils.set_random_seed(seed)
    encoder = build_encoder(config.model_config())
    np.savez({str(work)!r} + f"/weights-{{seed}}.npz", **{{v.path: np.asarray(v.value) for v in encoder.weights}})
"""
    if models > 1:
        subprocess.run([sys.executable, "-c", script], cwd=REPO, env=_jax_env(), check=True)
    return work / "config.json", [[str(work / f"weights-{seed}.npz")] for seed in range(1, models)] + [["none"]]


def _jax_env():
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(REPO))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # each way starts from an empty cache in its own --out
    return env


def _finetune(args, stats, in_process=False):
    if in_process:  # this Python is a JAX one (KERAS_BACKEND=jax): no start-up, the shared programs reused
        import contextlib
        import io

        from studies.device_path import finetune

        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            finetune.main([*args, "--stats", str(stats)])
        return json.loads(pathlib.Path(stats).read_text())
    command = [sys.executable, "-m", "studies.device_path.finetune", *args, "--stats", str(stats)]
    completed = subprocess.run(command, cwd=REPO, env=_jax_env(), capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stdout[-2000:]}{completed.stderr[-3000:]}")
    return json.loads(pathlib.Path(stats).read_text())


def _summary(runs, wall):
    """One way's figures from its processes' --stats, `runs` [({--out: model number}, stats)]."""
    per_model = {}
    for numbers, stats in runs:
        for job in stats["jobs"]:
            done = per_model.setdefault(numbers[job["model"]], {"updates": 0, "train_seconds": 0.0})
            done["updates"] += job["updates"]
            done["train_seconds"] += job["train_seconds"]
    rates = [m["updates"] / m["train_seconds"] for m in per_model.values() if m["train_seconds"] > 0]
    stats_list = [stats for _, stats in runs]
    loops_seconds = sum(s["train_seconds"] for s in stats_list)  # models trained together counted once
    updates = sum(m["updates"] for m in per_model.values())
    steady_updates, steady_seconds = steady(stats_list)
    return {"wall_seconds": wall, "wall_seconds_per_model": wall / len(per_model), "processes": len(runs),
            "models": len(per_model),
            "updates": updates, "train_seconds": loops_seconds,
            "updates_per_second_per_model": float(np.mean(rates)) if rates else 0.0,
            "updates_per_second_all_models": updates / loops_seconds if loops_seconds > 0 else 0.0,
            "steady_updates_per_second": steady_updates / steady_seconds if steady_seconds > 0 else 0.0,
            "compiles": sum(s["compiles"] for s in stats_list),
            "train_programs": sum(name in TRAIN_PROGRAMS for s in stats_list for job in s["jobs"]
                                  for name in job["compiled"])
            + sum((s.get("compiled_ahead") or {}).get("programs", 0) for s in stats_list),  # before the jobs
            "compile_seconds": sum(s["compile_seconds"] for s in stats_list),
            # the compile phase's wall time where the training programs were compiled ahead, at once (their own
            # seconds are in compile_seconds, added up)
            "ahead_seconds": sum((s.get("compiled_ahead") or {}).get("compile_seconds", 0.0) for s in stats_list),
            "traces": sum(s["traces"] for s in stats_list), "device": stats_list[0]["device"]}


def steady(stats_list):
    """(updates, training seconds) of the trainings that compiled no training program: the rate once compiled.
    A group of models trained together counts once (its time is shared; its compiles are on its first job)."""
    updates, seconds, groups = 0, 0.0, {}
    for stats in stats_list:
        for job in stats["jobs"]:
            if job["trained_together"] > 1:
                groups.setdefault((id(stats), job["task"], job.get("trial")), []).append(job)
            elif not any(name in TRAIN_PROGRAMS for name in job["compiled"]):
                updates, seconds = updates + job["updates"], seconds + job["train_seconds"]
    for jobs in groups.values():
        if not any(name in TRAIN_PROGRAMS for name in jobs[0]["compiled"]):
            updates, seconds = updates + sum(job["updates"] for job in jobs), seconds + jobs[0]["train_seconds"]
    return updates, seconds


def measure(work=None, tasks_dir=None, model_size="electra_tiny", models=3, tasks=tuple(GLUE_SIZES), scale=0.02,
            seeds=1, hparams=None, ways=("today", "new"), synthetic_length=128, before_models=1, model_hparams=None,
            block_steps=16, lengths="glue", in_process=False):
    """Runs the ways in `ways` on the same tasks; "today", "blocks" and "new" train all `models`, "before" the
    first `before_models` of them (its processes run one after another, so its time grows with the models:
    compare wall_seconds_per_model). Returns {way: summary, "ratios": {"<newer>/<older>": {...}}, "tasks",
    "model_size", "device"}, each summary with wall_seconds, wall_seconds_per_model, processes, models,
    updates, train_seconds (the training loops' wall time), updates_per_second_per_model,
    updates_per_second_all_models, compiles, train_programs (the compiled training steps), compile_seconds,
    traces, device, and for those three the run's settings. `in_process`: every way in this Python (it must
    run under KERAS_BACKEND=jax), a quick look: one start-up, and a program an earlier way compiled (the
    prediction's, the models' initialisers) is not compiled again, so compiles count each way's own."""
    work = pathlib.Path(work or tempfile.mkdtemp(prefix="finetune_jax_speed_"))
    work.mkdir(parents=True, exist_ok=True)
    synthetic = tasks_dir
    if tasks_dir is None:
        tasks_dir = synthetic_tasks(work / "tasks", scale, tasks, max_seq_length=synthetic_length, lengths=lengths)
        vocab_size = SYNTHETIC_VOCAB
    else:
        index = json.loads((pathlib.Path(tasks_dir) / "tasks.json").read_text())
        vocab_size = index["tasks"][tasks[0]]["featurization"]["vocab_size"]
    config, weights = write_models(work, model_size, vocab_size, models, model_hparams)

    def common(task_names):
        return (["--tasks-dir", str(tasks_dir), "--config", str(config), "--tasks", ",".join(task_names),
                 "--seeds", str(seeds)] + (["--hparams", json.dumps(hparams)] if hparams else []))

    results = {"model_size": model_size, "tasks": list(tasks), "seeds": seeds, "block_steps": block_steps,
               "lengths": "exported" if synthetic is None else lengths}
    if "before" in ways:
        start, runs = time.monotonic(), []
        for number, files in enumerate(weights[:before_models]):
            for task in tasks:
                out = work / "before" / f"model-{number}" / task
                runs.append(({str(out): number}, _finetune(common([task]) + ["--weights", *files, "--out", str(out)]
                                                 + BEFORE_FLAGS, out.with_suffix(".stats.json"), in_process)))
        results["before"] = _summary(runs, time.monotonic() - start)
    for way, flags in (("today", TODAY_FLAGS), ("blocks", new_flags(block_steps, buckets=False)),
                       ("new", new_flags(block_steps)), ("ahead", new_flags(block_steps) + ["--compile-ahead"])):
        if way in ways:
            start = time.monotonic()
            outs = [str(work / way / f"model-{number}") for number in range(len(weights))]
            stats = _finetune(common(tasks) + [arg for files in weights for arg in ("--weights", *files)]
                              + ["--out", *outs] + flags, work / f"{way}.stats.json", in_process)
            results[way] = _summary([({out: n for n, out in enumerate(outs)}, stats)], time.monotonic() - start)
            results[way]["settings"] = stats["settings"]
    done = [way for way in WAYS if way in results]
    results["ratios"] = {f"{new}/{old}": ratios(results[old], results[new])
                         for number, new in enumerate(done) for old in done[:number]}
    results["device"] = next(results[way]["device"] for way in ways)
    return results


def ratios(old, new):
    """How much better `new` is than `old` (above 1: better): wall time per model, updates/s, compiles."""
    return {"wall_time_per_model": old["wall_seconds_per_model"] / new["wall_seconds_per_model"],
            "updates_per_second_per_model": (new["updates_per_second_per_model"]
                                             / max(old["updates_per_second_per_model"], 1e-9)),
            "updates_per_second_all_models": (new["updates_per_second_all_models"]
                                              / max(old["updates_per_second_all_models"], 1e-9)),
            "steady_updates_per_second": (new["steady_updates_per_second"]
                                          / max(old["steady_updates_per_second"], 1e-9)),
            "compiles": old["compiles"] / max(new["compiles"], 1),
            "train_programs": old["train_programs"] / max(new["train_programs"], 1)}


def table(results):
    ways = [way for way in WAYS if way in results]
    rows = [("wall time, s", "wall_seconds", "{:.1f}"), ("models", "models", "{}"),
            ("wall time per model, s", "wall_seconds_per_model", "{:.1f}"), ("processes", "processes", "{}"),
            ("updates (all models)", "updates", "{}"), ("training loops, s", "train_seconds", "{:.1f}"),
            ("updates/s per model", "updates_per_second_per_model", "{:.1f}"),
            ("updates/s, all models", "updates_per_second_all_models", "{:.1f}"),
            ("updates/s once compiled", "steady_updates_per_second", "{:.1f}"),
            ("compiles", "compiles", "{}"), ("training programs", "train_programs", "{}"),
            ("compile time, s", "compile_seconds", "{:.1f}"),
            ("of it ahead, wall s", "ahead_seconds", "{:.1f}"),
            ("traces", "traces", "{}")]
    lines = [f"{'':<24}" + "".join(f"{way:>12}" for way in ways)]
    for label, key, form in rows:
        lines.append(f"{label:<24}" + "".join(f"{form.format(results[way][key]):>12}" for way in ways))
    for pair, figures in results.get("ratios", {}).items():
        lines.append(f"ratios {pair}: " + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in figures.items()))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks-dir", type=pathlib.Path, default=None,
                        help="exported tasks (python -m studies.device_path.task_arrays); default: synthetic ones")
    parser.add_argument("--model-size", default="electra_tiny")
    parser.add_argument("--model-hparams", type=json.loads, default=None, metavar="JSON",
                        help='the size\'s model_hparam_overrides, e.g. \'{"num_layers": 1}\'')
    parser.add_argument("--models", type=int, default=3, help="models (the last one the random control)")
    parser.add_argument("--before-models", type=int, default=1,
                        help="how many of them the old way trains (one process per job, one after another)")
    parser.add_argument("--tasks", default=",".join(GLUE_SIZES))
    parser.add_argument("--scale", type=float, default=0.02, help="synthetic tasks: GLUE's sizes times this")
    parser.add_argument("--synthetic-length", type=int, default=128, help="synthetic tasks: max_seq_length")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--hparams", default="", help="FinetuningConfig overrides (JSON) for both ways")
    parser.add_argument("--ways", default="today,new", help=f"some of {', '.join(WAYS)}")
    parser.add_argument("--steps-per-dispatch", type=int, default=16, help="the new way's K")
    parser.add_argument("--lengths", choices=("glue", "uniform"), default="glue",
                        help="synthetic tasks' lengths: like GLUE's, or uniform up to --synthetic-length")
    parser.add_argument("--work", type=pathlib.Path, default=None, help="where runs go (default: a new temp folder)")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write the results here")
    parser.add_argument("--in-process", action="store_true",
                        help="every way in this Python (run with KERAS_BACKEND=jax): quicker, and programs an earlier "
                             "way compiled are not compiled again (the smallest run: tests/test_jax_finetune_speed.py)")
    args = parser.parse_args(argv)
    results = measure(args.work, args.tasks_dir, args.model_size, args.models, tuple(args.tasks.split(",")),
                      args.scale, args.seeds, json.loads(args.hparams) if args.hparams else None,
                      tuple(args.ways.split(",")), args.synthetic_length, args.before_models, args.model_hparams,
                      args.steps_per_dispatch, args.lengths, args.in_process)
    print(f"device {results['device']}; {args.model_size}, {args.models} models, tasks {args.tasks}, "
          f"{args.seeds} seed(s), K = {args.steps_per_dispatch}"
          f"{'' if args.tasks_dir else f', synthetic at scale {args.scale}, {args.lengths} lengths'}")
    for way in ("today", "blocks", "new", "ahead"):
        if way in results:
            print(f"{way}: {results[way]['settings']}")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
