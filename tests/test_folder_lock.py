"""One writer per folder (storage/folder_lock.py), with real processes: a second writer stops at once with
one line naming the folder and the process that holds it, exit 2, and touches nothing; a lock left by a
killed process blocks nobody. (run_pretraining.py's own second-writer check is in test_run_pretraining.py.)"""
import os
import signal
import subprocess
import sys

import pytest

from common.errors import InputError
from storage import folder_lock
from tests.conftest import REPO_ROOT

HOLD = ("import sys, time; from storage import folder_lock; "
        "lock = folder_lock.acquire(sys.argv[1], 'building a dataset'); print('held', flush=True); time.sleep(120)")


def start_holder(folder):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_builder_on_a_folder_being_written_stops_at_once_and_touches_nothing(tmp_path, tokenizer):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("One sentence here.\nAnother one there.\n\nA second document.\n")
    output = tmp_path / "dataset"
    output.mkdir()
    (output / "metadata.json").write_text("{}")  # an earlier build's file, which --overwrite would delete
    holder = start_holder(output)
    try:
        builder = subprocess.run(
            [sys.executable, "build_pretraining_dataset.py", "--corpus-dir", str(corpus), "--output-dir", str(output),
             "--vocab-file", str(tokenizer.vocab_file), "--overwrite"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="3"))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert builder.returncode == 2, builder.stderr[-2000:]
    lines = builder.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: {output}: another run is building a dataset here (pid {holder.pid}, ")
    assert sorted(p.name for p in output.iterdir()) == ["metadata.json"]
    assert (output / "metadata.json").read_text() == "{}"


def test_a_lock_left_by_a_killed_process_does_not_block_the_next_writer(tmp_path):
    folder = tmp_path / "model"
    holder = start_holder(folder)
    with pytest.raises(InputError, match=f"pid {holder.pid}"):
        folder_lock.acquire(folder, "pretraining")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with folder_lock.acquire(folder, "pretraining") as lock:
        assert f"pid {os.getpid()}" in lock.path.read_text()  # the file now names this process
    with folder_lock.acquire(folder, "pretraining"):  # released on leaving the block
        pass


def test_writers_of_different_parts_of_one_folder_do_not_block_each_other(tmp_path):
    """Fine-tuning two tasks from one model at once is fine; the same task twice is not."""
    folder = tmp_path / "model"
    folder.mkdir()
    with folder_lock.acquire(folder, "fine-tuning sst2", name="finetuning-sst2"), \
            folder_lock.acquire(folder, "fine-tuning mrpc", name="finetuning-mrpc"):
        with pytest.raises(InputError, match="another run is fine-tuning sst2"):
            folder_lock.acquire(folder, "fine-tuning sst2", name="finetuning-sst2")
