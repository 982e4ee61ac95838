"""The ONNX graph of a fine-tuned ELECTRA encoder and its classification, regression or tagging head, written
directly from the weights with ONNX Runtime's fused transformer ops.

Why not tf2onnx's graph: it held ~1,800 small nodes (LayerNorm as GlobalAveragePool over transposes, GELU
as Erfc pieces) that ONNX Runtime's optimizer could not fuse (neither model_type "bert" nor "bert_tf"
matched). An encoder is a short fixed graph; written here it is, a layer, one `Attention` and one
`BiasGelu` (com.microsoft ops, what ONNX Runtime's transformer optimizer itself fuses a BERT into), two
MatMuls and two residual Adds + LayerNormalization. The file runs in ONNX Runtime (and Optimum, Triton's
onnxruntime backend), not in other ONNX runtimes.

Semantics are the Keras model's: word + position + token-type embeddings, LayerNormalization (opset 17),
the optional embeddings projection; per layer self-attention over the real tokens (the int32 0/1
attention_mask: padded keys get -10000 added to their scores, which leaves them exactly 0 after the softmax
in float32, as Keras' masked logits do), residual + LayerNorm, exact (Erf) GELU; then the head. The span
head's beam search stays with tf2onnx (checkpoints/onnx_export.py).
"""
import numpy as np

from checkpoints.saved_model_ids import INPUT_NAMES

MS_DOMAIN = "com.microsoft"
OPSET = 17
IR_VERSION = 8  # opset 17's; onnx's newest IR is more than older ONNX Runtime releases read
KINDS = ("classification", "regression", "tagging")


def supports(model, info):
    """Whether this module writes the model's graph (else tf2onnx does)."""
    return info.kind in KINDS and hasattr(model, "head") and getattr(model.encoder, "causal", None) is None


class _Graph:
    """Nodes and float32 initializers, with names made unique by a running number."""

    def __init__(self):
        self.nodes, self.initializers, self._count = [], [], 0

    def name(self, stem):
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, stem, value, dtype=np.float32):
        from onnx import numpy_helper

        name = self.name(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op_type, inputs, stem=None, outputs=None, domain=None, **attributes):
        from onnx import helper

        outputs = outputs or [self.name(stem or op_type.lower())]
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=self.name(op_type),
                                           domain=domain, **attributes))
        return outputs[0]


def _numpy(variable):
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable, np.float32)


def _dense(graph, x, dense, stem):
    """MatMul + Add of a keras Dense (no activation)."""
    return graph.op("Add", [graph.op("MatMul", [x, graph.const(f"{stem}_kernel", _numpy(dense.kernel))]),
                            graph.const(f"{stem}_bias", _numpy(dense.bias))])


def _embeddings(graph, encoder):
    embeddings = encoder.embeddings
    table = _numpy(encoder.word_table())
    words = graph.op("Gather", [graph.const("word_embeddings", table), "input_ids"])
    types = graph.op("Gather", [graph.const("token_type_embeddings", _numpy(embeddings.token_type_embeddings)),
                                "token_type_ids"])
    length = graph.op("Shape", ["input_ids"], start=1, end=2)
    positions = graph.op("Slice", [graph.const("position_embeddings", _numpy(embeddings.position_embeddings)),
                                   graph.const("zero", [0], np.int64), length, graph.const("axis", [0], np.int64)])
    summed = graph.op("Add", [graph.op("Add", [words, positions]), types])
    hidden = _layer_norm(graph, summed, embeddings.layer_norm, "embeddings")
    if encoder.embeddings_project is not None:
        hidden = _dense(graph, hidden, encoder.embeddings_project, "embeddings_project")
    return hidden


def _dense_residual_layer_norm(graph, x, dense, skip, norm, stem):
    """LayerNorm(dense(x) + skip). Not com.microsoft's SkipLayerNormalization: on an AVX2 CPU (onnxruntime
    1.31) it took 12% of an electra_small forward pass, the two Adds and LayerNormalization 3%."""
    return _layer_norm(graph, graph.op("Add", [_dense(graph, x, dense, stem), skip]), norm, stem)


def _layer_norm(graph, x, norm, stem):
    """ONNX LayerNormalization (opset 17) of a keras LayerNormalization's weights."""
    return graph.op("LayerNormalization", [x, graph.const(f"{stem}_gamma", _numpy(norm.gamma)),
                                           graph.const(f"{stem}_beta", _numpy(norm.beta))],
                    axis=-1, epsilon=float(norm.epsilon))


def _layer(graph, hidden, mask, layer, number):
    stem = f"layer_{number}"
    attention = layer.attention_self
    projections = (attention.query, attention.key, attention.value)
    kernel = np.concatenate([_numpy(dense.kernel) for dense in projections], axis=-1)
    bias = np.concatenate([_numpy(dense.bias) for dense in projections])
    context = graph.op("Attention", [hidden, graph.const(f"{stem}_qkv_kernel", kernel),
                                     graph.const(f"{stem}_qkv_bias", bias), mask],
                       domain=MS_DOMAIN, num_heads=int(attention.num_heads))
    attended = _dense_residual_layer_norm(graph, context, layer.attention_output_dense, hidden,
                                          layer.attention_output_layer_norm, f"{stem}_attention_output")
    dense = layer.intermediate_dense  # exact GELU: keras' "gelu" activation, approximate=False
    intermediate = graph.op("BiasGelu", [graph.op("MatMul", [attended, graph.const(f"{stem}_intermediate_kernel",
                                                                                   _numpy(dense.kernel))]),
                                         graph.const(f"{stem}_intermediate_bias", _numpy(dense.bias))],
                            domain=MS_DOMAIN)
    return _dense_residual_layer_norm(graph, intermediate, layer.output_dense, attended, layer.output_layer_norm,
                                      f"{stem}_output")


def _head(graph, hidden, head, info):
    if info.kind == "tagging":
        return _dense(graph, hidden, head.dense, "head"), ["batch", "length", head.num_outputs]
    cls = graph.op("Gather", [hidden, graph.const("cls_position", 0, np.int64)], axis=1)
    logits = _dense(graph, cls, head.dense, "head")
    if info.kind == "regression":  # the task's scale, as checkpoints/saved_model_ids.py serves it
        low, high = info.score_range or (0.0, 1.0)
        logits = graph.op("Add", [graph.op("Mul", [logits, graph.const("score_scale", high)]),
                                  graph.const("score_offset", low)])
    return logits, ["batch", head.num_outputs]


def build(model, info):
    """The ONNX ModelProto: the three int64 inputs [batch, length] → "logits" (float32)."""
    from onnx import TensorProto, helper

    graph = _Graph()
    encoder = model.encoder
    mask = graph.op("Cast", ["attention_mask"], stem="mask_int32", to=TensorProto.INT32)
    hidden = _embeddings(graph, encoder)
    for number, layer in enumerate(encoder.transformer_layers):
        hidden = _layer(graph, hidden, mask, layer, number)
    logits, shape = _head(graph, hidden, model.head, info)
    graph.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "length"]) for name in INPUT_NAMES]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, shape)
    proto = helper.make_graph(graph.nodes, "electra", inputs, [output], initializer=graph.initializers)
    return helper.make_model(proto, producer_name="electra-keras", ir_version=IR_VERSION,
                             opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)])
