"""Fine-tunes a pretrained ELECTRA on GLUE tasks, SQuAD, MRQA sets, CoNLL-2000 chunking or a task of your own
files with the original's heads and recipe.

    python run_finetuning.py --model-name electra_small --task mnli
    python run_finetuning.py --model-name my_model --task cola,sts --num-trials 10 --do-predict
    python run_finetuning.py --model-name my_model --task cola,sst,mrpc,sts,rte --each-task   # GLUE's table
    python run_finetuning.py --model-name electra_base --task squad --hparams '{"learning_rate": 5e-5}'
    python run_finetuning.py --model-name electra_small --task my_task --train-file train.csv \\
        --dev-file dev.jsonl --text-fields question,sentence --label-field label
    python run_finetuning.py --model-name electra_small --task my_ner --train-file train.conll \\
        --dev-file dev.conll --task-type tagging --text-fields 0 --label-field 3

Reads the pretrained folder <data-dir>/models/<model-name>/ (config.json, vocabulary, latest checkpoint)
and the task data under <data-dir>/finetuning_data/ (or --finetuning-data-dir): <task>/ with the
original's lower-case names or GLUE's and SQuAD's own (SST-2/, glue_data/STS-B/, train-v2.0.json).
A task of your own files (any name that is not a built-in task's) is read from --train-file, --dev-file
and --test-file (CSV, TSV, JSON lines; CoNLL-style column files for tagging) or a --task-spec JSON file;
question answering on your own files is --task squadv1 / squad (SQuAD-format train.json and dev.json in
<finetuning-data-dir>/squad/) or --task mrqa:<name> (an MRQA-format set in <finetuning-data-dir>/<name>/).
Writes into the model folder: results/<task>_results.json (every trial, median/mean/std; rewritten after each
trial, so the same command after a stop continues after the finished trials of the same config),
finetuning_models/<task>_model_<trial>/, finetuning_logs/ (TensorBoard) and, with --do-predict,
test_predictions/trial_<k>/ (GLUE submission TSVs, SQuAD prediction JSON with null odds, chunk_test.txt,
<task>_test.tsv or <task>_test.txt for your own tasks).

Under JAX (KERAS_BACKEND=jax, on a machine with or without TensorFlow) the same command reads and writes the
same files: tokenization in Python, checkpoints with NumPy, TensorBoard event files written by hand, and the
training step of training_jax.finetune, with the platform's speed settings (on a GPU or TPU bfloat16, length
buckets and 16 updates per dispatch; on the CPU the original's float32 single
updates); the flags under "speed under KERAS_BACKEND=jax" change them.
"""
import argparse
import os
import pathlib
import sys

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from data import paths
from storage import folder_lock
from common.errors import InputError, exit_on_input_error


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-name", required=True, help="a pretrained model folder under <data-dir>/models/")
    parser.add_argument("--task", required=True,
                        help="cola, sst, mrpc, sts, qqp, mnli, qnli, rte, wnli, squad (2.0), squadv1, newsqa, "
                             "naturalqs, triviaqa, searchqa, mrqa:<name>, chunk (CoNLL-2000), or a name of your "
                             "own with --train-file/--dev-file or --task-spec. Question answering on your own "
                             "files: SQuAD-format train.json/dev.json in <finetuning-data-dir>/squad/ (--task "
                             "squadv1, or squad with unanswerable questions) or an MRQA-format set in "
                             "<finetuning-data-dir>/<name>/ (--task mrqa:<name>). Several tasks separated by "
                             "commas share one "
                             "encoder (a head each), their examples mixed in every batch as the original's "
                             "(hparams multitask_batches)")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    parser.add_argument("--finetuning-data-dir", type=pathlib.Path, default=None,
                        help="where the task folders are (default <data-dir>/finetuning_data)")
    parser.add_argument("--hparams", default="", help="JSON object (inline or a .json file) of FinetuningConfig "
                                                       "overrides (configs/finetuning_config.py)")
    parser.add_argument("--num-trials", type=int, default=None, help="trials with seeds seed, seed+1, … "
                                                                      "(default 1; same as hparams num_trials)")
    parser.add_argument("--do-predict", action="store_true", help="also write test-set predictions")
    parser.add_argument("--matmul-dtype", default=None,
                        help="float32 (default, the original's arithmetic) or bfloat16: the dense projections' "
                             "matmuls take bfloat16 operands, everything else stays float32 (faster on CPUs with "
                             "AMX or avx512_bf16; same as hparams matmul_dtype; configs/finetuning_config.py)")
    parser.add_argument("--each-task", action="store_true",
                        help="fine-tune each task of --task on its own (its own encoder, recipe and results), one "
                             "after another in this process, instead of one encoder shared by all: GLUE's table in "
                             "one command (under JAX the tasks of one head kind share their compiled programs)")
    parser.add_argument("--skip-bad-rows", action="store_true",
                        help="skip rows that cannot be parsed (GLUE TSV rows, MRQA lines, CoNLL sentences, rows "
                             "of your own files), as "
                             "the original did, with a count per file, instead of stopping (same as hparams "
                             "skip_bad_rows)")
    own = parser.add_argument_group(
        "a task of your own files", "flags named as Hugging Face's run_glue / run_ner examples name theirs; the "
        "full reference, formats and errors: docs/finetuning.md#your-own-files")
    own.add_argument("--train-file", "--train_file", dest="train_file", default=None,
                     help="training rows: .csv, .tsv, .jsonl (.json; .gz too) with a header / keys naming the "
                          "fields; for tagging a CoNLL-style column file (a word and its tag per line)")
    own.add_argument("--dev-file", "--validation-file", "--validation_file", dest="dev_file", default=None,
                     help="the rows the metrics are computed on (same fields as the training file)")
    own.add_argument("--test-file", "--test_file", dest="test_file", default=None,
                     help="rows to predict with --do-predict (labels not needed)")
    own.add_argument("--text-fields", default=None,
                     help="one or two text fields, comma-separated (default sentence1,sentence2 when both "
                          "exist, else sentence, else text); tagging: the word's column number (default 0)")
    own.add_argument("--label-field", default=None,
                     help="the label field (default label); tagging: the tag's column number (default -1, "
                          "the last)")
    own.add_argument("--task-type", choices=("classification", "regression", "tagging"), default=None,
                     help="default classification for a .csv/.tsv/.jsonl training file, else tagging; "
                          "regression needs numeric labels")
    own.add_argument("--label-names", default=None,
                     help="classification: the labels in the head's order, comma-separated (default: the "
                          "training file's, sorted as run_glue sorts them, as numbers when all are integers)")
    own.add_argument("--score-range", default=None,
                     help="regression: MIN,MAX of the scores (default the training file's); targets are "
                          "(score - MIN) / MAX, as STS-B's")
    own.add_argument("--task-spec", type=pathlib.Path, default=None,
                     help="a JSON file describing your task(s) instead of the flags above: one object (or a "
                          "list) with name, task_type, train_file, dev_file, test_file, text_fields, "
                          "label_field, label_names, score_range, unordered_pairs, format; paths relative to "
                          "the file")
    from training_jax.finetune_settings import add_flags

    add_flags(parser)
    return parser.parse_args(argv)


def on_jax():
    """Whether this run trains under JAX (KERAS_BACKEND=jax): read before Keras or TensorFlow is imported."""
    return os.environ["KERAS_BACKEND"] == "jax"


OWN_FLAGS = ("train_file", "dev_file", "test_file", "text_fields", "label_field", "task_type", "label_names",
             "score_range")


def own_tasks(args):
    """The tasks of the user's files that the flags or --task-spec describe (finetune.custom); [] for none.
    Every name in --task that is not a built-in task's must be one of them."""
    from finetune.custom.spec import from_flags, read_spec_file
    from finetune.custom.task import make_task
    from finetune.registry import FAMILIES, task_names

    builtin = task_names() + list(FAMILIES)
    given = [name for name in OWN_FLAGS if getattr(args, name) is not None]
    names = [part.strip() for part in (args.task or "").split(",") if part.strip()]
    new = [name for name in names if name.lower() not in builtin and name.partition(":")[0].lower() not in FAMILIES]
    if args.task_spec is not None:
        if given:
            raise InputError(f"--task-spec with --{given[0].replace('_', '-')}: describe a task of your own files "
                             "either by the flags or by the spec file, not both")
        specs = read_spec_file(args.task_spec, builtin)
        described = [spec.name.lower() for spec in specs]
        for name in new:
            if name.lower() not in described:
                raise InputError(f"--task {name}: neither a built-in task nor in --task-spec {args.task_spec} "
                                 f"(which describes {', '.join(spec.name for spec in specs)})")
        return [make_task(spec) for spec in specs]
    if not given:
        return []  # an unknown name is then refused by the registry, with the list of tasks
    if len(new) > 1:
        raise InputError(f"--task {args.task}: the file flags describe one task of your own files, and "
                         f"{', '.join(new)} are all new names; describe several with --task-spec")
    if not new and len(names) != 1:
        raise InputError(f"--task {args.task}: with --{given[0].replace('_', '-')}, name your own task in --task "
                         "(a name that is not a built-in task's, e.g. my_task)")
    name = new[0] if new else names[0]  # a built-in name alone is refused by the spec's check, with a fix
    if args.do_predict and args.test_file is None:
        raise InputError(f"--do-predict for task {name}: no --test-file; pass the rows to predict with --test-file")
    return [make_task(from_flags(name, args.train_file, args.dev_file, args.test_file, args.text_fields,
                                 args.label_field, args.task_type, args.label_names, args.score_range,
                                 builtin_names=builtin))]


def prepare(args, say=print):
    from configs.finetuning_config import FinetuningConfig
    from finetune.pretrained import read_model_folder
    from finetune.registry import parse_task_list

    data_dir = args.data_dir or paths.default_data_dir()
    tasks = parse_task_list(args.task, own_tasks(args))
    pretrained = read_model_folder(paths.models_dir(data_dir) / args.model_name)
    overrides = {}
    if args.num_trials is not None:
        if args.num_trials < 1:
            raise InputError(f"--num-trials {args.num_trials}: must be at least 1")
        overrides["num_trials"] = args.num_trials
    if args.skip_bad_rows:
        overrides["skip_bad_rows"] = True
    if args.matmul_dtype is not None:
        overrides["matmul_dtype"] = args.matmul_dtype  # checked by FinetuningConfig
    if args.each_task and len(tasks) < 2:
        raise InputError(f"--each-task with --task {args.task}: name several tasks (e.g. cola,sst,mrpc,sts,rte) to "
                         "fine-tune each on its own, or leave --each-task out")
    # each task with its own encoder and recipe (--each-task), or all of them sharing one (the original's)
    groups = [[task] for task in tasks] if args.each_task else [tasks]
    configs = [FinetuningConfig.create(args.hparams, pretrained.recipe_size, [t.recipe_name for t in group],
                                       overrides=overrides) for group in groups]
    if on_jax() and any(config.skip_padding for config in configs):
        raise InputError("--hparams skip_padding: TensorFlow's option (a jitted JAX step needs the batch's shape, "
                         "not its count of real tokens); leave it out under KERAS_BACKEND=jax")
    limit = pretrained.model_config.max_position_embeddings
    if configs[0].max_seq_length > limit:
        raise InputError(f"--hparams max_seq_length {configs[0].max_seq_length} exceeds the model's "
                         f"{limit} positions ({pretrained.folder}/config.json); use at most {limit}")
    data_root = args.finetuning_data_dir or pathlib.Path(data_dir) / "finetuning_data"
    return pretrained, list(zip(groups, configs)), data_root


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    if on_jax():
        from training_jax.pretrain import without_tensorflow

        without_tensorflow()  # as on a GPU machine, which has none: tokenizer, checkpoints and logs in Python
    else:
        from training.cpu_features import turn_on_onednn
        from training_jax.finetune_settings import given_flags

        if given_flags(args):
            raise InputError(f"{given_flags(args)[0]}: a flag of fine-tuning under JAX; run with KERAS_BACKEND=jax "
                             "or leave it out")
        turn_on_onednn()  # before TensorFlow is imported
        from model.elementwise_gradients import by_hand

        by_hand(True)  # a bad ELECTRA_ELEMENTWISE_GRADIENTS: its one line before anything is written
    pretrained, groups, data_root = prepare(args)
    from finetune.trials import prepare_tasks

    tokenizer = pretrained.tokenizer()
    # every group's files read and featurized before any training: a bad file stops the run at once
    prepared = [(tasks, config, prepare_tasks(tasks, data_root, tokenizer, config, do_predict=args.do_predict))
                for tasks, config in groups]
    every = [task for tasks, _ in groups for task in tasks]
    names = "+".join(t.name for t in every)
    logs = pretrained.folder / "finetuning_logs"
    stems = "+".join(t.file_stem for t in every)  # no colon in folder names (mrqa:<name> → mrqa-<name>)
    with folder_lock.acquire(pretrained.folder, f"fine-tuning {names} from this model", name=f"finetuning-{stems}",
                             fix="wait for it to finish or stop it"):
        if not on_jax():  # after every input is checked: a bad file's error stays the one line on stderr
            note_bf16_matmuls([config for _, config in groups])
        all_trials = {}
        for tasks, config, task_data in prepared:
            group_names, group_stems = "+".join(t.name for t in tasks), "+".join(t.file_stem for t in tasks)
            all_trials.update(run_trials(pretrained, config, tasks, task_data, args, group_names, group_stems, logs))
        return all_trials


def note_bf16_matmuls(configs):
    """One line on stderr where this CPU has native bfloat16 and the dense products stay float32 (the default):
    training.cpu_features.bf16_matmuls_note. TensorFlow on a CPU only (a GPU it sees gets no note)."""
    import tensorflow as tf

    from training.cpu_features import bf16_matmuls_note, read_cpu_features

    if any(config.matmul_dtype != "float32" for config in configs):
        return
    note = bf16_matmuls_note("float32", not tf.config.list_physical_devices("GPU"), read_cpu_features())
    if note:
        print(note, file=sys.stderr, flush=True)


def run_trials(pretrained, config, tasks, task_data, args, names, stems, logs):
    from finetune.reporter import Reporter
    from finetune.trials import TrialRunner, results_table

    multitask = f" ({config.multitask_batches.replace('_', '-')} batches)" if len(tasks) > 1 else ""
    options = {"do_predict": args.do_predict,
               "reporter_factory": lambda trial: Reporter(logs / f"{stems}_trial_{trial + 1}")}
    if on_jax():
        from training_jax.finetune import product_runner

        runner = product_runner(args, pretrained, config, task_data, **options)
        print(f"Under JAX: {runner.settings.describe()}", flush=True)
    else:
        runner = TrialRunner(pretrained, config, task_data, pretrained.folder, **options)
    print(f"Fine-tuning {pretrained.folder.name} ({pretrained.recipe_size} recipe: lr {config.learning_rate:g}, "
          f"layer-wise decay {config.layerwise_lr_decay:g} {config.layerwise_lr_variant}, "
          f"{config.num_train_epochs:g} epochs, batch {config.train_batch_size}, max length "
          f"{config.max_seq_length}) on {names}{multitask}: {runner.num_steps} steps per trial, "
          f"{config.num_trials} trial(s)",
          flush=True)
    all_trials = runner.run(resume=True)  # a run cut off between trials continues after its finished ones
    print(results_table(all_trials, task_data))
    for task in tasks:
        print(f"Results: {runner.results_path(task)}")
    return all_trials


if __name__ == "__main__":
    main()
    sys.exit(0)
