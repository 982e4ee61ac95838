"""PretrainingLoop: the cadence of a pretraining run written once; a backend's subclass computes the updates.

training.loop.Run (TensorFlow: tf.distribute, checkpoints) and training_jax.pretrain.Run (JAX: blocks of
updates under one jit, a resumable state file, npz weights) supply the updates, the window's metrics, the
held-out evaluation and the saves; this class decides when each happens, times the windows (steps/s, tokens/s,
ETA), stops at a pause or before a time limit, and writes what both backends write alike: metrics.jsonl (a
line per log window and per evaluation, the run record last), TensorBoard scalars under logs/train and
logs/eval (the same values), and the console lines.
"""
import pathlib
import sys
import time

from pretrain_loop.collapse import ELECTRIC_NOTE, collapse_detector
from pretrain_loop.console import eval_line, train_line
from pretrain_loop.event_file import ScalarWriter
from pretrain_loop.metrics_file import METRICS_FILE, RUN, MetricsFile

DONE, PAUSED = "done", "paused"
STOP_MARGIN_SECONDS = 30.0  # kept before a time limit: the last save and the process's exit
TIMING_KEYS = ("steps_per_second", "tokens_per_second", "examples_per_second")  # a window's, besides its metrics


class PretrainingLoop:
    """The loop around a backend's updates. Subclasses supply run_updates, window_metrics, learning_rate,
    held_out_metrics, save_checkpoint and run_record, and may refine the other hooks; `train` runs the loop."""

    def __init__(self, folder, writes=True):
        self.folder = pathlib.Path(folder)
        self.writes = writes  # False on a worker that is not the chief: it trains and writes nothing
        self.metrics_file = MetricsFile(self.folder / METRICS_FILE, enabled=writes)
        self.scalar_writers = {}
        self.step, self.wall_before, self.last_eval = 0, 0.0, None
        self.compile_seconds = self.timed_start = self.timed_from = None
        self.wall_seconds = self.timed_seconds = 0.0
        self.window_start, self.window_from = time.monotonic(), 0  # what the window's rate is timed from
        self.logged_from = 0  # the step the window's sums start after: the last log (a resume restores it)
        self.detector = None  # watch_collapse: the discriminator-collapse check of every log window

    # ------------------------------------------------------------ what a backend supplies
    def run_updates(self, count):
        """Runs `count` updates, adding their statistics to the window's sums; returns the step reached (an
        update a backend skipped, such as a float16 step with non-finite gradients, does not count)."""
        raise NotImplementedError

    def updates_until(self, step, event):
        """How many updates the next run_updates makes when the next event is at step `event`: all of them."""
        return event - step

    def wait_for_updates(self):
        """Returns once the updates dispatched have run (an asynchronous backend waits here)."""

    def window_metrics(self):
        """(metrics, tokens, examples) of the log window that ends now (the updates after self.logged_from); the
        window's sums start over."""
        raise NotImplementedError

    def learning_rate(self, step):
        raise NotImplementedError

    def held_out_metrics(self, step):
        """(metrics, batches) of an evaluation on the held-out examples, or None when none were read."""
        raise NotImplementedError

    def save_checkpoint(self, step):
        raise NotImplementedError

    def save_state(self, wall_seconds):
        """What a pause or a time limit leaves for the same command to continue from. Nothing by default: a
        backend whose checkpoints are its state resumes from those."""

    def stopped_early(self, step, total):
        """The time limit stopped the run at `step`, before its end."""

    def after_checkpoint(self, wall_seconds):
        """A checkpoint and its evaluation are written (not at the last step)."""

    def after_first_updates(self, seconds):
        """The first updates, their compile included, took `seconds`."""

    def check_window(self, step, metrics):
        """A backend's checks of a window's metrics: warnings, or a stop."""

    def run_record(self):
        """The backend's part of the run record: model, backend, config, device, devices (replicas), versions,
        checkpoint_steps, weights_dtype, step_settings (what the step ran with: its precision, its backend's
        speed options), train_examples, eval_examples."""
        raise NotImplementedError

    def watch_collapse(self, config):
        """Checks every log window for a collapsed discriminator (pretrain_loop.collapse), on both backends;
        an Electric run's metrics do not measure one, which is said once."""
        self.detector = collapse_detector(config)
        if self.detector is None:
            self.say(ELECTRIC_NOTE)

    def say(self, line, error=False):
        print(line, file=sys.stderr if error else sys.stdout, flush=True)

    # ------------------------------------------------------------ the files
    def record(self, split, step, values):
        """One metrics.jsonl line and the same values as TensorBoard scalars under logs/<split>."""
        self.metrics_file.append({"split": split, "step": step, **values})
        if not self.writes:
            return
        if split not in self.scalar_writers:
            self.scalar_writers[split] = ScalarWriter(self.folder / "logs" / split)
        self.scalar_writers[split].scalars(step, values)

    def write_run_record(self, total):
        """The run record, last in metrics.jsonl: the run is complete."""
        self.metrics_file.append({
            "split": RUN, **self.run_record(), "num_train_steps": total,
            "wall_clock_seconds": round(self.wall_seconds, 1), "compile_seconds": round(self.compile_seconds or 0.0, 1),
            "steps_per_second": round((total - self.timed_from) / self.timed_seconds, 2) if self.timed_seconds
            else None})

    # ------------------------------------------------------------ the loop
    def restart_window(self, step, now=None):
        self.window_start, self.window_from = now or time.monotonic(), step

    def log_window(self, step, total):
        """The window's line, record and scalars. Its rate is timed over the steps since the window's clock
        started (after the compile where it can, evaluations and saves left out); tokens/s and examples/s are the
        window's per-step counts at that rate. Timed once the updates have run: an asynchronous backend's host
        gets here as soon as it has dispatched them."""
        self.wait_for_updates()
        rate = (step - self.window_from) / max(time.monotonic() - self.window_start, 1e-9)
        metrics, tokens, examples = self.window_metrics()
        per_second = rate / max(1, step - self.logged_from)
        self.say(train_line(step, total, metrics, rate, tokens * per_second))
        self.check_window(step, metrics)
        warning = self.detector and self.detector.check(step, metrics)
        if warning:
            self.say(warning, error=True)
        self.record("train", step, {**metrics, "learning_rate": self.learning_rate(step), "steps_per_second": rate,
                                    "tokens_per_second": tokens * per_second,
                                    "examples_per_second": examples * per_second})
        self.restart_window(step)
        self.logged_from = step

    def untimed(self, action, *args):
        """Runs `action(*args)` with its time left out of the window's rate. The updates already dispatched are
        waited for first: on an asynchronous backend (JAX) they are still running when the host gets here, and
        the action's wait for them would take the training's time out of the window (the second H200 window
        logged 85 steps/s for a step its benchmark timed at 68)."""
        self.wait_for_updates()
        begun = time.monotonic()
        result = action(*args)
        self.window_start += time.monotonic() - begun
        return result

    def evaluate(self, step):
        """The held-out evaluation at `step`, printed and recorded; its time is left out of the window's rate."""
        result = self.untimed(self.held_out_metrics, step)
        self.last_eval = step
        if result is not None:
            metrics, batches = result
            self.say(eval_line(step, metrics, batches))
            self.record("eval", step, metrics)
        return None if result is None else result[0]

    def train(self, cadence, started=None, time_limit_seconds=0.0, save_every_seconds=0.0):
        """Trains from self.step to cadence.total; returns DONE, or PAUSED after cadence.pause_at or before
        `time_limit_seconds` counted from `started` (a time.monotonic() reading, by default now) run out, having
        saved the state (save_state) to continue from; the state is also saved every `save_every_seconds`."""
        total = cadence.total
        start = time.monotonic()
        started, last_save = started or start, start
        self.restart_window(self.step, start)
        while self.step < total:
            previous = self.step
            step = self.step = self.run_updates(self.updates_until(previous, cadence.next_event(previous)))
            if self.compile_seconds is None:
                self.wait_for_updates()
                now = time.monotonic()
                self.compile_seconds, self.timed_start, self.timed_from = now - start, now, step
                if not cadence.logs(step):  # the first window's rate leaves the compile out where it can
                    self.restart_window(step, now)
                self.after_first_updates(self.compile_seconds)
            if step == previous:
                continue  # every update skipped: no event reached
            if cadence.logs(step):
                self.log_window(step, total)
            if cadence.saves(step):
                self.untimed(self.save_checkpoint, step)
            if cadence.evaluates(step) and self.last_eval != step:
                self.evaluate(step)
            now = time.monotonic()
            wall = self.wall_before + now - start
            if cadence.saves(step) and step < total:
                self.after_checkpoint(wall)
            if step == cadence.pause_at and step < total:
                self.save_state(wall)
                self.say(f"paused at step {step} (--pause-at-step); the same command continues")
                return PAUSED
            # Before the limit: a save takes seconds, and the next window must fit as well.
            window = (now - self.timed_start) / max(1, step - self.timed_from) * cadence.log_every
            if time_limit_seconds and step < total and now - started + 2 * window + STOP_MARGIN_SECONDS > \
                    time_limit_seconds:
                self.save_state(wall)
                self.stopped_early(step, total)
                return PAUSED
            if save_every_seconds and now - last_save > save_every_seconds and step < total:
                self.save_state(wall)
                last_save = time.monotonic()
        now = time.monotonic()
        self.wall_seconds = self.wall_before + now - start
        self.timed_seconds = now - self.timed_start if self.timed_start else 0.0
        return DONE
