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
"""
import argparse

from training_jax.run import device_line

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", default="jax_export", help="the export folder, as copied into the repository")
    args = parser.parse_args(argv)
    print(window_line(args.export))


if __name__ == "__main__":
    main()
