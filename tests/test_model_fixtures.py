"""Tiny configs and batches shared by the model and pretraining tests (plus a check of the fixtures)."""
import numpy as np

from configs.pretraining_config import PretrainingConfig
from pretrain.builder import build_pretrainer

PAD, CLS, SEP, MASK = 0, 1, 2, 3
VOCAB_SIZE = 60
SEQ_LENGTH = 16

TINY_HPARAMS = {
    "model_size": "electra_tiny", "vocab_size": VOCAB_SIZE, "max_seq_length": SEQ_LENGTH,
    "cls_token_id": CLS, "sep_token_id": SEP, "mask_token_id": MASK, "seed": 7,
    "model_hparam_overrides": {"hidden_size": 32, "num_heads": 2, "intermediate_size": 64,
                               "embedding_size": 16, "max_position_embeddings": 32},
}


def tiny_config(**overrides):
    hparams = dict(TINY_HPARAMS)
    hparams["model_hparam_overrides"] = dict(TINY_HPARAMS["model_hparam_overrides"])
    hparams["model_hparam_overrides"].update(overrides.pop("model_hparam_overrides", {}))
    hparams.update(overrides)
    return PretrainingConfig.create(hparams)


def tiny_pretrainer(**overrides):
    return build_pretrainer(tiny_config(**overrides))


def tiny_batch(batch_size=4, seq_length=SEQ_LENGTH, lengths=None, seed=0):
    """[CLS] tokens [SEP] then padding, two segments; real lengths vary unless given."""
    rng = np.random.default_rng(seed)
    if lengths is None:
        lengths = rng.integers(5, seq_length + 1, batch_size)
    input_ids = np.zeros((batch_size, seq_length), "int32")
    input_mask = np.zeros((batch_size, seq_length), "int32")
    segment_ids = np.zeros((batch_size, seq_length), "int32")
    for row, length in enumerate(lengths):
        input_ids[row, :length] = rng.integers(MASK + 1, VOCAB_SIZE, length)
        input_ids[row, 0] = CLS
        input_ids[row, length - 1] = SEP
        input_mask[row, :length] = 1
        segment_ids[row, length // 2:length] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def test_tiny_config_is_small_and_has_both_projections():
    config = tiny_config()
    discriminator, generator = config.model_config(), config.generator_model_config()
    assert (discriminator.hidden_size, discriminator.num_layers, discriminator.embedding_size) == (32, 2, 16)
    assert (generator.hidden_size, generator.num_heads, generator.intermediate_size) == (16, 1, 64)
    assert config.max_predictions_per_seq == 2
    batch = tiny_batch()
    assert (batch["input_ids"][:, 0] == CLS).all()
