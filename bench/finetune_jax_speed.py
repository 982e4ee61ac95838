"""run_finetuning.py's speed under KERAS_BACKEND=jax, its speed settings side by side in one run.

    python -m bench.finetune_jax_speed             # electra_tiny, random GLUE-shaped files at 2% of GLUE's sizes
    python -m bench.finetune_jax_speed --model-size electra_small --finetuning-data-dir ../shared/data/glue \\
        --vocab-file ../shared/data/vocab/bert-base-uncased-vocab.txt      # GLUE's own files

Each way is one process of `run_finetuning.py --task cola,sst,mrpc,sts,rte --each-task` (JAX, TensorFlow
unimportable, as on a GPU machine) on the same task files, from a model folder of its own holding the same randomly
initialised encoder (speed does not depend on what the weights learned), so each starts from an empty compile
cache:
- today: `--no-bf16 --no-length-buckets --steps-per-dispatch 1`: the CPU's defaults, the original's float32 batches
  at max_seq_length, one update per dispatch, each batch padded and sent by the host;
- blocks: K updates per dispatch (`--steps-per-dispatch K`), batches still at max_seq_length;
- new: length buckets and K per dispatch, the accelerator's defaults (bfloat16 left to the platform: on on a GPU);
- ahead: new with its training programs compiled before training, in threads at once (`--compile-ahead`);
- default: no flag, what this platform gets.
Printed per way: wall time (start-up, reading and featurising the files, compiles, evaluation), the updates and
training seconds of every trial (the results files' num_train_steps and train_seconds), updates/s, updates/s once
compiled (the trials after each task's first: --seeds 2 or more), compiles and their seconds (jax.monitoring),
each task's primary dev metric (today and blocks train the same batches, so they agree but for float rounding; the
buckets train other ones), and the ratios to today's. `measure(...)` returns the same as a dict.

Without --finetuning-data-dir the tasks are bench/synthetic_glue.py's: GLUE's rows times --scale, GLUE's lengths,
random words of a made-up vocabulary of --vocab-size tokens.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench.synthetic_glue import GLUE_ROWS, write_glue_files, write_vocab

REPO = pathlib.Path(__file__).resolve().parents[1]
WAYS = ("today", "blocks", "new", "ahead", "default")
MODEL_NAME = "speed"


def way_flags(way, block_steps):
    return {"today": ["--no-bf16", "--no-length-buckets", "--steps-per-dispatch", "1"],
            "blocks": ["--no-length-buckets", "--steps-per-dispatch", str(block_steps)],
            "new": ["--length-buckets", "--steps-per-dispatch", str(block_steps)],
            "ahead": ["--length-buckets", "--steps-per-dispatch", str(block_steps), "--compile-ahead"],
            "default": []}[way]


# One way's process: run_finetuning.py's main under a compile count, TensorFlow unimportable; its figures to argv[1].
CHILD = """
import json, sys, time
start = time.monotonic()
sys.modules["tensorflow"] = None
from training_jax.compiles import CompileCount
counts = CompileCount()
import run_finetuning
run_finetuning.main(sys.argv[2:])
json.dump({"seconds": time.monotonic() - start, "compiles": counts.compiles, "compile_seconds": counts.compile_seconds,
           "traces": counts.traces}, open(sys.argv[1], "w"))
"""


def write_model_folder(folder, vocab_file, model_size, model_hparams=None, seed=1):
    """A model folder as a JAX pretraining run writes it: a randomly initialised encoder (seed `seed`) as ckpt-1,
    its config.json and the vocabulary."""
    import keras

    if keras.backend.backend() == "jax":
        sys.modules.setdefault("tensorflow", None)  # Keras's seeding would import it where installed (seconds)
    from configs.pretraining_config import PretrainingConfig
    from finetune.pretrained import build_encoder
    from storage import model_folder

    vocab_size = sum(1 for _ in open(vocab_file, encoding="utf-8"))
    config = PretrainingConfig.create({"model_size": model_size, "vocab_size": vocab_size,
                                       "model_hparam_overrides": model_hparams or {}})
    keras.utils.set_random_seed(seed)
    encoder = build_encoder(config.model_config())
    weights = {variable.path: np.asarray(keras.ops.convert_to_numpy(variable.value)) for variable in encoder.weights}
    model_folder.write_weights_checkpoint(folder, 1, weights, config, vocab_file)
    return folder


def _jax_env():
    env = dict(os.environ, KERAS_BACKEND="jax",
               PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # each way starts from an empty cache in its own model folder
    return env


def run_way(data_dir, tasks_dir, tasks, seeds, hparams, flags, stats, in_process=False):
    """One run_finetuning.py process (or, `in_process`, its main in this JAX Python); returns its figures."""
    args = ["--data-dir", str(data_dir), "--model-name", MODEL_NAME, "--finetuning-data-dir", str(tasks_dir),
            "--task", ",".join(tasks), *(["--each-task"] if len(tasks) > 1 else []), "--num-trials", str(seeds),
            *(["--hparams", json.dumps(hparams)] if hparams else []), *flags]
    if in_process:
        import contextlib
        import io

        import run_finetuning
        from training_jax.compiles import CompileCount

        start, counts = time.monotonic(), CompileCount()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            run_finetuning.main(args)
        return {"seconds": time.monotonic() - start, "compiles": counts.compiles,
                "compile_seconds": counts.compile_seconds, "traces": counts.traces}
    command = [sys.executable, "-c", CHILD, str(stats), *args]
    completed = subprocess.run(command, cwd=REPO, env=_jax_env(), capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"run_finetuning.py {' '.join(args)} failed:\n{completed.stdout[-2000:]}"
                           f"{completed.stderr[-3000:]}")
    return json.loads(pathlib.Path(stats).read_text())


def summary(model_dir, tasks, process):
    """A way's figures from its results files and its process's counts."""
    updates = seconds = steady_updates = steady_seconds = 0
    metrics, settings = {}, None
    for task in tasks:
        results = json.loads((model_dir / "results" / f"{task}_results.json").read_text())
        settings = results.get("jax_settings", settings)
        for number, trial in enumerate(results["trials"]):
            updates, seconds = updates + results["num_train_steps"], seconds + trial["train_seconds"]
            if number:  # the task's programs were compiled by its first trial
                steady_updates += results["num_train_steps"]
                steady_seconds += trial["train_seconds"]
        metrics[task] = results["summary"][results["primary_metric"]]["mean"]
    return {"wall_seconds": process["seconds"], "updates": updates, "train_seconds": seconds,
            "updates_per_second": updates / seconds if seconds > 0 else 0.0,
            "steady_updates_per_second": steady_updates / steady_seconds if steady_seconds > 0 else None,
            "compiles": process["compiles"], "compile_seconds": process["compile_seconds"],
            "traces": process["traces"], "dev_metrics": metrics, "settings": settings}


def measure(work=None, tasks_dir=None, vocab_file=None, model_size="electra_tiny", tasks=tuple(GLUE_ROWS),
            scale=0.02, seeds=2, hparams=None, ways=("today", "new"), block_steps=16, model_hparams=None,
            vocab_size=1000, max_seq_length=128, in_process=False):
    """Runs `ways` on the same tasks and weights. Returns {way: figures, "ratios": {way: {...} against today's},
    "tasks", "model_size", "device"}; `in_process`: every way in this Python (which must be a JAX one), a quick
    look: programs an earlier way compiled are not compiled again."""
    unknown = [way for way in ways if way not in WAYS]
    if unknown:
        raise ValueError(f"unknown way {unknown[0]}; choose from {', '.join(WAYS)}")
    work = pathlib.Path(work or tempfile.mkdtemp(prefix="finetune_jax_speed_"))
    work.mkdir(parents=True, exist_ok=True)
    synthetic = tasks_dir is None
    if vocab_file is None:
        vocab_file = write_vocab(work / "vocab.txt", vocab_size)
    if synthetic:
        tasks_dir = write_glue_files(work / "glue", vocab_file, scale, tasks, max_seq_length)
    hparams = {"max_seq_length": max_seq_length, "save_finetuned_models": False, **(hparams or {})}
    base = write_model_folder(work / "base", vocab_file, model_size, model_hparams)
    results = {"model_size": model_size, "tasks": list(tasks), "seeds": seeds, "block_steps": block_steps,
               "task_files": "synthetic" if synthetic else str(tasks_dir)}
    for way in ways:
        data_dir = work / way
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.copytree(base, data_dir / "models" / MODEL_NAME)
        process = run_way(data_dir, tasks_dir, tasks, seeds, hparams, way_flags(way, block_steps),
                          work / f"{way}.stats.json", in_process)
        results[way] = summary(data_dir / "models" / MODEL_NAME, tasks, process)
    results["ratios"] = {way: ratios(results[ways[0]], results[way]) for way in ways[1:]}
    results["device"] = device_name(in_process)
    return results


def device_name(in_process):
    if in_process:
        import jax

        return f"{jax.devices()[0].platform} {jax.devices()[0].device_kind}"
    script = "import jax; d = jax.devices()[0]; print(d.platform, d.device_kind)"
    completed = subprocess.run([sys.executable, "-c", script], env=_jax_env(), capture_output=True, text=True)
    return completed.stdout.strip() or "unknown"


def ratios(old, new):
    """How much better `new` is than `old` (above 1: better)."""
    steady = (new["steady_updates_per_second"] / old["steady_updates_per_second"]
              if new["steady_updates_per_second"] and old["steady_updates_per_second"] else None)
    return {"wall_time": old["wall_seconds"] / new["wall_seconds"],
            "updates_per_second": new["updates_per_second"] / max(old["updates_per_second"], 1e-9),
            "steady_updates_per_second": steady, "compiles": old["compiles"] / max(new["compiles"], 1)}


def table(results):
    ways = [way for way in WAYS if way in results]
    rows = [("wall time, s", "wall_seconds", "{:.1f}"), ("updates", "updates", "{}"),
            ("training, s", "train_seconds", "{:.1f}"), ("updates/s", "updates_per_second", "{:.1f}"),
            ("updates/s once compiled", "steady_updates_per_second", "{:.1f}"), ("compiles", "compiles", "{}"),
            ("compile time, s", "compile_seconds", "{:.1f}"), ("traces", "traces", "{}")]
    lines = [f"{'':<26}" + "".join(f"{way:>10}" for way in ways)]
    for label, key, form in rows:
        lines.append(f"{label:<26}" + "".join(
            f"{'n/a' if results[way][key] is None else form.format(results[way][key]):>10}" for way in ways))
    for task in results["tasks"]:
        lines.append(f"{'dev ' + task:<26}" + "".join(f"{results[way]['dev_metrics'][task]:>10.2f}" for way in ways))
    for way, figures in results.get("ratios", {}).items():
        lines.append(f"{way} / {ways[0]}: " + ", ".join(
            f"{name} {'n/a' if ratio is None else f'{ratio:.2f}x'}" for name, ratio in figures.items()))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--finetuning-data-dir", type=pathlib.Path, default=None,
                        help="GLUE's task folders (default: random GLUE-shaped files, bench/synthetic_glue.py)")
    parser.add_argument("--vocab-file", type=pathlib.Path, default=None,
                        help="the model's vocabulary (default: a made-up one of --vocab-size tokens)")
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument("--model-size", default="electra_tiny")
    parser.add_argument("--model-hparams", type=json.loads, default=None, metavar="JSON",
                        help='the size\'s model_hparam_overrides, e.g. \'{"num_layers": 1}\'')
    parser.add_argument("--tasks", default=",".join(GLUE_ROWS))
    parser.add_argument("--scale", type=float, default=0.02, help="random files: GLUE's rows times this")
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=2, help="trials per task (the second on is the compiled rate)")
    parser.add_argument("--hparams", type=json.loads, default=None, metavar="JSON",
                        help="FinetuningConfig overrides for every way")
    parser.add_argument("--ways", default="today,new", help=f"some of {', '.join(WAYS)}, the first the baseline")
    parser.add_argument("--steps-per-dispatch", type=int, default=16, help="K of the blocks, new and ahead ways")
    parser.add_argument("--work", type=pathlib.Path, default=None, help="where runs go (default: a new temp folder)")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write the results here")
    parser.add_argument("--in-process", action="store_true",
                        help="every way in this Python (run with KERAS_BACKEND=jax): quicker, and programs an earlier "
                             "way compiled are not compiled again (tests/test_bench_modules.py's smallest run)")
    args = parser.parse_args(argv)
    if args.finetuning_data_dir is not None and args.vocab_file is None:
        parser.error("--finetuning-data-dir needs the --vocab-file its words are tokenized with")
    results = measure(args.work, args.finetuning_data_dir, args.vocab_file, args.model_size,
                      tuple(args.tasks.split(",")), args.scale, args.seeds, args.hparams, tuple(args.ways.split(",")),
                      args.steps_per_dispatch, args.model_hparams, args.vocab_size, args.max_seq_length,
                      args.in_process)
    print(f"device {results['device']}; {args.model_size}, tasks {args.tasks}, {args.seeds} seed(s), "
          f"K = {args.steps_per_dispatch}; task files: "
          f"{results['task_files'] if args.finetuning_data_dir else f'random at scale {args.scale}'}")
    for way in WAYS:
        if way in results:
            print(f"{way}: {results[way]['settings']}")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
