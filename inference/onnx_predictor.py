"""Predictions from a `--format onnx` export folder with ONNX Runtime: the fine-tuned folder's featurisation
(inference.predict.FolderPredictor: this project's tokenizer from the folder's vocabulary, length-sorted
batches padded to their longest), only the forward pass is model.onnx's. No TensorFlow model is loaded.
"""
import json
import types

import numpy as np

from common.errors import InputError
from inference.predict import FolderPredictor

MODEL_FILE = "model.onnx"  # checkpoints.onnx_export.MODEL_FILE
INFO_FILE = "electra_onnx.json"  # checkpoints.onnx_export.INFO_FILE
FIX = "export it again with python -m checkpoints.export --format onnx"


def read_info(folder):
    path = folder / INFO_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: unreadable ({str(error)[:80]}); {FIX}") from None


def open_session(path, threads=None):
    """An ONNX Runtime CPU session; InputError naming the file when it is not a loadable model."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    # idle threads sleep instead of spinning: on a CPU shared with other work (or a TensorFlow pool in the
    # same process) spinning took the cores from the threads doing the work; measured 1.63 s against 1.34 s
    # for an electra_small batch of 64 x 24 on 2 loaded cores (the same outputs)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own error types for a damaged or foreign file
        reason = str(error).strip().splitlines()[0][:120] if str(error).strip() else type(error).__name__
        raise InputError(f"{path}: not a loadable ONNX model ({reason}); {FIX}") from None


def model_source(folder):
    """inference.predict.ModelSource of an export folder, from its electra_onnx.json."""
    from inference.predict import ModelSource

    values = read_info(folder)
    try:
        return ModelSource(folder, False, values.get("task") or folder.name, values["kind"],
                           tuple(values["label_names"]), bool(values["is_pair"]), int(values["max_seq_length"]),
                           onnx=True)
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"{folder / INFO_FILE}: lacks or garbles {error}; {FIX}") from None


class OnnxPredictor(FolderPredictor):
    """FolderPredictor whose forward pass is an ONNX Runtime session on the export's model.onnx."""

    def __init__(self, source, batch_size, null_threshold=None):
        from data.tokenization import load_tokenizer
        from inference.predict import qa_settings

        self.source, self.batch_size = source, batch_size
        values = read_info(source.path)
        vocab = str(source.path / values["vocab_file"])
        # the export serves regression scores on the task's scale already: no score_range to apply
        self.info = types.SimpleNamespace(task=source.task, score_range=None, head={"beam_size": values["beam_size"]})
        self.tokenizer = load_tokenizer(vocab_file=None if values.get("sentencepiece") else vocab,
                                        spm_model=vocab if values.get("sentencepiece") else None,
                                        lower_case=values["do_lower_case"])
        self.session = open_session(source.path / MODEL_FILE)
        self._outputs = [output.name for output in self.session.get_outputs()]
        if source.kind == "span":
            self.qa = qa_settings(self.info, null_threshold)

    def _forward(self, inputs):
        feed = {"input_ids": inputs["input_ids"], "attention_mask": inputs["input_mask"],
                "token_type_ids": inputs["segment_ids"]}
        outputs = self.session.run(self._outputs, {name: np.asarray(value, np.int64) for name, value in feed.items()})
        if self._outputs == ["logits"]:
            return outputs[0]
        return dict(zip(self._outputs, outputs))
