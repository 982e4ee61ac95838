"""Precision is per model: a mixed-precision pretrainer gets its policy passed to every layer, and Keras'
global dtype policy (which would leak into whatever the process builds next) stays float32."""
import keras

from pretrain.builder import build_for_training
from tests.model_fixtures import tiny_config


def test_mixed_bfloat16_pretrainer_leaves_the_global_policy_float32():
    assert keras.config.dtype_policy().name == "float32"
    model, _ = build_for_training(tiny_config(mixed_precision="mixed_bfloat16"))

    assert keras.config.dtype_policy().name == "float32"
    after = keras.layers.Dense(2)
    after.build((None, 3))
    assert after.dtype_policy.name == "float32" and after.compute_dtype == "float32"

    assert model.dtype_policy.name == "mixed_bfloat16"
    layers = list(model._flatten_layers(include_self=False, recursive=True))
    assert len(layers) > 30
    for layer in layers:
        # LayerNorms compute in float32 under any policy; every other layer carries the model's.
        expected = "float32" if isinstance(layer, keras.layers.LayerNormalization) else "mixed_bfloat16"
        assert layer.dtype_policy.name == expected, layer.path
    query = model.discriminator.transformer_layers[0].attention_self.query
    assert query.compute_dtype == "bfloat16" and query.kernel.dtype == "float32"


def test_an_encoder_config_carries_its_policy():
    from model.encoder import BertEncoder

    encoder = BertEncoder(60, 32, 2, 2, 64, embedding_size=16, max_position_embeddings=32, dtype="mixed_bfloat16")
    clone = BertEncoder.from_config(encoder.get_config())
    assert clone.get_config() == encoder.get_config()
    assert clone.transformer_layers[1].output_dense.dtype_policy.name == "mixed_bfloat16"
    assert clone.embeddings.layer_norm.dtype_policy.name == "float32"
