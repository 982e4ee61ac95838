"""The JAX fine-tuning step of run_finetuning.py under KERAS_BACKEND=jax (no TensorFlow): JaxTrainer, and the
TrialRunner that run_finetuning.py builds with it (product_runner).

What runs is run_finetuning.py's fine-tuning: the recipe (FinetuningConfig), the encoder read from the model
folder, FinetuningModel and its heads, task_loss, build_optimizer, the batching and the trial loop
(finetune.trials.TrialRunner) and its results files. New here is only the compiled step (JaxTrainer: jax.jit of
value_and_grad inside keras.StatelessScope, then optimizer.stateless_apply).

Speed (issue 33): the jobs compile once per head kind and batch shape: JaxTrainer shares its programs across
trials and tasks, grows the smaller last batch of an epoch to the batch size with rows that weigh 0 in the loss,
and passes the schedule's step counts as inputs; the numbers are the ones each trial's own programs gave (within
float32 rounding; tests/test_jax_finetune_speed.py).

Speed (issue 42), each option on by default on an accelerator and off on the CPU (training_jax.finetune_settings;
a flag given wins; the resolved choice is logged and recorded in each results file's "jax_settings"):
--bf16 computes in bfloat16 (float32 weights and losses). --length-buckets pads each training batch to the
smallest of a few lengths (--bucket-lengths, default 32, 64, 128) that holds it, examples of similar length
batched together (training_jax.finetune_buckets: other batches, the same update for the same examples).
--steps-per-dispatch K runs K updates per dispatch, their batches sent as one block (training_jax.finetune_blocks;
K single updates bit for bit on the CPU). Their speed side by side: python -m bench.finetune_jax_speed.

Every local device (--devices N, default all): data parallel over pretraining's mesh (training_jax.data_parallel's
choose_devices and Placement). The weights and optimizer state are replicated, each training and prediction batch
is split along its rows, and the program is the one-device program: jit's SPMD partitioner all-reduces the
gradients and the loss's sums, so the loss stays the global batch's (its weighted sum or mean), and the dropout
bits drawn from Keras's threefry seeds are one device's (jit's random bits do not depend on the sharding). 8 virtual
CPU devices fine-tune what 1 does within float32 rounding (tests/test_jax_finetune_devices.py). One device is
today's program, unchanged.

The studies' arrays path (tasks featurised where TensorFlow is, several models vmapped in one process) builds on
JaxTrainer too: studies/device_path/finetune.py.
"""
import functools
import json
import os
import re

os.environ.setdefault("KERAS_BACKEND", "jax")  # before Keras is imported: this module is the JAX side only

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from finetune.batches import grow_rows  # noqa: E402
from finetune.loop import BaseTrainer, MixedTasks, model_inputs  # noqa: E402
from finetune.trials import TrialRunner  # noqa: E402
from training_jax import finetune_settings  # noqa: E402
from training_jax.step import with_sized_schedule  # noqa: E402

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
    - `compile_ahead`: a training in blocks first compiles its programs (one per bucket length the task can use,
      so that a later task of its head kind finds them all) at once, in threads (training_jax.compile_ahead).
    - `placement` (training_jax.data_parallel.Placement): over several devices the state is replicated and each
      batch split along its rows over the mesh (`spread`); None or one device: today's one-device program.
    The defaults compute what the per-trainer programs computed, within float32 rounding."""

    def __init__(self, model, tasks, optimizer, config, programs=PROGRAMS, fixed_shapes=True, sized_steps=True,
                 block_steps=0, buckets=None, compile_ahead=False, placement=None):
        if config.skip_padding:
            raise ValueError("skip_padding is TensorFlow's option (model/unpadding.py): a jitted step needs fixed "
                             "shapes")
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
        self.spread = placement if placement is not None and placement.mesh is not None else None  # several devices
        if self.spread is not None:
            self._schedule_steps = self.spread.put(self._schedule_steps)

    @property
    def state(self):
        """(trainable, non-trainable, optimizer values): copied from the variables at first use (so
        weights set after construction count), copies because the step donates their buffers."""
        if self._state is None:
            self._state = tuple(_copies(variables) for variables in (
                self.model.trainable_variables, self.model.non_trainable_variables, self.optimizer.variables))
            if self.spread is not None:
                self._state = self.spread.put(self._state)
        return self._state

    def on_devices(self, tree, rows_axis=None):
        """`tree` where the step takes it: as it is on one device (today's program); over several, replicated, or
        split along its rows (`rows_axis`: a batch's rows)."""
        if self.spread is None:
            return tree
        return self.spread.put(tree) if rows_axis is None else self.spread.put_rows(tree, rows_axis)

    def jit(self, function):
        """jax.jit with the state donated (not on the CPU); over several devices every output replicated, as
        pretraining's step (the state stays where the next update reads it)."""
        placed = {} if self.spread is None else {"out_shardings": self.spread.replicated}
        return jax.jit(function, donate_argnums=self._donate, **placed)

    @property
    def prediction_rows(self):
        """A prediction batch's rows: eval_batch_size, grown to a multiple of the devices (an equal share each;
        the added rows are dropped)."""
        count = 1 if self.spread is None else self.spread.count
        return -(-self.config.eval_batch_size // count) * count

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
        if self.spread is not None:  # a program over these devices (one device: today's key)
            key.append(("devices", tuple(device.id for device in self.spread.devices)))
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
        return self.jit(self._update_fn(task))

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
            return AheadProgram(self.jit(block))

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
        if self.fixed_shapes or self.spread is not None:  # over several devices every batch splits evenly
            inputs = grow_rows(inputs, self.config.train_batch_size)
        inputs = self.on_devices(inputs, rows_axis=0)
        self._state, loss = self._train_fn(task)(self.state, inputs, self._schedule_steps)
        return loss

    def predict_batch(self, task, batch):
        rows = len(batch["index"])
        inputs = self.on_devices(grow_rows(model_inputs(batch), self.prediction_rows), rows_axis=0)
        if self._state is not None:  # during training: the arrays the updates hold
            trainable, non_trainable, _ = self._state
        else:  # after it: the variables' own values (prediction donates nothing, so no copy of every weight)
            trainable, non_trainable = ([v.value for v in variables] for variables in (
                self.model.trainable_variables, self.model.non_trainable_variables))
        trainable, non_trainable = self.on_devices((trainable, non_trainable))  # replicated already: no copy
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


# ---------------------------------------------------------------- run_finetuning.py under JAX
def product_runner(args, pretrained, config, task_data, **runner_options):
    """run_finetuning.py's TrialRunner under KERAS_BACKEND=jax: JaxTrainer with this platform's speed settings
    (finetune_settings: bf16, length buckets and K updates per dispatch on an
    accelerator; the original's float32 single updates on the CPU), the folder's encoder in that dtype, the
    settings recorded in the results files; compiled programs cached in <model folder>/jax_work. It trains on the
    first --devices local devices (default: all of them), data parallel when several (data_parallel.Placement: the
    global train_batch_size must split evenly over them, else one line and exit 2), the placement logged."""
    from finetune.pretrained import FINETUNING_DTYPE, load_encoder
    from training_jax.compiles import use_compile_cache
    from training_jax.from_dataset import WORK_DIR
    from training_jax.data_parallel import Placement, choose_devices
    from training_jax.pretrain import COMPILE_CACHE

    placement = Placement(choose_devices(getattr(args, "devices", None)), config.train_batch_size)
    print(f"Under JAX: device {placement.describe()}", flush=True)
    use_compile_cache(pretrained.folder / WORK_DIR / COMPILE_CACHE)
    settings = finetune_settings.resolve(args, jax.devices()[0].platform)
    trainer_class = functools.partial(
        JaxTrainer, block_steps=settings.steps_per_dispatch if settings.device_blocks else 0,
        buckets=settings.buckets(config.max_seq_length), compile_ahead=settings.compiles_ahead, placement=placement)
    dtype = "mixed_bfloat16" if settings.bf16 else FINETUNING_DTYPE
    return RecordingTrialRunner(settings, pretrained, config, task_data, pretrained.folder, trainer_class=trainer_class,
                                load_encoder=functools.partial(load_encoder, dtype=dtype), placement=placement,
                                **runner_options)


class RecordingTrialRunner(TrialRunner):
    """TrialRunner whose results files also record the run's settings (bf16, buckets, updates per dispatch,
    vmapped: FinetuneSettings.record; with a `placement`, the devices), and which continues only a results file of
    the same bf16 and buckets (other ones computed other numbers: the run starts over, the old file set aside; other
    devices compute the same numbers within rounding)."""

    def __init__(self, settings, *args, placement=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.settings, self.placement = settings, placement

    def jax_settings(self):
        record = self.settings.record(self.config.max_seq_length)
        if self.placement is not None:
            record.update(devices=self.placement.count, device=self.placement.describe())
        return record

    def results_extra(self):
        return {"jax_settings": self.jax_settings()}

    def finished_trials(self):
        found = super().finished_trials()
        for data in self.task_data if found else ():
            recorded = json.loads(self.results_path(data.task).read_text()).get("jax_settings", {})
            if any(recorded.get(key) != self.jax_settings()[key] for key in ("bf16", "length_buckets")):
                return None
        return found
