"""Fine-tunes on an accelerator under KERAS_BACKEND=jax (no TensorFlow) from exported task arrays.

    # here (TensorFlow): featurise the tasks with the model's vocabulary
    python -m finetune.arrays --tasks cola,sst,mrpc,sts,rte --finetuning-data-dir DIR --vocab-file V --out TASKS
    # on the accelerator (JAX, Keras and NumPy):
    KERAS_BACKEND=jax python -m training_jax.finetune --tasks-dir TASKS --config config.json \\
        --weights weights-2000.npz --out OUT [--tasks cola,sst] [--seeds 5] [--hparams JSON]

What runs is run_finetuning.py's fine-tuning: the recipe (FinetuningConfig for the model's size and the
task), the encoder built from the pretraining config, FinetuningModel and its heads, task_loss,
build_optimizer, the batching and the trial loop (finetune.trials.TrialRunner, seed + k per trial) and
its results files. New here is only the compiled step (JaxTrainer: one jax.jit per task of
value_and_grad inside keras.StatelessScope, then optimizer.stateless_apply) and where the weights and
the featurised tasks come from (arrays, not a checkpoint and TSV files).

--weights: .npz files of {Keras variable path: array} as training_jax.pretrain writes them (float16
allowed); together they must hold every discriminator encoder weight (electra/...), other keys
(generator/..., heads) are ignored. `--weights none`: the control, an encoder randomly initialised from
the pretraining config's seed (the same one in every trial).

Each task is fine-tuned alone (as the RTD-vs-MLM study does), one after another, so multitask_batches
does not apply here (JaxTrainer itself trains mixed batches of several tasks as the TensorFlow trainer
does, for a caller that gives TrialRunner several tasks); OUT/<task>_results.json
is TrialRunner's results file (every trial, median/mean/std, majority baseline), rewritten after each
trial and marked complete after the last. A task whose results are complete is skipped, so running the
same command again continues. Batches are padded to a multiple of 32 tokens (pad_to_multiple; at most 4
lengths at 128) unless --hparams says otherwise, and the compiled programs are kept in JAX's persistent
cache (OUT/.jax_cache, or $JAX_COMPILATION_CACHE_DIR), so later trials and tasks of the same model shape
do not compile again. Fine-tuned models are not saved (that needs TensorFlow's SavedModel).
"""
import argparse
import json
import os
import pathlib
import time

os.environ.setdefault("KERAS_BACKEND", "jax")  # before Keras is imported: this module is the JAX side only

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from common.errors import InputError, exit_on_input_error  # noqa: E402
from finetune.loop import BaseTrainer, model_inputs  # noqa: E402
from training_jax.arrays import read_weights  # noqa: E402

DEFAULT_PAD_TO_MULTIPLE = 32
COMPILATION_CACHE = ".jax_cache"  # in --out unless JAX_COMPILATION_CACHE_DIR names one (parallel runs can share)


class JaxTrainer(BaseTrainer):
    """Trains on a copy of the weights held as arrays (trainable, non-trainable, optimizer variables),
    updated by one jitted step per task (and one for batches that mix the tasks); written back to the
    Keras variables when training ends.

    jax.jit compiles once per input shape: pad_to_multiple keeps the lengths few, and prediction pads
    its last, smaller batch with empty rows to eval_batch_size. The last training batch of an epoch is
    smaller too and is compiled once more per length (padding its rows would change the loss's sum)."""

    def __init__(self, model, tasks, optimizer, config):
        super().__init__(model, tasks, optimizer, config)
        self._state = None
        self._train_steps, self._predict_steps = {}, {}
        self._donate = (0,) if jax.default_backend() != "cpu" else ()  # the CPU cannot reuse buffers

    @property
    def state(self):
        """(trainable, non-trainable, optimizer values): copied from the variables at first use (so
        weights set after construction count), copies because the step donates their buffers."""
        if self._state is None:
            self._state = tuple(_copies(variables) for variables in (
                self.model.trainable_variables, self.model.non_trainable_variables, self.optimizer.variables))
        return self._state

    def _train_fn(self, task):
        if task.name not in self._train_steps:
            model, optimizer = self.model, self.optimizer
            trainable_vars, non_trainable_vars = model.trainable_variables, model.non_trainable_variables
            trained = {id(v) for v in self.trained_variables(task)}
            has_gradient = [id(v) in trained for v in trainable_vars]

            def loss_and_updates(trainable, non_trainable, inputs):
                mapping = list(zip(trainable_vars, trainable)) + list(zip(non_trainable_vars, non_trainable))
                with keras.StatelessScope(state_mapping=mapping) as scope:
                    loss = self.batch_loss(task, inputs)
                return loss, [scope.get_current_value(v) for v in non_trainable_vars]  # dropout seeds

            gradient_fn = jax.value_and_grad(loss_and_updates, has_aux=True)

            def update(state, inputs):
                trainable, non_trainable, optimizer_values = state
                (loss, non_trainable), gradients = gradient_fn(trainable, non_trainable, inputs)
                # Other heads get None, as under TensorFlow: the optimizer leaves them and their slots be.
                gradients = [g if kept else None for g, kept in zip(gradients, has_gradient)]
                trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, gradients, trainable)
                return (trainable, non_trainable, optimizer_values), loss

            self._train_steps[task.name] = jax.jit(update, donate_argnums=self._donate)
        return self._train_steps[task.name]

    def _predict_fn(self, task):
        if task.name not in self._predict_steps:
            def forward(trainable, non_trainable, inputs):
                outputs, _ = self.model.stateless_call(trainable, non_trainable, inputs, task_name=task.name,
                                                       training=False)
                return outputs

            self._predict_steps[task.name] = jax.jit(forward)
        return self._predict_steps[task.name]

    def step(self, task, batch):
        self._state, loss = self._train_fn(task)(self.state, model_inputs(batch))
        return loss

    def predict_batch(self, task, batch):
        inputs = model_inputs(batch)
        rows = len(batch["index"])
        missing = self.config.eval_batch_size - rows
        if missing > 0:
            inputs = {k: np.concatenate([v, np.zeros((missing, *v.shape[1:]), v.dtype)]) for k, v in inputs.items()}
        trainable, non_trainable, _ = self.state
        outputs = self._predict_fn(task)(trainable, non_trainable, inputs)
        return keras.tree.map_structure(lambda value: value[:rows], outputs)

    def current_learning_rate(self):
        with keras.StatelessScope(state_mapping=list(zip(self.optimizer.variables, self.state[2]))):
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


def encoder_loader(pretraining_config, files):
    """load_encoder(pretrained) for TrialRunner: the encoder with the arrays' weights. With no files,
    one encoder randomly initialised from the pretraining config's seed, the same in every trial."""
    from finetune.pretrained import build_encoder, restored_encoder

    model_config = pretraining_config.model_config()
    gdes = bool(files) and pretraining_config.electra_objective and pretraining_config.gdes_embeddings
    if files:
        weights = read_weights(files)
    else:
        keras.utils.set_random_seed(pretraining_config.seed)
        weights = {v.path: (np.asarray(v.value), "random") for v in build_encoder(model_config).weights}
    restore = lambda model: assign_by_path(model, weights, files)  # noqa: E731
    return lambda pretrained: restored_encoder(model_config, gdes, restore)


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
    parser.add_argument("--weights", nargs="+", required=True,
                        help="weights .npz files ({variable path: array}), or none for a random encoder")
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--tasks", default="", help="tasks separated by commas (default: every exported task)")
    parser.add_argument("--seeds", type=int, default=None, help="trials per task, seeds seed, seed+1, … "
                                                                "(default 1; same as hparams num_trials)")
    parser.add_argument("--hparams", default="", help="FinetuningConfig overrides, JSON inline or a .json file")
    return parser.parse_args(argv)


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    from training_jax.pretrain import without_tensorflow

    without_tensorflow()
    from configs.loading import parse_hparams
    from configs.pretraining_config import PretrainingConfig
    from data.progress import format_duration
    from finetune import arrays
    from finetune.loop import count_steps
    from finetune.trials import TrialRunner, results_table

    if keras.backend.backend() != "jax":
        raise InputError(f"KERAS_BACKEND is {keras.backend.backend()}; run with KERAS_BACKEND=jax")
    if not jax.config.jax_compilation_cache_dir:
        # Every trial builds a new model, hence new jitted functions: the same programs, compiled once
        # here and read back after (measured on the CPU: 2.2 s → 0.4 s per trial for the tiny model).
        jax.config.update("jax_compilation_cache_dir", str(args.out / COMPILATION_CACHE))
    if not args.config.is_file():
        raise InputError(f"{args.config}: no such file; pass the config.json of the pretraining run")
    pretraining = PretrainingConfig.load(args.config)
    files = [] if [w.lower() for w in args.weights] == ["none"] else [pathlib.Path(w) for w in args.weights]
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
    load_encoder = encoder_loader(pretraining, files)
    pretrained = pretrained_record(args.config, pretraining, files)
    device = jax.devices()[0]
    log = lambda message: print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)  # noqa: E731
    log(f"device {device.platform} {device.device_kind}; jax {jax.__version__}, keras {keras.__version__}; "
        f"weights {pretrained.checkpoint}; tasks {', '.join(d.task.name for d in task_data)}")
    steps = [count_steps([d.train["count"]], c) * c.num_trials for d, c in zip(task_data, configs)]
    done_steps, train_seconds = 0, 0.0
    for number, (data, config) in enumerate(zip(task_data, configs)):
        runner = TrialRunner(pretrained, config, [data], args.out, say=log, trainer_class=JaxTrainer,
                             load_encoder=load_encoder, results_dir=args.out)
        name = data.task.name
        if _complete(runner.results_path(data.task), config.num_trials):
            log(f"{name}: complete in {runner.results_path(data.task)}, skipped")
            steps[number] = 0
            continue
        log(f"{name}: lr {config.learning_rate:g}, layer-wise decay {config.layerwise_lr_decay:g}, "
            f"{config.num_train_epochs:g} epochs, batch {config.train_batch_size}: {runner.num_steps} steps "
            f"per trial, {config.num_trials} trial(s)")
        start = time.monotonic()
        all_trials = runner.run(resume=True)  # a task cut off between trials continues
        train_seconds += time.monotonic() - start
        done_steps += steps[number]
        rate = done_steps / train_seconds
        remaining = sum(steps[number + 1:])
        log(f"{name}: done, {steps[number] / (time.monotonic() - start):.1f} steps/s with evaluation; "
            f"{number + 1}/{len(task_data)} tasks, ETA {format_duration(remaining / rate)}\n"
            + results_table(all_trials, [data]))
    return args.out


def _complete(path, num_trials):
    """A finished results file with as many trials as asked for (a rerun with more seeds starts again)."""
    if not path.is_file():
        return False
    results = json.loads(path.read_text())
    return results.get("complete", False) and results.get("trials_done") == num_trials


if __name__ == "__main__":
    main()
