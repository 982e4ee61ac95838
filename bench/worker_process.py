"""A benchmark's measurement in a fresh process (its own thread pools, its own choice of kernels and backend):
the worker prints one RESULT line of JSON last, the parent reads it back."""
import json
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULT = "RESULT "


def print_result(value):
    """The worker's side: its measurement as the line the parent looks for."""
    print(RESULT + json.dumps(value), flush=True)


def run_worker(command, env, label, exit_on_failure=True):
    """Runs `command` in the repository with `env`; returns the JSON of its last RESULT line. A failed worker
    (an exit code, or no RESULT line) ends the benchmark with its stderr's tail, or with exit_on_failure=False
    prints it and returns None, so that the other settings still run."""
    completed = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT)]
    if completed.returncode or not lines:
        message = f"[{label}] failed (rc {completed.returncode}):\n{completed.stderr[-3000:]}"
        if exit_on_failure:
            raise SystemExit(message)
        print(message, flush=True)
        return None
    return json.loads(lines[-1][len(RESULT):])
