"""The pretraining step's faster kernels compute what the plain ones did: the one-matmul Q/K/V projection
equals the three Dense layers, and the argmax of an accelerator equals the top_k route of TensorFlow and CPUs."""
import numpy as np
import pytest
from keras import ops

from model.attention import SelfAttention


# float32: the same dot products up to the matmul kernel's blocking; bfloat16: one rounding of the result
@pytest.mark.parametrize("policy, tolerance", [("float32", 1e-6), ("mixed_bfloat16", 2.0 ** -8)])
def test_one_qkv_matmul_equals_the_three_dense_layers(policy, tolerance):
    attention = SelfAttention(hidden_size=48, num_heads=3, dtype=policy)
    hidden = np.random.default_rng(0).normal(size=(2, 7, 48)).astype("float32")
    attention.build(hidden.shape)
    for dense in (attention.query, attention.key, attention.value):
        dense.bias.assign(np.random.default_rng(1).normal(size=48).astype("float32"))  # not all zeros

    fused = attention.project_qkv(ops.cast(hidden, attention.compute_dtype))
    separate = [dense(hidden) for dense in (attention.query, attention.key, attention.value)]
    for got, expected in zip(fused, separate):
        assert got.dtype == expected.dtype == attention.compute_dtype
        got, expected = (ops.convert_to_numpy(ops.cast(x, "float32")) for x in (got, expected))
        np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance * np.abs(expected).max())
        assert not np.array_equal(got, np.zeros_like(got))


def test_argmax_picks_the_index_top_k_picks_first_of_ties(monkeypatch):
    from pretrain import sampling

    rng = np.random.default_rng(0)
    values = rng.normal(size=(3, 5, 50)).astype("float32")
    values[0, 0, [3, 9]] = 10.0  # a tie: the first one wins both ways
    by_top_k = ops.convert_to_numpy(ops.top_k(values, 1)[1][..., 0])
    by_argmax = ops.convert_to_numpy(ops.argmax(values, axis=-1))
    np.testing.assert_array_equal(by_top_k, by_argmax)
    assert by_argmax[0, 0] == 3
    assert sampling.argmax_by_top_k()  # TensorFlow (and any CPU) keeps top_k
    for route in (True, False):
        monkeypatch.setattr(sampling, "argmax_by_top_k", lambda: route)
        np.testing.assert_array_equal(ops.convert_to_numpy(sampling.argmax_last_axis(values)), by_argmax)
