"""The compute_dtype_softmax option of the self-attention (model/attention.py): in float32 it is today's attention bit
for bit; under mixed_bfloat16 it agrees with today's within bfloat16 rounding, its dropout drops at the rate it says,
and the lowered JAX pretraining step then holds no float32 [batch, heads, seq, seq] (today's does), no top_k, and
the flat update's reductions do not grow with the number of variables (the per-variable update's do)."""
import json
import pathlib
import textwrap

import numpy as np
import pytest
from keras import ops

from tests.helpers import run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# bfloat16 keeps 8 significant bits: one rounding is off by at most 2 ** -8 of the value (its unit roundoff)
BF16_ROUNDOFF = 2.0 ** -8


def attention_and_inputs(policy, on, rate=0.1):
    """A 3-head SelfAttention with scores large enough for a peaked softmax, a batch with a padded example."""
    import keras

    from model.attention import SelfAttention

    keras.utils.set_random_seed(0)
    attention = SelfAttention(48, 3, attention_dropout=rate, dtype=policy, compute_dtype_softmax=on)
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(2, 9, 48)).astype("float32")
    attention.build(hidden.shape)
    for dense in (attention.query, attention.key, attention.value):
        dense.kernel.assign(rng.normal(size=(48, 48)).astype("float32") * 0.3)
    mask = np.ones((2, 9), "int32")
    mask[1, 6:] = 0
    return attention, hidden, mask


def attend(policy, on, training):
    attention, hidden, mask = attention_and_inputs(policy, on)
    output = attention(hidden, mask, training=training, use_fused=False)
    values = attention.value(hidden)
    return (ops.convert_to_numpy(ops.cast(output, "float32")), output.dtype,
            float(np.abs(ops.convert_to_numpy(ops.cast(values, "float32"))).max()))


@pytest.mark.parametrize("training", [False, True])
def test_in_float32_the_option_is_todays_attention_bit_for_bit(training):
    today, _, _ = attend("float32", False, training)
    option, _, _ = attend("float32", True, training)
    np.testing.assert_array_equal(option, today)


def test_under_mixed_bfloat16_it_agrees_within_bfloat16_rounding():
    """Each output is a convex combination of the values, by weights that take about (3 + ln seq) roundings more
    than today's (the exponent's argument, exp, the sum's result, the division): 8 unit roundoffs of the largest
    value bound the difference (measured: 1.5-3)."""
    today, today_dtype, largest_value = attend("mixed_bfloat16", False, False)
    option, option_dtype, _ = attend("mixed_bfloat16", True, False)
    assert today_dtype == option_dtype == "bfloat16"
    np.testing.assert_allclose(option, today, rtol=0, atol=8 * BF16_ROUNDOFF * largest_value)
    assert not np.array_equal(option, today)  # the option took its own path


def test_the_softmax_in_bfloat16_is_the_float32_softmax_rounded():
    from model.attention import compute_dtype_softmax

    logits = np.random.default_rng(1).normal(scale=4.0, size=(3, 2, 7, 11)).astype("float32")
    logits[..., 8:] = -1e9  # masked keys
    expected = ops.convert_to_numpy(ops.softmax(ops.cast(ops.cast(logits, "bfloat16"), "float32"), axis=-1))
    probs = compute_dtype_softmax(ops.cast(logits, "bfloat16"))
    assert probs.dtype == "bfloat16"
    probs = ops.convert_to_numpy(ops.cast(probs, "float32"))
    assert np.all(probs[..., 8:] == 0)
    np.testing.assert_allclose(probs, expected, rtol=0, atol=8 * BF16_ROUNDOFF * expected.max())
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=8 * BF16_ROUNDOFF)


def test_the_dropout_drops_at_its_rounded_rate_and_keeps_the_mean():
    import keras

    from model.attention import compute_dtype_dropout, rounded_keep_probability

    keep = rounded_keep_probability(0.1)
    assert keep == 922 / 1024
    ones = ops.ones((256, 1024), dtype="bfloat16")
    seed = keras.random.SeedGenerator(5)
    dropped = ops.convert_to_numpy(ops.cast(compute_dtype_dropout(ones, 0.1, seed), "float32"))
    again = ops.convert_to_numpy(ops.cast(compute_dtype_dropout(ones, 0.1, keras.random.SeedGenerator(5)), "float32"))
    np.testing.assert_array_equal(again, dropped)  # the same seed state, the same mask
    later = ops.convert_to_numpy(ops.cast(compute_dtype_dropout(ones, 0.1, seed), "float32"))
    assert not np.array_equal(later, dropped)  # the seed advanced
    count, rate = dropped.size, 1 - keep
    assert abs((dropped == 0).mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / count)
    kept = np.unique(dropped[dropped != 0])
    assert kept.size == 1 and abs(kept[0] - 1 / keep) <= BF16_ROUNDOFF / keep  # 1/keep rounded to bfloat16
    assert abs(dropped.mean() - 1.0) < 5 * np.sqrt(rate / keep / count) + BF16_ROUNDOFF


def test_the_option_is_in_the_config_and_changes_no_variable():
    from model.encoder import BertEncoder

    def encoder(**kwargs):
        built = BertEncoder(120, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, **kwargs)
        built.build()
        return built

    today, option = encoder(), encoder(compute_dtype_softmax=True)
    assert option.get_config()["compute_dtype_softmax"] and not today.get_config()["compute_dtype_softmax"]
    restored = BertEncoder.from_config(option.get_config())
    assert all(layer.attention_self.compute_dtype_softmax for layer in restored.transformer_layers)
    assert option.transformer_layers[0].get_config()["compute_dtype_softmax"]
    assert [v.path for v in today.weights] == [v.path for v in option.weights]  # checkpoint names


GUARD_SCRIPT = textwrap.dedent('''
    import json, re, sys
    sys.modules["tensorflow"] = None
    import jax, numpy as np
    from training_jax.compiles import lowered_structure
    from tests.helpers import synthetic_batch
    from configs.pretraining_config import PretrainingConfig
    from pretrain import sampling
    from pretrain.builder import build_for_training
    from training_jax.step import make_step_fn, use_compute_dtype_softmax

    sampling.argmax_by_top_k = lambda: False  # the accelerator's choice, wherever this runs
    BATCH, SEQ = 4, 16

    def build(num_layers, fused):
        """A micro ELECTRA of electra_small's structure (generator and discriminator) under mixed_bfloat16."""
        config = PretrainingConfig.create({
            "model_size": "electra_small", "model_hparam_overrides": {**MODEL, "num_layers": num_layers},
            "generator_hidden_size": 0.5, "vocab_size": 120, "max_seq_length": SEQ, "train_batch_size": BATCH,
            "num_warmup_steps": 0, "mixed_precision": "mixed_bfloat16"})
        model, optimizer = build_for_training(config)
        optimizer.fused = fused
        return model, optimizer

    def values(variables):
        return [v.value for v in variables]

    model, optimizer = build(1, True)
    batch = synthetic_batch(np.random.default_rng(0), BATCH, SEQ, 120)
    state = (values(model.trainable_variables), values(model.non_trainable_variables), values(optimizer.variables))
    steps = {}
    for on in (False, True):
        use_compute_dtype_softmax(model, on)
        text = jax.jit(make_step_fn(model, optimizer)).lower(state, batch).as_text()  # lowered only, no compile
        scores = lambda dtype: len(re.findall(rf"tensor<{BATCH}x\\d+x{SEQ}x{SEQ}x{dtype}>", text))
        steps[str(on)] = {"f32_scores": scores("f32"), "bf16_scores": scores("bf16"), **lowered_structure(text)}
    updates = {}  # the update alone at two depths: [variables, reductions]
    for fused in (True, False):
        for num_layers in (1, 2):
            deeper, deeper_optimizer = build(num_layers, fused)
            trainable = values(deeper.trainable_variables)
            text = jax.jit(deeper_optimizer.stateless_apply).lower(values(deeper_optimizer.variables), trainable,
                                                                   trainable).as_text()
            updates[f"{fused}-{num_layers}"] = [len(trainable), lowered_structure(text)["reduce"]]
    print("RESULTS" + json.dumps({"steps": steps, "updates": updates}))
''')


def test_the_lowered_bfloat16_step_holds_no_float32_scores_nor_top_k():
    from tests.helpers import MICRO_MODEL

    result = run_script_under_jax(GUARD_SCRIPT.replace("MODEL", json.dumps(MICRO_MODEL)), REPO_ROOT)
    today, option = result["steps"]["False"], result["steps"]["True"]
    assert today["f32_scores"] > 0, today  # the guard can fail: today's softmax and dropout mask are float32
    assert option["f32_scores"] == 0 and option["bf16_scores"] > today["bf16_scores"], option
    assert option["sort_or_top_k"] == today["sort_or_top_k"] == 0
    # the flat update: the same reductions at 48 and 80 variables; the per-variable one: one more per variable
    updates = result["updates"]
    assert updates["True-1"][0] < updates["True-2"][0] and updates["True-1"][1] == updates["True-2"][1], updates
    assert (updates["False-2"][1] - updates["False-1"][1] == updates["False-2"][0] - updates["False-1"][0]), updates
