"""Pretraining under KERAS_BACKEND=jax: run_pretraining.py's JAX trainer, in pieces that resume where they stopped.

    KERAS_BACKEND=jax python run_pretraining.py --model-name electra_small   # training_jax.from_dataset

What trains is what run_pretraining.py trains under TensorFlow: the run's plan (training_jax.run_plan) holds the
config run_pretraining.py resolved, the dataset's examples as arrays, and the steps to log, evaluate and checkpoint
at; model, masking, sampling, losses, optimizer and schedule are pretrain.builder's; one update is
training_jax.step's (value_and_grad + optimizer.stateless_apply under one jit). What differs is the outer loop:
batches are drawn from NumPy arrays of the dataset's examples
(a fresh seeded permutation per epoch) instead of tf.data, and the masking/sampling/dropout randomness
comes from the model's own SeedGenerator instead of the TF loop's per-step seeds (same distributions,
another stream).

Pieces: the whole state (training_jax.state) is saved to --state-dir every --save-every-minutes, at the
end, and before --time-limit-minutes runs out; the next run of the same command continues from it and
computes the same updates as a run that never stopped. When the state is gone (a new machine), the run
starts over at step 0 and says so.

Writes to the options' `out`, a model folder (storage.model_folder) that run_finetuning.py (as
<data-dir>/models/<name>) and checkpoints.export --model-dir read as it is:
  ckpt-<step>.index, .data-*  every model weight by its Keras path at each of the plan's checkpoint steps, in
                      TensorFlow's checkpoint format written without TensorFlow (storage.checkpoint_bundle;
                      float weights rounded to float16 by default, --weights-dtype; readers widen them)
  config.json, vocab.txt, checkpoint  the config that trained (as sized), the plan's vocabulary, and the
                      state file naming the checkpoints, written after each checkpoint's files
  metrics.jsonl       one JSON line per log window ({"split": "train", "step", metric...}, averaged over
                      the window) and per evaluation on the held-out examples ({"split": "eval", ...}); last,
                      {"split": "run", ...}: the config, device, steps, wall-clock and throughput, which
                      marks the run complete (pretrain_loop.metrics_file: run_pretraining.py writes the same)
  logs/train, logs/eval  the same values as TensorBoard scalars (pretrain_loop.event_file, no TensorFlow)
A run holds the folder's lock (storage.folder_lock) while it writes: a second run on the same --out stops at
once with one line naming the first (exit 2).

The step's precision and speed options (training_jax.speed_settings) depend on the device: on a GPU or TPU
mixed_bfloat16 and every option proven to give the same update or the same distributions (rbg bits, the flat
AdamW update, bfloat16 attention, blocks of updates per dispatch; on an NVIDIA GPU the fused attention, measured
faster there); on a CPU the original's float32 and none.
The flags override either; the log's first lines and the run record name what was resolved.

The cadence of logging, evaluating, saving, pausing and stopping before the time limit is
pretrain_loop.base.PretrainingLoop's, which run_pretraining.py's loop shares; this module supplies the
updates (blocks of K under one jit that stop at each event's exact step), the state and the weights.
"""
import argparse
import json
import pathlib
import sys
import time

from common.errors import InputError
from pretrain_loop.base import DONE, PAUSED, PretrainingLoop
from pretrain_loop.cadence import Cadence
from training_jax import data_parallel, fit, speed_settings
from training_jax import state as state_lib
from training_jax.arrays import load_packed, unpack_examples
from training_jax.weights import save_checkpoint

TRAIN_ARRAYS = "train.npz"
EVAL_ARRAYS = "eval.npz"
COMPILE_CACHE = "jax_cache"  # in the run's work folder: compiled programs shared by the pieces of its runs


def build(config_path, settings=None):
    """(config, pretrainer, optimizer) computing in the settings' precision, the step's options set
    (training_jax.speed_settings; None: the CPU's defaults, the config's precision)."""
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_for_training

    config = PretrainingConfig.load(config_path)
    settings = settings or speed_settings.resolve("cpu", config.mixed_precision)
    config = speed_settings.with_precision(config, settings)
    model, optimizer = build_for_training(config)
    speed_settings.apply_to_step(settings, model, optimizer)
    return config, model, optimizer


def step_settings(args, platform, config_path):
    """The step's settings for `platform` from the flags and the config's own precision (the CPU's default)."""
    configured = json.loads(pathlib.Path(config_path).read_text()).get("mixed_precision", "float32")
    return speed_settings.resolve_from_args(args, platform, configured)


def add_stats(a, b):
    import jax

    return jax.tree_util.tree_map(lambda x, y: x + y, a, b)


def make_functions(model, optimizer, replicated=None):
    """(train, evaluate, zero_stats): train (jitted) runs a block of updates, one per row of its [K, batch]
    indices, gathering each batch from the device-resident examples and adding each step's metric
    statistics to a running sum: one dispatch and one host transfer (the indices) per K steps instead of
    per step. K = 1 is the plain update; K > 1 scans it (lax.scan), which computes the same updates bit
    for bit (tests/test_jax_pretraining.py). zero_stats(state, examples, batch_size) is the sum's start.
    `replicated`: over several devices (training_jax.data_parallel), the sharding every output keeps, so that the
    next call's inputs are laid out as the first's and nothing compiles twice."""
    import jax
    import keras

    from training_jax.step import make_step_fn, with_sized_schedule

    sized_schedule = with_sized_schedule(optimizer)
    step_fn = make_step_fn(model, optimizer)
    trainable_vars, non_trainable_vars = model.trainable_variables, model.non_trainable_variables

    def one_step(state, stats_sum, examples, indices, schedule_steps):
        # [T, W] of the schedule are inputs, not constants: a run sized after compiling keeps its program
        if sized_schedule is not None:
            sized_schedule.steps = schedule_steps
        batch = {key: value[indices] for key, value in examples.items()}
        state, loss, stats = step_fn(state, batch)
        return state, add_stats(stats_sum, stats), loss

    def train(state, stats_sum, examples, block_indices, schedule_steps):
        if block_indices.shape[0] == 1:
            return one_step(state, stats_sum, examples, block_indices[0], schedule_steps)

        def body(carry, indices):
            state, stats_sum, loss = one_step(*carry, examples, indices, schedule_steps)
            return (state, stats_sum), loss

        (state, stats_sum), losses = jax.lax.scan(body, (state, stats_sum), block_indices)
        return state, stats_sum, losses[-1]

    def evaluate(trainable, non_trainable, batch):
        mapping = list(zip(trainable_vars, trainable)) + list(zip(non_trainable_vars, non_trainable))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            stats = model.compute_losses(batch, training=False).stats
        return stats, [scope.get_current_value(v) for v in non_trainable_vars]

    def zero_stats(state, examples, batch_size):
        batch = {key: jax.ShapeDtypeStruct((batch_size, *value.shape[1:]), value.dtype)
                 for key, value in examples.items()}
        shapes = jax.eval_shape(step_fn, state, batch)[2]  # the config's own schedule: only shapes matter
        return jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), shapes)

    if replicated is not None:
        return (jax.jit(train, donate_argnums=(0, 1), out_shardings=replicated),
                jax.jit(evaluate, out_shardings=replicated), zero_stats)
    return jax.jit(train, donate_argnums=(0, 1)), jax.jit(evaluate), zero_stats


def default_block_steps(platform, log_every, most=32):
    """Updates per dispatch: 1 on the CPU (no launch overhead worth a second program), else the largest
    divisor of the log window up to `most`, so that log windows end on block boundaries."""
    if platform == "cpu":
        return 1
    return max(k for k in range(1, most + 1) if log_every % k == 0)


class Batches:
    """Index batches over n examples: a fresh seeded permutation per epoch, the remainder carried over.
    Its position (the generator's state and the indices not yet used) is saved with the run's state."""

    def __init__(self, n, batch_size, seed):
        import numpy as np

        self.n, self.batch_size = n, batch_size
        self.rng = np.random.default_rng(seed)
        self.pending = np.empty(0, "int32")

    def next(self):
        import numpy as np

        while len(self.pending) < self.batch_size:
            self.pending = np.concatenate([self.pending, self.rng.permutation(self.n).astype("int32")])
        indices, self.pending = self.pending[:self.batch_size], self.pending[self.batch_size:]
        return indices

    def position(self):
        return {"rng": self.rng.bit_generator.state, "pending": self.pending.tolist()}

    def restore(self, position):
        import numpy as np

        self.rng.bit_generator.state = position["rng"]
        self.pending = np.asarray(position["pending"], "int32")


class Run(PretrainingLoop):
    """One model's training by its plan (training_jax.run_plan) with `args`' options (run_options): the device
    state, its blocks of updates, its pieces and its files; the cadence (log windows, evaluations, saves, pause,
    time limit, metrics) is PretrainingLoop's."""

    def __init__(self, args, plan):
        import jax
        import keras
        import numpy as np

        super().__init__(args.out, writes=jax.process_index() == 0)  # over several processes process 0 writes
        self.args = args
        self.plan = plan  # as it trains: the sized one once a --fit-minutes run sized itself (fit.sized_plan)
        self.sized = plan.sized
        self.checkpoint_steps = list(plan.checkpoint_steps)
        self.log_every, self.eval_every = plan.log_every, plan.eval_every
        self.device = jax.devices()[0]
        self.devices = data_parallel.choose_devices(args.devices)
        config_path = plan.config_file
        self.settings = step_settings(args, speed_settings.platform_of(self.device), config_path)
        self.config, self.model, self.optimizer = build(config_path, self.settings)
        self.placement = data_parallel.Placement(self.devices, self.config.train_batch_size)
        if self.settings.fused_attention and self.placement.mesh is not None:  # the kernels split along the batch
            from training_jax.step import use_fused_attention

            use_fused_attention(self.model, True, mesh=self.placement.mesh)
        if args.init_from:  # before the state is taken from the model: the run starts from these weights
            self.init_from_weights(args.init_from)
        self.state_dir = args.state_dir or plan.work / f"state_{plan.model}"  # each process's own (the caller's)
        config = self.config
        self.log(f"device {self.placement.describe()}; jax {jax.__version__}, keras "
                 f"{keras.__version__}; {config.num_train_steps} steps of batch {config.train_batch_size}, "
                 f"checkpoints {fit.steps_list(self.checkpoint_steps)}")
        self.log(f"step: {self.settings.describe()}")

        train_examples = unpack_examples(load_packed(plan.train_arrays))
        self.example_tokens = np.asarray(train_examples["input_mask"]).sum(axis=1)  # for tokens/s, on the host
        self.train_examples = self.placement.put(train_examples)
        eval_examples = unpack_examples(load_packed(plan.eval_arrays))
        self.num_train = int(self.train_examples["input_ids"].shape[0])
        size = config.eval_batch_size
        self.eval_batches = [self.placement.put({k: v[i:i + size] for k, v in eval_examples.items()})
                             for i in range(0, len(eval_examples["input_ids"]) - size + 1, size)
                             ][:config.num_eval_steps]
        self.log(f"{self.num_train} training examples, {len(self.eval_batches)} held-out batches of {size}")
        self.train_fn, self.evaluate_fn, zero_stats = make_functions(
            self.model, self.optimizer, self.placement.replicated if self.placement.mesh else None)
        self.block_steps = self.settings.steps_per_dispatch or default_block_steps(self.device.platform,
                                                                                   self.log_every)
        # Everything committed to the device up front: the jitted functions' outputs are, and inputs placed
        # otherwise would make the second call compile again (seen: the compile time twice over).
        self.state = self.placement.put(([v.value for v in self.model.trainable_variables],
                                         [v.value for v in self.model.non_trainable_variables],
                                         [v.value for v in self.optimizer.variables]))
        # The same masks at every evaluation; copies, since the training state's buffers are donated.
        self.eval_state0 = self.placement.put(
            [jax.numpy.array(v.value, copy=True) for v in self.model.non_trainable_variables])
        self.batches = Batches(self.num_train, config.train_batch_size, config.seed)
        self.stats_sum = self.placement.put(zero_stats(self.state, self.train_examples, config.train_batch_size))
        self.stats_tree = jax.tree_util.tree_structure(self.stats_sum)
        self.set_schedule_steps()
        self.window_tokens, self.last_loss = 0, None
        self.trial = None  # a copy of the initial state that --fit-minutes measures on

    def init_from_weights(self, files):
        """Every model weight (seed states included) from an earlier run's model folder or checkpoint (or its
        older .npz files); the optimizer's moments start fresh (they are not copied back from the GPU
        machine), so the schedule warms up again."""
        from training_jax.weights import assign_weights, read_weight_files

        weights = {key: value for key, (value, _) in read_weight_files(files, self.args.init_flag).items()}
        assign_weights(self.model, weights, files[0])
        self.log(f"weights from {', '.join(str(f) for f in files)}; fresh optimizer moments")

    def set_schedule_steps(self):
        import numpy as np

        steps = np.array([self.config.num_train_steps, self.config.num_warmup_steps], "float32")
        self.schedule_steps = self.placement.put(steps)

    def train_steps(self, state, stats_sum, count=None):
        """`count` updates (default one block) in one dispatch; the batch indices are its one transfer."""
        import numpy as np

        count = count or self.block_steps
        indices = np.stack([self.batches.next() for _ in range(count)])
        self.window_tokens += int(self.example_tokens[indices].sum())
        return self.train_fn(state, stats_sum, self.train_examples, self.placement.put_indices(indices),
                             self.schedule_steps)

    def log(self, message):
        print(f"[{time.strftime('%H:%M:%S')}] {self.plan.model}: {message}", flush=True)

    def say(self, line, error=False):
        self.log(line)

    def cadence(self):
        """Logs every log_every steps, evaluates every eval_every and at each checkpoint, writes weights there."""
        return Cadence(self.config.num_train_steps, self.log_every, save_steps=tuple(self.checkpoint_steps),
                       eval_every=self.eval_every, eval_steps=tuple(self.checkpoint_steps),
                       pause_at=self.args.pause_at_step)

    # ------------------------------------------------------------ the state between pieces
    def _groups(self):
        import jax

        trainable, non_trainable, optimizer_vars = self.state
        return {"trainable": trainable, "non_trainable": non_trainable, "optimizer": optimizer_vars,
                "eval_non_trainable": self.eval_state0, "stats": jax.tree_util.tree_leaves(self.stats_sum)}

    def save_state(self, wall_seconds):
        groups = self.placement.fetch(self._groups())
        metadata = {"batches": self.batches.position(), "metrics_bytes": self.metrics_file.size(),
                    "wall_seconds": wall_seconds, "window_tokens": self.window_tokens,
                    "logged_from": self.logged_from}
        state_lib.save_state(self.state_dir, self.step, groups, metadata)

    def resume(self):
        """Continue from the saved state, or start at step 0 (saying so when an earlier piece is lost)."""
        import jax

        saved = state_lib.load_state(self.state_dir)
        if saved is None:
            if self.metrics_file.size():
                self.log(f"no saved state in {self.state_dir}: the earlier pieces are lost, starting over at "
                         "step 0")
            self.metrics_file.start_over()
            return
        step, groups, metadata = saved
        try:
            state_lib.check_matches(self.state_dir / state_lib.STATE_FILE, groups,
                                    self.placement.fetch(self._groups()))
        except ValueError as error:
            raise InputError(str(error)) from None
        if self.writes and self.metrics_file.size() < metadata["metrics_bytes"]:
            raise InputError(f"{self.metrics_file.path} is shorter than when the state in {self.state_dir} was "
                             f"saved; pass the --out of that run, or delete {self.state_dir} to start over")
        self.metrics_file.truncate(metadata["metrics_bytes"])  # lines written after the save are written again
        self.state = self.placement.put((groups["trainable"], groups["non_trainable"], groups["optimizer"]))
        self.eval_state0 = self.placement.put(groups["eval_non_trainable"])
        self.stats_sum = self.placement.put(jax.tree_util.tree_unflatten(self.stats_tree, groups["stats"]))
        self.batches.restore(metadata["batches"])
        self.step, self.wall_before = step, metadata["wall_seconds"]
        self.window_tokens = metadata.get("window_tokens", 0)  # the window's so far (states saved before: none)
        self.logged_from = metadata.get("logged_from", step)
        self.log(f"resumed at step {step} from {self.state_dir}")

    # ------------------------------------------------------------ the loop's hooks (pretrain_loop.base)
    def run_updates(self, count):
        self.state, self.stats_sum, self.last_loss = self.train_steps(self.state, self.stats_sum, count)
        return self.step + count

    def updates_until(self, step, event):
        """A whole block, or single steps where an event comes sooner (so that each happens at its exact step)."""
        return self.block_steps if event - step >= self.block_steps else 1

    def wait_for_updates(self):
        if self.last_loss is not None:  # none before the first update (the evaluation at step 0)
            self.last_loss.block_until_ready()

    def after_first_updates(self, seconds):
        self.log(f"first step (compile + run) {seconds:.1f} s")
        self.log(f"{self.block_steps} update(s) per dispatch")  # the other settings: the "step:" line above

    def window_metrics(self):
        import jax

        values = self.model.finalize_metrics(self.placement.fetch(self.stats_sum))
        self.stats_sum = jax.tree_util.tree_map(jax.numpy.zeros_like, self.stats_sum)
        tokens, self.window_tokens = self.window_tokens, 0
        return values, tokens, (self.step - self.logged_from) * self.config.train_batch_size

    def check_window(self, step, metrics):
        import numpy as np

        if not np.isfinite(metrics["total_loss"]):
            sys.exit(f"error: {self.plan.model}: the loss is not finite at step {step}")

    def learning_rate(self, step):
        from training_jax.step import SizedSchedule

        schedule = self.optimizer._learning_rate
        if isinstance(schedule, SizedSchedule):  # the run's own length (sized or not), not the compiled one's
            return float(schedule.schedule.rate(step, self.config.num_train_steps, self.config.num_warmup_steps))
        return float(schedule(step) if callable(schedule) else schedule)

    def held_out_metrics(self, step):
        if not self.eval_batches:  # no held-out shard (do_eval off, or a one-shard dataset)
            return None
        return self.evaluate_held_out(), len(self.eval_batches)

    def save_checkpoint(self, step):
        self.write_weights(step)

    def after_checkpoint(self, wall_seconds):
        if self.args.state_at_checkpoints:  # a kill after a checkpoint resumes from it, as a TensorFlow run does
            self.save_state(wall_seconds)

    def stopped_early(self, step, total):
        if self.args.fit_minutes and step not in self.checkpoint_steps:
            self.write_weights(step)  # a sized run cut short still brings back its newest weights
        minutes = self.args.time_limit_minutes or self.args.fit_minutes  # the hard stop of either bound
        self.log(f"stopped at step {step}/{total} to stay inside {minutes:g} minutes; "
                 "run the same command again to continue")

    def run_record(self):
        import jax
        import keras

        return {"model": self.plan.model, "backend": "jax", "config": self.config.to_dict(),  # as sized
                "device": self.placement.describe(), "devices": self.placement.count,
                "versions": {"jax": jax.__version__, "keras": keras.__version__},
                "checkpoint_steps": self.checkpoint_steps, "weights_dtype": self.args.weights_dtype,
                "step_settings": self.settings.to_dict(), "train_examples": self.num_train,
                "eval_examples": len(self.eval_batches) * self.config.eval_batch_size}

    def run(self, started=None):
        """Trains until the last step, --pause-at-step, or the time limit counted from `started` (a
        time.monotonic() reading: the process's start, so that building and compiling count); returns DONE
        or PAUSED."""
        args = self.args
        save_every = args.save_every_minutes * 60
        if self.placement.processes > 1:  # every process must stop and save at the same step: no clock decides
            if args.fit_minutes or args.time_limit_minutes:
                raise InputError("a time box (--max-minutes, --fit-minutes, --time-limit-minutes): over several "
                                 "processes each would stop by its own clock; give a step count (the config's "
                                 "num_train_steps, or --pause-at-step)")
            save_every = float("inf")  # the state saved at a pause and at the end, the same step on all
        if self.writes:
            args.out.mkdir(parents=True, exist_ok=True)
        self.resume()
        total = self.config.num_train_steps
        if self.step >= total:
            self.log(f"done already (step {self.step}); delete {self.state_dir} and {args.out} to train again")
            return DONE
        started = started or time.monotonic()
        if args.fit_minutes and not self.sized:
            if self.step:
                raise InputError(f"{self.state_dir}: a run that was not sized is saved there; delete it to start "
                                 "over with --fit-minutes, or continue it without")
            fit.size_run(self, started, args.fit_minutes, args.measure_steps)
            self.sized, total = True, self.config.num_train_steps
            self.window_tokens = 0  # the measuring's
            self.evaluate(0)
        self.watch_collapse(self.config)
        limit = args.time_limit_minutes * 60 if args.time_limit_minutes else None
        if args.fit_minutes and not limit:
            limit = args.fit_minutes * 60 + fit.RESERVE_SECONDS  # the sized run ends before; this is the hard stop
        if self.train(self.cadence(), started, limit, save_every) == PAUSED:
            return PAUSED
        self.write_run_record(total)
        self.save_state(self.wall_seconds)  # the finished state, run record included: a rerun says "done"
        self.log(f"done: {total} steps, {self.wall_seconds:.0f} s of training over all pieces")
        return DONE

    def measure(self, steps):
        """(steps/s, seconds of the first step: compile and run) of the update, on this run's initial state,
        which it consumes: a Run that measured does not train."""
        start = time.monotonic()
        self.state, self.stats_sum, loss = self.train_steps(self.state, self.stats_sum)
        loss.block_until_ready()
        compiled = time.monotonic()
        blocks = max(1, -(-steps // self.block_steps))
        for _ in range(blocks):
            self.state, self.stats_sum, loss = self.train_steps(self.state, self.stats_sum)
        loss.block_until_ready()
        return blocks * self.block_steps / (time.monotonic() - compiled), compiled - start

    # ------------------------------------------------------------ --fit-minutes (training_jax.fit)
    def compile_and_time_evaluation(self):
        """(seconds of the first update, seconds of one held-out evaluation after its compile), on copies of
        the initial state, which stays as it is."""
        import jax

        copy = lambda tree: jax.tree_util.tree_map(lambda x: jax.numpy.array(x, copy=True), tree)  # noqa: E731
        start = time.monotonic()
        self.trial = (copy(self.state), copy(self.stats_sum))
        self.trial = self.train_steps(*self.trial)[:2]
        jax.block_until_ready(self.trial)
        compiled = time.monotonic()
        self.evaluate_held_out()  # its compile
        evaluated = time.monotonic()
        self.evaluate_held_out()
        return compiled - start, time.monotonic() - evaluated

    def measure_rate(self, steps, warm=3):
        """steps/s of the update on the trial copy (then dropped); the batches start over afterwards."""
        import jax

        warm_blocks, blocks = (max(1, -(-n // self.block_steps)) for n in (warm, steps))
        for index in range(warm_blocks + blocks):
            if index == warm_blocks:
                jax.block_until_ready(self.trial)
                start = time.monotonic()
            self.trial = self.train_steps(*self.trial)[:2]
        jax.block_until_ready(self.trial)
        rate = blocks * self.block_steps / (time.monotonic() - start)
        self.trial = None
        self.batches = Batches(self.num_train, self.config.train_batch_size, self.config.seed)
        return rate

    def resize(self, fields, config_path):
        """The run becomes the one `fields` (training_jax.fit.sized_fields) describe; its config is written to
        config_path."""
        import dataclasses

        self.config = dataclasses.replace(self.config, **fields["config"])
        self.config.save(config_path)
        self.checkpoint_steps, self.eval_every = fields["checkpoint_steps"], fields["eval_every"]
        self.set_schedule_steps()

    def evaluate_held_out(self):
        if not self.eval_batches:
            return None
        non_trainable, summed = self.eval_state0, None
        for batch in self.eval_batches:
            stats, non_trainable = self.evaluate_fn(self.state[0], non_trainable, batch)
            summed = stats if summed is None else add_stats(summed, stats)
        return self.model.finalize_metrics(self.placement.fetch(summed))

    def write_weights(self, step):
        if not self.writes:  # process 0 writes the model folder
            return
        trainable, non_trainable = self.placement.fetch(self.state[:2])
        for variable, value in zip(self.model.trainable_variables, trainable):
            variable.assign(value)
        for variable, value in zip(self.model.non_trainable_variables, non_trainable):
            variable.assign(value)
        vocab = self.plan.vocab_file
        prefix = save_checkpoint(self.args.out, step, self.model, self.args.weights_dtype, self.config,
                                 vocab if vocab and pathlib.Path(vocab).is_file() else None,
                                 keep=self.args.keep_checkpoints or None)
        self.log(f"saved {pathlib.Path(prefix).name}")


def add_run_arguments(parser):
    """The run's options (Run's `args`), as flags: the JAX trainer's own, beside the plan."""
    parser.add_argument("--state-dir", type=pathlib.Path, default=None,
                        help="where the resumable state is kept (default <work>/state_<model>); hundreds of MB "
                             "at electra_small, so keep it out of what is copied back")
    parser.add_argument("--time-limit-minutes", type=float, default=0.0,
                        help="save the state and stop before this many minutes (0: no limit)")
    parser.add_argument("--save-every-minutes", type=float, default=3.0)
    parser.add_argument("--keep-checkpoints", type=int, default=0, metavar="N",
                        help="keep only the newest N checkpoints in --out (0: all)")
    parser.add_argument("--state-at-checkpoints", action="store_true",
                        help="also save the resumable state at each checkpoint (run_pretraining.py under JAX)")
    parser.add_argument("--pause-at-step", type=int, default=0,
                        help="save the state and stop after this step (a planned interruption)")
    parser.add_argument("--weights-dtype", default="float16", choices=("float16", "float32"))
    parser.add_argument("--fit-minutes", type=float, default=0.0,
                        help="set the run's length after compiling, from its measured speed, so that it ends, "
                             "saved, this many minutes after the process started (training_jax/fit.py; the "
                             "plan's \"fit\" block says with which models it shares the device)")
    parser.add_argument("--measure-steps", type=int, default=50, help="--fit-minutes: the steps it times")
    parser.add_argument("--init-from", type=pathlib.Path, nargs="+", default=None, metavar="WEIGHTS",
                        help="start from an earlier run's weights: its model folder (--out) or a checkpoint prefix "
                             "(…/ckpt-N), or the older .npz files (weights-<step>.npz or all its shards), with fresh "
                             "optimizer moments; a saved state of this run still wins")
    parser.set_defaults(init_flag="--init-from")  # the flag its messages name (run_pretraining.py: --init-checkpoint)
    speed_settings.add_step_flags(parser)
    add_device_arguments(parser)


def add_device_arguments(parser):
    """Where the run trains: the local devices, and over several hosts, this process's place (run_pretraining.py's
    flags under JAX too)."""
    parser.add_argument("--devices", type=int, default=None, metavar="N",
                        help="train on the first N local devices, data parallel (the global batch split over them; "
                             "default: every local device)")
    parser.add_argument("--num-processes", type=int, default=None, metavar="N",
                        help="train over N processes (hosts), one per host, all devices of all of them data parallel "
                             "(jax.distributed; default: JAX_NUM_PROCESSES, else 1; docs/jax_gpu.md)")
    parser.add_argument("--process-id", type=int, default=None, metavar="I",
                        help="this process's index, 0 to N-1; process 0 writes the model folder (default: "
                             "JAX_PROCESS_ID)")
    parser.add_argument("--coordinator-address", default=None, metavar="HOST:PORT",
                        help="process 0's host and a free port (default: JAX_COORDINATOR_ADDRESS)")


def run_options(out, **values):
    """Run's options as add_run_arguments' defaults with `values` (by their destinations) in their place."""
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    options = parser.parse_args([])
    unknown = sorted(set(values) - set(vars(options)))
    if unknown:
        raise TypeError(f"run_options: no such option(s) {unknown}")
    vars(options).update(values, out=pathlib.Path(out))
    return options


def without_tensorflow():
    """Keeps this process from importing TensorFlow where it is installed: Keras imports it only to seed it
    (keras.utils.set_random_seed), which costs seconds and memory per process, and the JAX path must run
    as it runs on machines without it. A process that has imported TensorFlow already keeps it. Keras, if not
    imported yet, then imports without scikit-learn and matplotlib (common.quiet.lean_keras_import)."""
    from common.quiet import lean_keras_import

    sys.modules.setdefault("tensorflow", None)
    lean_keras_import()
