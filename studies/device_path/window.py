"""The device studies' GPU window: bench.gpu_window's benchmark first, then studies.device_path.run on an export
(pretraining from arrays, with the MLM baseline at equal FLOPs when asked, fine-tuning from task arrays, the weights
brought back as an archive in parts). The product's window is bench.gpu_window's line of the three commands.

    python -m studies.device_path.window [--export jax_export]   # prints the line (the device tool's timeout 600 s)

The time: about 150 s of benchmark, then the run's minutes and its ~20 s of collecting, inside the call's 600 s with
half a minute to spare. tests/test_jax_run.py runs this line (a micro model's arguments in place of the defaults)
under the GPU image's Python stand-in.
"""
import argparse

from bench.gpu_window import bench_command
from studies.device_path.run import device_line

BENCH_ARGS = "--max-seconds 150 --no-finetuning"  # its own bound: the product window's 220 s would not leave 390 s
RUN_MINUTES = 6.5  # the time-boxed run after the benchmark: 150 s + 390 s + ~20 s of collecting < 600 s
FINETUNE_MINUTES = 2.0  # of the run's minutes, for the five tasks x two models (issue 42's 90 s goal + compiles)


def window_line(export="jax_export", bench_args=None, run_args=None):
    """The whole window: the device line (its wheel prelude, then studies.device_path.run) with the benchmark put
    between the prelude and the run. `bench_args` / `run_args` replace the defaults (a test's micro sizes)."""
    line = device_line(export, minutes=RUN_MINUTES)
    prelude, run = line.split(" python3 -m studies.device_path.run ", 1)
    run = "python3 -m studies.device_path.run " + run + f" --finetune-minutes {FINETUNE_MINUTES:g}"
    bench = bench_command(BENCH_ARGS if bench_args is None else bench_args)
    return f"{prelude} {bench}; PYTHONUNBUFFERED=1 {run}{' ' + run_args if run_args else ''}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--export", default="jax_export", help="the export folder, as copied into the repository")
    print(window_line(parser.parse_args(argv).export))


if __name__ == "__main__":
    main()
