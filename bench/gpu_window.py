"""The one command line a GPU window runs: the bounded speed benchmark first, then the product's three commands.

    python -m bench.gpu_window     # prints the line to give the device tool (timeout 600 s; docs/jax_gpu.md)

A window is one call of at most 10 minutes, rare, so the line is built to bring back whatever finished when it is cut
short: bench.gpu_speed writes each row to $OUT/bench/gpu_speed.jsonl the moment it is measured and stays inside its
--max-seconds; then `run_pretraining.py --max-minutes` on the carried dataset folder (built here with
build_pretraining_dataset.py --compression gzip: 47 MB for the four shared Wikipedia shards), the model exported to
$OUT as Hugging Face float16 weights (`checkpoints.export --format hf --dtype float16`) cut into parts for the copy
limit by tar and split, then `run_finetuning.py --each-task` on the carried GLUE files inside a `timeout` of what is
left of the call, and the model folder's small files (metrics, results, TensorBoard, configs) in one tar; the whole
output is kept in $OUT/window.log. A failed step does not stop the next (`;`, not `&&`). The random control needs no
pretraining: it can be fine-tuned anywhere. What comes back fits the device tool's limits (8 files, 16 MiB each).
tests/test_gpu_window_product.py runs this line under the GPU image's Python stand-in. (The studies' own window, with
their MLM baseline, is studies/device_path/window.py.)"""
import argparse
import json
import shlex

# The benchmark's whole-run bound (bench.gpu_speed --max-seconds). The first H200 window (2026-11-29) measured
# Hugging Face's row in 27 s and `defaults` in 90 s (XLA compiled for 64 s), so 150 s held those two alone; 220 s
# also holds the next row, since the second window (2026-11-30) `defaults - fused_attention`: the fused attention
# became the GPU default on two separate measurements, and this row alternates them in one process.
BENCH_SECONDS = 220.0
BENCH_OUT = "$OUT/bench"
WHEELS_DIR = ".whl"  # carried: the wheels the image lacks (keras, namex, optree, ...), installed first
DEVICE_PRELUDE = ("python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "
                  f"{WHEELS_DIR}/site {WHEELS_DIR}/*.whl && export PYTHONPATH=$PWD/{WHEELS_DIR}/site KERAS_BACKEND=jax "
                  "|| exit;")


def bench_command(bench_args=None):
    """The benchmark's part: bounded, rows written as they come; the fine-tuning half left to the run itself."""
    args = bench_args if bench_args is not None else f"--max-seconds {BENCH_SECONDS:g} --no-finetuning"
    return f"PYTHONUNBUFFERED=1 python3 -m bench.gpu_speed --out {BENCH_OUT} {args}"


# The window through the product's commands: what a user with a GPU types, in one call.
WINDOW_DATA = "window"  # carried: <WINDOW_DATA>/pretrain_tfrecords (gzip shards) and <WINDOW_DATA>/glue
WINDOW_MODEL = "electra_small"
WINDOW_TASKS = "rte,mrpc,cola,sts,sst"  # fewest updates first: a fine-tuning cut by its timeout keeps the most tasks
# run_pretraining.py --max-minutes: compile, measure, size the run to end saved by then. The first window compiled
# and measured for 106 s and then trained at 75-85 steps/s: 3.5 minutes train ~7,000 steps, enough to see the
# discriminator leave its plateau (the studies' run: held-out AUC 0.70 by step 3,700).
PRETRAIN_MINUTES = 3.5
CALL_SECONDS = 600  # the device tool's limit on one command
# Fine-tuning runs until this second of the call (a `timeout` of what is left), so that the last tar always fits:
# the steps before it are estimates (~10 s of wheels, the benchmark's 220 plus an overrun, pretraining's 210, under
# 25 for the float16 export on the first window), and a fixed timeout would let their overruns kill the tar that
# brings the fine-tuning results back: ~110 s are left, which held RTE, MRPC and CoLA there (105 s, compiles
# included). The tar of the small files takes a few seconds.
FINETUNE_UNTIL = CALL_SECONDS - 20
PART_BYTES = "15m"  # split's parts: under the device tool's 16 MiB a file
PRETRAIN_HPARAMS = {"train_batch_size": 128, "do_eval": True, "num_eval_steps": 40}
# The fine-tuned models are not kept (54 MB each at electra_small, too large to come back, slow to write): the
# results files and logs are what a window returns.
FINETUNE_HPARAMS = {"save_finetuned_models": False}
WINDOW_START = "WINDOW_START"  # the shell variable of the call's start, seconds since the epoch (`date +%s`)
# Everything the steps print, kept whole: the device tool returns only the output's last 12,000 characters, and the
# first window's second call needed its log (compile times, sizing, evaluations) from a hand-added tee.
WINDOW_LOG = "$OUT/window.log"


def product_line(data=WINDOW_DATA, model=WINDOW_MODEL, tasks=WINDOW_TASKS, bench_args=None, pretrain_hparams=None,
                 finetune_hparams=None, pretrain_minutes=PRETRAIN_MINUTES, finetune_until=FINETUNE_UNTIL,
                 benchmark=True):
    """The window as the product's commands (module docstring). `pretrain_hparams` replaces the default (a test's
    micro model), `finetune_hparams` adds to FINETUNE_HPARAMS; `finetune_until` is the second of the call by which
    fine-tuning ends (skipped where none is left); `benchmark` False leaves the benchmark out (a test that runs it
    elsewhere)."""
    folder = f"{data}/models/{model}"
    hparams = shlex.quote(json.dumps(PRETRAIN_HPARAMS if pretrain_hparams is None else pretrain_hparams))
    steps = [
        f"python3 run_pretraining.py --data-dir {data} --model-name {model} --max-minutes {pretrain_minutes:g} "
        f"--hparams {hparams}",
        f"python3 -m checkpoints.export --model-dir {folder} --format hf --dtype float16 --output {data}/hf16 "
        f"--overwrite && tar -C {data} -cf - hf16 | split -b {PART_BYTES} -d - $OUT/hf16.tar.part",
        f"left=$((${WINDOW_START} + {finetune_until} - $(date +%s))); [ $left -gt 0 ] && "
        f"timeout $left python3 run_finetuning.py --data-dir {data} --model-name {model} "
        f"--finetuning-data-dir {data}/glue --task {tasks}{' --each-task' if ',' in tasks else ''} "
        f"--hparams {shlex.quote(json.dumps({**FINETUNE_HPARAMS, **(finetune_hparams or {})}))}",
        f"tar -C {data}/models -czf $OUT/model_files.tar.gz --exclude='ckpt*' --exclude=jax_work {model}",
    ]
    if benchmark:
        steps.insert(0, bench_command(bench_args))
    start = f"{WINDOW_START}=$(date +%s);"  # before the wheels' install: the call's own start
    logged = "{ " + "; ".join(steps) + f"; }} 2>&1 | tee {WINDOW_LOG}"
    return f"{start} {DEVICE_PRELUDE} export PYTHONUNBUFFERED=1; {logged}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--product", action="store_true",
                        help="accepted for the lines written before it was the default: the same line")
    parser.parse_args(argv)
    print(product_line())


if __name__ == "__main__":
    main()
