"""Weight gradients of TensorFlow's float32 MatMul on Eigen's kernels where oneDNN's are slow (AVX2 CPUs).

Why: on an AVX2-only CPU (AMD Zen 3), oneDNN runs the weight gradient of a wide dense layer (x^T · dy, summed
over batch x length) at 0.55-0.6x its forward's speed: 12.1 ms against 7.2 ms for the FFN's 256 x 1024 kernel at
1280 rows, 138 ms against 95 ms at 16,384 rows, where TensorFlow's own Eigen kernel takes 7.5 and 80 ms
(`python -m bench.dense_grad_cpu`; docs/benchmarks.md, "The Zen 3 again"). TensorFlow's oneDNN pass takes over
MatMul but not BatchMatMulV3, so this module can replace MatMul's registered gradient with one that computes the
weight-side product with BatchMatMulV3 when the gradient has a side of WIDE or more (the FFN kernels, the
generator's tied vocabulary table), laid out so that its output is wider than tall (faster: 80 against 107 ms for
the FFN output kernel at 16,384 rows). Narrower products stay oneDNN's, which is faster on them (64 x 256: 6.4
against 8.8 ms). Forward passes and input gradients are untouched. Only floating-point rounding changes.

Measured so far (docs/benchmarks.md): the products alone are 1.6-2.0x faster this way on a Zen 3, but the
training steps barely move: fine-tuning 1.03x per update (3 repeats, within their spread), pretraining 0.96x
(3 steps each, within their spread). So it is an option, off by default: `ELECTRA_MATMUL_GRADIENTS=eigen` routes
them (any CPU), `onednn` (the default) keeps TensorFlow's own gradient. Float32 only; the scripts call this for
CPU training only (a GPU's MatMul is not oneDNN's).
"""
from common.errors import environment_choice

ENV = "ELECTRA_MATMUL_GRADIENTS"
CHOICES = ("onednn", "eigen")
WIDE = 1024  # the product's longer side from which Eigen's kernel wins (measured; docs/benchmarks.md)

_state = {"original": None}


def chosen(environ=None):
    """True when ENV asks for the weight gradients on Eigen's kernels. InputError (the scripts' one line and exit
    code 2) for a value not in CHOICES."""
    return environment_choice(ENV, CHOICES, "eigen: the wide weight gradients on TensorFlow's Eigen kernels",
                              environ) == "eigen"


def weight_product(x, y):
    """x^T · y (the weight side of a MatMul's gradient), on Eigen's kernel when the result is WIDE or more
    on a side and both sides are known, else oneDNN's MatMul as TensorFlow's own gradient computes it."""
    import tensorflow as tf
    from tensorflow.python.ops import gen_math_ops

    rows, columns = x.shape[-1], y.shape[-1]
    if rows is None or columns is None or max(rows, columns) < WIDE:
        return gen_math_ops.mat_mul(x, y, transpose_a=True, grad_b=True)
    if rows > columns:  # Eigen's kernel is faster on the wide layout: (y^T x)^T
        return tf.transpose(gen_math_ops.batch_mat_mul_v3(y, x, Tout=x.dtype, adj_x=True))
    return gen_math_ops.batch_mat_mul_v3(x, y, Tout=x.dtype, adj_x=True)


def _matmul_gradient(op, grad):
    """TensorFlow's MatMul gradient (tensorflow/python/ops/math_grad.py) with its weight-side product by
    weight_product; anything else (other dtypes, transposed first operands, skipped inputs) is the original's."""
    from tensorflow.python.ops import gen_math_ops

    a, b = op.inputs
    transpose_a, transpose_b = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if a.dtype.name != "float32" or transpose_a or getattr(op, "skip_input_indices", None) is not None:
        return _state["original"](op, grad)
    if transpose_b:  # y = a · b^T: da = dy · b, db = dy^T · a
        return gen_math_ops.mat_mul(grad, b, grad_a=True), weight_product(grad, a)
    return gen_math_ops.mat_mul(grad, b, transpose_b=True, grad_a=True), weight_product(a, grad)


def _registry():
    from tensorflow.python.framework import ops

    return ops._gradient_registry._registry["MatMul"]


def install():
    """Replaces MatMul's registered gradient (once per process; graphs traced afterwards use it)."""
    entry = _registry()
    if _state["original"] is None:
        _state["original"] = entry["type"]
    entry["type"] = _matmul_gradient


def uninstall():
    if _state["original"] is not None:
        _registry()["type"] = _state["original"]


def installed():
    return _registry()["type"] is _matmul_gradient


def route_weight_gradients(environ=None):
    """Installs the routing when `chosen`, else puts TensorFlow's own gradient back; returns whether it is
    installed. Call before the training step is traced."""
    if chosen(environ):
        install()
        return True
    uninstall()
    return False
