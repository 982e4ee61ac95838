"""The pretraining run under TensorFlow: build under the strategy, restore, train in host loops, save checkpoints.

When it logs, evaluates and saves, and what it writes besides checkpoints (metrics.jsonl, TensorBoard scalars,
the console lines, the curves), is pretrain_loop.base.PretrainingLoop's, which the JAX run shares.
"""
import pathlib
import sys

import keras
import numpy as np
import tensorflow as tf

from common.matmul_gradients import route_weight_gradients
from data import tfrecords
from pretrain.builder import build_for_training
from pretrain.metrics import add_stats
from configs.loading import save_json
from configs.resolve import changed_fields
from pretrain_loop.base import PretrainingLoop
from pretrain_loop.cadence import Cadence
from storage import model_folder
from training import checkpointing, curves, strategy as strategy_lib
from training.step import EXAMPLES, SKIPPED, TOKENS, PretrainingSteps


# Ends the line for a damaged shard: the error stops the run before any further save, so the model
# folder's checkpoints are those of before and a resume after the rebuild continues from the last one.
RESUME_AFTER_REBUILD = ", then run the same command again to resume from the last checkpoint"


def resolve_jit(use_xla, device_kind):
    """XLA on GPU/TPU when asked. On CPU it is off: measured slower there for these models
    (docs/benchmarks.md, "Pretraining step speed")."""
    return bool(use_xla) and device_kind != "CPU"


def build(config, strategy):
    with strategy.scope():
        return build_for_training(config)


def train_dataset(strategy, config, dataset_dir, metadata, files, seed):
    micro_batch = config.train_batch_size // config.gradient_accumulation_steps

    def dataset_fn(context):
        return tfrecords.pretraining_dataset(dataset_dir, context.get_per_replica_batch_size(micro_batch),
                                             files=files, input_context=context, training=True, seed=seed,
                                             metadata=metadata)
    return strategy.distribute_datasets_from_function(dataset_fn)


def eval_dataset(strategy, config, dataset_dir, metadata, files):
    def dataset_fn(context):
        return tfrecords.pretraining_dataset(dataset_dir, context.get_per_replica_batch_size(
            config.eval_batch_size), files=files, input_context=context, training=False, metadata=metadata)
    options = tf.distribute.InputOptions(experimental_fetch_to_device=True)
    return strategy.distribute_datasets_from_function(dataset_fn, options)


def to_numpy(stats):
    return {key: np.asarray(value) for key, value in stats.items()}


class Run(PretrainingLoop):
    """One pretraining run in one process (of one or several workers): tf.distribute updates and checkpoints;
    the cadence (log windows, evaluations, saves, metrics.jsonl, TensorBoard) is PretrainingLoop's."""

    def __init__(self, config, strategy, dataset_dir, metadata, train_files, eval_files, vocab_file,
                 init_checkpoint=None, saved_config=None, stream=None):
        self.chief = strategy_lib.is_chief(strategy)
        super().__init__(config.model_dir, writes=self.chief)
        self.config = config
        self.strategy = strategy
        self.dataset_dir, self.metadata = dataset_dir, metadata
        self.train_files, self.eval_files = train_files, eval_files
        self.model_dir = pathlib.Path(config.model_dir)
        self.stream = stream or sys.stdout
        self.vocab_file = vocab_file
        self.init_checkpoint = init_checkpoint
        self.saved_config = saved_config
        self.window, self.skipped, self.eval_examples = None, 0.0, 0

    def say(self, line, error=False):
        if self.chief:
            print(line, file=sys.stderr if error else self.stream, flush=True)

    def write_model_folder(self):
        if not self.chief:
            return
        model_folder.write_config(self.model_dir, self.config)
        model_folder.copy_vocab(self.model_dir, self.vocab_file, replace=False)  # a resumed run's was checked

    def cadence(self):
        """Saves every save_checkpoints_steps, at the extra checkpoint steps and at the end; evaluates (do_eval)
        every eval_every_steps (default: at each save) and at the extra steps."""
        config = self.config
        extra = tuple(config.extra_checkpoint_steps)
        eval_every = (config.eval_every_steps or config.save_checkpoints_steps) if config.do_eval else 0
        return Cadence(config.num_train_steps, config.iterations_per_loop, save_every=config.save_checkpoints_steps,
                       save_steps=extra + (config.num_train_steps,), eval_every=eval_every,
                       eval_steps=extra if config.do_eval else ())

    def run(self):
        config, strategy, say = self.config, self.strategy, self.say
        jit = resolve_jit(config.use_xla, strategy_lib.device_kind())
        eigen = strategy_lib.device_kind() == "CPU" and route_weight_gradients()  # before the step is traced
        pretrainer, optimizer = self.pretrainer, self.optimizer = build(config, strategy)
        steps = self.steps = PretrainingSteps(strategy, pretrainer, optimizer, seed=config.seed,
                                              accumulation_steps=config.gradient_accumulation_steps, jit_compile=jit,
                                              dynamic_loss_scale=config.mixed_precision == "mixed_float16")
        checkpoint = tf.train.Checkpoint(model=model_folder.model_trackable(pretrainer), optimizer=optimizer,
                                         **steps.trackables())
        checkpoints = self.checkpoints = checkpointing.Checkpoints(
            self.model_dir, checkpoint, config.keep_checkpoint_max, chief=self.chief,
            worker_id=strategy_lib.worker_id(strategy))
        restored = self.restore(pretrainer, checkpoints)
        if restored:
            if restored != checkpoints.listed_latest:
                state_file = self.model_dir / model_folder.STATE_FILE
                say(f"Note: {checkpoints.listed_latest} is listed in {state_file} but its files are gone; resuming "
                    "from the newest checkpoint still there.")
            say(f"Resuming from {restored} at step {int(optimizer.iterations.numpy())}.")
            changed = changed_fields(self.saved_config, config)
            if changed:
                say(f"Note: these settings differ from the saved run and apply from now on: {', '.join(changed)}")
        elif self.init_checkpoint:
            model_folder.restore_weights(pretrainer, self.init_checkpoint)
            say(f"Starting from the weights of {self.init_checkpoint} with a fresh optimizer.")
        self.write_model_folder()
        step = self.step = self.logged_from = int(optimizer.iterations.numpy())
        if restored:  # the windows and evaluations after the checkpoint are logged again
            self.metrics_file.keep_until(step)
        else:
            self.metrics_file.start_over()
        total = config.num_train_steps
        params = sum(int(np.prod(v.shape)) for v in pretrainer.trainable_variables)
        xla = self.xla = 'on' if jit else 'elementwise only' if config.xla_fuse_elementwise else 'off'
        say(f"Pretraining {config.model_name} ({config.model_size}, {params:,} parameters) on "
            f"{strategy_lib.describe(strategy)}: global batch {config.train_batch_size} × "
            f"{config.max_seq_length} tokens, {total} steps, {config.mixed_precision}, XLA {xla}, "
            + ("wide weight gradients on Eigen's kernels, " if eigen else "") +
            f"{len(self.train_files)} training shard(s)"
            + (f", {len(self.eval_files)} eval shard(s)" if config.do_eval else "") + f"; writing to {self.model_dir}")
        if config.do_eval and self.eval_files == self.train_files:
            say("Note: the dataset has one shard, so evaluation reads training data; build more shards to hold "
                "one out.")
        self.watch_collapse(config)
        self.iterator = iter(train_dataset(strategy, config, self.dataset_dir, self.metadata, self.train_files,
                                           seed=config.seed + step))
        self.train(self.cadence())
        step = self.step
        if int(optimizer.iterations.numpy()) == step and checkpoints.latest is None:
            checkpoints.save(step)
        if config.do_eval and self.last_eval != step:
            self.evaluate(step)
        checkpoints.cleanup()
        self.write_run_record(total)
        say(f"Done: the model (config.json, vocabulary, checkpoints) is in {self.model_dir}; TensorBoard logs in "
            f"{self.model_dir / 'logs'} (tensorboard --logdir {self.model_dir / 'logs'}).")
        if self.chief:
            say(self.draw_curves())
        return step

    # ------------------------------------------------------------ the loop's hooks (pretrain_loop.base)
    def run_updates(self, count):
        with tfrecords.naming_damaged_shards(self.train_files, RESUME_AFTER_REBUILD):
            stats = to_numpy(self.steps.train(self.iterator, count, self.config.max_seq_length))
        # Updates, not loop iterations: a float16 step skipped for non-finite gradients does not
        # count (optimizer.iterations stays), so the run makes num_train_steps real updates and a
        # checkpoint's number is its optimizer step (what a resume restarts from).
        step, steps = int(self.optimizer.iterations.numpy()), self.steps
        if step == self.step and steps.dynamic_loss_scale and float(steps.loss_scale.numpy()) <= 1.0:
            raise RuntimeError(
                f"training diverged at step {step}: every update of the last {count} had non-finite "
                "gradients even at loss scale 1; lower learning_rate or use mixed_bfloat16/float32")
        self.window = stats if self.window is None else add_stats(self.window, stats)
        return step

    def window_metrics(self):
        window, self.window = self.window, None
        self.skipped = float(window[SKIPPED])
        return self.pretrainer.finalize_metrics(window), float(window[TOKENS]), float(window[EXAMPLES])

    def check_window(self, step, metrics):
        if self.skipped:
            self.say(f"Note: {self.skipped:.0f} update(s) skipped for non-finite float16 gradients (loss scale "
                     f"now {float(self.steps.loss_scale.numpy()):g}).")

    def learning_rate(self, step):
        return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

    def save_checkpoint(self, step):
        self.say(f"Saved checkpoint {self.checkpoints.save(step)}")

    def run_record(self):
        examples = {shard["file"]: shard["examples"] for shard in self.metadata.get("shards", [])}
        return {"model": self.config.model_name, "backend": "tensorflow", "config": self.config.to_dict(),
                "device": strategy_lib.describe(self.strategy), "devices": self.strategy.num_replicas_in_sync,
                "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
                "checkpoint_steps": [model_folder.checkpoint_step(path)
                                     for path in model_folder.saved_checkpoints(self.model_dir)],
                "weights_dtype": "float32",
                "step_settings": {"platform": strategy_lib.device_kind(), "precision": self.config.mixed_precision,
                                  "xla": getattr(self, "xla", None)},
                "train_examples": sum(examples.get(pathlib.Path(f).name, 0) for f in self.train_files),
                "eval_examples": self.eval_examples}

    def draw_curves(self):
        """Draws the whole run's curves beside its logs; the line that says where they are."""
        path, reason = curves.write_run_curves(self.model_dir, self.config.model_name)
        if path is None:
            return f"Curves not drawn: {reason}."
        splits = "training and held-out" if self.config.do_eval else "training"
        return f"Curves (losses, generator accuracy, discriminator AUC/precision/recall; {splits}): {path}"

    def restore(self, pretrainer, checkpoints):
        """Resumes from the model folder's latest checkpoint (the path), or loads an import's weights only
        (None). A damaged checkpoint stops with one line that says which older one to resume from."""
        latest = checkpoints.latest
        if not latest:
            return None
        with model_folder.explaining_damage(self.model_dir, latest):
            if model_folder.holds_optimizer_state(latest):
                return checkpoints.restore_latest()
            model_folder.restore_weights(pretrainer, latest, label="model folder checkpoint", use_other=None)
        self.say(f"{latest} holds weights only (an imported model): training starts from them "
                 "with a fresh optimizer at step 0.")
        return None

    def held_out_metrics(self, step):
        dataset = eval_dataset(self.strategy, self.config, self.dataset_dir, self.metadata, self.eval_files)
        total, count = None, 0
        with tfrecords.naming_damaged_shards(self.eval_files, RESUME_AFTER_REBUILD):
            for index, batch in enumerate(dataset):
                if self.config.num_eval_steps and index >= self.config.num_eval_steps:
                    break
                stats = to_numpy(self.steps.evaluate(batch, tf.constant(index, tf.int64)))
                total = stats if total is None else add_stats(total, stats)
                count += 1
        if total is None:
            return None
        self.eval_examples = int(float(total[EXAMPLES]))
        return self.pretrainer.finalize_metrics(total), count

    def evaluate(self, step):
        metrics = super().evaluate(step)
        if metrics is not None and self.chief:
            save_json({"step": step, **metrics}, self.model_dir / "eval_results.json")
        return metrics
