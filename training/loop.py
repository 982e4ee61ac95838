"""The pretraining run: build under the strategy, restore, train in host loops, log, save, evaluate."""
import pathlib
import time

import keras
import numpy as np
import tensorflow as tf

from data import tfrecords
from pretrain.builder import build_for_training
from pretrain.metrics import add_stats
from storage import model_folder
from configs.resolve import changed_fields
from training import checkpointing, curves, reporting, strategy as strategy_lib
from training.collapse import ELECTRIC_NOTE, collapse_detector
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


class Run:
    """One pretraining run in one process (of one or several workers)."""

    def __init__(self, config, strategy, dataset_dir, metadata, train_files, eval_files, vocab_file,
                 init_checkpoint=None, saved_config=None, stream=None):
        self.config = config
        self.strategy = strategy
        self.dataset_dir, self.metadata = dataset_dir, metadata
        self.train_files, self.eval_files = train_files, eval_files
        self.chief = strategy_lib.is_chief(strategy)
        self.model_dir = pathlib.Path(config.model_dir)
        self.reporter = reporting.Reporter(self.model_dir / "logs", enabled=self.chief, stream=stream)
        self.vocab_file = vocab_file
        self.init_checkpoint = init_checkpoint
        self.saved_config = saved_config

    def write_model_folder(self):
        if not self.chief:
            return
        model_folder.write_config(self.model_dir, self.config)
        model_folder.copy_vocab(self.model_dir, self.vocab_file, replace=False)  # a resumed run's was checked

    def run(self):
        config, strategy, say = self.config, self.strategy, self.reporter.print
        jit = resolve_jit(config.use_xla, strategy_lib.device_kind())
        pretrainer, optimizer = build(config, strategy)
        steps = PretrainingSteps(strategy, pretrainer, optimizer, seed=config.seed,
                                 accumulation_steps=config.gradient_accumulation_steps, jit_compile=jit,
                                 dynamic_loss_scale=config.mixed_precision == "mixed_float16")
        checkpoint = tf.train.Checkpoint(model=model_folder.model_trackable(pretrainer), optimizer=optimizer,
                                         **steps.trackables())
        checkpoints = checkpointing.Checkpoints(self.model_dir, checkpoint, config.keep_checkpoint_max,
                                                chief=self.chief, worker_id=strategy_lib.worker_id(strategy))
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
        step = int(optimizer.iterations.numpy())
        total = config.num_train_steps
        params = sum(int(np.prod(v.shape)) for v in pretrainer.trainable_variables)
        xla = 'on' if jit else 'elementwise only' if config.xla_fuse_elementwise else 'off'
        say(f"Pretraining {config.model_name} ({config.model_size}, {params:,} parameters) on "
            f"{strategy_lib.describe(strategy)}: global batch {config.train_batch_size} × "
            f"{config.max_seq_length} tokens, {total} steps, {config.mixed_precision}, XLA {xla}, "
            f"{len(self.train_files)} training shard(s)"
            + (f", {len(self.eval_files)} eval shard(s)" if config.do_eval else "") + f"; writing to {self.model_dir}")
        if config.do_eval and self.eval_files == self.train_files:
            say("Note: the dataset has one shard, so evaluation reads training data; build more shards to hold "
                "one out.")
        detector = collapse_detector(config)
        if detector is None:
            say(ELECTRIC_NOTE)
        iterator = iter(train_dataset(strategy, config, self.dataset_dir, self.metadata, self.train_files,
                                      seed=config.seed + step))
        log_every, save_every = config.iterations_per_loop, config.save_checkpoints_steps
        eval_every = config.eval_every_steps or save_every
        interval_stats, interval_start, interval_begin_step = None, time.monotonic(), step
        last_eval = None
        while step < total:
            boundaries = [total]
            for every in (log_every, save_every) + ((eval_every,) if config.do_eval else ()):
                boundaries.append((step // every + 1) * every)
            boundaries += [extra for extra in config.extra_checkpoint_steps if extra > step]
            num = min(boundaries) - step
            with tfrecords.naming_damaged_shards(self.train_files, RESUME_AFTER_REBUILD):
                stats = to_numpy(steps.train(iterator, num, config.max_seq_length))
            # Updates, not loop iterations: a float16 step skipped for non-finite gradients does not
            # count (optimizer.iterations stays), so the run makes num_train_steps real updates and a
            # checkpoint's number is its optimizer step (what a resume restarts from).
            previous, step = step, int(optimizer.iterations.numpy())
            if step == previous and steps.dynamic_loss_scale and float(steps.loss_scale.numpy()) <= 1.0:
                raise RuntimeError(
                    f"training diverged at step {step}: every update of the last {num} had non-finite "
                    "gradients even at loss scale 1; lower learning_rate or use mixed_bfloat16/float32")
            interval_stats = stats if interval_stats is None else add_stats(interval_stats, stats)
            if step == previous:
                continue  # all skipped: no boundary reached, nothing new to log or save
            if step % log_every == 0 or step == total:
                elapsed = max(time.monotonic() - interval_start, 1e-9)
                metrics = pretrainer.finalize_metrics(interval_stats)
                rate = (step - interval_begin_step) / elapsed
                tokens = float(interval_stats[TOKENS]) / elapsed
                say(reporting.train_line(step, total, metrics, rate, tokens))
                skipped = float(interval_stats[SKIPPED])
                if skipped:
                    say(f"Note: {skipped:.0f} update(s) skipped for non-finite float16 gradients (loss scale "
                        f"now {float(steps.loss_scale.numpy()):g}).")
                lr = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
                self.reporter.scalars(self.reporter.train_writer, step, {
                    **metrics, "learning_rate": lr, "steps_per_second": rate, "tokens_per_second": tokens,
                    "examples_per_second": float(interval_stats[EXAMPLES]) / elapsed})
                warning = detector and detector.check(step, metrics)
                if warning:
                    say(warning, error=True)
                interval_stats, interval_start, interval_begin_step = None, time.monotonic(), step
            extra = step in config.extra_checkpoint_steps
            if step % save_every == 0 or step == total or extra:
                path = checkpoints.save(step)
                say(f"Saved checkpoint {path}")
            if config.do_eval and (step % eval_every == 0 or step == total or extra) and last_eval != step:
                self.evaluate(steps, pretrainer, step)
                last_eval = step
                interval_start = time.monotonic()
        if int(optimizer.iterations.numpy()) == step and checkpoints.latest is None:
            checkpoints.save(step)
        if config.do_eval and last_eval != step:
            self.evaluate(steps, pretrainer, step)
        checkpoints.cleanup()
        self.reporter.close()
        say(f"Done: the model (config.json, vocabulary, checkpoints) is in {self.model_dir}; TensorBoard logs in "
            f"{self.model_dir / 'logs'} (tensorboard --logdir {self.model_dir / 'logs'}).")
        if self.chief:
            say(self.draw_curves())
        return step

    def draw_curves(self):
        """Draws the whole run's curves (read back from its event files) beside its logs; the line that says
        where they are."""
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
        self.reporter.print(f"{latest} holds weights only (an imported model): training starts from them "
                            "with a fresh optimizer at step 0.")
        return None

    def evaluate(self, steps, pretrainer, step):
        dataset = eval_dataset(self.strategy, self.config, self.dataset_dir, self.metadata, self.eval_files)
        total, count = None, 0
        with tfrecords.naming_damaged_shards(self.eval_files, RESUME_AFTER_REBUILD):
            for index, batch in enumerate(dataset):
                if self.config.num_eval_steps and index >= self.config.num_eval_steps:
                    break
                stats = to_numpy(steps.evaluate(batch, tf.constant(index, tf.int64)))
                total = stats if total is None else add_stats(total, stats)
                count += 1
        if total is None:
            return None
        metrics = pretrainer.finalize_metrics(total)
        self.reporter.print(reporting.eval_line(step, metrics, count))
        self.reporter.scalars(self.reporter.eval_writer, step, metrics)
        if self.chief:
            from configs.loading import save_json
            save_json({"step": step, **metrics}, self.model_dir / "eval_results.json")
        return metrics
