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
(run by ONNX Runtime, inference/onnx_predictor.py, the tokenizer outside the graph as here). Its task,
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
"""
import argparse
import dataclasses
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

import numpy as np  # noqa: E402

from common import atomic  # noqa: E402
from common.errors import InputError, exit_on_input_error  # noqa: E402
from data import paths  # noqa: E402
from data.progress import ProgressLine  # noqa: E402
from inference import rows as rows_lib  # noqa: E402

DEFAULT_BATCH_SIZE = 64
DEFAULT_WINDOW = 4096  # rows sorted by length together: ~64 batches, so padding is little and memory bounded
PROGRESS_MIN_ROWS = 1000
PROGRESS_AFTER_S = 3.0  # no line before this: the first batch's compilation would make a wild ETA
FINETUNING_INFO = "finetuning_info.json"  # finetune.saved.INFO_FILE
SERVING_INFO = "electra_serving.json"  # what checkpoints.saved_model writes beside a SavedModel
KINDS = ("classification", "regression", "tagging", "span")


# ------------------------------------------------------------------------------------------------ the model


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """What the input must hold and the output says, read from the folder before any weight."""
    path: pathlib.Path
    saved_model: bool
    task: str
    kind: str
    label_names: tuple
    is_pair: bool
    max_seq_length: int
    onnx: bool = False  # an ONNX export folder (model.onnx)

    @property
    def role(self):
        """What a row gives the model (inference.rows.DEFAULT_FIELDS' keys)."""
        if self.kind == "span":
            return "qa"
        if self.kind == "tagging":
            return "words"
        return "pair" if self.is_pair else "single"


def _read_json(path, fix):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: unreadable ({str(error)[:80]}); {fix}") from None


def newest_finetuned(model_dir, task):
    """The newest `finetuning_models/<task>_model_<trial>/` of a pretrained model folder (by the time its
    finetuning_info.json was written; the higher trial on a tie)."""
    folder = pathlib.Path(model_dir) / "finetuning_models"
    stem = task.strip().replace(":", "-")
    found = []
    for candidate in folder.glob(f"{stem}_model_*"):
        trial = candidate.name[len(stem) + len("_model_"):]
        if trial.isdigit() and (candidate / FINETUNING_INFO).is_file():
            found.append(((candidate / FINETUNING_INFO).stat().st_mtime, int(trial), candidate))
    if not found:
        have = sorted({p.name.rsplit("_model_", 1)[0] for p in folder.glob("*_model_*")
                       if p.name.rsplit("_model_", 1)[-1].isdigit()})
        raise InputError(f"{folder}: no fine-tuned model of task {task!r} (it has: {', '.join(have) or 'none'}); "
                         f"fine-tune one with run_finetuning.py --task {task}, or pick another --task")
    return max(found)[2]


def resolve_model(model_dir, task=None) -> ModelSource:
    """A fine-tuned folder, a pretrained folder + --task, or a SavedModel; InputError naming what is there."""
    path = pathlib.Path(model_dir)
    if not path.is_dir():
        raise InputError(f"--model-dir {path}: no such folder; pass a fine-tuned model folder "
                         "(<model dir>/finetuning_models/<task>_model_<trial>/) or its exported SavedModel")
    if (path / "model.onnx").is_file():
        from inference.onnx_predictor import source_fields

        return ModelSource(path, False, **source_fields(path), onnx=True)
    if (path / "saved_model.pb").is_file():
        return _saved_model_source(path)
    if (path / FINETUNING_INFO).is_file():
        return _folder_source(path)
    if (path / "finetuning_models").is_dir():
        if not task:
            tasks = sorted({p.name.rsplit("_model_", 1)[0] for p in (path / "finetuning_models").glob("*_model_*")
                            if (p / FINETUNING_INFO).is_file()})
            raise InputError(f"--model-dir {path}: a pretrained model folder; name the fine-tuned task with --task "
                             f"(it has: {', '.join(tasks) or 'none'})")
        return _folder_source(newest_finetuned(path, task))
    raise InputError(f"--model-dir {path}: neither a fine-tuned model folder ({FINETUNING_INFO}) nor a SavedModel "
                     "(saved_model.pb) nor a model folder with finetuning_models/; pass the folder run_finetuning.py "
                     "or checkpoints.export wrote")


def _folder_source(folder):
    info = _read_json(folder / FINETUNING_INFO, "re-run the fine-tuning that wrote it")
    try:
        kind, labels = info["kind"], tuple(info["label_names"])
        source = ModelSource(folder, False, info["task"], kind, labels, bool(info["is_pair"]),
                             int(info["max_seq_length"]))
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"{folder / FINETUNING_INFO}: lacks or garbles {error}; re-run the fine-tuning that wrote "
                         "it") from None
    if kind not in KINDS:
        raise InputError(f"{folder / FINETUNING_INFO}: kind {kind!r} is none of {', '.join(KINDS)}; this command "
                         "predicts those")
    if kind in ("classification", "tagging") and not labels:
        raise InputError(f"{folder / FINETUNING_INFO}: a {kind} model without label_names; re-run the fine-tuning")
    return source


def _saved_model_source(path):
    info_path = path / SERVING_INFO
    if not info_path.is_file():
        raise InputError(f"{path}: a SavedModel without {SERVING_INFO}; pass one written by python -m "
                         "checkpoints.export --format saved_model")
    info = _read_json(info_path, "re-export the SavedModel")
    outputs = set(info.get("outputs", []))
    kind = "tagging" if "tags" in outputs else "regression" if "score" in outputs else "classification"
    return ModelSource(path, True, info.get("task") or path.name, kind, tuple(info.get("label_names", [])),
                       bool(info.get("is_pair")), int(info.get("max_seq_length", 0)))


def _softmax(logits):
    logits = np.asarray(logits, np.float32)
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


class FolderPredictor:
    """A fine-tuned model folder's Keras model (finetune.saved.load_finetuned_model) and tokenizer, inputs
    built exactly as fine-tuning built them, one compiled call for every batch shape."""

    def __init__(self, source, batch_size, null_threshold=None):
        import tensorflow as tf

        from data.tokenization import load_tokenizer
        from finetune.saved import load_finetuned_model

        self.source, self.batch_size = source, batch_size
        self.model, self.info = load_finetuned_model(source.path)
        self.tokenizer = load_tokenizer(vocab_file=None if self.info.sp_model else self.info.vocab_file,
                                        spm_model=self.info.sp_model, lower_case=self.info.do_lower_case)
        spec = tf.TensorSpec([None, None], tf.int32)
        signature = {"input_ids": spec, "input_mask": spec, "segment_ids": spec}
        self._forward = tf.function(lambda inputs: self.model(inputs, training=False), input_signature=[signature])
        if source.kind == "span":
            self.qa = qa_settings(self.info, null_threshold)

    def run(self, sequences, done, min_length=1):
        """The model's outputs per sequence, in the sequences' order: length-sorted batches, each padded to
        its longest (finetune.batches, as fine-tuning's evaluation batches); `done(count)` after each."""
        from finetune.batches import iterate_batches

        outputs = [None] * len(sequences["input_ids"])
        for batch in iterate_batches(sequences, {}, self.batch_size, self.source.max_seq_length, rng=None,
                                     bucketing=True, min_length=min_length):
            result = self._forward({key: batch[key] for key in ("input_ids", "input_mask", "segment_ids")})
            if isinstance(result, dict):
                result = {key: np.asarray(value) for key, value in result.items()}
                for row, index in enumerate(batch["index"]):
                    outputs[index] = {key: value[row] for key, value in result.items()}
            else:
                result = np.asarray(result)
                for row, index in enumerate(batch["index"]):
                    outputs[index] = result[row]
            done(len(batch["index"]))
        return outputs

    def predict(self, rows, done=lambda count: None):
        """One output dict per row (rows_lib.Row), in the rows' order; `done(count)` after each batch."""
        kind = self.source.kind
        if kind == "tagging":
            return self._tag(rows, done)
        if kind == "span":
            return self._answer(rows, done)
        from finetune.features import pack

        special = self.tokenizer.special_ids
        pair = self.source.is_pair
        encoded = self.tokenizer.encode_batch([r.texts[0] for r in rows] + ([r.texts[1] for r in rows] if pair else []))
        sequences, cut = {"input_ids": [], "segment_ids": []}, []
        limit = self.source.max_seq_length
        for number in range(len(rows)):
            a, b = encoded[number], encoded[len(rows) + number] if pair else None
            ids, segments = pack(a, b, special.cls, special.sep, limit)
            sequences["input_ids"].append(ids)
            sequences["segment_ids"].append(segments)
            cut.append(len(a) + (len(b) + 3 if pair else 2) > limit)
        outputs = self.run(sequences, done)
        return [classification_output(self.source, self.info.score_range, row, output, truncated)
                for row, output, truncated in zip(rows, outputs, cut)]

    def _tag(self, rows, done):
        from finetune.tagging.featurize import align

        sentences = [_Words(row.texts[0]) for row in rows]
        aligned = align(sentences, self.tokenizer, self.source.max_seq_length)
        sequences = {"input_ids": [ids for ids, _ in aligned],
                     "segment_ids": [np.ones(len(ids), np.int32) for ids, _ in aligned]}  # as the tagging features
        results = []
        for row, (_, positions), logits in zip(rows, aligned, self.run(sequences, done)):
            tag_ids = np.asarray(logits)[positions].argmax(-1)
            results.append(tagging_output(self.source, row, [int(i) for i in tag_ids]))
        return results

    def _answer(self, rows, done):
        from finetune.squad.featurize import featurize_examples
        from finetune.squad.postprocess import answer_and_offsets, best_candidate
        from finetune.squad.reader import Paragraph, SquadExample, split_words

        qa = self.qa
        examples = [SquadExample(str(number), row.texts[0], Paragraph(row.texts[1], *split_words(row.texts[1])),
                                 [], "", -1, -1, False) for number, row in enumerate(rows)]
        windows = featurize_examples(examples, self.tokenizer, self.source.max_seq_length, qa.doc_stride,
                                     qa.max_query_length, training=False)
        sequences = {"input_ids": [w.input_ids for w in windows], "segment_ids": [w.segment_ids for w in windows]}
        by_example = {}
        for index, window in enumerate(windows):
            by_example.setdefault(window.example_index, []).append(index)
        per_window = self.run(sequences, lambda count: None, min_length=self.info.head.get("beam_size", 20))
        outputs = {key: [output[key] for output in per_window] for key in per_window[0]} if windows else {}
        results = []
        for number, (row, example) in enumerate(zip(rows, examples)):
            indices = by_example.get(number, [])
            best = best_candidate(indices, windows, outputs, qa) if indices else None
            null_odds = min(float(outputs["answerable_logit"][i]) for i in indices) if indices else None
            answer = {"line": row.line, "answer": "", "start": None, "end": None,
                      "score": None if best is None else best[0], "null_odds": null_odds}
            if best is not None and (qa.null_threshold is None or null_odds <= qa.null_threshold):
                text, start, end = answer_and_offsets(windows[best[1]], example, self.tokenizer, best[2], best[3],
                                                      self.tokenizer.lower_case)
                answer.update(answer=text, start=start, end=end)
            if len(self.tokenizer.encode(row.texts[0])) > qa.max_query_length:
                answer["truncated"] = True  # the question was cut; a long context is read in windows
            results.append(answer)
        done(len(rows))  # a row is done when all its windows are
        return results


class OnnxPredictor(FolderPredictor):
    """FolderPredictor with an ONNX export's tokenizer and forward pass (inference/onnx_predictor.py)."""

    def __init__(self, source, batch_size, null_threshold=None):
        from inference.onnx_predictor import OnnxModel

        self.source, self.batch_size = source, batch_size
        model = OnnxModel(source.path, source.task)
        self.info, self.tokenizer, self._forward = model.info, model.tokenizer, model.forward
        if source.kind == "span":
            self.qa = qa_settings(self.info, null_threshold)


class _Words:
    """What finetune.tagging.featurize.align reads of a sentence."""

    def __init__(self, words):
        self.words = list(words)


def qa_settings(info, null_threshold=None):
    """The span decoding settings: fine-tuning's defaults (configs/finetuning_config.py: doc stride,
    query and answer lengths) and the no-answer threshold: --null-threshold, else the original's -2.75 for a
    task whose questions may have no answer (SQuAD 2.0), else none (always the best span)."""
    import types

    from configs.finetuning_config import FinetuningConfig

    defaults = {field.name: field.default for field in dataclasses.fields(FinetuningConfig)}
    if null_threshold is None:
        try:
            from finetune.registry import get_task

            if getattr(get_task(info.task), "has_unanswerable", False):
                null_threshold = defaults["qa_na_threshold"]
        except InputError:  # a task of the user's own: nothing says its questions may have no answer
            pass
    return types.SimpleNamespace(doc_stride=defaults["doc_stride"], max_query_length=defaults["max_query_length"],
                                 max_answer_length=defaults["max_answer_length"], null_threshold=null_threshold)


def classification_output(source, score_range, row, output, truncated):
    if source.kind == "regression":
        value = float(np.asarray(output, np.float32).reshape(-1)[0])
        if score_range:
            low, high = score_range  # the head regresses (score − min) / max
            value = value * high + low
        result = {"line": row.line, "score": value}
    else:
        probabilities = _softmax(output)
        result = {"line": row.line, "label": source.label_names[int(np.argmax(probabilities))],
                  "probabilities": {name: float(p) for name, p in zip(source.label_names, probabilities)}}
    if truncated:
        result["truncated"] = True
    return result


def tagging_output(source, row, tag_ids):
    words = list(row.texts[0])
    tags = [source.label_names[i] for i in tag_ids] + [None] * (len(words) - len(tag_ids))
    result = {"line": row.line, "words": words, "tags": tags}
    if len(tag_ids) < len(words):
        result["truncated"] = True
    return result


class SavedModelPredictor:
    """The exported SavedModel's serving signature (it tokenizes, truncates and pads to max_seq_length in
    its graph, so its batches are cut in input order: sorting would not shorten them)."""

    def __init__(self, source, batch_size):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

        self.source, self.batch_size = source, batch_size
        self._loaded = tf.saved_model.load(str(source.path))  # the signature needs the object alive
        self._serve = self._loaded.signatures["serving_default"]
        self._tf = tf

    def predict(self, rows, done=lambda count: None):
        tf, source = self._tf, self.source
        results = []
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start:start + self.batch_size]
            if source.kind == "tagging":
                served = self._serve(text=tf.constant([" ".join(row.texts[0]) for row in chunk]))
                tags, counts = served["tag_ids"].numpy(), served["num_words"].numpy()
                results += [tagging_output(source, row, [int(i) for i in tags[n, :counts[n]]])
                            for n, row in enumerate(chunk)]
            else:
                names = ("text_a", "text_b") if source.is_pair else ("text",)
                served = self._serve(**{name: tf.constant([row.texts[i] for row in chunk])
                                        for i, name in enumerate(names)})
                for n, row in enumerate(chunk):
                    if source.kind == "regression":
                        results.append({"line": row.line, "score": float(served["score"].numpy()[n])})
                    else:
                        probabilities = served["probabilities"].numpy()[n]
                        results.append({"line": row.line,
                                        "label": source.label_names[int(np.argmax(probabilities))],
                                        "probabilities": {name: float(p) for name, p in
                                                          zip(source.label_names, probabilities)}})
            done(len(chunk))
        return results


def load_predictor(source, batch_size, null_threshold=None):
    if source.onnx:
        return OnnxPredictor(source, batch_size, null_threshold)
    from storage.model_folder import require_tensorflow_backend

    require_tensorflow_backend("inference.predict")
    if source.saved_model:
        return SavedModelPredictor(source, batch_size)
    return FolderPredictor(source, batch_size, null_threshold)


# ------------------------------------------------------------------------------------------------ the input


class Input:
    """The input as a file that can be read twice (stdin is copied to a temporary file first): once to
    check every row before the model is loaded, once to predict. close() removes the copy."""

    def __init__(self, path, fmt=None, fields=None, role="single"):
        self._temp = None
        if path is None or str(path) == "-":
            handle, name = tempfile.mkstemp(prefix="electra_predict_stdin_")
            with os.fdopen(handle, "wb") as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy)
            self.path = self._temp = pathlib.Path(name)
            self.where = "stdin"
        else:
            self.path, self.where = pathlib.Path(path), str(path)
            if not self.path.is_file():
                raise InputError(f"{path}: no such file; pass a CSV, TSV, JSON lines or text file (or - for stdin)")
        self.fields, self.role = fields, role
        first = ""
        try:
            with rows_lib.open_text(self.path) as handle:
                first = next((line for line in handle if line.strip()), "")
        except (OSError, EOFError) as error:
            raise InputError(f"{self.where}: unreadable ({error}); pass a readable file") from None
        self.format = fmt or rows_lib.input_format(None if self._temp else self.path, first, fields, role)

    def rows(self):
        try:
            with rows_lib.open_text(self.path) as handle:
                yield from rows_lib.read_rows(handle, self.format, self.fields, self.role, self.where)
        except (OSError, EOFError) as error:  # a damaged .gz
            raise InputError(f"{self.where}: unreadable ({error}); pass a readable file") from None

    def close(self):
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)


def check_rows(source_input, skip_malformed):
    """(the number of rows to predict, {line: reason} of the malformed ones); InputError at the first
    malformed row unless skipping, or when no row is left."""
    count, malformed = 0, {}
    for item in source_input.rows():
        if isinstance(item, rows_lib.Malformed):
            if not skip_malformed:
                raise InputError(f"{source_input.where} line {item.line}: {item.reason}; fix the row or pass "
                                 "--skip-malformed to skip such rows")
            malformed[item.line] = item.reason
        else:
            count += 1
    if not count:
        raise InputError(f"{source_input.where}: no row to predict" + (" (every row is malformed)" if malformed else
                                                                        "; give at least one row of text"))
    return count, malformed


def windows(items, size):
    """Consecutive lists of at most `size` rows (malformed items dropped: check_rows counted them)."""
    window = []
    for item in items:
        if isinstance(item, rows_lib.Row):
            window.append(item)
            if len(window) == size:
                yield window
                window = []
    if window:
        yield window


# ------------------------------------------------------------------------------------------------ the command


def parse_args(argv=None):
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
    parser.add_argument("--input-format", choices=rows_lib.FORMATS, default=None,
                        help="default: by the file's suffix, else guessed from its first line")
    parser.add_argument("--text-fields", default=None,
                        help="the text column(s), comma-separated (a pair model: two; QA: question,context)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="rows per forward pass")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                        help="rows sorted by length together before batching (order restored after)")
    parser.add_argument("--skip-malformed", action="store_true",
                        help="skip rows that cannot be read (counted and reported) instead of stopping")
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
    args = parse_args(argv)
    stdout = stdout or sys.stdout
    model_dir = args.model_dir
    if model_dir is None:
        model_dir = paths.models_dir(args.data_dir or paths.default_data_dir()) / args.model_name
    source = resolve_model(model_dir, args.task)
    fields = text_fields(args, source)
    source_input = Input(args.input, args.input_format, fields, source.role)
    try:
        return predict(args, source, source_input, stdout)
    finally:
        source_input.close()


def predict(args, source, source_input, stdout):
    total, malformed = check_rows(source_input, args.skip_malformed)

    predictor = load_predictor(source, args.batch_size, args.null_threshold)
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
