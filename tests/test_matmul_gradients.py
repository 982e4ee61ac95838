"""common/matmul_gradients.py: MatMul's weight gradients on Eigen's kernel where the product is wide, the same
gradients within float32 rounding, and the rule that chooses it."""
import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from common import matmul_gradients


@pytest.fixture
def routed():
    before = matmul_gradients.installed()
    matmul_gradients.install()
    yield
    if not before:
        matmul_gradients.uninstall()


def tensorflow_s_own(fn):
    """fn() with MatMul's gradient as TensorFlow registers it."""
    was = matmul_gradients.installed()
    matmul_gradients.uninstall()
    try:
        return fn()
    finally:
        if was:
            matmul_gradients.install()


# (a's shape, b's shape, transpose_b): the FFN's two kernels (wide), the tied vocabulary table's y = h · E^T
# (wide and tall: its gradient is computed transposed), and a narrow one that stays on MatMul
CASES = [((96, 256), (256, 1024), False), ((96, 1024), (1024, 256), False), ((80, 64), (1100, 64), True),
         ((96, 64), (64, 256), False)]


def gradients(a_shape, b_shape, transpose_b, seed=0):
    rng = np.random.default_rng(seed)
    a = tf.constant(rng.standard_normal(a_shape, dtype=np.float32))
    b = tf.Variable(rng.standard_normal(b_shape, dtype=np.float32))
    upstream = tf.constant(rng.standard_normal((a_shape[0], b_shape[0] if transpose_b else b_shape[1]),
                                               dtype=np.float32))

    @tf.function
    def grads(a):
        with tf.GradientTape() as tape:
            tape.watch(a)
            y = tf.matmul(a, b, transpose_b=transpose_b)
            loss = tf.reduce_sum(y * upstream)
        return tape.gradient(loss, [a, b])

    concrete = grads.get_concrete_function(tf.TensorSpec([None, a_shape[1]], tf.float32))
    types = {op.type for op in concrete.graph.get_operations()}
    return [g.numpy() for g in concrete(a)], types


@pytest.mark.parametrize("a_shape, b_shape, transpose_b", CASES)
def test_the_same_gradients_within_float32_rounding(routed, a_shape, b_shape, transpose_b):
    (da, db), types = gradients(a_shape, b_shape, transpose_b)
    (da_tf, db_tf), types_tf = tensorflow_s_own(lambda: gradients(a_shape, b_shape, transpose_b))
    np.testing.assert_array_equal(da, da_tf)  # the input gradient is TensorFlow's own product
    np.testing.assert_allclose(db, db_tf, rtol=2e-5, atol=2e-4)
    wide = max(db.shape) >= matmul_gradients.WIDE
    assert ("BatchMatMulV3" in types) == wide, types
    assert "BatchMatMulV3" not in types_tf


def test_under_gradient_tape_eagerly_and_for_a_keras_dense_layer(routed):
    import keras

    layer = keras.layers.Dense(1024)
    x = tf.random.stateless_normal((2, 7, 256), seed=(1, 2))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(layer(x)))
    routed_kernel = tape.gradient(loss, layer.kernel)

    def own():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(x)))
        return tape.gradient(loss, layer.kernel)

    np.testing.assert_allclose(routed_kernel.numpy(), tensorflow_s_own(own).numpy(), rtol=2e-5, atol=2e-4)


def test_other_dtypes_and_transposed_first_operands_keep_tensorflow_s_gradient(routed):
    a = tf.random.stateless_normal((1024, 8), seed=(3, 4), dtype=tf.float64)
    b = tf.random.stateless_normal((1024, 16), seed=(5, 6), dtype=tf.float64)

    @tf.function
    def grads(a, b):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            loss = tf.reduce_sum(tf.matmul(a, b, transpose_a=True))
        return tape.gradient(loss, [a, b])

    graph = grads.get_concrete_function(a, b).graph
    assert "BatchMatMulV3" not in {op.type for op in graph.get_operations()}
    a32, b32 = tf.cast(a, tf.float32), tf.cast(b, tf.float32)
    graph = grads.get_concrete_function(a32, b32).graph
    assert "BatchMatMulV3" not in {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("environ, expected", [
    ({}, False),  # the default: TensorFlow's own gradient, on every CPU
    ({"TF_ENABLE_ONEDNN_OPTS": "1"}, False),
    ({"ELECTRA_MATMUL_GRADIENTS": "eigen"}, True),
    ({"ELECTRA_MATMUL_GRADIENTS": " Eigen "}, True),
    ({"ELECTRA_MATMUL_GRADIENTS": "onednn"}, False),
    ({"ELECTRA_MATMUL_GRADIENTS": ""}, False),
])
def test_the_choice(environ, expected):
    assert matmul_gradients.chosen(environ) is expected


def test_a_bad_value_names_the_variable_and_the_choices():
    with pytest.raises(InputError, match="ELECTRA_MATMUL_GRADIENTS='fast' in the environment: use one of onednn, "
                                         "eigen"):
        matmul_gradients.chosen({"ELECTRA_MATMUL_GRADIENTS": "fast"})


def test_route_installs_and_takes_it_back():
    before = matmul_gradients.installed()
    try:
        assert matmul_gradients.route_weight_gradients({"ELECTRA_MATMUL_GRADIENTS": "eigen"}) is True
        assert matmul_gradients.installed()
        assert matmul_gradients.route_weight_gradients({}) is False
        assert not matmul_gradients.installed()
    finally:
        (matmul_gradients.install if before else matmul_gradients.uninstall)()
