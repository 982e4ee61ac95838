"""An ONNX export folder (`--format onnx`) for inference.predict: what the folder says about its model
(electra_onnx.json), its tokenizer (this project's, from the folder's vocabulary) and model.onnx's forward
pass in ONNX Runtime. inference.predictors.OnnxPredictor puts them in place of the fine-tuned folder's, so
the featurisation and batching stay the fine-tuned folder's own. No TensorFlow model is loaded.
"""
import json
import types

import numpy as np

from common.errors import InputError

MODEL_FILE = "model.onnx"  # checkpoints.onnx_export.MODEL_FILE
INFO_FILE = "electra_onnx.json"  # checkpoints.onnx_export.INFO_FILE
FIX = "export it again with python -m checkpoints.export --format onnx"


def read_info(folder):
    path = folder / INFO_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: unreadable ({str(error)[:80]}); {FIX}") from None


def source_fields(folder):
    """inference.sources.ModelSource's fields (task, kind, label_names, is_pair, max_seq_length)."""
    values = read_info(folder)
    try:
        return {"task": values.get("task") or folder.name, "kind": values["kind"],
                "label_names": tuple(values["label_names"]), "is_pair": bool(values["is_pair"]),
                "max_seq_length": int(values["max_seq_length"])}
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"{folder / INFO_FILE}: lacks or garbles {error}; {FIX}") from None


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


class OnnxModel:
    """`info` (what FolderPredictor reads of finetune.saved's FinetunedInfo), `tokenizer`, `forward`."""

    def __init__(self, folder, task):
        from data.tokenization import load_tokenizer

        values = read_info(folder)
        vocab = str(folder / values["vocab_file"])
        # the export serves regression scores on the task's scale already: no score_range to apply
        self.info = types.SimpleNamespace(task=task, score_range=None, head={"beam_size": values["beam_size"]})
        sentencepiece = bool(values.get("sentencepiece"))
        self.tokenizer = load_tokenizer(vocab_file=None if sentencepiece else vocab,
                                        spm_model=vocab if sentencepiece else None, lower_case=values["do_lower_case"])
        self.session = open_session(folder / MODEL_FILE)
        self._outputs = [output.name for output in self.session.get_outputs()]

    def forward(self, inputs):
        """{"input_ids", "input_mask", "segment_ids"} → logits, or the span head's dict of beams."""
        feed = {"input_ids": inputs["input_ids"], "attention_mask": inputs["input_mask"],
                "token_type_ids": inputs["segment_ids"]}
        outputs = self.session.run(self._outputs, {name: np.asarray(value, np.int64) for name, value in feed.items()})
        if self._outputs == ["logits"]:
            return outputs[0]
        return dict(zip(self._outputs, outputs))
