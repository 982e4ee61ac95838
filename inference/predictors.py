"""The three ways a model predicts rows: a fine-tuned model folder's Keras model, its ONNX export in ONNX
Runtime, and its exported SavedModel's serving signature. Each takes a window of `inference.rows.Row`s and
returns one `inference.outputs` object per row, in the rows' order.

The folder and ONNX predictors build their inputs with fine-tuning's own featurisation (pair truncation,
the tagger's first sub-token per word, SQuAD's windows and answer decoding), so that their predictions are
fine-tuning's; the SavedModel tokenizes in its graph.
"""
import dataclasses
import types

import numpy as np

from common.errors import InputError
from inference.outputs import classification_output, label_output, span_output, tagging_output


class FolderPredictor:
    """A fine-tuned model folder's Keras model and tokenizer, with inputs built as fine-tuning built them.

    One compiled call serves every batch shape.

    Args:
        source: the folder's `inference.sources.ModelSource`.
        batch_size: rows (QA: windows) per forward pass.
        null_threshold: QA only: see `qa_settings`.
        matmul_dtype: the dense projections' operand dtype (model/matmul.py): "float32", as fine-tuning
            evaluated the model, or "bfloat16" (faster on CPUs with AMX or avx512_bf16).

    Example:

    ```python
    predictor = FolderPredictor(resolve_model(folder), batch_size=64)
    predictor.predict([Row(line=1, texts=("a fine film",))])  # [{"line": 1, "label": "1", ...}]
    ```
    """

    def __init__(self, source, batch_size, null_threshold=None, matmul_dtype="float32"):
        import tensorflow as tf

        from data.tokenization import load_tokenizer
        from finetune.saved import load_finetuned_model
        from model.matmul import set_matmul_dtype

        self.source, self.batch_size = source, batch_size
        self.model, self.info = load_finetuned_model(source.path)
        self.model.encoder.skip_padding = True  # as fine-tuning evaluated it under TensorFlow (model/unpadding.py)
        set_matmul_dtype(self.model, matmul_dtype)  # before the first call traces the forward pass
        self.tokenizer = load_tokenizer(vocab_file=None if self.info.sp_model else self.info.vocab_file,
                                        spm_model=self.info.sp_model, lower_case=self.info.do_lower_case)
        spec = tf.TensorSpec([None, None], tf.int32)
        signature = {"input_ids": spec, "input_mask": spec, "segment_ids": spec}
        self._forward = tf.function(lambda inputs: self.model(inputs, training=False), input_signature=[signature],
                                    autograph=False)
        if source.kind == "span":
            self.qa = qa_settings(self.info, null_threshold)

    def run(self, sequences, done, min_length=1):
        """The model's outputs per sequence, in the sequences' order.

        Batches are length-sorted and each padded to its longest (finetune.batches, as fine-tuning's
        evaluation batches).

        Args:
            sequences: {"input_ids": [...], "segment_ids": [...]}, one array per sequence.
            done: called with the number of sequences after each batch.
            min_length: the shortest a batch is padded to (QA: the span head's beam size).
        """
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
        """One output object per row, in the rows' order.

        Args:
            rows: a list of `inference.rows.Row`.
            done: called with a number of rows as batches finish.
        """
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
            answer = None
            if best is not None and (qa.null_threshold is None or null_odds <= qa.null_threshold):
                answer = answer_and_offsets(windows[best[1]], example, self.tokenizer, best[2], best[3],
                                            self.tokenizer.lower_case)
            # the question was cut; a long context is read in windows
            question_cut = len(self.tokenizer.encode(row.texts[0])) > qa.max_query_length
            results.append(span_output(row, None if best is None else best[0], null_odds, answer, question_cut))
        done(len(rows))  # a row is done when all its windows are
        return results


class OnnxPredictor(FolderPredictor):
    """`FolderPredictor` with an ONNX export's tokenizer and forward pass (inference/onnx_folder.py).

    No TensorFlow model is loaded; featurisation, batching and output are the folder predictor's own.

    Args:
        source: the ONNX folder's `inference.sources.ModelSource` (`source.onnx` true).
        batch_size: rows (QA: windows) per forward pass.
        null_threshold: QA only: see `qa_settings`.
    """

    def __init__(self, source, batch_size, null_threshold=None):
        from inference.onnx_folder import OnnxModel

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
    """The span decoding settings: fine-tuning's defaults and the no-answer threshold.

    The defaults are configs/finetuning_config.py's doc stride, query and answer lengths.

    Args:
        info: the fine-tuned model's info (its `task` decides the default threshold).
        null_threshold: answer "" where the null odds exceed this; None: the original's -2.75 for a task
            whose questions may have no answer (SQuAD 2.0), else none (always the best span).
    """
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


class SavedModelPredictor:
    """The exported SavedModel's serving signature, in batches cut in input order.

    The graph tokenizes, truncates and pads to max_seq_length itself, so sorting by length would not
    shorten its batches.

    Args:
        source: the SavedModel's `inference.sources.ModelSource` (`source.saved_model` true).
        batch_size: rows per call of the signature.
    """

    def __init__(self, source, batch_size):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

        self.source, self.batch_size = source, batch_size
        self._loaded = tf.saved_model.load(str(source.path))  # the signature needs the object alive
        self._serve = self._loaded.signatures["serving_default"]
        self._tf = tf

    def predict(self, rows, done=lambda count: None):
        """One output object per row, in the rows' order; `done(count)` after each batch."""
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
                        results.append(label_output(source, row, served["probabilities"].numpy()[n]))
            done(len(chunk))
        return results


def check_matmul_dtype(source, matmul_dtype):
    """InputError unless `matmul_dtype` is "float32" or the source a fine-tuned folder: an export runs as it was
    exported."""
    if matmul_dtype != "float32" and (source.onnx or source.saved_model):
        raise InputError(f"--matmul-dtype {matmul_dtype}: {source.path} is an exported "
                         f"{'ONNX model' if source.onnx else 'SavedModel'}, which runs as it was exported; give "
                         "the fine-tuned model folder it came from (finetuning_models/<task>_model_<trial>/)")


def load_predictor(source, batch_size, null_threshold=None, matmul_dtype="float32"):
    """The predictor for a resolved model: ONNX, SavedModel or fine-tuned folder.

    Args:
        source: an `inference.sources.ModelSource` (from `resolve_model`).
        batch_size: rows per forward pass.
        null_threshold: QA only: see `qa_settings`.
        matmul_dtype: a fine-tuned folder's matmul operand dtype (`FolderPredictor`); an export runs as it was
            exported, so anything but "float32" is an InputError there.

    Example:

    ```python
    predictor = load_predictor(resolve_model("exports/sst_onnx"), batch_size=64)
    ```
    """
    check_matmul_dtype(source, matmul_dtype)
    if source.onnx:
        return OnnxPredictor(source, batch_size, null_threshold)
    from storage.model_folder import require_tensorflow_backend

    require_tensorflow_backend("inference.predict")
    if source.saved_model:
        return SavedModelPredictor(source, batch_size)
    return FolderPredictor(source, batch_size, null_threshold, matmul_dtype)
