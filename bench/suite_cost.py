"""Where the test suite's time goes: each test file's wall time, the CPU time its tests spend in the pytest
worker, and the CPU time of the processes they start (commands, JAX scripts, the accelerator's Python).

    python -m bench.suite_cost [--pytest-args="-n 2 --dist loadfile"] [--top 40] [--log FILE] [TEST PATHS...]

Why: `make test` must come under 10 minutes on 2 cores (issue 44) and the suite is CPU-bound, so what matters
is CPU seconds, and about half of them are spent in child processes, which pytest's --durations cannot tell
apart from waiting. This runs pytest with its own plugin in every worker (`-p bench.suite_cost`): around each
test's setup, call and teardown it reads getrusage for the worker itself and for its waited-for children (a
child's children are counted once the child has waited for them), so no test or child needs changing. A file's
module fixtures are charged to the test that set them up or tore them down, which is why the table is by file.
Prints the CPU (model name and flags), the load before the run, the files with the most CPU, and the totals.
"""
import argparse
import collections
import json
import os
import pathlib
import resource
import shlex
import subprocess
import sys
import tempfile
import time

import pytest

LOG_VARIABLE = "ELECTRA_SUITE_COST_LOG"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------- the pytest plugin
def _cpu_seconds(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Appends one JSON line per test to $ELECTRA_SUITE_COST_LOG: its file, wall, own CPU and children's CPU."""
    log = os.environ.get(LOG_VARIABLE)
    if not log:
        yield
        return
    wall, own, children = time.perf_counter(), _cpu_seconds(resource.RUSAGE_SELF), \
        _cpu_seconds(resource.RUSAGE_CHILDREN)
    yield
    record = {"file": item.nodeid.split("::")[0], "test": item.nodeid,
              "wall": time.perf_counter() - wall, "own_cpu": _cpu_seconds(resource.RUSAGE_SELF) - own,
              "child_cpu": _cpu_seconds(resource.RUSAGE_CHILDREN) - children}
    with open(log, "a", encoding="utf-8") as f:  # one short line per write: the workers' lines do not interleave
        f.write(json.dumps(record) + "\n")


# ------------------------------------------------------------------------------------------- the run and its table
def by_file(records):
    """{file: {"tests", "wall", "own_cpu", "child_cpu"}} summed over its tests."""
    files = collections.defaultdict(lambda: {"tests": 0, "wall": 0.0, "own_cpu": 0.0, "child_cpu": 0.0})
    for record in records:
        row = files[record["file"]]
        row["tests"] += 1
        for key in ("wall", "own_cpu", "child_cpu"):
            row[key] += record[key]
    return dict(files)


def table(records, run_wall, top):
    """The printed report: the `top` files by CPU (their own and their children's), then the totals."""
    files = by_file(records)
    ordered = sorted(files.items(), key=lambda item: -(item[1]["own_cpu"] + item[1]["child_cpu"]))
    lines = [f"{'file':<52} {'tests':>5} {'wall s':>8} {'worker CPU s':>12} {'child CPU s':>11} {'CPU s':>8}"]
    for name, row in ordered[:top]:
        lines.append(f"{name:<52} {row['tests']:>5} {row['wall']:>8.1f} {row['own_cpu']:>12.1f} "
                     f"{row['child_cpu']:>11.1f} {row['own_cpu'] + row['child_cpu']:>8.1f}")
    own = sum(row["own_cpu"] for row in files.values())
    children = sum(row["child_cpu"] for row in files.values())
    total = own + children
    lines.append(f"{len(records)} tests in {len(files)} files; the run took {run_wall:.1f} s of wall time")
    share = children / total if total else 0.0
    lines.append(f"CPU in tests: {total:.1f} s = {own:.1f} s in the pytest worker(s) + {children:.1f} s in child "
                 f"processes ({share:.0%}); outside the tests (start-up, collection, imports before the first "
                 "test) is not counted")
    return "\n".join(lines)


def read_records(log):
    path = pathlib.Path(log)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="test files or folders (default: the project's testpaths)")
    parser.add_argument("--pytest-args", default="-n 2 --dist loadfile",
                        help="pytest's options, as one string (default: the README's test command's)")
    parser.add_argument("--top", type=int, default=40, help="how many files to list")
    parser.add_argument("--log", help="the per-test JSON lines (default: a temporary file, removed after)")
    args = parser.parse_args(argv)

    log = pathlib.Path(args.log) if args.log else pathlib.Path(tempfile.mkdtemp(prefix="suite_cost_")) / "tests.jsonl"
    log.unlink(missing_ok=True)
    env = dict(os.environ, **{LOG_VARIABLE: str(log)})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-p", "bench.suite_cost", "-q", "-p", "no:cacheprovider",
               *shlex.split(args.pytest_args), *args.paths]
    from training.cpu_features import read_cpu_features

    print(f"CPU: {read_cpu_features().describe()}; {os.cpu_count()} cores; load average before the run: "
          f"{os.getloadavg()[0]:.2f}")
    print("Command:", shlex.join(command), flush=True)
    started = time.perf_counter()
    completed = subprocess.run(command, env=env)
    run_wall = time.perf_counter() - started
    records = read_records(log)
    if not args.log:
        log.unlink(missing_ok=True)
        log.parent.rmdir()
    print(table(records, run_wall, args.top))
    if completed.returncode != 0:
        print(f"pytest exited with {completed.returncode}: the figures cover the tests that ran")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main())
