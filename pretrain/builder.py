"""Builds the pretrainer's towers from a PretrainingConfig, wiring the original's sharing options.

Precision is per model: the builders take a Keras dtype policy (`dtype`, e.g. "mixed_bfloat16") and hand
it to every layer. None means Keras' global policy, which nothing in this project sets, so building a
mixed-precision pretrainer leaves the next model of the process in float32.
"""
import dataclasses

import keras

from model.embeddings import BertEmbeddings
from model.encoder import BertEncoder
from model.matmul import set_matmul_dtype
from model.optimizers import create_optimizer
from model.two_tower import TwoTowerEncoder
from pretrain.pretrainer import ElectraPretrainer

DISCRIMINATOR_NAME = "electra"
GENERATOR_NAME = "generator"
TOWER_NAMES = {"ltr": "generator_ltr", "rtl": "generator_rtl"}  # the original's two-tower scopes


def shared_embeddings(model_config, dtype=None):
    """The embedding block both towers read (TF1 scope electra/embeddings)."""
    c = model_config
    return BertEmbeddings(c.vocab_size, c.embedding_size, c.max_position_embeddings, c.type_vocab_size,
                          c.dropout, c.initializer_range, c.layer_norm_epsilon, dtype=dtype, name="embeddings")


def build_encoders(config, dtype=None):
    """(generator, discriminator) BertEncoders for a PretrainingConfig.

    ELECTRA: a narrower generator sharing every embedding with the discriminator (or its own with
    untied_generator_embeddings; or the discriminator's stop-gradient view plus a residual under
    gdes_embeddings); untied_generator=False makes the generator the discriminator itself;
    uniform_generator has no generator network; two_tower_generator (Electric) builds two causal towers of
    the generator's size, generator_ltr and generator_rtl, sharing the embeddings unless
    untied_generator_embeddings gives each its own. MLM-only: one full-size model named "electra".
    """
    model_config = config.model_config()
    if not config.electra_objective:
        return BertEncoder.from_model_config(model_config, name=DISCRIMINATOR_NAME, dtype=dtype), None
    embeddings = shared_embeddings(model_config, dtype)
    discriminator = BertEncoder.from_model_config(model_config, name=DISCRIMINATOR_NAME,
                                                  embeddings=embeddings,
                                                  gdes_embeddings=config.gdes_embeddings, dtype=dtype)
    if config.uniform_generator:
        return None, discriminator
    if not config.untied_generator:
        return discriminator, discriminator
    generator_config = config.generator_model_config()
    generator_embeddings = None if config.untied_generator_embeddings else embeddings
    if generator_embeddings is not None:
        generator_config = dataclasses.replace(generator_config, embedding_size=model_config.embedding_size)
    if config.two_tower_generator:
        ltr, rtl = (BertEncoder.from_model_config(generator_config, name=TOWER_NAMES[direction],
                                                  embeddings=generator_embeddings, causal=direction, dtype=dtype)
                    for direction in ("ltr", "rtl"))
        return TwoTowerEncoder(ltr, rtl, dtype=dtype), discriminator
    generator = BertEncoder.from_model_config(generator_config, name=GENERATOR_NAME,
                                              embeddings=generator_embeddings, dtype=dtype)
    return generator, discriminator


def build_pretrainer(config, dtype=None):
    """An ElectraPretrainer (built, with TF1-named variables) for a PretrainingConfig, every layer in the
    dtype policy `dtype` (training passes config.mixed_precision; loading and exporting weights, which
    are float32 under any policy, leave it to the default)."""
    if config.gdes_embeddings and config.untied_generator_embeddings:
        raise ValueError("gdes_embeddings shares the generator's embeddings; it cannot be combined "
                         "with untied_generator_embeddings")
    generator, discriminator = build_encoders(config, dtype)
    pretrainer = ElectraPretrainer(generator, discriminator, objective=config.objective_settings(), dtype=dtype)
    set_matmul_dtype(pretrainer, config.matmul_dtype)  # model/matmul.py: a no-op at float32 or a 16-bit policy
    return pretrainer


def build_optimizer(config):
    """The optimizer and schedule a PretrainingConfig asks for (the run script and the benchmarks share
    it, so both train with the same recipe). Gradient accumulation is the training loop's job."""
    return create_optimizer(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps,
        weight_decay_rate=config.weight_decay_rate, lr_decay_power=config.lr_decay_power,
        optimizer=config.optimizer, epsilon=config.adam_epsilon, beta_1=config.adam_beta1,
        beta_2=config.adam_beta2, clip_norm=config.clip_norm)


def build_for_training(config):
    """(pretrainer, built optimizer) in the config's precision (its own dtype policy, not the process's),
    seeded by config.seed so that a config names its initial weights and dropout streams: two runs of
    one config start equal. Shared by run_pretraining.py and the JAX trainer (training_jax.pretrain), so
    both start the same way."""
    keras.utils.set_random_seed(config.seed)
    pretrainer = build_pretrainer(config, dtype=config.mixed_precision)
    optimizer = build_optimizer(config)
    optimizer.build(pretrainer.trainable_variables)
    return pretrainer, optimizer
