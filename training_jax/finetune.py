"""Fine-tunes on an accelerator under KERAS_BACKEND=jax (no TensorFlow) from exported task arrays.

    # here (TensorFlow): featurise the tasks with the model's vocabulary
    python -m finetune.arrays --tasks cola,sst,mrpc,sts,rte --finetuning-data-dir DIR --vocab-file V --out TASKS
    # on the accelerator (JAX, Keras and NumPy): one model
    KERAS_BACKEND=jax python -m training_jax.finetune --tasks-dir TASKS --config config.json \\
        --weights weights-2000.npz --out OUT [--tasks cola,sst] [--seeds 5] [--hparams JSON]
    # several models in one process (each --weights one model, each its --out, in the same order)
    KERAS_BACKEND=jax python -m training_jax.finetune --tasks-dir TASKS --config config.json \\
        --weights electra.npz --weights mlm.npz --weights none --out OUT_E OUT_M OUT_R [--stats S.json] \\
        [--no-bf16] [--no-length-buckets] [--steps-per-dispatch K] [--no-vmap-models]

What runs is run_finetuning.py's fine-tuning: the recipe (FinetuningConfig for the model's size and the
task), the encoder built from the pretraining config, FinetuningModel and its heads, task_loss,
build_optimizer, the batching and the trial loop (finetune.trials.TrialRunner, seed + k per trial) and
its results files. New here is only the compiled step (JaxTrainer: jax.jit of value_and_grad inside
keras.StatelessScope, then optimizer.stateless_apply) and where the weights and the featurised tasks
come from (arrays, not a checkpoint and TSV files).

--weights: a JAX run's model folder or one of its checkpoints (…/ckpt-N, float16 allowed), or the older
.npz files of {Keras variable path: array}; together they must hold every discriminator encoder weight
(electra/...), other keys (generator/..., heads) are ignored. `--weights none`: the control, an encoder
randomly initialised from the pretraining config's seed (the same one in every trial). Repeat --weights for
more models: all of them train in this process, with one --out each.

Speed (issue 33): the jobs run in one process and compile once per head kind and batch shape: JaxTrainer
shares its programs across trials, models and tasks, grows the smaller last batch of an epoch to the batch
size with rows that weigh 0 in the loss, and passes the schedule's step counts as inputs; the numbers are
the ones each trial's own programs gave (within float32 rounding; tests/test_jax_finetune_speed.py).
--no-fixed-shapes, --no-shared-programs and --no-sized-steps bring back the old behaviour, for
bench/finetune_jax_speed.py. --stats writes the settings, and the updates, training seconds and compiles
(jax.monitoring) per job.

Speed (issue 42), each option on by default on an accelerator and off on the CPU (training_jax.finetune_settings;
a flag given wins; the resolved choice is logged, in --stats and in each results file's "jax_settings"):
--bf16 computes in bfloat16 (float32 weights and losses). --length-buckets pads each training batch to the
smallest of a few lengths (--bucket-lengths, default 32, 64, 128) that holds it, examples of similar length
batched together (training_jax.finetune_buckets: other batches, the same update for the same examples).
--steps-per-dispatch K runs K updates per dispatch, their batches sent as one block (training_jax.finetune_blocks;
K single updates bit for bit on the CPU). --vmap-models trains the models of a task (one seed) in one update
vmapped over them (training_jax.members; the separate runs' numbers within float32 rounding,
tests/test_jax_finetune_buckets.py). The run goes in rounds, one seed of every task and model per round, the task
with the most updates first within a round (task_order says why).

Each task is fine-tuned alone (as the RTD-vs-MLM study does), so multitask_batches does not apply here
(JaxTrainer itself trains mixed batches of several tasks as the TensorFlow trainer does, for a caller
that gives TrialRunner several tasks); OUT/<task>_results.json is TrialRunner's results file (every
trial, median/mean/std, majority baseline), rewritten after each trial and marked complete after the
last. A task whose results are complete is skipped, so running the same command again continues.
Host-built batches (prediction, and training without buckets, blocks or vmapped models) are padded to
a multiple of 32 tokens (pad_to_multiple; at most 4 lengths at 128) when the config's length_bucketing is on
(--hparams; off by default, as the original: every batch max_seq_length long), and the compiled programs
are kept in JAX's persistent cache (the first OUT/.jax_cache, or $JAX_COMPILATION_CACHE_DIR), so a later process of the same shapes reads them back. Fine-tuned models are
not saved (that needs TensorFlow's SavedModel).
"""
import argparse
import dataclasses
import functools
import json
import os
import pathlib
import re
import time

os.environ.setdefault("KERAS_BACKEND", "jax")  # before Keras is imported: this module is the JAX side only

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from common.errors import InputError, exit_on_input_error  # noqa: E402
from configs.loading import save_json  # noqa: E402
from finetune.batches import grow_rows  # noqa: E402
from finetune.loop import BaseTrainer, MixedTasks, model_inputs  # noqa: E402
from finetune.trials import TrialRunner  # noqa: E402
from training_jax.weights import read_weight_files  # noqa: E402
from training_jax import finetune_settings  # noqa: E402
from training_jax.step import with_sized_schedule  # noqa: E402

DEFAULT_PAD_TO_MULTIPLE = 32
COMPILATION_CACHE = ".jax_cache"  # in --out unless JAX_COMPILATION_CACHE_DIR names one (parallel runs can share)
PROGRAMS = {}  # the process's compiled steps, {program_key: jitted function}: every JaxTrainer's by default


class JaxTrainer(BaseTrainer):
    """Trains on a copy of the weights held as arrays (trainable, non-trainable, optimizer variables),
    updated by one jitted step per task (and one for batches that mix the tasks); written back to the
    Keras variables when training ends.

    Few programs for many trials, tasks and models (each new shape or constant is a compile):
    - `programs` ({key: jitted function}, default the process's PROGRAMS): a step is shared by every
      trainer whose program would be the same (program_key: the layers, variables, optimizer rules,
      loss and head kind, not the task's name), so a later trial, model or task of the same head kind
      reuses it; None gives this trainer programs of its own (as before).
    - `fixed_shapes`: the smaller last training batch of an epoch is grown to train_batch_size with
      copies of its first row that weigh 0 in the loss (batches.grow_rows, loop.weighted_loss), so one
      train program per length; its loss and gradients are the unpadded batch's (dropout's random bits
      of a row do not depend on the batch size under JAX's partitionable threefry). Prediction always
      grows its last batch to eval_batch_size.
    - `sized_steps`: the schedule's T and W are the step's inputs (training_jax.step.SizedSchedule), not
      constants, so tasks and trials of other lengths share the program.
    - `block_steps` K > 0: a one-task training runs K updates per dispatch, their batches sent as one block
      (training_jax.finetune_blocks), its batches padded to `buckets` (a list of lengths, the largest
      max_seq_length; training_jax.finetune_buckets), or, with buckets None, today's batches at
      max_seq_length in today's order (then K updates are K of `step`'s). 0: one `step` per batch.
    - `compile_ahead`: a training in blocks first compiles its programs (one per bucket length it will use)
      at once, in threads (training_jax.compile_ahead).
    The defaults compute what the per-trainer programs computed, within float32 rounding."""

    def __init__(self, model, tasks, optimizer, config, programs=PROGRAMS, fixed_shapes=True, sized_steps=True,
                 block_steps=0, buckets=None, compile_ahead=False):
        super().__init__(model, tasks, optimizer, config)
        self._state = None
        self.block_steps, self.buckets, self.compile_ahead = block_steps, buckets, compile_ahead
        self.programs, self._found = ({} if programs is None else programs), {}
        self.fixed_shapes = fixed_shapes
        schedule = optimizer._learning_rate
        self._sized = with_sized_schedule(optimizer) if sized_steps else None
        self._schedule_steps = jax.numpy.asarray(
            [getattr(schedule, "num_train_steps", 0), getattr(schedule, "num_warmup_steps", 0)], "float32")
        self._donate = (0,) if jax.default_backend() != "cpu" else ()  # the CPU cannot reuse buffers

    @property
    def state(self):
        """(trainable, non-trainable, optimizer values): copied from the variables at first use (so
        weights set after construction count), copies because the step donates their buffers."""
        if self._state is None:
            self._state = tuple(_copies(variables) for variables in (
                self.model.trainable_variables, self.model.non_trainable_variables, self.optimizer.variables))
        return self._state

    def program_key(self, purpose, task):
        """What a traced step depends on, the task's name aside: equal keys, the same program."""
        model = self.model
        head_names = [head.name for head in model.heads.values()]
        mixed = isinstance(task, MixedTasks)
        key = [type(self), purpose, tuple(t.kind for t in task.tasks) if mixed else task.kind,
               None if mixed else list(model.heads).index(task.name),
               _variables_key(model.trainable_variables, head_names),
               _variables_key(model.non_trainable_variables, head_names),
               tuple(_layer_key(layer) for layer in model._flatten_layers(include_self=False))]
        if purpose.startswith("train"):
            optimizer, config = self.optimizer, self.config
            settings = {k: v for k, v in optimizer.get_config().items() if k not in ("name", "learning_rate")}
            schedule = optimizer._learning_rate
            schedule = getattr(schedule, "schedule", schedule)
            schedule_config = schedule.get_config() if hasattr(schedule, "get_config") else schedule
            if self._sized is not None:
                schedule_config = {k: v for k, v in schedule_config.items()
                                   if k not in ("num_train_steps", "num_warmup_steps")}
            trained = {id(v) for v in self.trained_variables(task)}
            key += [type(optimizer), sorted(settings.items()), type(schedule), schedule_config,
                    getattr(optimizer, "_variable_decays", None), getattr(optimizer, "_variable_lr_multipliers", None),
                    tuple(id(v) in trained for v in model.trainable_variables),
                    config.answerable_weight, config.loss_reduction, self._sized is not None]
        return repr(key)

    def _program(self, purpose, task, build):
        """The shared program for `key`, built if none yet; found once per trainer, purpose and task (the
        key takes milliseconds to make, a step can take less)."""
        if (purpose, task.name) not in self._found:
            key = self.program_key(purpose, task)
            if key not in self.programs:
                self.programs[key] = build()
            self._found[purpose, task.name] = self.programs[key]
        return self._found[purpose, task.name]

    def _train_fn(self, task):
        return self._program("train", task, lambda: self._build_train_fn(task))

    def _build_train_fn(self, task):
        return jax.jit(self._update_fn(task), donate_argnums=self._donate)

    def block_fn(self, task, length, together=False):
        """The update of a block of K batches padded to `length` (finetune_blocks.block_program; one program
        per length, K and number of members: `length` is in the key, the shapes tell jit the rest), vmapped over a
        leading member axis of the state when `together`."""
        from training_jax.compile_ahead import AheadProgram
        from training_jax.finetune_blocks import block_program

        def build():
            block = block_program(self._update_fn(task))
            if together:
                block = jax.vmap(block, in_axes=(0, None, None, None))
            return AheadProgram(jax.jit(block, donate_argnums=self._donate))

        purpose = f"train block {self.block_steps} x {length}{' vmapped' if together else ''}"
        return self._program(purpose, task, build)

    def min_length(self, task):
        from finetune.loop import min_length

        return min_length(task, self.config)

    def _update_fn(self, task):
        """One update, (state, inputs, schedule steps) -> (state, loss), not yet compiled."""
        model, optimizer, sized = self.model, self.optimizer, self._sized
        trainable_vars, non_trainable_vars = model.trainable_variables, model.non_trainable_variables
        trained = {id(v) for v in self.trained_variables(task)}
        has_gradient = [id(v) in trained for v in trainable_vars]

        def loss_and_updates(trainable, non_trainable, inputs):
            mapping = list(zip(trainable_vars, trainable)) + list(zip(non_trainable_vars, non_trainable))
            with keras.StatelessScope(state_mapping=mapping) as scope:
                loss = self.batch_loss(task, inputs)
            return loss, [scope.get_current_value(v) for v in non_trainable_vars]  # dropout seeds

        gradient_fn = jax.value_and_grad(loss_and_updates, has_aux=True)

        def update(state, inputs, schedule_steps):
            trainable, non_trainable, optimizer_values = state
            (loss, non_trainable), gradients = gradient_fn(trainable, non_trainable, inputs)
            # Other heads get None, as under TensorFlow: the optimizer leaves them and their slots be.
            gradients = [g if kept else None for g, kept in zip(gradients, has_gradient)]
            if sized is not None:
                sized.steps = schedule_steps  # [T, W] traced: not compiled in
            try:
                trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, gradients, trainable)
            finally:
                if sized is not None:
                    sized.steps = None  # the tracer must not outlive the trace
            return (trainable, non_trainable, optimizer_values), loss

        return update

    def _predict_fn(self, task):
        def build():
            def forward(trainable, non_trainable, inputs):
                outputs, _ = self.model.stateless_call(trainable, non_trainable, inputs, task_name=task.name,
                                                       training=False)
                return outputs

            return jax.jit(forward)

        return self._program("predict", task, build)

    def train(self, train_features, num_steps, seed, reporter=None, label=""):
        if self.block_steps and len(train_features) == 1:
            from training_jax.finetune_blocks import train_in_blocks

            means, _ = train_in_blocks([self], [(train_features, num_steps, seed, reporter, label)])
            return float(means[0])
        return super().train(train_features, num_steps, seed, reporter, label)

    def step(self, task, batch):
        inputs = model_inputs(batch)
        if self.fixed_shapes:
            inputs = grow_rows(inputs, self.config.train_batch_size)
        self._state, loss = self._train_fn(task)(self.state, inputs, self._schedule_steps)
        return loss

    def predict_batch(self, task, batch):
        rows = len(batch["index"])
        inputs = grow_rows(model_inputs(batch), self.config.eval_batch_size)
        if self._state is not None:  # during training: the arrays the updates hold
            trainable, non_trainable, _ = self._state
        else:  # after it: the variables' own values (prediction donates nothing, so no copy of every weight)
            trainable, non_trainable = ([v.value for v in variables] for variables in (
                self.model.trainable_variables, self.model.non_trainable_variables))
        outputs = self._predict_fn(task)(trainable, non_trainable, inputs)
        return keras.tree.map_structure(lambda value: np.asarray(value)[:rows], outputs)  # no slicing program

    def current_learning_rate(self):
        return self.learning_rate_at(self.state[2])

    @property
    def iterations_index(self):
        """Where the optimizer's step count is among its variables (the state's third part)."""
        return next(n for n, v in enumerate(self.optimizer.variables) if v is self.optimizer.iterations)

    def learning_rate_after(self, iterations):
        """The learning rate after `iterations` updates: the schedule reads the step count alone, so a logged
        rate needs no copy of the rest of the optimizer's state from the device."""
        with keras.StatelessScope(state_mapping=[(self.optimizer.iterations, iterations)]):
            return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

    def learning_rate_at(self, optimizer_values):
        """The learning rate the optimizer has with these values of its variables (its step count)."""
        with keras.StatelessScope(state_mapping=list(zip(self.optimizer.variables, optimizer_values))):
            return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

    def finish_training(self):
        trainable, non_trainable, optimizer_values = self.state
        for variables, values in ((self.model.trainable_variables, trainable),
                                  (self.model.non_trainable_variables, non_trainable),
                                  (self.optimizer.variables, optimizer_values)):
            for variable, value in zip(variables, values):
                variable.assign(value)
        self._state = None  # the variables own these buffers now; a later use copies them again


def _copies(variables):
    return [jax.numpy.array(v.value, copy=True) for v in variables]


def _variables_key(variables, head_names):
    """Each variable's path (heads by their position, not their task's name; the numbers Keras gives
    each new model's dropout seeds left out), shape and dtype."""
    def generic(path):
        for number, name in enumerate(head_names):
            path = path.replace(f"/{name}/", f"/<head {number}>/")
        return re.sub(r"seed_generator_\d+", "seed_generator", path)

    return tuple((generic(v.path), tuple(v.shape), str(v.dtype)) for v in variables)


def _layer_key(layer):
    """A layer's class and settings (dropout rates, sizes, dtype policy), its own name left out."""
    try:
        config = layer.get_config()
    except NotImplementedError:
        config = {k: v for k, v in vars(layer).items() if isinstance(v, (bool, int, float, str, type(None)))}
    return type(layer), sorted((k, repr(v)) for k, v in config.items() if k not in ("name", "_name"))


# ---------------------------------------------------------------- weights from arrays
def assign_by_path(model, weights, files):
    """Sets every weight of `model` from `weights` ({path: (array, file)}), cast to its dtype."""
    missing = [v.path for v in model.weights if v.path not in weights]
    if missing:
        raise InputError(f"{', '.join(str(f) for f in files)}: no {missing[0]} (and {len(missing) - 1} more of "
                         f"the encoder's {len(model.weights)} weights); pass the weights files that hold the "
                         "discriminator (electra/...) of the run --config describes")
    for variable in model.weights:
        value, source = weights[variable.path]
        if tuple(value.shape) != tuple(variable.shape):
            raise InputError(f"{source}: {variable.path} has shape {tuple(value.shape)}, the model built from "
                             f"--config wants {tuple(variable.shape)}; pass the config.json the weights were "
                             "trained with")
        variable.assign(value.astype(variable.dtype))


def encoder_loader(pretraining_config, files, dtype=None):
    """load_encoder(pretrained) for TrialRunner: the encoder with the arrays' weights. With no files,
    one encoder randomly initialised from the pretraining config's seed, the same in every trial.
    `dtype`: its Keras dtype policy (None: fine-tuning's float32; "mixed_bfloat16" for --bf16)."""
    from finetune.pretrained import FINETUNING_DTYPE, build_encoder, restored_encoder

    model_config = pretraining_config.model_config()
    gdes = bool(files) and pretraining_config.electra_objective and pretraining_config.gdes_embeddings
    if files:
        weights = read_weight_files(files)
    else:
        keras.utils.set_random_seed(pretraining_config.seed)
        weights = {v.path: (np.asarray(v.value), "random") for v in build_encoder(model_config).weights}
    restore = lambda model: assign_by_path(model, weights, files)  # noqa: E731
    return lambda pretrained: restored_encoder(model_config, gdes, restore, dtype or FINETUNING_DTYPE)


def pretrained_record(config_path, pretraining_config, files):
    """The PretrainedModel TrialRunner records in its results (model folder, weights) for arrays."""
    from configs.finetuning_config import size_of
    from finetune.pretrained import PretrainedModel

    model_config = pretraining_config.model_config()
    return PretrainedModel(
        folder=pathlib.Path(config_path).resolve().parent, model_config=model_config,
        recipe_size=size_of(pretraining_config.model_size, model_config.hidden_size), vocab_file=None,
        sp_model=None, do_lower_case=pretraining_config.do_lower_case,
        checkpoint=",".join(str(f) for f in files) or f"none (random initialisation, seed {pretraining_config.seed})")


# ---------------------------------------------------------------- run_finetuning.py under JAX
def product_runner(args, pretrained, config, task_data, **runner_options):
    """run_finetuning.py's TrialRunner under KERAS_BACKEND=jax: JaxTrainer with this platform's speed settings
    (finetune_settings: bf16, length buckets and K updates per dispatch on an
    accelerator; the original's float32 single updates on the CPU), the folder's encoder in that dtype, the
    settings recorded in the results files; compiled programs cached in <model folder>/jax_work."""
    from finetune.pretrained import FINETUNING_DTYPE, load_encoder
    from training_jax.compiles import use_compile_cache
    from training_jax.from_dataset import WORK_DIR
    from training_jax.pretrain import COMPILE_CACHE

    use_compile_cache(pretrained.folder / WORK_DIR / COMPILE_CACHE)
    settings = finetune_settings.resolve(args, jax.devices()[0].platform)
    trainer_class = functools.partial(
        JaxTrainer, block_steps=settings.steps_per_dispatch if settings.device_blocks else 0,
        buckets=settings.buckets(config.max_seq_length), compile_ahead=settings.compiles_ahead)
    dtype = "mixed_bfloat16" if settings.bf16 else FINETUNING_DTYPE
    return RecordingTrialRunner(settings, pretrained, config, task_data, pretrained.folder, trainer_class=trainer_class,
                                load_encoder=functools.partial(load_encoder, dtype=dtype), **runner_options)


# ---------------------------------------------------------------- the run
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks-dir", type=pathlib.Path, required=True,
                        help="the folder python -m finetune.arrays wrote (tasks.json and <task>.npz)")
    parser.add_argument("--config", type=pathlib.Path, required=True,
                        help="the pretraining config.json of the weights (model size, vocabulary size, seed)")
    parser.add_argument("--weights", nargs="+", required=True, action="append",
                        help="one model: its model folder or checkpoint prefix (…/ckpt-N), or the older .npz files "
                             "({variable path: array}), or none for a random encoder; repeat --weights for more "
                             "models in this process")
    parser.add_argument("--out", type=pathlib.Path, nargs="+", required=True,
                        help="the results folder, one per --weights in the same order")
    parser.add_argument("--tasks", default="", help="tasks separated by commas (default: every exported task)")
    parser.add_argument("--seeds", type=int, default=None, help="trials per task, seeds seed, seed+1, … "
                                                                "(default 1; same as hparams num_trials)")
    parser.add_argument("--hparams", default="", help="FinetuningConfig overrides, JSON inline or a .json file")
    finetune_settings.add_flags(parser, several_models=True)
    parser.add_argument("--stats", type=pathlib.Path, default=None,
                        help="write a JSON of this run's updates, training seconds and compiles per job")
    before = parser.add_argument_group("what the code did before (for python -m bench.finetune_jax_speed)")
    before.add_argument("--no-fixed-shapes", action="store_true",
                        help="train the smaller last batch of an epoch at its own size (a program of its own)")
    before.add_argument("--no-shared-programs", action="store_true",
                        help="compile every trial's steps anew instead of reusing the process's programs")
    before.add_argument("--no-sized-steps", action="store_true",
                        help="compile the schedule's step counts into the step instead of passing them")
    return parser.parse_args(argv)


@dataclasses.dataclass
class ModelRun:
    """One model of the run: its weights files ([] for the random control) and results folder."""
    files: list
    out: pathlib.Path
    load_encoder: object = None
    pretrained: object = None


def model_runs(args):
    """ModelRun per --weights, paired with --out; InputError when the counts differ."""
    if len(args.out) != len(args.weights):
        raise InputError(f"--out: {len(args.out)} folder(s) for {len(args.weights)} --weights; give one results "
                         "folder per --weights, in the same order")
    if len(set(args.out)) != len(args.out):
        raise InputError("--out: a folder named twice; give every model its own results folder")
    return [ModelRun([] if [w.lower() for w in weights] == ["none"] else [pathlib.Path(w) for w in weights], out)
            for weights, out in zip(args.weights, args.out)]


def task_order(task_data, configs):
    """Task numbers in the order a round trains them: the most updates first (ties in --tasks order).

    The run trains in rounds, one seed of every task and model per round (the first seed of every task before
    any second one), and a time limit stops it wherever it is: what it loses is the task in progress. Most
    updates first makes that task a short one (RTE, MRPC), not SST-2 (half of all of GLUE's updates), which
    the fewest-first order always left for last, so that any shortfall lost it and all the time it had trained."""
    from finetune.loop import count_steps

    updates = [count_steps([d.train["count"]], c) for d, c in zip(task_data, configs)]
    return sorted(range(len(task_data)), key=lambda t: (-updates[t], t))


class RecordingTrialRunner(TrialRunner):
    """TrialRunner whose results files also record the run's settings (bf16, buckets, updates per dispatch,
    vmapped: FinetuneSettings.record), and which continues only a results file of the same bf16 and buckets
    (other ones computed other numbers: the run starts over, the old file set aside)."""

    def __init__(self, settings, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.settings = settings

    def jax_settings(self):
        return self.settings.record(self.config.max_seq_length)

    def write_results(self, all_trials, complete):
        super().write_results(all_trials, complete)
        for data in self.task_data:
            path = self.results_path(data.task)
            save_json({**json.loads(path.read_text()), "jax_settings": self.jax_settings()}, path)

    def finished_trials(self):
        found = super().finished_trials()
        for data in self.task_data if found else ():
            recorded = json.loads(self.results_path(data.task).read_text()).get("jax_settings", {})
            if any(recorded.get(key) != self.jax_settings()[key] for key in ("bf16", "length_buckets")):
                return None
        return found


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    from training_jax.pretrain import without_tensorflow

    without_tensorflow()
    from configs.loading import parse_hparams
    from configs.pretraining_config import PretrainingConfig
    from data.progress import format_duration
    from finetune import arrays
    from finetune.trials import results_table
    from training_jax.compiles import CompileCount, use_compile_cache

    started = time.monotonic()
    compiles = CompileCount()
    if keras.backend.backend() != "jax":
        raise InputError(f"KERAS_BACKEND is {keras.backend.backend()}; run with KERAS_BACKEND=jax")
    models = model_runs(args)
    # A later process (a rerun, or another run of the same shapes) reads the programs back instead of
    # compiling them; within this process the shared programs (JaxTrainer) compile each once.
    use_compile_cache(models[0].out / COMPILATION_CACHE)
    if not args.config.is_file():
        raise InputError(f"{args.config}: no such file; pass the config.json of the pretraining run")
    pretraining = PretrainingConfig.load(args.config)
    hparams = parse_hparams(args.hparams)
    if args.seeds is not None:
        if args.seeds < 1:
            raise InputError(f"--seeds {args.seeds}: must be at least 1")
        hparams["num_trials"] = args.seeds
    if hparams.get("save_finetuned_models"):
        raise InputError("--hparams save_finetuned_models: not on the JAX path (a SavedModel needs TensorFlow); "
                         "drop it")
    hparams = {"pad_to_multiple": DEFAULT_PAD_TO_MULTIPLE, **hparams, "save_finetuned_models": False}
    names = [name for name in args.tasks.split(",") if name.strip()] or None
    task_data = arrays.load_task_data(args.tasks_dir, names)
    configs = [arrays.task_config(args.tasks_dir, d.task.name, pretraining, hparams) for d in task_data]
    device = jax.devices()[0]
    settings = finetune_settings.resolve(args, device.platform)
    buckets = [settings.buckets(config.max_seq_length) for config in configs]  # checked before any work
    dtype = "mixed_bfloat16" if settings.bf16 else None
    for model in models:
        model.load_encoder = encoder_loader(pretraining, model.files, dtype)
        model.pretrained = pretrained_record(args.config, pretraining, model.files)

    def trainer(task):
        return functools.partial(
            JaxTrainer, programs=None if args.no_shared_programs else PROGRAMS, fixed_shapes=not args.no_fixed_shapes,
            sized_steps=not args.no_sized_steps,
            block_steps=settings.steps_per_dispatch if settings.device_blocks else 0, buckets=buckets[task],
            compile_ahead=settings.compiles_ahead)

    log = lambda message: print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)  # noqa: E731
    log(f"device {device.platform} {device.device_kind}; jax {jax.__version__}, keras {keras.__version__}; "
        f"{len(models)} model(s): {'; '.join(m.pretrained.checkpoint for m in models)}; tasks "
        f"{', '.join(d.task.name for d in task_data)}; {settings.describe()}")
    order = task_order(task_data, configs)
    runners = {}  # (model number, task number) -> (TrialRunner, its finished trials by task)
    for t in order:
        data, config = task_data[t], configs[t]
        for m, model in enumerate(models):
            runner = RecordingTrialRunner(settings, model.pretrained, config, [data], model.out, say=log,
                                          trainer_class=trainer(t), load_encoder=model.load_encoder,
                                          results_dir=model.out)
            where = f"{model.out}: {data.task.name}"
            if _complete(runner.results_path(data.task), config.num_trials):
                log(f"{where}: complete in {runner.results_path(data.task)}, skipped")
                continue
            log(f"{where}: lr {config.learning_rate:g}, layer-wise decay {config.layerwise_lr_decay:g}, "
                f"{config.num_train_epochs:g} epochs, batch {config.train_batch_size}: {runner.num_steps} steps "
                f"per trial, {config.num_trials} trial(s)")
            runners[m, t] = (runner, runner.trials_so_far(resume=True)[data.task.name])
    jobs = [(key, trial) for trial in range(max((c.num_trials for c in configs), default=0)) for t in order
            for key in sorted(k for k in runners if k[1] == t)
            if len(runners[key][1]) <= trial < runners[key][0].config.num_trials]
    steps_left = sum(runners[key][0].num_steps for key, _ in jobs)
    started_trials, ahead = {}, None
    if settings.compiles_ahead and jobs:
        started_trials, ahead = compile_programs_ahead(runners, jobs, order, settings.vmap_models)
        log(f"compiled {ahead['programs']} training program(s) ahead in {ahead['compile_seconds']:.1f} s, "
            f"{ahead['threads']} at once (their compiles {ahead['compile_seconds_summed']:.1f} s in all; "
            f"traced and lowered in {ahead['lower_seconds']:.1f} s)")
    done_steps, train_seconds, process_train_seconds, records, jobs_done = 0, 0.0, 0.0, [], 0
    for trial in dict.fromkeys(trial for _, trial in jobs):
        for t in order:
            group = [runners[key] for key, r in jobs if r == trial and key[1] == t]
            if not group:
                continue
            data = task_data[t]
            start, job_compiles = time.monotonic(), CompileCount()
            together = settings.vmap_models and len(group) > 1
            seconds_each = train_round(group, trial, together, started_trials.pop((t, trial), None))
            seconds = time.monotonic() - start
            steps = sum(runner.num_steps for runner, _ in group)
            steps_left, jobs_done = steps_left - steps, jobs_done + len(group)
            train_seconds, done_steps = train_seconds + seconds, done_steps + steps
            process_train_seconds += seconds_each[0] if together else sum(seconds_each)
            for number, ((runner, trials), member_seconds) in enumerate(zip(group, seconds_each)):
                records.append({"model": str(runner.results_dir), "task": data.task.name, "trial": trial + 1,
                                "updates": runner.num_steps, "train_seconds": member_seconds, "seconds": seconds,
                                # the group's compiles, on its first job (the others' are 0)
                                "compiles": 0 if number else job_compiles.compiles,
                                "compiled": [] if number else job_compiles.names,
                                "compile_seconds_by_name": {} if number else job_compiles.seconds_by_name,
                                "trained_together": len(group) if together else 1})
                log(f"{runner.results_dir}: {data.task.name} seed {trial + 1}: done, {steps / seconds:.1f} steps/s "
                    f"with evaluation; {jobs_done}/{len(jobs)} jobs, ETA "
                    f"{format_duration(steps_left * train_seconds / done_steps)}; {compiles.compiles} compiles so "
                    f"far\n" + results_table({data.task.name: trials}, [data]))
    if args.stats is not None:
        from common import atomic

        atomic.write_json(args.stats, {
            "device": f"{device.platform} {device.device_kind}", "settings": settings.record(configs[0].max_seq_length)
            if configs else None, "jobs": records,
            "compiled_ahead": ahead,
            "train_seconds": process_train_seconds,  # the training loops' wall time (models together count once)
            "compiles": compiles.compiles, "compile_seconds": compiles.compile_seconds, "traces": compiles.traces,
            "seconds": time.monotonic() - started})
    return models[0].out if len(models) == 1 else [model.out for model in models]


def compile_programs_ahead(runners, jobs, order, vmap_models):
    """Starts each task's first trial to train (its models built as train_round would) and compiles every block
    program their training will call, at once (training_jax.compile_ahead). Returns ({(task number, trial):
    the group's StartedTrials}, compile_ahead's figures)."""
    from training_jax.compile_ahead import compile_ahead
    from training_jax.finetune_blocks import block_calls

    started_trials, calls = {}, []
    for t in order:
        trials = [r for key, r in jobs if key[1] == t]
        if not trials:
            continue
        trial = min(trials)
        group = [runners[key] for key, r in jobs if r == trial and key[1] == t]
        started = started_trials[t, trial] = [runner.start_trial(trial) for runner, _ in group]
        arguments = [runner.train_arguments(s) for (runner, _), s in zip(group, started)]
        trainers = [s.trainer for s in started]
        if vmap_models and len(group) > 1:
            for seed in dict.fromkeys(a[2] for a in arguments):  # members of one seed train together
                chosen = [n for n, a in enumerate(arguments) if a[2] == seed]
                calls += block_calls([trainers[n] for n in chosen], [arguments[n] for n in chosen])
        else:
            for trainer, argument in zip(trainers, arguments):
                calls += block_calls([trainer], [argument])
    return started_trials, compile_ahead(calls)


def train_round(group, trial, together, started=None):
    """Trial `trial` of each (TrialRunner, its finished trials) of `group` (one task, one model each), trained
    together (one vmapped update, training_jax.members) or one after another, then scored and recorded as
    TrialRunner.run does (its results file rewritten). `started`: the group's trials already started
    (compile_programs_ahead), else started here. Returns each one's training seconds."""
    from training_jax.members import train_members

    started = started or [runner.start_trial(trial) for runner, _ in group]
    if together:
        seconds = train_members([s.trainer for s in started],
                                [runner.train_arguments(s) for (runner, _), s in zip(group, started)])
        for (runner, trials), begun in zip(group, started):
            runner.record_trial({runner.task_data[0].task.name: trials}, trial, runner.score_trial(begun, seconds))
        return [seconds] * len(group)
    seconds = []
    for (runner, trials), begun in zip(group, started):
        start = time.monotonic()
        begun.trainer.train(*runner.train_arguments(begun))
        seconds.append(time.monotonic() - start)
        runner.record_trial({runner.task_data[0].task.name: trials}, trial, runner.score_trial(begun, seconds[-1]))
    return seconds


def _complete(path, num_trials):
    """A finished results file with as many trials as asked for (a rerun with more seeds starts again)."""
    if not path.is_file():
        return False
    results = json.loads(path.read_text())
    return results.get("complete", False) and results.get("trials_done") == num_trials


if __name__ == "__main__":
    main()
