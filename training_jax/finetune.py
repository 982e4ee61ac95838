"""Fine-tunes on an accelerator under KERAS_BACKEND=jax (no TensorFlow) from exported task arrays.

    # here (TensorFlow): featurise the tasks with the model's vocabulary
    python -m finetune.arrays --tasks cola,sst,mrpc,sts,rte --finetuning-data-dir DIR --vocab-file V --out TASKS
    # on the accelerator (JAX, Keras and NumPy): one model
    KERAS_BACKEND=jax python -m training_jax.finetune --tasks-dir TASKS --config config.json \\
        --weights weights-2000.npz --out OUT [--tasks cola,sst] [--seeds 5] [--hparams JSON]
    # several models in one process (each --weights one model, each its --out, in the same order)
    KERAS_BACKEND=jax python -m training_jax.finetune --tasks-dir TASKS --config config.json \\
        --weights electra.npz --weights mlm.npz --weights none --out OUT_E OUT_M OUT_R [--bf16] [--stats S.json] \\
        [--vmap-models]

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

Speed (issue 33): the jobs (model × task, all trials) run in one process, the task with the fewest
updates first (a run stopped by a time limit has finished the short ones), and compile once per head
kind and batch shape: JaxTrainer shares its programs across trials, models and tasks, grows the smaller
last batch of an epoch to the batch size with rows that weigh 0 in the loss, and passes the schedule's
step counts as inputs; the numbers are the ones each trial's own programs gave (within float32
rounding; tests/test_jax_finetune_speed.py). --no-fixed-shapes, --no-shared-programs and
--no-sized-steps bring back the old behaviour, for bench/finetune_jax_speed.py. --bf16 computes in
bfloat16 (float32 weights and losses): an option, not the default, until a GPU run shows its scores
equal float32's. --stats writes the updates, training seconds and compiles (jax.monitoring) per job.
--vmap-models trains a task's models and trials together, one update vmapped over them
(training_jax.members; the separate runs' numbers within float32 rounding, the same results files):
an option until a GPU run measures it.

Each task is fine-tuned alone (as the RTD-vs-MLM study does), so multitask_batches does not apply here
(JaxTrainer itself trains mixed batches of several tasks as the TensorFlow trainer does, for a caller
that gives TrialRunner several tasks); OUT/<task>_results.json is TrialRunner's results file (every
trial, median/mean/std, majority baseline), rewritten after each trial and marked complete after the
last. A task whose results are complete is skipped, so running the same command again continues.
Batches are padded to a multiple of 32 tokens (pad_to_multiple; at most 4 lengths at 128) when
length_bucketing is on (--hparams; off by default, as the original: every batch max_seq_length long),
and the compiled programs are kept in JAX's persistent cache (the first OUT/.jax_cache, or
$JAX_COMPILATION_CACHE_DIR), so a later process of the same shapes reads them back. Fine-tuned models are
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
from finetune.batches import grow_rows  # noqa: E402
from finetune.loop import BaseTrainer, MixedTasks, model_inputs  # noqa: E402
from training_jax.weights import read_weight_files  # noqa: E402
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
    The defaults compute what the per-trainer programs computed, within float32 rounding.
    `timings`: a list that gets {"updates", "seconds"} of each `train` call (its compiles included)."""

    def __init__(self, model, tasks, optimizer, config, programs=PROGRAMS, fixed_shapes=True, sized_steps=True,
                 timings=None):
        super().__init__(model, tasks, optimizer, config)
        self._state, self.timings = None, timings
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

    def members_train_fn(self, task):
        """The update vmapped over a leading member axis of the state and the batch (the models and
        trials of one task, training_jax.members; members of one seed get copies of one batch: a batch
        is kilobytes beside a model's megabytes, and one program serves one seed or several)."""
        build = lambda: jax.jit(jax.vmap(self._update_fn(task), in_axes=(0, 0, None)),  # noqa: E731
                                donate_argnums=self._donate)
        return self._program("train vmapped", task, build)

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
        start = time.monotonic()
        last_mean = super().train(train_features, num_steps, seed, reporter, label)  # it waits for the last loss
        if self.timings is not None:
            self.timings.append({"updates": num_steps, "seconds": time.monotonic() - start})
        return last_mean

    def step(self, task, batch):
        inputs = model_inputs(batch)
        if self.fixed_shapes:
            inputs = grow_rows(inputs, self.config.train_batch_size)
        self._state, loss = self._train_fn(task)(self.state, inputs, self._schedule_steps)
        return loss

    def predict_batch(self, task, batch):
        rows = len(batch["index"])
        inputs = grow_rows(model_inputs(batch), self.config.eval_batch_size)
        trainable, non_trainable, _ = self.state
        outputs = self._predict_fn(task)(trainable, non_trainable, inputs)
        return keras.tree.map_structure(lambda value: np.asarray(value)[:rows], outputs)  # no slicing program

    def current_learning_rate(self):
        return self.learning_rate_at(self.state[2])

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
    parser.add_argument("--bf16", action="store_true",
                        help="compute in bfloat16 (mixed_bfloat16: float32 weights and losses); off by default, "
                             "the original fine-tunes in float32")
    parser.add_argument("--stats", type=pathlib.Path, default=None,
                        help="write a JSON of this run's updates, training seconds and compiles per job")
    parser.add_argument("--vmap-models", action="store_true",
                        help="train the models and trials of a task together, one update vmapped over them "
                             "(training_jax.members; the separate runs' numbers within float32 rounding); off "
                             "by default until a GPU run measures it")
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


def job_order(models, task_data, configs):
    """(model, task number) pairs, the fewest updates first (a run cut off has finished the short ones),
    then in --tasks and --weights order."""
    from finetune.loop import count_steps

    updates = [count_steps([d.train["count"]], c) * c.num_trials for d, c in zip(task_data, configs)]
    jobs = [(updates[t], t, m) for t in range(len(task_data)) for m in range(len(models))]
    return [(models[m], t, n) for n, t, m in sorted(jobs)]


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    from training_jax.pretrain import without_tensorflow

    without_tensorflow()
    from configs.loading import parse_hparams
    from configs.pretraining_config import PretrainingConfig
    from data.progress import format_duration
    from finetune import arrays
    from finetune.trials import TrialRunner, results_table
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
    dtype = "mixed_bfloat16" if args.bf16 else None
    for model in models:
        model.load_encoder = encoder_loader(pretraining, model.files, dtype)
        model.pretrained = pretrained_record(args.config, pretraining, model.files)
    timings = []
    trainer = functools.partial(JaxTrainer, programs=None if args.no_shared_programs else PROGRAMS,
                                fixed_shapes=not args.no_fixed_shapes, sized_steps=not args.no_sized_steps,
                                timings=timings)
    device = jax.devices()[0]
    log = lambda message: print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)  # noqa: E731
    log(f"device {device.platform} {device.device_kind}; jax {jax.__version__}, keras {keras.__version__}; "
        f"{len(models)} model(s): {'; '.join(m.pretrained.checkpoint for m in models)}; tasks "
        f"{', '.join(d.task.name for d in task_data)}{'; bfloat16' if args.bf16 else ''}")
    jobs = job_order(models, task_data, configs)
    if args.vmap_models:  # one group per task: its models (and trials) trained together
        groups = [[job for job in jobs if job[1] == task] for task in dict.fromkeys(job[1] for job in jobs)]
    else:
        groups = [[job] for job in jobs]
    steps_left = sum(steps for _, _, steps in jobs)
    done_steps, train_seconds, process_train_seconds, records, jobs_done = 0, 0.0, 0.0, [], 0
    for group in groups:
        data, config = task_data[group[0][1]], configs[group[0][1]]
        steps_left -= sum(steps for _, _, steps in group)
        jobs_done += len(group)
        runners = {}
        for model, _, _ in group:
            runner = TrialRunner(model.pretrained, config, [data], model.out, say=log, trainer_class=trainer,
                                 load_encoder=model.load_encoder, results_dir=model.out)
            where = f"{model.out}: {data.task.name}"
            if _complete(runner.results_path(data.task), config.num_trials):
                log(f"{where}: complete in {runner.results_path(data.task)}, skipped")
                continue
            log(f"{where}: lr {config.learning_rate:g}, layer-wise decay {config.layerwise_lr_decay:g}, "
                f"{config.num_train_epochs:g} epochs, batch {config.train_batch_size}: {runner.num_steps} steps "
                f"per trial, {config.num_trials} trial(s)")
            runners[model.out] = runner
        if not runners:
            continue
        start, first_timing, job_compiles = time.monotonic(), len(timings), CompileCount()
        if args.vmap_models:  # a task cut off between trials continues
            updates, all_trials = run_together(list(runners.values()))
        else:
            all_trials = [runner.run(resume=True) for runner in runners.values()]
            updates = [sum(t["updates"] for t in timings[first_timing:])]
        seconds = time.monotonic() - start
        steps = sum(s for model, _, s in group if model.out in runners)
        train_seconds, done_steps = train_seconds + seconds, done_steps + steps
        trained = timings[first_timing:]
        group_train_seconds = (trained[0]["seconds"] if args.vmap_models and trained
                               else sum(t["seconds"] for t in trained))
        process_train_seconds += group_train_seconds
        for out, model_updates, model_trials in zip(runners, updates, all_trials):
            records.append({"model": str(out), "task": data.task.name, "updates": model_updates,
                            "train_seconds": group_train_seconds, "seconds": seconds,
                            "compiles": job_compiles.compiles, "compiled": job_compiles.names,
                            "trained_together": len(runners) if args.vmap_models else 1})
            log(f"{out}: {data.task.name}: done, {steps / seconds:.1f} steps/s with evaluation; "
                f"{jobs_done}/{len(jobs)} jobs, ETA {format_duration(steps_left * train_seconds / done_steps)}; "
                f"{compiles.compiles} compiles so far\n" + results_table(model_trials, [data]))
    if args.stats is not None:
        from common import atomic

        atomic.write_json(args.stats, {
            "device": f"{device.platform} {device.device_kind}", "jobs": records,
            "train_seconds": process_train_seconds,  # the training loops' wall time (models together count once)
            "compiles": compiles.compiles, "compile_seconds": compiles.compile_seconds, "traces": compiles.traces,
            "seconds": time.monotonic() - started})
    return models[0].out if len(models) == 1 else [model.out for model in models]


def run_together(runners):
    """The runners' trials (one task each, the same task; each resumed where its results file stops)
    built as TrialRunner builds them, trained at once (training_jax.members) and then scored and
    recorded one by one as TrialRunner.run does. Returns (updates per runner, {task: trials} per runner)."""
    from training_jax.members import train_members

    done = [runner.trials_so_far(resume=True) for runner in runners]
    members = [(runner, trials, trial) for runner, trials in zip(runners, done)
               for trial in range(len(next(iter(trials.values()))), runner.config.num_trials)]
    updates = [runner.num_steps * sum(1 for member in members if member[0] is runner) for runner in runners]
    if members:
        started = [runner.start_trial(trial) for runner, _, trial in members]
        seconds = train_members([trial.trainer for trial in started],
                                [member[0].train_arguments(trial) for member, trial in zip(members, started)])
        for (runner, trials, trial), begun in zip(members, started):
            runner.record_trial(trials, trial, runner.score_trial(begun, seconds))
    return updates, done


def _complete(path, num_trials):
    """A finished results file with as many trials as asked for (a rerun with more seeds starts again)."""
    if not path.is_file():
        return False
    results = json.loads(path.read_text())
    return results.get("complete", False) and results.get("trials_done") == num_trials


if __name__ == "__main__":
    main()
