"""training_jax/rng.py: the step's random bits from threefry (the default) or XLA's RngBitGenerator ("rbg"). Keras's
jax SeedGenerator does not follow jax_default_prng_impl by itself (its raw two-word seeds fail under "rbg"); through
use_prng the step's kinds of draws (dropout, masking, Gumbel sampling) work under each, with the same distributions,
other bits, the same bits again from the same seed state, and the lowered step draws through RngBitGenerator."""
import json
import pathlib
import textwrap

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import json, sys
    sys.modules["tensorflow"] = None
    import jax, keras, numpy as np
    from keras import ops
    from tests.helpers import synthetic_batch
    from configs.pretraining_config import PretrainingConfig
    from model.attention import compute_dtype_dropout
    from pretrain.builder import build_for_training
    from pretrain.masking import mask_inputs
    from pretrain.sampling import sample_tokens
    from training_jax.rng import use_prng
    from training_jax.step import make_step_fn

    try:  # what the flag alone does to Keras's draws
        jax.config.update("jax_default_prng_impl", "rbg")
        keras.random.uniform((2,), seed=keras.random.SeedGenerator(1))
        flag_alone = "works"
    except TypeError as error:
        flag_alone = "fails: " + str(error)[:60]
    jax.config.update("jax_default_prng_impl", "threefry2x32")

    config = PretrainingConfig.create({"model_size": "electra_small", "model_hparam_overrides": MODEL,
                                       "generator_hidden_size": 0.5, "vocab_size": 120, "max_seq_length": 16,
                                       "train_batch_size": 4, "num_warmup_steps": 0})
    model, optimizer = build_for_training(config)  # built under the default: the same initial weights
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    batch = synthetic_batch(np.random.default_rng(0), 4, 16, 120)
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 120, (512, 64)).astype("int32")
    input_mask = np.ones_like(ids)
    input_mask[:, 48:] = 0  # 48 real tokens: candidates at positions 0..47
    seed = keras.random.SeedGenerator(7)

    def draws(seed_state):  # the step's kinds of draws from one seed state, and the state they leave
        with keras.StatelessScope(state_mapping=[(seed.state, seed_state)]) as scope:
            dropped = keras.random.dropout(ops.ones((512, 1024)), 0.1, seed=seed)
            dropped16 = compute_dtype_dropout(ops.ones((512, 1024), "bfloat16"), 0.1, seed)
            masked = mask_inputs(ids, input_mask, mask_prob=0.15, max_predictions=10, mask_token_id=4,
                                 special_token_ids=(), seed=seed)
            sampled = sample_tokens(ops.zeros((64, 8, 120)), seed)
        return dropped, ops.cast(dropped16, "float32"), masked, sampled, scope.get_current_value(seed.state)

    results = {"flag_alone": flag_alone}
    for impl in ("threefry2x32", "rbg"):
        use_prng(impl)
        jitted = jax.jit(lambda seed_state: draws(seed_state))  # a new function: jit reuses a function's trace
        first, second = jitted(seed.state.value), jitted(seed.state.value)
        dropped, dropped16, masked, sampled, _ = jax.tree_util.tree_map(np.asarray, first)
        weights = masked["masked_lm_weights"] > 0
        turned = np.take_along_axis(masked["input_ids"], masked["masked_lm_positions"], 1)
        step_text = jax.jit(make_step_fn(model, optimizer)).lower(state, batch).as_text() if impl == "rbg" else ""
        results[impl] = {
            "dropout": float((dropped == 0).mean()), "dropout16": float((dropped16 == 0).mean()),
            "mask_token": float((turned[weights] == 4).mean()), "positions": int(weights.sum()),
            "positions_mean": float(masked["masked_lm_positions"][weights].mean()),
            "sampled": np.bincount(sampled.ravel(), minlength=120).tolist(),
            "first_bits": (dropped[0, :64] == 0).tolist(),
            "repeated": all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(first),
                                                                 jax.tree_util.tree_leaves(second))),
            "step_rng_bit_generators": step_text.count("rng_bit_generator")}
    use_prng("threefry2x32")
    restored = keras.random.dropout(ops.ones((512, 1024)), 0.1, seed=keras.random.SeedGenerator(7))
    results["restored"] = (np.asarray(restored)[0, :64] == 0).tolist()
    print("RESULTS" + json.dumps(results))
''')


def within(observed, expected, count, sigmas=5):
    """|observed - expected| within `sigmas` binomial standard deviations of a rate over `count` draws."""
    return abs(observed - expected) < sigmas * np.sqrt(expected * (1 - expected) / count)


def test_threefry_and_rbg_draw_the_same_distributions_reproducibly():
    result = run_script_under_jax(SCRIPT.replace("MODEL", json.dumps({**MICRO_MODEL, "num_layers": 1})), REPO_ROOT)
    assert result["flag_alone"].startswith("fails"), result["flag_alone"]  # why use_prng translates Keras's seeds
    threefry, rbg = result["threefry2x32"], result["rbg"]
    for draws in (threefry, rbg):
        assert within(draws["dropout"], 0.1, 512 * 1024), draws["dropout"]
        assert within(draws["dropout16"], 102 / 1024, 512 * 1024), draws["dropout16"]  # the rounded rate
        assert within(draws["mask_token"], 0.85, draws["positions"]), draws["mask_token"]
        spread = np.sqrt((48 ** 2 - 1) / 12 / draws["positions"])  # uniform positions 0..47
        assert abs(draws["positions_mean"] - 23.5) < 5 * spread, draws["positions_mean"]
        counts = np.array(draws["sampled"])  # Gumbel-max over equal logits: every token alike (512 draws)
        assert counts.sum() == 512 and counts.max() < 20, counts
        assert draws["repeated"]  # from the same seed state, the same bits and the same next state
    assert threefry["first_bits"] != rbg["first_bits"]  # other bits
    assert threefry["step_rng_bit_generators"] == 0
    # the pretraining step's draws go through RngBitGenerator (lowered into shared private functions, so a few)
    assert rbg["step_rng_bit_generators"] > 0
    assert result["restored"] == threefry["first_bits"]  # back to the default: today's bits again


def test_an_unknown_generator_is_refused():
    from training_jax.rng import use_prng

    with pytest.raises(ValueError, match="no PRNG implementation 'philox'; choose one of threefry2x32, rbg"):
        use_prng("philox")
