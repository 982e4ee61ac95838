"""The studies' fine-tuning on a machine without TensorFlow from exported task arrays (KERAS_BACKEND=jax): several
models (a study's arms and the random control) in one process, their updates vmapped together.

    # where TensorFlow is: featurise the tasks with the model's vocabulary
    python -m studies.device_path.task_arrays --tasks cola,sst,mrpc,sts,rte --finetuning-data-dir DIR \\
        --vocab-file V --out TASKS
    # on the accelerator (JAX, Keras and NumPy): one model
    KERAS_BACKEND=jax python -m studies.device_path.finetune --tasks-dir TASKS --config config.json \\
        --weights weights-2000.npz --out OUT [--tasks cola,sst] [--seeds 5] [--hparams JSON]
    # several models in one process (each --weights one model, each its --out, in the same order)
    KERAS_BACKEND=jax python -m studies.device_path.finetune --tasks-dir TASKS --config config.json \\
        --weights electra.npz --weights mlm.npz --weights none --out OUT_E OUT_M OUT_R [--stats S.json] \\
        [--no-bf16] [--no-length-buckets] [--steps-per-dispatch K] [--no-vmap-models]

A user fine-tunes with run_finetuning.py (under JAX too); this command is what the RTD-vs-MLM study's device
calls ran before that existed, kept for them: the arms vmapped in one process and the random control. What runs
is run_finetuning.py's fine-tuning: the recipe (FinetuningConfig for the model's size and the task), the encoder
built from the pretraining config, FinetuningModel and its heads, the trial loop (finetune.trials.TrialRunner,
seed + k per trial) and its results files, trained by the product's JaxTrainer (training_jax.finetune). New here
is only where the weights and the featurised tasks come from (arrays, not a checkpoint and TSV files) and the
models trained together (studies/device_path/members.py).

--weights: a JAX run's model folder or one of its checkpoints (…/ckpt-N, float16 allowed), or the older
.npz files of {Keras variable path: array}; together they must hold every discriminator encoder weight
(electra/...), other keys (generator/..., heads) are ignored. `--weights none`: the control, an encoder
randomly initialised from the pretraining config's seed (the same one in every trial). Repeat --weights for
more models: all of them train in this process, with one --out each.

The speed settings are run_finetuning.py's under JAX (training_jax.finetune_settings), plus --vmap-models, which
trains the models of a task (one seed) in one update vmapped over them (members.py; the separate runs' numbers
within float32 rounding, tests/test_jax_finetune_buckets.py). --no-fixed-shapes, --no-shared-programs and
--no-sized-steps bring back the code before issue 33, for studies/device_path/finetune_speed.py. --stats writes
the settings, and the updates, training seconds and compiles (jax.monitoring) per job. The run goes in rounds,
one seed of every task and model per round, the task with the most updates first within a round (task_order says
why).

Each task is fine-tuned alone (as the RTD-vs-MLM study does), so multitask_batches does not apply here;
OUT/<task>_results.json is TrialRunner's results file (every trial, median/mean/std, majority baseline),
rewritten after each trial and marked complete after the last. A task whose results are complete is skipped, so
running the same command again continues. Host-built batches (prediction, and training without buckets, blocks
or vmapped models) are padded to a multiple of 32 tokens (pad_to_multiple; at most 4 lengths at 128) when the
config's length_bucketing is on (--hparams; off by default, as the original), and the compiled programs are kept
in JAX's persistent cache (the first OUT/.jax_cache, or $JAX_COMPILATION_CACHE_DIR), so a later process of the
same shapes reads them back. Fine-tuned models are not saved (that needs TensorFlow's SavedModel).
"""
import argparse
import dataclasses
import functools
import json
import os
import pathlib
import time

os.environ.setdefault("KERAS_BACKEND", "jax")  # before Keras is imported: this module is the JAX side only
from common.quiet import lean_keras_import  # noqa: E402
lean_keras_import()  # Keras without scikit-learn and matplotlib, as the commands import it

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from common.errors import InputError, exit_on_input_error  # noqa: E402
from training_jax import finetune_settings  # noqa: E402
from training_jax.finetune import PROGRAMS, JaxTrainer, RecordingTrialRunner  # noqa: E402
from training_jax.weights import read_weight_files  # noqa: E402

DEFAULT_PAD_TO_MULTIPLE = 32
COMPILATION_CACHE = ".jax_cache"  # in --out unless JAX_COMPILATION_CACHE_DIR names one (parallel runs can share)


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
                        help="the folder python -m studies.device_path.task_arrays wrote (tasks.json and <task>.npz)")
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
    before = parser.add_argument_group("what the code did before (for python -m studies.device_path.finetune_speed)")
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


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    from training_jax.pretrain import without_tensorflow

    without_tensorflow()
    from configs.loading import parse_hparams
    from configs.pretraining_config import PretrainingConfig
    from data.progress import format_duration
    from studies.device_path import task_arrays as arrays
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
    from studies.device_path.members import train_members

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
