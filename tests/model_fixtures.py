"""Tiny configs, batches and pretrainers shared by the model and pretraining tests, and the pretrainer
tests' hand computations (fixed masking, gradient sizes, log-softmax). Imports no TensorFlow until a
function needs it, so that subprocess scripts (KERAS_BACKEND=jax) and conftest.py may import it."""
import numpy as np

from configs.pretraining_config import PretrainingConfig

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
    from pretrain.builder import build_pretrainer

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


# ------------------------------------------------------------------ the pretrainer tests' hand computations
NO_DROPOUT = {"model_hparam_overrides": {"dropout": 0.0, "attention_dropout": 0.0}}


def fixed_masking(batch):
    """Row 0: positions 3 and 5 ([MASK] at 3, 5 left unchanged); row 1: one slot at 2, the other unused."""
    ids = batch["input_ids"]
    positions = np.array([[3, 5], [2, 0], [1, 4], [2, 2]], "int32")
    weights = np.array([[1, 1], [1, 0], [1, 1], [1, 1]], "float32")
    masked_ids = ids.copy()
    masked_ids[0, 3] = MASK
    masked_ids[1, 2] = MASK
    masked_ids[2, 1] = MASK
    masked_ids[2, 4] = MASK
    masked_ids[3, 2] = MASK
    targets = np.take_along_axis(ids, positions, 1) * weights.astype("int32")
    return {"input_ids": masked_ids, "masked_lm_positions": positions, "masked_lm_ids": targets,
            "masked_lm_weights": weights}


def max_abs(gradient):
    """A gradient's largest magnitude; None (no path from the loss) counts as zero."""
    import tensorflow as tf

    return 0.0 if gradient is None else float(tf.reduce_max(tf.abs(tf.convert_to_tensor(gradient))))


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def random_tables_alike(weights):
    """Pairs of 2-D variables (each counted once: shared embeddings are one variable) whose values start
    with the same numbers: a Keras initializer instance shared by two variables repeats one draw."""
    tables = {id(v): (v.path, np.asarray(v).ravel()) for v in weights if len(v.shape) == 2}
    named = sorted(tables.values(), key=lambda item: item[0])
    alike = []
    for i, (first, a) in enumerate(named):
        for second, b in named[i + 1:]:
            size = min(a.size, b.size)
            if np.allclose(a[:size], b[:size]):
                alike.append((first, second))
    return len(named), alike
