"""The encoder's skip_padding option (model/unpadding.py): the real tokens' rows only, the same function."""
import numpy as np
import pytest

from tests.finetune_fixtures import TASKS, mixed_losses, step_config, synthetic_features, tiny_model


def micro_encoder(**kwargs):
    import keras

    from model.encoder import BertEncoder

    keras.utils.set_random_seed(3)
    return BertEncoder(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
                       embedding_size=8, max_position_embeddings=16, **kwargs)


def ragged_inputs(lengths=(5, 9, 1, 7), seq=9):
    rng = np.random.default_rng(0)
    mask = np.array([[1] * n + [0] * (seq - n) for n in lengths], np.int32)
    return {"input_ids": (rng.integers(1, 50, mask.shape) * mask).astype(np.int32), "input_mask": mask,
            "segment_ids": (rng.integers(0, 2, mask.shape) * mask).astype(np.int32)}


def both_ways(encoder, inputs, **call_args):
    encoder.skip_padding = False
    padded = encoder(inputs, **call_args)
    encoder.skip_padding = True
    return padded, encoder(inputs, **call_args)


def test_real_tokens_come_out_as_the_padded_encoder_gives_them_and_padding_as_zeros():
    inputs = ragged_inputs()
    mask = inputs["input_mask"][..., None]
    padded, rows = both_ways(micro_encoder(), inputs, return_all_layers=True)
    assert len(rows) == 2
    for every, real_only in zip(padded, rows):
        every, real_only = np.asarray(every), np.asarray(real_only)
        assert real_only.shape == every.shape
        np.testing.assert_allclose(real_only * mask, every * mask, atol=2e-6)
        assert not np.any(real_only * (1 - mask)) and np.any(every * (1 - mask))


def test_the_gradients_are_the_padded_encoders():
    import tensorflow as tf

    encoder, inputs = micro_encoder(), ragged_inputs()
    weights = tf.constant(np.random.default_rng(1).normal(size=(4, 9, 16)) * inputs["input_mask"][..., None],
                          tf.float32)

    def gradients():
        @tf.function(autograph=False)
        def traced():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(encoder(inputs) * weights)
            return tape.gradient(loss, encoder.trainable_variables)
        return [tf.convert_to_tensor(g).numpy() for g in traced()]

    encoder.skip_padding = False
    every = gradients()
    encoder.skip_padding = True
    for expected, got in zip(every, gradients()):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    assert np.any(every[0])  # the first variable's gradient is not trivially zero


def test_training_with_dropout_keeps_padding_zero_and_draws_masks_for_the_rows():
    inputs = ragged_inputs()
    mask = inputs["input_mask"][..., None]
    encoder = micro_encoder(dropout=0.5, attention_dropout=0.5)
    encoder.skip_padding = True
    trained, evaluated = np.asarray(encoder(inputs, training=True)), np.asarray(encoder(inputs))
    assert np.all(np.isfinite(trained)) and not np.any(trained * (1 - mask))
    assert not np.allclose(trained * mask, evaluated * mask, atol=1e-3)  # dropout acted on the rows


@pytest.mark.parametrize("option, refusal", [({"scan_layers": True}, "scan_layers"), ({"causal": "rtl"}, "causal")])
def test_scan_layers_and_causal_encoders_are_refused(option, refusal):
    encoder = micro_encoder(**option)
    encoder.skip_padding = True
    with pytest.raises(ValueError, match=refusal):
        encoder(ragged_inputs())


def test_fine_tuning_updates_give_the_padded_losses():
    """TFTrainer on the multitask fixtures (classification, regression and tagging heads, batches padded to 64
    positions of which 4-29 are real), dropout off: the same losses step by step."""
    from configs.finetuning_config import FinetuningConfig
    from finetune.loop import build_optimizer
    from finetune.tf_trainer import TFTrainer

    config = step_config()
    losses = {}
    for skip in (False, True):
        model = tiny_model(TASKS, config)
        model.encoder.skip_padding = skip
        losses[skip] = mixed_losses(TFTrainer(model, TASKS, build_optimizer(config, 10, 1), config))
    assert len(set(losses[False])) == 4
    np.testing.assert_allclose(losses[True], losses[False], rtol=2e-5)
    from finetune.trials import skips_padding

    # the default under TensorFlow (this process's backend); False computes every position, as the original
    assert skips_padding(FinetuningConfig.create({})) and not skips_padding(FinetuningConfig.create(
        {"skip_padding": False}))


def test_a_trial_sets_the_option_on_its_encoder_and_jax_refuses_it_when_asked(tmp_path):
    from configs.finetuning_config import FinetuningConfig
    from finetune.trials import TaskData, TrialRunner
    from training_jax.finetune import JaxTrainer

    task = TASKS[0]
    data = TaskData(task, synthetic_features()[task.name], {}, {}, {})
    for skip in (None, False, True):
        config = FinetuningConfig.create({"skip_padding": skip, "save_finetuned_models": False})
        encoder = tiny_model([task], config).encoder
        runner = TrialRunner(None, config, [data], tmp_path, trainer_class=lambda *args: None,
                             load_encoder=lambda pretrained: encoder)
        assert runner.start_trial(0).encoder.skip_padding == (skip is not False)
    with pytest.raises(ValueError, match="TensorFlow's option"):
        JaxTrainer(None, [task], None, FinetuningConfig.create({"skip_padding": True}))
