"""The one command line a GPU window runs: the bounded speed benchmark first, then the time-boxed run.

    python -m bench.gpu_window [--export jax_export]     # prints the line to give the device tool (timeout 600 s)

A window is one call of at most 10 minutes, rare, so the line is built to bring back whatever finished when it is
cut short: bench.gpu_speed writes each row to $OUT/bench/gpu_speed.jsonl the moment it is measured and stays inside
its --max-seconds; then training_jax.run (the product's own device line, training_jax.run.device_line) pretrains
with the GPU's defaults (mixed_bfloat16 and every proven speed option: training_jax.speed_settings) and fine-tunes,
inside its --minutes, writing $OUT as it goes. A failed benchmark does not stop the run (`;`, not `&&`).

What comes back fits the device tool's limits (8 files, 16 MiB each, 2 folders down): the benchmark's one jsonl
file and the run's at most 6 at electra_small without --also-mlm (two archive parts, metrics.jsonl, results.json,
run.json). The time: about 150 s of benchmark, then the run's minutes and its ~20 s of collecting, inside the
call's 600 s with half a minute to spare. tests/test_jax_run.py runs this line (with a micro model's arguments in
place of the two defaults) under the GPU image's Python stand-in.

--product prints the window as the product's own commands instead (product_line; docs/jax_gpu.md, "The GPU
window through the three commands"): the same benchmark, then `run_pretraining.py --max-minutes` on the carried
dataset folder (built here with build_pretraining_dataset.py --compression gzip: 47 MB for the four shared
Wikipedia shards), the model exported to $OUT as Hugging Face float16 weights (`checkpoints.export --format hf
--dtype float16`) cut into parts for the copy limit by tar and split, then `run_finetuning.py --each-task` on the
carried GLUE files inside a `timeout`, and the model folder's small files (metrics, results, TensorBoard, configs)
in one tar. Nothing of training_jax.export, finetune.arrays or training_jax.run is used; the random control and
the MLM baseline of the time-boxed run are the studies' (a control needs no pretraining: it can be fine-tuned
anywhere). tests/test_gpu_window_product.py runs this line under the stand-in.
"""
import argparse
import json
import shlex

from training_jax.run import DEVICE_PRELUDE, device_line

BENCH_SECONDS = 150.0  # the benchmark's whole-run bound (bench.gpu_speed --max-seconds)
RUN_MINUTES = 6.5  # the time-boxed run after it: 150 s + 390 s + ~20 s of collecting < 600 s
FINETUNE_MINUTES = 2.0  # of the run's minutes, for the five tasks x two models (issue 42's 90 s goal + compiles)
BENCH_OUT = "$OUT/bench"


def bench_command(bench_args=None):
    """The benchmark's part: bounded, rows written as they come; the fine-tuning half left to the run itself."""
    args = bench_args if bench_args is not None else f"--max-seconds {BENCH_SECONDS:g} --no-finetuning"
    return f"PYTHONUNBUFFERED=1 python3 -m bench.gpu_speed --out {BENCH_OUT} {args}"


def window_line(export="jax_export", bench_args=None, run_args=None):
    """The whole window: the product's device line (its wheel prelude, then training_jax.run) with the benchmark
    put between the prelude and the run. `bench_args` / `run_args` replace the defaults (a test's micro sizes)."""
    line = device_line(export, minutes=RUN_MINUTES)
    prelude, run = line.split(" python3 -m training_jax.run ", 1)
    run = "python3 -m training_jax.run " + run + f" --finetune-minutes {FINETUNE_MINUTES:g}"
    return f"{prelude} {bench_command(bench_args)}; PYTHONUNBUFFERED=1 {run}{' ' + run_args if run_args else ''}"


# The window through the product's commands (--product): what a user with a GPU types, in one call.
WINDOW_DATA = "window"  # carried: <WINDOW_DATA>/pretrain_tfrecords (gzip shards) and <WINDOW_DATA>/glue
WINDOW_MODEL = "electra_small"
WINDOW_TASKS = "rte,mrpc,cola,sts,sst"  # fewest updates first: a fine-tuning cut by its timeout keeps the most tasks
PRETRAIN_MINUTES = 4.0  # run_pretraining.py --max-minutes: compile, measure, size the run to end saved by then
# run_finetuning.py's timeout. The call's budget, estimated: ~10 s of wheels, the benchmark's 150, pretraining's 240,
# ~40 for the float16 export and its parts (not yet timed on a GPU machine), this 130 and ~5 of tar: ~575 s < 600.
FINETUNE_SECONDS = 130
PART_BYTES = "15m"  # split's parts: under the device tool's 16 MiB a file
PRETRAIN_HPARAMS = {"train_batch_size": 128, "do_eval": True, "num_eval_steps": 40}
# The fine-tuned models are not kept (54 MB each at electra_small, too large to come back, slow to write): the
# results files and logs are what a window returns.
FINETUNE_HPARAMS = {"save_finetuned_models": False}


def product_line(data=WINDOW_DATA, model=WINDOW_MODEL, tasks=WINDOW_TASKS, bench_args=None, pretrain_hparams=None,
                 finetune_hparams=None, pretrain_minutes=PRETRAIN_MINUTES, finetune_seconds=FINETUNE_SECONDS,
                 benchmark=True):
    """The window as the product's commands (module docstring). `pretrain_hparams` replaces the default (a test's
    micro model), `finetune_hparams` adds to FINETUNE_HPARAMS; `benchmark` False leaves the benchmark out (a test
    that runs it elsewhere)."""
    folder = f"{data}/models/{model}"
    hparams = shlex.quote(json.dumps(PRETRAIN_HPARAMS if pretrain_hparams is None else pretrain_hparams))
    steps = [
        f"python3 run_pretraining.py --data-dir {data} --model-name {model} --max-minutes {pretrain_minutes:g} "
        f"--hparams {hparams}",
        f"python3 -m checkpoints.export --model-dir {folder} --format hf --dtype float16 --output {data}/hf16 "
        f"--overwrite && tar -C {data} -cf - hf16 | split -b {PART_BYTES} -d - $OUT/hf16.tar.part",
        f"timeout {finetune_seconds} python3 run_finetuning.py --data-dir {data} --model-name {model} "
        f"--finetuning-data-dir {data}/glue --task {tasks}{' --each-task' if ',' in tasks else ''} "
        f"--hparams {shlex.quote(json.dumps({**FINETUNE_HPARAMS, **(finetune_hparams or {})}))}",
        f"tar -C {data}/models -czf $OUT/model_files.tar.gz --exclude='ckpt*' --exclude=jax_work {model}",
    ]
    if benchmark:
        steps.insert(0, bench_command(bench_args))
    return f"{DEVICE_PRELUDE} export PYTHONUNBUFFERED=1; " + "; ".join(steps)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", default="jax_export", help="the export folder, as copied into the repository")
    parser.add_argument("--product", action="store_true",
                        help="the window as the product's commands (run_pretraining.py, checkpoints.export, "
                             f"run_finetuning.py) on the carried folder {WINDOW_DATA}/")
    args = parser.parse_args(argv)
    print(product_line() if args.product else window_line(args.export))


if __name__ == "__main__":
    main()
