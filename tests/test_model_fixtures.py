"""A check of the tiny configs and batches that tests/model_fixtures.py shares with the model and
pretraining tests."""
from tests.model_fixtures import CLS, tiny_batch, tiny_config


def test_tiny_config_is_small_and_has_both_projections():
    config = tiny_config()
    discriminator, generator = config.model_config(), config.generator_model_config()
    assert (discriminator.hidden_size, discriminator.num_layers, discriminator.embedding_size) == (32, 2, 16)
    assert (generator.hidden_size, generator.num_heads, generator.intermediate_size) == (16, 1, 64)
    assert config.max_predictions_per_seq == 2
    batch = tiny_batch()
    assert (batch["input_ids"][:, 0] == CLS).all()
