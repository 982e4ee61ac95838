"""LayerNorm and GELU with hand-written backward passes (model/elementwise_gradients.py): autodiff's function and
gradients within float32 rounding, taken only in training under TensorFlow, and turned off by its variable."""
import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from model import elementwise_gradients
from tests.model_fixtures import NO_DROPOUT, fixed_masking, tiny_batch, tiny_pretrainer


def relative_error(got, expected):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))


def value_and_gradients(function, *args, upstream):
    args = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(args)
        output = function(*args)
        loss = tf.reduce_sum(output * upstream)
    return [output] + tape.gradient(loss, args)


@pytest.mark.parametrize("shape", [(3, 7, 48), (21, 48)])  # padded batches and the real tokens' rows
def test_layer_norm_is_keras_s_with_the_same_gradients(shape):
    from keras import ops

    rng = np.random.default_rng(0)
    x = (rng.normal(size=shape) * 4 + 2).astype("float32")
    gamma, beta = rng.normal(size=(2, shape[-1])).astype("float32")
    upstream = rng.normal(size=shape).astype("float32")
    ours = value_and_gradients(lambda *a: elementwise_gradients.layer_norm(*a, 1e-12), x, gamma, beta,
                               upstream=upstream)
    keras_s = value_and_gradients(lambda *a: ops.layer_normalization(*a, -1, 1e-12), x, gamma, beta,
                                  upstream=upstream)
    for name, got, expected in zip(("y", "dx", "dgamma", "dbeta"), ours, keras_s):
        assert relative_error(got, expected) < 2e-6, name


@pytest.mark.parametrize("dtype, tolerance", [("float32", 2e-6), ("bfloat16", 2e-2)])
def test_gelu_is_the_exact_one_with_the_same_gradient(dtype, tolerance):
    from keras import ops

    rng = np.random.default_rng(1)
    x = tf.cast(rng.normal(size=(5, 64)) * 3, dtype)
    upstream = tf.cast(rng.normal(size=(5, 64)), dtype)
    ours = value_and_gradients(elementwise_gradients.gelu, x, upstream=upstream)
    keras_s = value_and_gradients(lambda v: ops.gelu(v, approximate=False), x, upstream=upstream)
    assert ours[0].dtype == ours[1].dtype == x.dtype  # mixed_bfloat16's FFN stays in its compute dtype
    for got, expected in zip(ours, keras_s):
        assert relative_error(got, expected) < tolerance


def test_only_training_under_tensorflow_takes_them(monkeypatch):
    assert elementwise_gradients.by_hand(True) and not elementwise_gradients.by_hand(False)
    assert not elementwise_gradients.by_hand(None)
    monkeypatch.setenv(elementwise_gradients.ENV, "autodiff")
    assert not elementwise_gradients.by_hand(True)
    monkeypatch.setenv(elementwise_gradients.ENV, "by-hand")
    monkeypatch.setattr("keras.backend.backend", lambda: "jax")  # XLA fuses either form there
    assert not elementwise_gradients.by_hand(True)
    monkeypatch.setenv(elementwise_gradients.ENV, "fast")
    with pytest.raises(InputError, match=f"{elementwise_gradients.ENV}='fast' in the environment: use one of "
                                         "by-hand, autodiff"):
        elementwise_gradients.by_hand(True)


def test_a_pretraining_step_reaches_them_and_computes_autodiff_s_gradients(monkeypatch):
    """Every LayerNorm and GELU of the generator, the discriminator and both heads takes them in training (2
    layers each: 11 LayerNorms, 6 GELUs); the loss and every weight's gradient are autodiff's within rounding."""
    model, batch = tiny_pretrainer(**NO_DROPOUT), tiny_batch(lengths=[16, 12, 9, 6])
    masked, sampled = fixed_masking(batch), np.array([[7, 9], [8, 8], [10, 11], [12, 13]], "int32")
    calls = {"layer_norm": 0, "gelu": 0}

    def counted(name):
        original = getattr(elementwise_gradients, name)

        def call(*args):
            calls[name] += 1
            return original(*args)
        return call

    def loss_and_gradients():
        with tf.GradientTape() as tape:
            loss = model.compute_losses(batch, training=True, masked_inputs=masked, sampled_ids=sampled).total_loss
        return [loss] + tape.gradient(loss, model.trainable_variables)

    for name in calls:
        monkeypatch.setattr(elementwise_gradients, name, counted(name))
    by_hand = loss_and_gradients()
    assert calls == {"layer_norm": 11, "gelu": 6}
    monkeypatch.setenv(elementwise_gradients.ENV, "autodiff")
    autodiff = loss_and_gradients()
    assert calls == {"layer_norm": 11, "gelu": 6}  # not called again
    assert relative_error(by_hand[0], autodiff[0]) < 1e-6
    by_hand, autodiff = ([tf.convert_to_tensor(g).numpy() for g in grads[1:]] for grads in (by_hand, autodiff))
    largest = max(np.max(np.abs(g)) for g in autodiff)  # the key biases' gradients are 0 up to rounding
    for variable, got, expected in zip(model.trainable_variables, by_hand, autodiff):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6 * largest, err_msg=variable.path)
    model.compute_losses(batch, training=False, masked_inputs=masked, sampled_ids=sampled)
    monkeypatch.delenv(elementwise_gradients.ENV)
    model.compute_losses(batch, training=False, masked_inputs=masked, sampled_ids=sampled)
    assert calls == {"layer_norm": 11, "gelu": 6}  # evaluation keeps Keras' own ops


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_under_a_mixed_policy_the_gradients_keep_their_dtypes_and_autodiff_s_values(monkeypatch, policy):
    """The residual sums reach LayerNorm in 16 bits (it computes in float32) and the FFN's GELU runs in them."""
    from pretrain.builder import build_pretrainer
    from tests.model_fixtures import tiny_config

    model = build_pretrainer(tiny_config(**NO_DROPOUT), dtype=policy)
    batch = tiny_batch(lengths=[16, 12, 9, 6])
    masked, sampled = fixed_masking(batch), np.array([[7, 9], [8, 8], [10, 11], [12, 13]], "int32")

    def gradients():
        with tf.GradientTape() as tape:
            loss = model.compute_losses(batch, training=True, masked_inputs=masked, sampled_ids=sampled).total_loss
        return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]

    by_hand = gradients()
    monkeypatch.setenv(elementwise_gradients.ENV, "autodiff")
    autodiff = gradients()
    largest = max(np.max(np.abs(g)) for g in autodiff)
    for variable, got, expected in zip(model.trainable_variables, by_hand, autodiff):
        assert got.dtype == expected.dtype == np.float32, variable.path
        # a 16-bit unit roundoff or two of the largest (measured: 3.5e-3 at most, bfloat16's token-type table)
        assert np.max(np.abs(got - expected)) <= 1e-2 * largest, variable.path
