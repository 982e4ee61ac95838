"""bench/dropout_rng_cpu.py's replacement dropout: the mask it draws is dropout's (rate zeroed, the rest
scaled by 1 / (1 - rate)), from float32 or float16 uniforms."""
import numpy as np
import pytest


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_patched_dropout_is_dropout(dtype, monkeypatch):
    import keras

    from bench import dropout_rng_cpu

    monkeypatch.setattr(keras.src.backend.random, "dropout", keras.src.backend.random.dropout)  # restored after
    dropout_rng_cpu.patch_dropout(dtype)
    x = np.ones((200, 500), "float32")
    y = np.asarray(keras.layers.Dropout(0.1, seed=3)(x, training=True))
    kept = y != 0
    assert abs(kept.mean() - 0.9) < 0.005  # 100,000 draws: 5 standard deviations
    np.testing.assert_allclose(y[kept], 1 / 0.9, rtol=1e-6)
    assert np.array_equal(np.asarray(keras.layers.Dropout(0.1)(x, training=False)), x)
