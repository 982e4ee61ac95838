"""A fine-tuned model with token ids in: the function both the ids-in SavedModel and the ONNX export hold.

Inputs are Hugging Face's names and dtype (`input_ids`, `attention_mask`, `token_type_ids`, int64
[batch, length], any batch and length up to the model's position table), so that Optimum, Triton and
`saved_model_cli` feed what a `transformers` tokenizer returns. The tokenizer stays outside the graph: no
tensorflow-text op is in it, and any TensorFlow client runs the SavedModel (the raw-text SavedModel of
checkpoints/saved_model.py needs tensorflow-text's ops: NormalizeUTF8, WordpieceTokenizeWithOffsets, ...).

Outputs, by task kind:
  classification  logits [batch, labels]
  regression      logits [batch, 1]: the score on the task's scale (the head's (score − min) / max undone)
  tagging         logits [batch, length, labels] (read at each word's first sub-token)
  span            the span head's beams: start_top_log_probs, start_top_index [batch, k], end_top_log_probs,
                  end_top_index [batch, k, k], answerable_logit [batch] (k = the head's beam size; length >= k)
"""
import json

from common.atomic import atomic_output_dir
from common.errors import InputError

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUR_NAMES = dict(zip(INPUT_NAMES, ("input_ids", "input_mask", "segment_ids")))  # the Keras model's input names
KINDS = ("classification", "regression", "tagging", "span")
INFO_FILE = "electra_ids_serving.json"


def load_exportable(folder, fmt):
    """(Keras model, finetune.saved.FinetunedInfo) of a fine-tuned folder whose task kind `fmt` exports."""
    from finetune.saved import load_finetuned_model, read_info

    info = read_info(folder)  # InputError naming finetuning_info.json when the folder is not fine-tuned
    if info.kind not in KINDS:
        raise InputError(f"{folder}/finetuning_info.json: task kind {info.kind!r}; --format {fmt} exports "
                         f"{', '.join(KINDS)} models: export this one with --format saved_model or fine-tune again")
    return load_finetuned_model(folder)


def ids_function(model, info):
    """A tf.function: the three int64 inputs → {output name: tensor} (the module docstring's table)."""
    import tensorflow as tf

    signature = [tf.TensorSpec([None, None], tf.int64, name=name) for name in INPUT_NAMES]
    low, high = info.score_range or (0.0, 1.0)

    def serve(*inputs):
        outputs = model({OUR_NAMES[name]: tf.cast(value, tf.int32) for name, value in zip(INPUT_NAMES, inputs)},
                        training=False)
        if isinstance(outputs, dict):
            return dict(outputs)
        outputs = tf.cast(outputs, tf.float32)
        if info.kind == "regression":
            outputs = outputs * high + low
        return {"logits": outputs}

    return tf.function(serve, input_signature=signature, autograph=False)


def serving_info(info, outputs, **extra):
    """What a predictor needs beside the graph (electra_ids_serving.json, electra_onnx.json)."""
    return {"task": info.task, "kind": info.kind, "label_names": list(info.label_names), "is_pair": info.is_pair,
            "max_seq_length": info.max_seq_length, "do_lower_case": info.do_lower_case,
            "beam_size": info.head.get("beam_size"), "inputs": list(INPUT_NAMES), "outputs": sorted(outputs),
            **extra}


def frozen_signature(function):
    """The concrete function with its weights folded in as constants, outputs named again: the TF1-style
    loader `saved_model_cli run` (and TF Serving, Triton's TensorFlow backend) uses could not find the
    Keras 3 model's variables in a SavedModel that tracks them; constants need no restore."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = function.get_concrete_function()
    names = sorted(concrete.structured_outputs)  # a dict's flattening order
    frozen = convert_variables_to_constants_v2(concrete)
    serve = tf.function(lambda *inputs: dict(zip(names, frozen(*inputs))), input_signature=function.input_signature,
                        autograph=False)
    return frozen, serve.get_concrete_function()


def export_ids_saved_model(folder, output, overwrite=False):
    """--format saved_model_ids: a fine-tuned folder → a SavedModel, `serving_default` taking token ids."""
    import tensorflow as tf

    model, info = load_exportable(folder, "saved_model_ids")
    # a client's padding costs nothing past the gather (model/unpadding.py); the span head's beams keep every
    # position: a short window's beam reaches into padding, whose masked log-probabilities (about -1000) it returns
    model.encoder.skip_padding = info.kind != "span"
    module = tf.Module(name="electra_ids")
    module.frozen, serving = frozen_signature(ids_function(model, info))
    description = serving_info(info, serving.structured_outputs)
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)  # inference only
    with atomic_output_dir(output, overwrite) as temp:
        tf.saved_model.save(module, str(temp), signatures={"serving_default": serving}, options=options)
        (temp / INFO_FILE).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    return description
