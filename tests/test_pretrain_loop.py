"""pretrain_loop: the cadence both backends share, run here around a counting stand-in for a backend; the
metrics file's resume rules; TensorBoard event files written without TensorFlow and read back by it; the
package imports no backend and training_jax nothing of training/."""
import ast
import json
import pathlib

import pytest

from pretrain_loop import base, event_file
from pretrain_loop.cadence import Cadence
from pretrain_loop.metrics_file import METRICS_FILE, MetricsFile, curves_of, read_metrics

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


class CountingLoop(base.PretrainingLoop):
    """A backend that counts: each update adds 1 to `seen`; metrics are the window's mean step."""

    def __init__(self, folder, skip_first=0):
        super().__init__(folder)
        self.calls, self.saved, self.states, self.window = [], [], [], []
        self.skip_first = skip_first  # updates that do not count (a float16 step skipped)
        self.lines = []

    def run_updates(self, count):
        self.calls.append(count)
        if self.skip_first:
            self.skip_first -= 1
            return self.step
        self.window += range(self.step + 1, self.step + count + 1)
        return self.step + count

    def window_metrics(self):
        window, self.window = self.window, []
        return {"total_loss": sum(window) / len(window)}, 10.0 * len(window), 2.0 * len(window)

    def learning_rate(self, step):
        return 1e-3 * step

    def held_out_metrics(self, step):
        return {"total_loss": -step}, 3

    def save_checkpoint(self, step):
        self.saved.append(step)

    def save_state(self, wall_seconds):
        self.states.append(self.step)

    def run_record(self):
        return {"model": "counting", "backend": "none"}

    def say(self, line, error=False):
        self.lines.append(line)


def records(folder):
    return [json.loads(line) for line in (folder / METRICS_FILE).read_text().splitlines()]


def test_the_loop_logs_saves_and_evaluates_at_exactly_its_event_steps(tmp_path):
    loop = CountingLoop(tmp_path)
    cadence = Cadence(total=10, log_every=4, save_every=6, save_steps=(3, 10), eval_every=5, eval_steps=(3,))
    assert loop.train(cadence) == base.DONE
    loop.write_run_record(cadence.total)
    assert loop.calls == [3, 1, 1, 1, 2, 2]  # up to each next event: 3 4 5 6 8 10
    assert loop.saved == [3, 6, 10]
    written = records(tmp_path)
    assert [(r["split"], r["step"]) for r in written[:-1]] == [
        ("eval", 3), ("train", 4), ("eval", 5), ("train", 8), ("train", 10), ("eval", 10)]
    train = [r for r in written if r["split"] == "train"]
    assert [r["total_loss"] for r in train] == [2.5, 6.5, 9.5]  # each window's own updates, none twice
    assert [r["learning_rate"] for r in train] == [pytest.approx(0.004), pytest.approx(0.008), pytest.approx(0.01)]
    assert set(train[0]) == {"split", "step", "total_loss", "learning_rate", *base.TIMING_KEYS}
    for record in train:  # the window's tokens and examples per step (10 and 2 here) at its steps/s
        assert record["tokens_per_second"] == pytest.approx(10 * record["steps_per_second"])
        assert record["examples_per_second"] == pytest.approx(2 * record["steps_per_second"])
    assert written[-1]["split"] == "run" and written[-1]["num_train_steps"] == 10
    assert {"wall_clock_seconds", "compile_seconds", "steps_per_second", "model", "backend"} <= set(written[-1])
    assert any(line.startswith("step 4/10 (40%) | loss 2.500 |") and "ETA" in line for line in loop.lines)
    assert "eval at step 5 (3 batches): total_loss -5.0000" in loop.lines
    # the same values as TensorBoard scalars, one event file per split
    assert len(list((tmp_path / "logs" / "train").glob("events.out.tfevents.*"))) == 1


class AsyncLoop(CountingLoop):
    """An asynchronous backend on a fake clock: run_updates queues STEP_SECONDS of device work a step and returns
    at once, as a jitted JAX block does; what reads results (the window's metrics, an evaluation, a save) waits
    for the queue first, then takes its own seconds."""
    STEP_SECONDS, EVAL_SECONDS, SAVE_SECONDS = 0.01, 0.5, 2.0

    def __init__(self, folder, clock):
        super().__init__(folder)
        self.clock, self.queued = clock, 0.0

    def run_updates(self, count):
        self.queued += count * self.STEP_SECONDS
        return super().run_updates(count)

    def wait_for_updates(self):
        self.clock.now, self.queued = self.clock.now + self.queued, 0.0

    def window_metrics(self):
        self.wait_for_updates()
        return super().window_metrics()

    def held_out_metrics(self, step):
        self.wait_for_updates()
        self.clock.now += self.EVAL_SECONDS
        return super().held_out_metrics(step)

    def save_checkpoint(self, step):
        self.wait_for_updates()
        self.clock.now += self.SAVE_SECONDS
        super().save_checkpoint(step)


def test_the_windows_rate_is_the_updates_own_on_an_asynchronous_backend(tmp_path, monkeypatch):
    """Evaluations and saves are left out of a window's steps/s, and the updates still running when one starts
    are not: every window is timed at the updates' own 100 steps/s, however many evaluations and saves fall in it."""
    clock = type("Clock", (), {"now": 0.0, "monotonic": lambda self: self.now})()
    monkeypatch.setattr(base, "time", clock)
    loop = AsyncLoop(tmp_path, clock)
    cadence = Cadence(total=40, log_every=10, save_every=20, eval_every=5)
    assert loop.train(cadence) == base.DONE
    train = [r for r in records(tmp_path) if r["split"] == "train"]
    assert [r["step"] for r in train] == [10, 20, 30, 40]
    assert [r["steps_per_second"] for r in train] == [pytest.approx(1 / AsyncLoop.STEP_SECONDS)] * 4
    assert loop.saved == [20, 40] and clock.now == pytest.approx(
        40 * AsyncLoop.STEP_SECONDS + 8 * AsyncLoop.EVAL_SECONDS + 2 * AsyncLoop.SAVE_SECONDS)


def test_skipped_updates_do_not_count_and_a_pause_saves_the_state(tmp_path):
    loop = CountingLoop(tmp_path, skip_first=2)
    assert loop.train(Cadence(total=8, log_every=2, pause_at=5)) == base.PAUSED
    assert loop.step == 5 and loop.states == [5] and loop.calls[:3] == [2, 2, 2]
    assert [r["step"] for r in records(tmp_path)] == [2, 4]
    assert "paused at step 5 (--pause-at-step); the same command continues" in loop.lines


def test_a_time_limit_stops_before_it_runs_out_and_saves(tmp_path):
    loop = CountingLoop(tmp_path)
    stopped = []
    loop.stopped_early = lambda step, total: stopped.append((step, total))
    assert loop.train(Cadence(total=100, log_every=10), time_limit_seconds=base.STOP_MARGIN_SECONDS) == base.PAUSED
    assert stopped == [(10, 100)] and loop.states == [10]


def test_both_backends_warn_of_a_collapsed_discriminator_through_the_shared_loop(tmp_path):
    from configs.pretraining_config import PretrainingConfig

    class CollapsedLoop(CountingLoop):  # recall 0 from step 6 on: a discriminator calling every token original
        def window_metrics(self):
            metrics, tokens, examples = super().window_metrics()
            recall = 0.0 if self.step > 5 else 0.5
            return {**metrics, "disc_recall": recall, "disc_auc": 0.5 + recall}, tokens, examples

    config = PretrainingConfig.create({"model_size": "electra_tiny", "num_warmup_steps": 1})
    loop = CollapsedLoop(tmp_path)
    loop.watch_collapse(config)
    loop.detector.min_steps = 4
    assert loop.train(Cadence(total=10, log_every=2)) == base.DONE
    warnings = [line for line in loop.lines if line.startswith("warning: the discriminator looks collapsed")]
    assert len(warnings) == 1 and "at step 6" in warnings[0]  # the first collapsed window; repeats are spaced out
    electric = CountingLoop(tmp_path / "electric")
    electric.watch_collapse(PretrainingConfig.create({"model_size": "electra_tiny", "electric_objective": True}))
    assert electric.detector is None and electric.lines[0].startswith("Note: no collapse warnings for Electric")


def test_a_resume_keeps_the_metrics_up_to_its_step(tmp_path):
    metrics = MetricsFile(tmp_path / METRICS_FILE)
    for record in ({"split": "train", "step": 2, "x": 1.0}, {"split": "eval", "step": 2, "x": 5.0},
                   {"split": "train", "step": 4, "x": 2.0}, {"split": "run", "num_train_steps": 4}):
        metrics.append(record)
    metrics.keep_until(2)  # resumed from the checkpoint of step 2 (of a run trained further)
    metrics.append({"split": "train", "step": 4, "x": 3.0})
    splits, run = read_metrics(tmp_path)
    assert run is None and [r["step"] for r in splits["train"]] == [2, 4] and len(splits["eval"]) == 1
    # a step logged twice (a kill after it, a resume from before it): the later record is the curve's
    twice = [{"split": "train", "step": 4, "x": 2.0}, {"split": "train", "step": 4, "x": 3.0}]
    assert curves_of(twice, ("x",))["train"]["x"] == [(4, 3.0)]


def test_the_event_files_are_tensorboards_own():
    from common.crc32c import crc32c

    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value (RFC 3720), what the framing uses


def test_tensorflow_reads_the_scalars_written_without_it(tmp_path):
    tf = pytest.importorskip("tensorflow")

    writer = event_file.ScalarWriter(tmp_path)
    writer.scalars(5, {"disc_auc": 0.75, "total_loss": 20.5})
    writer.scalars(10, {"disc_auc": 0.875})
    events = list(tf.compat.v1.train.summary_iterator(str(writer.path)))  # checks every record's CRCs
    assert events[0].file_version == "brain.Event:2"
    values = [(e.step, v.tag, float(tf.make_ndarray(v.tensor)), v.metadata.plugin_data.plugin_name)
              for e in events[1:] for v in e.summary.value]
    assert values == [(5, "disc_auc", 0.75, "scalars"), (5, "total_loss", 20.5, "scalars"),
                      (10, "disc_auc", 0.875, "scalars")]


def imports_of(package):
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                yield from ((path.name, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                yield path.name, node.module


def test_the_loop_imports_no_backend_and_training_jax_nothing_of_training():
    allowed = ("pretrain_loop", "common", "data.progress", "matplotlib")
    product = ("configs", "data", "model", "pretrain", "storage", "training", "training_jax", "finetune",
               "checkpoints", "inference", "tensorflow", "jax", "keras", "numpy")
    found = list(imports_of("pretrain_loop"))
    assert found
    offenders = [f"{name} imports {module}" for name, module in found
                 if module.split(".")[0] in product and not module.startswith(allowed)]
    assert offenders == []
    assert [f"{name} imports {module}" for name, module in imports_of("training_jax")
            if module == "training" or module.startswith("training.")] == []
