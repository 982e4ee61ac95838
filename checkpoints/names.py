"""The one table of names, ours ↔ TF1 ↔ Hugging Face ↔ BERT ↔ keras-hub (docs/reproduction.md#checkpoint-names).

The TF1 table is model/names.py's `tf1_name_map` (built from the model's structure, so it is never out of
date). Every other name is derived from a TF1 name by the rules below, the same renames Hugging Face's
ELECTRA converter and google-research/bert apply; nothing is listed twice.

Gradient-disentangled embeddings (gdes_embeddings) are merged on the way out: the discriminator's
`electra/embeddings/word_embeddings` is the shared table + its residual, and the generator's own view (the
plain shared table) is written as `generator/embeddings/word_embeddings`, the name the original gives an
untied generator table. Hugging Face's converter then loads each tower exactly (it reads names in sorted
order, so the generator's own table wins in ElectraForMaskedLM); the original TF1 code, which shares one
table, would give its generator the merged one.
"""
import re

import numpy as np

from model.names import tf1_name_map

DISCRIMINATOR = "electra"
GENERATOR = "generator"
DISCRIMINATOR_HEAD = "discriminator_predictions"
GENERATOR_HEAD = "generator_predictions"
GENERATOR_LTR = "generator_ltr"  # Electric's two-tower generator and its head
GENERATOR_RTL = "generator_rtl"
CLOZE_HEAD = "cloze_predictions"
GENERATOR_SCOPES = (GENERATOR, GENERATOR_HEAD, GENERATOR_LTR, GENERATOR_RTL, CLOZE_HEAD)
WORD_EMBEDDINGS = "electra/embeddings/word_embeddings"
GDES_DELTA = "electra/embeddings/word_embeddings_delta"
GENERATOR_WORD_EMBEDDINGS = "generator/embeddings/word_embeddings"
EMBEDDING_SUFFIXES = ("word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm/gamma",
                      "LayerNorm/beta")
GLOBAL_STEP = "global_step"
OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v")


# ------------------------------------------------------------------------------------------------ ours ↔ TF1


def export_tensors(pretrainer):
    """{TF1 name: float32 array} of every weight, gdes residuals merged (see the module docstring)."""
    variables = tf1_name_map(pretrainer)
    tensors = {name: np.asarray(variable.numpy(), dtype=np.float32) for name, variable in variables.items()
               if name != GDES_DELTA}
    if GDES_DELTA in variables:
        tensors[GENERATOR_WORD_EMBEDDINGS] = tensors[WORD_EMBEDDINGS]
        tensors[WORD_EMBEDDINGS] = np.asarray(pretrainer.merged_discriminator_embeddings(), dtype=np.float32)
    return tensors


def assign_imported(pretrainer, read, skip_generator=False, skip_discriminator_head=False):
    """Sets every weight of `pretrainer` from `read(tf1_name, shape) -> array` (the inverse of
    export_tensors; a gdes residual becomes merged − shared). With `skip_generator` the generator tower
    and head keep their fresh initialisation (a checkpoint that holds only a discriminator), with
    `skip_discriminator_head` the discriminator head (a bare encoder, e.g. a keras-hub backbone)."""
    variables = tf1_name_map(pretrainer)
    for name, variable in variables.items():
        if name == GDES_DELTA or (skip_generator and tower_of(name) == GENERATOR):
            continue
        if skip_discriminator_head and name.startswith(f"{DISCRIMINATOR_HEAD}/"):
            continue
        source = GENERATOR_WORD_EMBEDDINGS if (name == WORD_EMBEDDINGS and GDES_DELTA in variables) else name
        variable.assign(read(source, tuple(variable.shape)))
    if GDES_DELTA in variables:
        shared = variables[WORD_EMBEDDINGS].numpy()
        variables[GDES_DELTA].assign(read(WORD_EMBEDDINGS, shared.shape) - shared)


def tower_of(tf1_name):
    """Which model a TF1 name belongs to: "generator" for generator/* and its head (Electric: both towers
    and cloze_predictions), else "discriminator" (the shared embeddings are read from the discriminator)."""
    scope = tf1_name.split("/", 1)[0]
    return GENERATOR if scope in GENERATOR_SCOPES else "discriminator"


def is_optimizer_state(tf1_name):
    return tf1_name == GLOBAL_STEP or tf1_name.endswith(OPTIMIZER_SLOT_SUFFIXES)


# ------------------------------------------------------------------------------------------------ TF1 → HF


def hf_key(tf1_name):
    """The Hugging Face state-dict key of a TF1 name, inside the ElectraForPreTraining or
    ElectraForMaskedLM that holds it: either tower's scope becomes `electra.`, `layer_i` → `layer.i`,
    `dense_1` → `dense_prediction`, the generator's output bias → `generator_lm_head.bias`,
    kernel/gamma → weight, beta → bias, embedding tables get `.weight`."""
    scope, _, rest = tf1_name.partition("/")
    name = f"{DISCRIMINATOR}/{rest}" if scope in (DISCRIMINATOR, GENERATOR) else tf1_name
    name = name.replace(f"{GENERATOR_HEAD}/output_bias", "generator_lm_head/bias")
    name = re.sub(r"/layer_(\d+)/", r"/layer/\1/", name)
    name = name.replace("/dense_1/", "/dense_prediction/")
    parts = name.split("/")
    last = parts[-1]
    if last in ("kernel", "gamma"):
        parts[-1] = "weight"
    elif last == "beta":
        parts[-1] = "bias"
    elif last.endswith("_embeddings"):
        parts.append("weight")
    return ".".join(parts)


def hf_value(tf1_name, array):
    """TF1 kernels are [in, out]; torch.nn.Linear weights are [out, in]."""
    return np.ascontiguousarray(array.T if tf1_name.endswith("/kernel") else array)


def hf_models(tensors):
    """{"discriminator": {hf key: array}, "generator": {...}} from export_tensors' TF1 tensors.

    ElectraForPreTraining: electra/* + discriminator_predictions/*. ElectraForMaskedLM: the generator
    tower (generator/*, or electra/* when the generator is the discriminator itself or the model is
    MLM-only) + generator_predictions/*, with the shared embeddings unless it has its own. A model whose
    head is absent (a uniform generator; MLM-only has no discriminator) is left out, and so is Electric's
    two-tower generator (generator_ltr/, generator_rtl/, cloze_predictions/), which no Hugging Face class
    holds: an Electric model exports its discriminator only.
    """
    has_generator_tower = any(name.startswith(f"{GENERATOR}/encoder/") for name in tensors)
    generator_scope = GENERATOR if has_generator_tower else DISCRIMINATOR
    models = {}
    if any(name.startswith(f"{DISCRIMINATOR_HEAD}/") for name in tensors):
        models["discriminator"] = {
            hf_key(name): hf_value(name, array) for name, array in tensors.items()
            if name.split("/", 1)[0] in (DISCRIMINATOR, DISCRIMINATOR_HEAD)}
    if any(name.startswith(f"{GENERATOR_HEAD}/") for name in tensors):
        generator = {}
        for name, array in tensors.items():
            scope = name.split("/", 1)[0]
            own_copy = name.replace(f"{DISCRIMINATOR}/", f"{GENERATOR}/", 1)
            shared = (generator_scope == GENERATOR and name.startswith(f"{DISCRIMINATOR}/embeddings/")
                      and own_copy not in tensors)
            if scope in (generator_scope, GENERATOR_HEAD) or shared:
                generator[hf_key(name)] = hf_value(name, array)
        models["generator"] = generator
    return models


# ------------------------------------------------------------------------------------------------ TF1 → BERT


def bert_tensors(tensors):
    """google-research/bert names of the discriminator: `electra/` → `bert/` (no pooler: ELECTRA has none).
    Only for embedding size = hidden size (the caller checks): there is no embeddings_project in BERT."""
    return {f"bert/{name.partition('/')[2]}": array for name, array in tensors.items()
            if name.startswith(f"{DISCRIMINATOR}/")}


# ------------------------------------------------------------------------------------------------ TF1 → keras-hub

# keras_hub.models.ElectraBackbone (0.32) variable paths (`variable.path`) of the main encoder's TF1 names,
# `electra/` removed. Its layers: token/position/segment embeddings, embeddings_layer_norm, an
# embeddings_projection when embedding_dim ≠ hidden_dim, transformer_layer_i (keras-hub's post-LayerNorm
# TransformerEncoder over keras.layers.MultiHeadAttention), and a pooled_dense that ELECTRA does not have.
KERAS_HUB_RENAMES = (
    (r"embeddings/word_embeddings$", "token_embedding/embeddings"),
    (r"embeddings/position_embeddings$", "position_embedding/embeddings"),
    (r"embeddings/token_type_embeddings$", "segment_embedding/embeddings"),
    (r"embeddings/LayerNorm/", "embeddings_layer_norm/"),
    (r"embeddings_project/", "embeddings_projection/"),
    (r"encoder/layer_(\d+)/attention/self/", r"transformer_layer_\1/self_attention_layer/"),
    (r"encoder/layer_(\d+)/attention/output/dense/", r"transformer_layer_\1/self_attention_layer/attention_output/"),
    (r"encoder/layer_(\d+)/attention/output/LayerNorm/", r"transformer_layer_\1/self_attention_layer_norm/"),
    (r"encoder/layer_(\d+)/intermediate/dense/", r"transformer_layer_\1/feedforward_intermediate_dense/"),
    (r"encoder/layer_(\d+)/output/dense/", r"transformer_layer_\1/feedforward_output_dense/"),
    (r"encoder/layer_(\d+)/output/LayerNorm/", r"transformer_layer_\1/feedforward_layer_norm/"),
)
KERAS_HUB_POOLER = "pooled_dense/"  # keras-hub's tanh pooler on [CLS]; ELECTRA has none


def keras_hub_path(tf1_name):
    """The ElectraBackbone variable path of a TF1 name of the main encoder (`electra/…`), else None."""
    scope, _, rest = tf1_name.partition("/")
    if scope != DISCRIMINATOR:
        return None
    for pattern, replacement in KERAS_HUB_RENAMES:
        if re.match(pattern, rest):
            return re.sub(pattern, replacement, rest, count=1)
    return None


def keras_hub_tf1_shape(path, shape):
    """The TF1 shape of a keras-hub variable: MultiHeadAttention keeps the heads as an axis (query, key and
    value kernels [H, heads, H/heads], their biases [heads, H/heads], the output kernel [heads, H/heads,
    H]); TF1 has [H, H] and [H]. Row-major reshapes map one onto the other (head-major columns, as our
    attention splits them)."""
    shape = tuple(shape)
    if path.endswith("/attention_output/kernel"):
        return (shape[0] * shape[1], shape[2])
    if len(shape) == 3:
        return (shape[0], shape[1] * shape[2])
    if len(shape) == 2 and "/self_attention_layer/" in path and path.endswith("/bias"):
        return (shape[0] * shape[1],)
    return shape
