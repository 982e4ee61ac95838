"""Fine-tunes a pretrained ELECTRA on GLUE tasks, SQuAD, MRQA sets or CoNLL-2000 chunking with the
original's heads and recipe.

    python run_finetuning.py --model-name electra_small --task mnli
    python run_finetuning.py --model-name my_model --task cola,sts --num-trials 10 --do-predict
    python run_finetuning.py --model-name electra_base --task squad --hparams '{"learning_rate": 5e-5}'

Reads the pretrained folder <data-dir>/models/<model-name>/ (config.json, vocabulary, latest checkpoint)
and the task data under <data-dir>/finetuning_data/ (or --finetuning-data-dir): <task>/ with the
original's lower-case names or GLUE's and SQuAD's own (SST-2/, glue_data/STS-B/, train-v2.0.json).
Writes into the model folder: results/<task>_results.json (every trial, median/mean/std),
finetuning_models/<task>_model_<trial>/, finetuning_logs/ (TensorBoard) and, with --do-predict,
test_predictions/trial_<k>/ (GLUE submission TSVs, SQuAD prediction JSON with null odds, chunk_test.txt).
"""
import argparse
import os
import pathlib
import sys

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from data import paths
from common.errors import InputError, exit_on_input_error


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-name", required=True, help="a pretrained model folder under <data-dir>/models/")
    parser.add_argument("--task", required=True,
                        help="cola, sst, mrpc, sts, qqp, mnli, qnli, rte, wnli, squad (2.0), squadv1, newsqa, "
                             "naturalqs, triviaqa, searchqa, mrqa:<name> (any MRQA-format set), chunk "
                             "(CoNLL-2000); several separated by commas share one encoder (a head each), their "
                             "examples mixed in every batch as the original's (hparams multitask_batches)")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    parser.add_argument("--finetuning-data-dir", type=pathlib.Path, default=None,
                        help="where the task folders are (default <data-dir>/finetuning_data)")
    parser.add_argument("--hparams", default="", help="JSON object (inline or a .json file) of FinetuningConfig "
                                                       "overrides (configs/finetuning_config.py)")
    parser.add_argument("--num-trials", type=int, default=None, help="trials with seeds seed, seed+1, … "
                                                                      "(default 1; same as hparams num_trials)")
    parser.add_argument("--do-predict", action="store_true", help="also write test-set predictions")
    parser.add_argument("--skip-bad-rows", action="store_true",
                        help="skip rows that cannot be parsed (GLUE TSV rows, MRQA lines, CoNLL sentences), as "
                             "the original did, with a count per file, instead of stopping (same as hparams "
                             "skip_bad_rows)")
    return parser.parse_args(argv)


def prepare(args, say=print):
    from configs.finetuning_config import FinetuningConfig
    from finetune.pretrained import read_model_folder
    from finetune.registry import parse_task_list

    data_dir = args.data_dir or paths.default_data_dir()
    tasks = parse_task_list(args.task)
    pretrained = read_model_folder(paths.models_dir(data_dir) / args.model_name)
    overrides = {}
    if args.num_trials is not None:
        if args.num_trials < 1:
            raise InputError(f"--num-trials {args.num_trials}: must be at least 1")
        overrides["num_trials"] = args.num_trials
    if args.skip_bad_rows:
        overrides["skip_bad_rows"] = True
    config = FinetuningConfig.create(args.hparams, pretrained.recipe_size, [t.name for t in tasks],
                                     overrides=overrides)
    limit = pretrained.model_config.max_position_embeddings
    if config.max_seq_length > limit:
        raise InputError(f"--hparams max_seq_length {config.max_seq_length} exceeds the model's "
                         f"{limit} positions ({pretrained.folder}/config.json); use at most {limit}")
    data_root = args.finetuning_data_dir or pathlib.Path(data_dir) / "finetuning_data"
    return pretrained, config, tasks, data_root


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    from training.cpu_features import turn_on_onednn

    turn_on_onednn()  # before TensorFlow is imported
    pretrained, config, tasks, data_root = prepare(args)
    from finetune.trials import TrialRunner, prepare_tasks, results_table
    from training.reporting import Reporter

    tokenizer = pretrained.tokenizer()
    task_data = prepare_tasks(tasks, data_root, tokenizer, config, do_predict=args.do_predict)
    names = "+".join(t.name for t in tasks)
    multitask = f" ({config.multitask_batches.replace('_', '-')} batches)" if len(tasks) > 1 else ""
    logs = pretrained.folder / "finetuning_logs"
    stems = "+".join(t.file_stem for t in tasks)  # no colon in folder names (mrqa:<name> → mrqa-<name>)
    runner = TrialRunner(pretrained, config, task_data, pretrained.folder, do_predict=args.do_predict,
                         reporter_factory=lambda trial: Reporter(logs / f"{stems}_trial_{trial + 1}"))
    print(f"Fine-tuning {pretrained.folder.name} ({pretrained.recipe_size} recipe: lr {config.learning_rate:g}, "
          f"layer-wise decay {config.layerwise_lr_decay:g} {config.layerwise_lr_variant}, "
          f"{config.num_train_epochs:g} epochs, batch {config.train_batch_size}, max length "
          f"{config.max_seq_length}) on {names}{multitask}: {runner.num_steps} steps per trial, "
          f"{config.num_trials} trial(s)",
          flush=True)
    all_trials = runner.run()
    print(results_table(all_trials, task_data))
    for task in tasks:
        print(f"Results: {runner.results_path(task)}")
    return all_trials


if __name__ == "__main__":
    main()
    sys.exit(0)
