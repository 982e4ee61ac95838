"""Pretrains ELECTRA on a dataset built by build_pretraining_dataset.py.

    python run_pretraining.py --model-name electra_small
    python run_pretraining.py --model-name my_model --hparams '{"model_size": "electra_base"}'
    python run_pretraining.py --model-name electra_tiny --hparams '{"num_train_steps": 300}'

Reads <data-dir>/pretrain_tfrecords (its metadata.json fixes the vocabulary and sequence length) and
writes <data-dir>/models/<model-name>/: config.json, the vocabulary, checkpoints (the last
keep_checkpoint_max, every save_checkpoints_steps), logs/ (TensorBoard) and eval_results.json. Run the
same command again to resume after a crash or a kill. The strategy follows the hardware: default (CPU or
one GPU), MirroredStrategy (several GPUs), MultiWorkerMirroredStrategy (TF_CONFIG with several workers),
TPUStrategy (--tpu). train_batch_size is the global batch.

Under KERAS_BACKEND=jax the same command trains with the JAX step, without TensorFlow, into the same model
folder (training_jax/from_dataset.py: --max-minutes, --devices and the step's speed flags; docs/jax_gpu.md).
"""
import argparse
import os
import sys

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from data import paths
from common.errors import exit_on_input_error


def parse_args(argv=None):
    from configs.pretraining_arguments import add_pretraining_arguments

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pretraining_arguments(parser)
    return parser.parse_args(argv)


def prepare(args):
    """Validates everything (nothing written yet); returns the Run to start."""
    from configs.resolve import check_batch, resolve_run

    resolved = resolve_run(args.model_name, args.hparams, args.data_dir or paths.default_data_dir())
    config = resolved.config
    from training.cpu_features import turn_on_onednn

    turn_on_onednn(precision=config.mixed_precision)  # before TensorFlow is imported (nothing above imports it)
    if config.xla_fuse_elementwise:
        from training.xla_fusion import fuse_elementwise_with_xla

        fuse_elementwise_with_xla()  # the same: TensorFlow reads its XLA flags once

    from model.elementwise_gradients import by_hand
    from storage import folder_lock, model_folder

    by_hand(True)  # a bad ELECTRA_ELEMENTWISE_GRADIENTS: its one line before anything is written

    model_folder.require_tensorflow_backend("run_pretraining.py")
    from training import strategy as strategy_lib

    strategy = strategy_lib.select_strategy(args.tpu)
    check_batch(config, strategy.num_replicas_in_sync)
    warn_emulated_bf16(config.mixed_precision, strategy_lib.device_kind())
    # before the resume check reads the folder; the chief's alone: a multi-worker run's workers share its folder
    lock = (folder_lock.acquire(config.model_dir, "pretraining") if strategy_lib.is_chief(strategy)
            else folder_lock.shared())
    try:
        run = resume_or_start(args, resolved, strategy)
    except BaseException:
        lock.release()  # a refused run leaves the folder to the next one at once
        raise
    run.folder_lock = lock  # held for as long as the run lives
    return run


def resume_or_start(args, resolved, strategy):
    """The Run, resuming the model folder's checkpoints if it has any (checked against this run)."""
    from storage import model_folder, resume
    from training.loop import Run

    config = resolved.config
    has_checkpoint = model_folder.latest_checkpoint(config.model_dir) is not None
    saved = resume.check_resume(config, config.model_dir, has_checkpoint)
    if has_checkpoint:
        resume.check_resume_vocabulary(config.model_dir, resolved.metadata, resolved.dataset_dir)
    init = None
    if args.init_checkpoint and not has_checkpoint:
        init = model_folder.resolve_checkpoint(args.init_checkpoint)
    return Run(config, strategy, resolved.dataset_dir, resolved.metadata, resolved.train_files, resolved.eval_files,
               resolved.vocab_file, init_checkpoint=init, saved_config=saved)


def warn_emulated_bf16(precision, device_kind):
    """One line on stderr when mixed_bfloat16 runs on a CPU that emulates bfloat16 (slower than float32)."""
    if precision != "mixed_bfloat16" or device_kind != "CPU":
        return
    from training.cpu_features import bf16_cpu_warning, read_cpu_features
    warning = bf16_cpu_warning(precision, True, read_cpu_features())
    if warning:
        print(warning, file=sys.stderr, flush=True)


def main(argv=None):
    if os.environ.get("KERAS_BACKEND") == "jax":  # the same command on the JAX step, without TensorFlow
        from training_jax import from_dataset

        return from_dataset.main(argv)
    return main_tensorflow(argv)


@exit_on_input_error
def main_tensorflow(argv=None):
    args = parse_args(argv)
    run = prepare(args)
    with run.folder_lock:
        return run.run()


if __name__ == "__main__":
    main()
    sys.exit(0)
