"""Predictions on new text with a fine-tuned model: JSON lines out, one per input row, in input order.

    python -m inference.predict --model-dir electra_data/models/electra_small/finetuning_models/sst_model_1 new.csv
    python -m inference.predict --model-name electra_small --task sst new.jsonl --output predictions.jsonl
    python -m inference.predict --model-dir exports/sst/1 new.tsv          # the exported SavedModel
    python -m inference.predict --model-dir exports/sst_onnx new.tsv       # an ONNX export, with ONNX Runtime
    cat sentences.txt | python -m inference.predict --model-dir .../sst_model_1 > predictions.jsonl

The model: a fine-tuned model folder (`<model dir>/finetuning_models/<task>_model_<trial>/`, as
run_finetuning.py writes it, for any task: GLUE, chunking, SQuAD/MRQA and tasks from your own files), a
pretrained model folder with --task (its newest fine-tuned model of that task), or the SavedModel that
`python -m checkpoints.export --format saved_model` made of one, or its `--format onnx` export folder
(run by ONNX Runtime, inference/onnx_folder.py, the tokenizer outside the graph as here). Its task,
kind, label names, pair or single input and max_seq_length are read from the folder (finetuning_info.json,
the SavedModel's electra_serving.json or the ONNX folder's electra_onnx.json), never from a list of known
tasks.

The input (a file, or stdin when none is given): CSV, TSV (no quoting, as GLUE's), JSON lines (.jsonl;
.gz too), or plain text with one text per line; by the file's suffix, else guessed from its first line.
Text columns: --text-fields, else Hugging Face run_glue's defaults (sentence1/sentence2 for a pair model,
sentence, else text, for one text; a one-column file's column), tokens/words for a tagger (a list of words
in JSON, else whitespace-separated words), question/context for question answering. Other columns are
ignored.

Output, one JSON object per row (`"line"`: where the row starts in the input):
  classification  {"line": 2, "label": "1", "probabilities": {"0": 0.03, "1": 0.97}}
  regression      {"line": 2, "score": 3.81}          (on the task's scale: score_range applied)
  tagging         {"line": 2, "words": [...], "tags": [...]}   (a tag per word; null past max_seq_length)
  span (QA)       {"line": 2, "answer": "...", "start": 17, "end": 29, "score": -0.4, "null_odds": -3.1}
                  (start/end: characters of the context, end exclusive; SQuAD 2.0 answers "" with null
                  start/end where null_odds exceeds --null-threshold)
plus "truncated": true on a row longer than the model's max_seq_length (its first tokens were read).

Rows are read in windows of --window rows; each window is tokenized at once, sorted by length, cut into
batches of --batch-size padded to their longest row, and its outputs put back in input order. The whole
input is checked before the model is loaded: a row that cannot be read stops the command with its file and
line (exit code 2) and nothing is written; --skip-malformed skips such rows and reports how many. The
output is written under a temporary name and renamed when complete (stdout gets it at the end). Progress
with rate and ETA goes to stderr for inputs of 1,000 rows or more.

--matmul-dtype bfloat16 (a fine-tuned model folder only; an export runs as it was exported): the dense
projections' matmuls take bfloat16 operands, everything else stays float32 (model/matmul.py), faster on CPUs with
AMX or avx512_bf16; the probabilities move by bfloat16's rounding (docs/benchmarks.md has the speed and the labels
that change on SST-2).
"""
# This module is the command (its docstring is --help). Which model a path means: inference/sources.py; the
# predictors: inference/predictors.py; the output objects: inference/outputs.py; the input: inference/inputs.py
# and inference/rows.py.
import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from common import atomic  # noqa: E402
from common.errors import InputError, exit_on_input_error  # noqa: E402
from data import paths  # noqa: E402
from data.progress import ProgressLine  # noqa: E402
from inference.inputs import Input, check_rows, windows  # noqa: E402
from inference.predictors import check_matmul_dtype, load_predictor  # noqa: E402
from inference.rows import FORMATS  # noqa: E402
from inference.sources import resolve_model  # noqa: E402

DEFAULT_BATCH_SIZE = 64
DEFAULT_WINDOW = 4096  # rows sorted by length together: ~64 batches, so padding is little and memory bounded
PROGRESS_MIN_ROWS = 1000
PROGRESS_AFTER_S = 3.0  # no line before this: the first batch's compilation would make a wild ETA
MATMUL_DTYPES = ("float32", "bfloat16")  # model.matmul's, named here so that ONNX predictions import no Keras


def parse_args(argv=None):
    """The command's options, checked (argparse's usage error, exit 2, on a bad combination).

    Args:
        argv: the arguments after the command; None: sys.argv's.
    """
    parser = argparse.ArgumentParser(prog="python -m inference.predict", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="?", default=None,
                        help="CSV, TSV, JSON lines (.jsonl, .gz too) or text file; - or none: stdin")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--model-dir", type=pathlib.Path,
                       help="a fine-tuned model folder (finetuning_models/<task>_model_<trial>/), its exported "
                            "SavedModel or ONNX folder, or a pretrained model folder with --task")
    where.add_argument("--model-name", help="a model folder under <data-dir>/models/ (with --task)")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"with --model-name: default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    parser.add_argument("--task", help="with a pretrained model folder: predict with its newest fine-tuned model "
                                       "of this task")
    parser.add_argument("--output", "-o", default=None, help="the JSON lines file to write (default stdout)")
    parser.add_argument("--input-format", choices=FORMATS, default=None,
                        help="default: by the file's suffix, else guessed from its first line")
    parser.add_argument("--text-fields", default=None,
                        help="the text column(s), comma-separated (a pair model: two; QA: question,context)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="rows per forward pass")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                        help="rows sorted by length together before batching (order restored after)")
    parser.add_argument("--skip-malformed", action="store_true",
                        help="skip rows that cannot be read (counted and reported) instead of stopping")
    parser.add_argument("--matmul-dtype", choices=MATMUL_DTYPES, default="float32",
                        help="a fine-tuned model folder only: bfloat16 gives the dense projections' matmuls "
                             "bfloat16 operands, everything else float32 (faster on CPUs with AMX or "
                             "avx512_bf16; model/matmul.py); default float32, the model as fine-tuning "
                             "evaluated it")
    parser.add_argument("--null-threshold", type=float, default=None,
                        help="QA: answer \"\" where the null odds exceed this (default: -2.75 for SQuAD 2.0 "
                             "models, else always the best span)")
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.window < 1:
        parser.error("--batch-size and --window must be at least 1")
    if args.data_dir is not None and args.model_name is None:
        parser.error("--data-dir goes with --model-name")
    return args


def text_fields(args, source):
    """The `--text-fields` columns, as many as the model reads; None without the option (the defaults).

    Args:
        args: `parse_args`' result.
        source: the resolved `inference.sources.ModelSource` (its `role` says how many columns).
    """
    if not args.text_fields:
        return None
    fields = [field.strip() for field in args.text_fields.split(",") if field.strip()]
    need = 2 if source.role in ("pair", "qa") else 1
    if len(fields) != need:
        what = {"pair": "a sentence-pair model", "qa": "a question-answering model (question,context)"}.get(
            source.role, f"a {source.kind} model of one text")
        raise InputError(f"--text-fields {args.text_fields!r}: {what} reads {need} column{'s' if need > 1 else ''}; "
                         f"name {need}")
    return fields


@exit_on_input_error
def main(argv=None, stdout=None):
    """Predicts every row of the input with the model the options name; the summary `predict` returns.

    Bad input ends in one line naming the file and the fix, exit code 2 (`exit_on_input_error`).

    Args:
        argv: the command's arguments; None: sys.argv's.
        stdout: where the JSON lines go without `--output` (default sys.stdout).

    Example:

    ```python
    summary = main(["--model-dir", "exports/sst_onnx", "new.tsv", "--output", "predictions.jsonl"])
    summary["rows"], summary["seconds"]
    ```
    """
    args = parse_args(argv)
    stdout = stdout or sys.stdout
    model_dir = args.model_dir
    if model_dir is None:
        model_dir = paths.models_dir(args.data_dir or paths.default_data_dir()) / args.model_name
    source = resolve_model(model_dir, args.task)
    check_matmul_dtype(source, args.matmul_dtype)  # before the input is read
    fields = text_fields(args, source)
    source_input = Input(args.input, args.input_format, fields, source.role)
    try:
        return predict(args, source, source_input, stdout)
    finally:
        source_input.close()


def predict(args, source, source_input, stdout):
    """Checks the whole input, loads the predictor, writes one JSON line per row in input order.

    Returns {"rows", "skipped", "truncated", "seconds"}; the summary lines go to stderr.

    Args:
        args: `parse_args`' result.
        source: the resolved `inference.sources.ModelSource`.
        source_input: the `inference.inputs.Input` to read.
        stdout: where the lines go when `args.output` is unset or "-".
    """
    total, malformed = check_rows(source_input, args.skip_malformed)

    predictor = load_predictor(source, args.batch_size, args.null_threshold, args.matmul_dtype)
    describe = lambda done, elapsed: f"{done:,.0f}/{total:,} rows, {done / elapsed:,.1f} rows/s"  # noqa: E731
    progress = ProgressLine("predicting", total, describe) if total >= PROGRESS_MIN_ROWS else None
    started = time.perf_counter()
    done, truncated = 0, 0

    shown = False

    def advance(count):
        nonlocal done, shown
        done += count
        if progress is not None and time.perf_counter() - started >= PROGRESS_AFTER_S:
            progress.update(done)
            shown = True

    target = pathlib.Path(args.output) if args.output not in (None, "-") else None
    with (atomic.atomic_path(target) if target else _stdout_spool(stdout)) as out:
        with open(out, "w", encoding="utf-8") as handle:
            for window in windows(source_input.rows(), max(args.window, args.batch_size)):
                for result in predictor.predict(window, advance):
                    truncated += bool(result.get("truncated"))
                    handle.write(json.dumps(result, ensure_ascii=False) + "\n")
    seconds = time.perf_counter() - started
    if shown:
        progress.finish(done)
    if malformed:
        shown = ", ".join(str(line) for line in list(malformed)[:20]) + (" …" if len(malformed) > 20 else "")
        print(f"skipped {len(malformed)} malformed row{'s' if len(malformed) > 1 else ''} of {source_input.where}: "
              f"line{'s' if len(malformed) > 1 else ''} {shown}", file=sys.stderr)
    if truncated:
        print(f"note: {truncated} row{'s' if truncated > 1 else ''} longer than the model's {source.max_seq_length} "
              "tokens: their first tokens were read (\"truncated\": true)", file=sys.stderr)
    print(f"predicted {total:,} row{'s' if total > 1 else ''} with {source.task} ({source.kind}) in {seconds:.1f} s "
          f"({total / max(seconds, 1e-9):,.1f} rows/s); wrote {target or 'stdout'}", file=sys.stderr)
    return {"rows": total, "skipped": len(malformed), "truncated": truncated, "seconds": seconds}


class _stdout_spool:
    """Yields a temporary path; on success its lines are copied to stdout, so a failure prints nothing."""

    def __init__(self, stdout):
        self.stdout = stdout

    def __enter__(self):
        handle, name = tempfile.mkstemp(prefix="electra_predict_", suffix=".jsonl")
        os.close(handle)
        self.path = pathlib.Path(name)
        return self.path

    def __exit__(self, kind, value, traceback):
        try:
            if kind is None:
                with open(self.path, encoding="utf-8") as handle:
                    shutil.copyfileobj(handle, self.stdout)
                self.stdout.flush()
        finally:
            self.path.unlink(missing_ok=True)
        return False


if __name__ == "__main__":
    main()
    sys.exit(0)
