"""The dtype of the dense projections' matmul operands: a named option, "float32" (the default: the original's
arithmetic, bit for bit the code before the option) or "bfloat16".

"bfloat16" casts both operands of each dense projection's product (its input and kernel) to bfloat16 and the
product back to the layer's compute dtype; the bias add, the activation and everything else (GELU, LayerNorm,
dropout, the attention's scores and softmax, the losses, the optimizer) stay float32, and the weights stay float32
variables under their own names (a checkpoint saved under either setting loads under the other). The products it
covers: the Q/K/V projection (one matmul, model/attention.py), the attention output, the FFN in and out
(model/transformer.py), the embeddings projection and the heads' dense layers (every `Dense` of this module).
On CPUs with AMX or avx512_bf16, TensorFlow's bfloat16 matmuls are several times its float32 ones while its
bfloat16 elementwise kernels are slower than the float32 ones, which is where mixed_bfloat16 loses
(docs/benchmarks.md, "Intel with AMX"); this option takes only the matmuls' gain.

Only under a float32 compute dtype: under a 16-bit policy (mixed_bfloat16, mixed_float16) the products already
take the compute dtype's operands and the option changes nothing (it is ignored, not an error, at this level;
the configs say what they accept).

Model code: keras.ops and keras.layers only, the same under TensorFlow and JAX.
"""
import keras
from keras import ops

from model import elementwise_gradients

MATMUL_DTYPES = ("float32", "bfloat16")
SERIALIZATION_PACKAGE = "electra"


def check_matmul_dtype(matmul_dtype):
    """ValueError unless `matmul_dtype` is one of MATMUL_DTYPES; returns it."""
    if matmul_dtype not in MATMUL_DTYPES:
        raise ValueError(f"matmul_dtype {matmul_dtype!r} is not one of {', '.join(MATMUL_DTYPES)}")
    return matmul_dtype


def operand_dtype(matmul_dtype, compute_dtype):
    """The dtype a product's operands are cast to, or None where the option changes nothing (matmul_dtype
    float32, or a compute dtype other than float32)."""
    if matmul_dtype == "float32" or keras.backend.standardize_dtype(compute_dtype) != "float32":
        return None
    return matmul_dtype


def matmul(x, kernel, matmul_dtype, compute_dtype):
    """x · kernel with operands in `matmul_dtype` and the product in `compute_dtype` (operand_dtype's rule);
    the default (float32) is exactly ops.matmul(x, kernel)."""
    dtype = operand_dtype(matmul_dtype, compute_dtype)
    if dtype is None:
        return ops.matmul(x, kernel)
    return ops.cast(ops.matmul(ops.cast(x, dtype), ops.cast(kernel, dtype)), compute_dtype)


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class Dense(keras.layers.Dense):
    """keras.layers.Dense with `matmul_dtype` (this module's option). Its variables, names and config are
    Dense's, plus matmul_dtype; under the default (or a 16-bit policy) its call is Dense's own, except that an exact
    GELU in training under TensorFlow takes model.elementwise_gradients' backward pass."""

    def __init__(self, units, matmul_dtype="float32", **kwargs):
        super().__init__(units, **kwargs)
        self.matmul_dtype = check_matmul_dtype(matmul_dtype)

    def call(self, inputs, training=None):
        gelu_by_hand = (self.activation is keras.activations.gelu and self.quantization_mode is None
                        and elementwise_gradients.by_hand(training))
        default_matmul = operand_dtype(self.matmul_dtype, self.compute_dtype) is None
        if (default_matmul and not gelu_by_hand) or self.quantization_mode is not None:
            return super().call(inputs, training=training)
        x = matmul(inputs, self.kernel, self.matmul_dtype, self.compute_dtype)
        if self.bias is not None:
            x = ops.add(x, self.bias)
        if gelu_by_hand:
            return elementwise_gradients.gelu(x)
        if self.activation is not None:
            x = self.activation(x)
        return x

    def get_config(self):
        config = super().get_config()
        config.update(matmul_dtype=self.matmul_dtype)
        return config


def set_matmul_dtype(model, matmul_dtype):
    """Sets the option on every layer of `model` (and `model` itself) that has it: this module's Dense and
    model.attention.SelfAttention. For a model built elsewhere (the fine-tuning encoder a trial loads); takes
    effect at the next trace of its call. Returns how many layers took it."""
    check_matmul_dtype(matmul_dtype)
    count = 0
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if hasattr(layer, "matmul_dtype"):
            layer.matmul_dtype = matmul_dtype
            count += 1
    return count


def matmul_dtype_of(model):
    """The option as set on `model`'s layers: "float32" unless some layer has another (a mix: the first)."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if getattr(layer, "matmul_dtype", "float32") != "float32":
            return layer.matmul_dtype
    return "float32"
