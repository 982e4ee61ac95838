"""model/optimizers.py (with the schedules, layer-wise decay and path rules it uses) against numpy
references of the original's formulas, and its Keras plumbing (gradient accumulation, checkpoints, JAX,
tf.distribute)."""
import ast
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from model import layerwise_decay, lr_schedules, optimizer_rules, optimizers
from tests.helpers import JAX_QUICK_XLA_FLAGS, LEAN_KERAS

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
TF_ONLY = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="needs the TensorFlow backend")

QUERY_KERNEL = "electra/encoder/layer_0/attention/self/query/kernel"
QUERY_BIAS = "electra/encoder/layer_0/attention/self/query/bias"
LN_GAMMA = "electra/encoder/layer_0/attention/output/LayerNorm/gamma"


def make_variable(path, value):
    """A keras.Variable whose `.path` is `path` (Keras forbids `/` in a single name)."""
    *scopes, name = path.split("/")
    with contextlib.ExitStack() as stack:
        for scope in scopes:
            stack.enter_context(keras.name_scope(scope))
        return keras.Variable(np.asarray(value, "float32"), name=name)


def values(variables):
    return [keras.ops.convert_to_numpy(v) for v in variables]


def reference_adamw(params, grad_steps, lr, decays, multipliers=None, weight_decay_rate=0.01,
                    beta_1=0.9, beta_2=0.999, epsilon=1e-6, clip=None, clip_per_variable=False):
    """The original AdamWeightDecayOptimizer in float64 numpy (no bias correction)."""
    params = [np.asarray(p, np.float64).copy() for p in params]
    multipliers = multipliers or [1.0] * len(params)
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for step, grads in enumerate(grad_steps):
        grads = [np.asarray(g, np.float64) for g in grads]
        if clip and clip_per_variable:
            grads = [g * clip / max(np.linalg.norm(g), clip) for g in grads]
        elif clip:
            norm = np.sqrt(sum(np.sum(g * g) for g in grads))
            grads = [g * clip / max(norm, clip) for g in grads]
        rate = lr(step) if callable(lr) else lr
        for i, g in enumerate(grads):
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            update = m[i] / (np.sqrt(v[i]) + epsilon)
            if decays[i]:
                update = update + weight_decay_rate * params[i]
            params[i] = params[i] - rate * multipliers[i] * update
    return params


def run_steps(optimizer, variables, grad_steps):
    for grads in grad_steps:
        optimizer.apply([keras.ops.convert_to_tensor(np.asarray(g, "float32")) for g in grads], variables)
    return values(variables)


@pytest.fixture
def three_variables():
    rng = np.random.default_rng(0)
    inits = [rng.normal(size=(3, 4)), rng.normal(size=(4,)), 1.0 + 0.1 * rng.normal(size=(4,))]
    variables = [make_variable(p, x) for p, x in zip((QUERY_KERNEL, QUERY_BIAS, LN_GAMMA), inits)]
    grad_steps = [[rng.normal(size=x.shape) for x in inits] for _ in range(5)]
    return variables, inits, grad_steps


def test_adam_weight_decay_matches_numpy_reference(three_variables):
    variables, inits, grad_steps = three_variables
    opt = optimizers.AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.1)
    got = run_steps(opt, variables, grad_steps)
    want = reference_adamw(inits, grad_steps, 0.01, decays=[True, False, False], weight_decay_rate=0.1)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert int(keras.ops.convert_to_numpy(opt.iterations)) == 5


def test_no_bias_correction_makes_first_step_larger_than_keras_adamw():
    grad = np.array([0.5, -2.0, 3.0], "float32")
    ours = make_variable("w/kernel", np.zeros(3))
    stock = make_variable("w/kernel", np.zeros(3))
    optimizers.AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.0).apply([grad], [ours])
    keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.0, epsilon=1e-6).apply([grad], [stock])
    ours_step, stock_step = values([ours, stock])
    assert not np.allclose(ours_step, stock_step, rtol=0.1)
    # m/√v at step 1 is (1−β1)/√(1−β2) ≈ 3.16 without correction, 1 with it.
    np.testing.assert_allclose(ours_step / stock_step, 0.1 / np.sqrt(0.001), rtol=1e-3)


def test_weight_decay_skips_layernorm_and_bias_paths():
    paths = [
        "electra/dense/kernel",
        "electra/dense/bias",
        "electra/embeddings/LayerNorm/gamma",
        "generator_predictions/layer_norm/beta",
        "head/layer_normalization/gamma",  # a Keras-default LayerNormalization name
        "generator_predictions/output_bias",
    ]
    variables = [make_variable(p, np.full((2,), 2.0)) for p in paths]
    opt = optimizers.AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.5)
    got = run_steps(opt, variables, [[np.zeros(2)] * len(paths)])  # zero gradients: only decay moves
    np.testing.assert_allclose(got[0], 2.0 * (1 - 0.1 * 0.5))
    for value in got[1:]:
        np.testing.assert_array_equal(value, 2.0)
    assert [opt.decays_variable(p) for p in paths] == [True] + [False] * 5


def test_explicit_weight_decay_exclusion_list():
    kernel = make_variable("electra/dense/kernel", np.full((2,), 2.0))
    bias = make_variable("electra/dense/bias", np.full((2,), 2.0))
    opt = optimizers.AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.5,
                                     exclude_from_weight_decay=["^electra/dense/kernel$"])
    got = run_steps(opt, [kernel, bias], [[np.zeros(2), np.zeros(2)]])
    np.testing.assert_array_equal(got[0], 2.0)
    np.testing.assert_allclose(got[1], 2.0 * (1 - 0.05))


def test_global_norm_clipping_uses_one_norm_over_all_gradients():
    inits = [np.ones((2,)), np.ones((2,))]
    # Step 1: per-variable norms 6 and 8, global norm 10 → both scaled by 0.1. Step 2: small, unclipped.
    grad_steps = [[np.array([6.0, 0.0]), np.array([0.0, 8.0])], [np.array([0.3, 0.1]), np.array([-0.2, 0.2])]]
    variables = [make_variable("a/kernel", inits[0]), make_variable("b/kernel", inits[1])]
    opt = optimizers.AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.0, global_clipnorm=1.0)
    got = run_steps(opt, variables, grad_steps)
    decays = [False, False]
    want = reference_adamw(inits, grad_steps, 0.1, decays, clip=1.0)
    per_variable = reference_adamw(inits, grad_steps, 0.1, decays, clip=1.0, clip_per_variable=True)
    unclipped = reference_adamw(inits, grad_steps, 0.1, decays)
    for g, w, p, u in zip(got, want, per_variable, unclipped):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert not np.allclose(g, p, rtol=1e-3, atol=1e-4)
        assert not np.allclose(g, u, rtol=1e-3, atol=1e-4)


@TF_ONLY
def test_clip_by_global_norm_equals_tensorflow_including_sparse_gradients():
    import tensorflow as tf

    dense = tf.constant([[3.0, 4.0], [1.0, 2.0]])
    sparse = tf.IndexedSlices(tf.constant([[5.0, 6.0]]), tf.constant([1]), tf.constant([3, 2]))
    for clip in (1.0, 100.0):
        ours = optimizer_rules.clip_by_global_norm([dense, sparse, None], clip)
        theirs, _ = tf.clip_by_global_norm([dense, sparse, None], clip)
        assert ours[2] is None
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
        np.testing.assert_allclose(tf.convert_to_tensor(ours[1]), tf.convert_to_tensor(theirs[1]), rtol=1e-6)


def joint_formula(step, lr, total, warmup, power):
    decay = (1 - min(step, total) / total) ** power
    return lr * decay * (min(1.0, step / warmup) if warmup else 1.0)


def warmup_then_decay_formula(step, lr, total, warmup, power):
    if step < warmup:
        return lr * step / warmup
    return lr * (1 - min(step - warmup, total - warmup) / (total - warmup)) ** power


STEPS = [0, 1, 5, 10, 11, 55, 99, 100, 150]


@pytest.mark.parametrize("power", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("warmup", [0, 10])
def test_joint_schedule_matches_the_original_formula(power, warmup):
    schedule = lr_schedules.JointWarmupDecay(5e-4, num_train_steps=100, num_warmup_steps=warmup, power=power)
    got = [float(keras.ops.convert_to_numpy(schedule(s))) for s in STEPS]
    want = [joint_formula(s, 5e-4, 100, warmup, power) for s in STEPS]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)
    if warmup:
        assert got[0] == 0.0
        # Decay runs during warmup, so the peak reached is lr·(1 − W/T)^power, not lr.
        np.testing.assert_allclose(got[STEPS.index(10)], 5e-4 * 0.9 ** power, rtol=1e-6)
    assert got[STEPS.index(100)] == 0.0 and got[STEPS.index(150)] == 0.0


@pytest.mark.parametrize("power", [1.0, 0.5])
@pytest.mark.parametrize("warmup", [0, 10])
def test_warmup_then_decay_schedule(power, warmup):
    schedule = lr_schedules.WarmupThenDecay(2e-3, num_train_steps=100, num_warmup_steps=warmup, power=power)
    got = [float(keras.ops.convert_to_numpy(schedule(s))) for s in STEPS]
    want = [warmup_then_decay_formula(s, 2e-3, 100, warmup, power) for s in STEPS]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(got[STEPS.index(10)], 2e-3 if warmup else 2e-3 * 0.9 ** power, rtol=1e-6)
    with pytest.raises(ValueError):
        lr_schedules.WarmupThenDecay(1e-3, num_train_steps=10, num_warmup_steps=10)


def test_optimizer_feeds_the_schedule_its_update_count():
    schedule = lr_schedules.JointWarmupDecay(0.1, num_train_steps=10, num_warmup_steps=4)
    variable = make_variable("w/kernel", np.ones(2))
    opt = optimizers.AdamWeightDecay(learning_rate=schedule, weight_decay_rate=0.0)
    after_first = run_steps(opt, [variable], [[np.ones(2)]])[0]
    np.testing.assert_array_equal(after_first, 1.0)  # lr is 0 at step 0, as in the original
    run_steps(opt, [variable], [[np.ones(2)]] * 2)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(opt.learning_rate)),
                               joint_formula(3, 0.1, 10, 4, 1.0), rtol=1e-6)


L12_PATHS = (
    ["electra/embeddings/word_embeddings/embeddings", "electra/embeddings/LayerNorm/gamma",
     "electra/embeddings_project/kernel"]
    + [f"electra/encoder/layer_{i}/attention/self/query/kernel" for i in range(12)]
    + ["electra/encoder/layer_1/output/LayerNorm/beta", "electra/encoder/layer_10/output/dense/bias",
       "task_specific/cola/dense/kernel", "discriminator_predictions/dense/kernel",
       "task_specific/tagger/embeddings"]  # a head's own Keras Embedding table stays a head
)


@pytest.mark.parametrize("variant, top", [("original", 14), ("intended", 13)])
def test_layerwise_multipliers_l12_d08(variant, top):
    got = layerwise_decay.layerwise_lr_multipliers(L12_PATHS, num_layers=12, decay=0.8, variant=variant)
    for path in L12_PATHS[:3]:
        assert got[path] == pytest.approx(0.8 ** top, rel=1e-12)
    for i in range(12):
        assert got[f"electra/encoder/layer_{i}/attention/self/query/kernel"] == pytest.approx(
            0.8 ** (top - 1 - i), rel=1e-12)
    assert got["electra/encoder/layer_1/output/LayerNorm/beta"] == pytest.approx(0.8 ** (top - 2), rel=1e-12)
    assert got["electra/encoder/layer_10/output/dense/bias"] == pytest.approx(0.8 ** (top - 11), rel=1e-12)
    for head in L12_PATHS[-3:]:
        assert got[head] == 1.0
    top_layer = got["electra/encoder/layer_11/attention/self/query/kernel"]
    assert top_layer == pytest.approx(0.64 if variant == "original" else 0.8, rel=1e-12)


def test_layerwise_rejects_a_layer_beyond_num_layers():
    with pytest.raises(ValueError, match="num_layers=12"):
        layerwise_decay.layerwise_lr_multipliers(["electra/encoder/layer_12/output/dense/kernel"], 12, 0.8)


def test_lr_multipliers_scale_the_whole_update():
    grads = [[np.array([1.0, -2.0])] * 2]
    a, b = make_variable("a/kernel", np.ones(2)), make_variable("b/kernel", np.ones(2))
    opt = optimizers.AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.3,
                                     lr_multipliers={"b/kernel": 0.25})
    got_a, got_b = run_steps(opt, [a, b], grads)
    np.testing.assert_allclose(1.0 - got_b, 0.25 * (1.0 - got_a), rtol=1e-6)
    with pytest.raises(ValueError, match="not training"):
        bad = optimizers.AdamWeightDecay(learning_rate=0.1, lr_multipliers={"typo/kernel": 0.5})
        bad.build([make_variable("c/kernel", np.ones(2))])


def test_factory_layerwise_decay_reaches_the_update():
    layer, head = make_variable("electra/encoder/layer_0/kernel", np.ones(2)), make_variable("task_specific/kernel", np.ones(2))
    opt = optimizers.create_optimizer(0.1, num_train_steps=100, num_warmup_steps=0, weight_decay_rate=0.0,
                                      layerwise_lr_decay=0.5, num_layers=1, clip_norm=None)
    got_layer, got_head = run_steps(opt, [layer, head], [[np.ones(2), np.ones(2)]])
    # L = 1: layer_0 has depth 1, the head L + 2 = 3 → multiplier 0.5² relative to the head.
    np.testing.assert_allclose(1.0 - got_layer, 0.25 * (1.0 - got_head), rtol=1e-6)
    with pytest.raises(ValueError, match="num_layers"):
        optimizers.create_optimizer(0.1, 100, 0, layerwise_lr_decay=0.8)
    with pytest.raises(ValueError, match="optimizer"):
        optimizers.create_optimizer(0.1, 100, 0, optimizer="sgd")


def linear_regression_grads(weights, bias, x, y):
    """Gradient of mean over the batch of ‖xW + b − y‖²."""
    residual = x @ weights + bias - y
    return [2.0 * x.T @ residual / len(x), 2.0 * residual.mean(axis=0)]


def test_gradient_accumulation_equals_one_big_batch_and_counts_updates():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(8, 3)), rng.normal(size=(8, 2))
    w0, b0 = rng.normal(size=(3, 2)), rng.normal(size=(2,))

    def build(accumulation):
        variables = [make_variable("dense/kernel", w0), make_variable("dense/bias", b0)]
        # Small clip norm so clipping is active; schedule varies per update, zero at step 0.
        opt = optimizers.create_optimizer(0.1, num_train_steps=4, num_warmup_steps=2, clip_norm=0.05,
                                          gradient_accumulation_steps=accumulation)
        return variables, opt

    big_vars, big_opt = build(1)
    acc_vars, acc_opt = build(4)
    for _ in range(3):
        w, b = values(big_vars)
        big_opt.apply([keras.ops.convert_to_tensor(g.astype("float32"))
                       for g in linear_regression_grads(w, b, x, y)], big_vars)
        for micro in range(4):
            w, b = values(acc_vars)
            rows = slice(2 * micro, 2 * micro + 2)
            acc_opt.apply([keras.ops.convert_to_tensor(g.astype("float32"))
                           for g in linear_regression_grads(w, b, x[rows], y[rows])], acc_vars)
    for got, want in zip(values(acc_vars), values(big_vars)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert not np.allclose(values(big_vars)[0], w0)
    assert int(keras.ops.convert_to_numpy(acc_opt.iterations)) == 3
    assert int(keras.ops.convert_to_numpy(acc_opt._iterations)) == 12  # micro-batches
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(acc_opt.learning_rate)),
                               float(keras.ops.convert_to_numpy(big_opt.learning_rate)), rtol=1e-6)


def test_lamb_option_uses_keras_lamb_with_nvidia_betas_and_path_based_decay():
    opt = optimizers.create_optimizer(0.1, num_train_steps=10, num_warmup_steps=0, optimizer="lamb",
                                      weight_decay_rate=0.5, clip_norm=None)
    assert isinstance(opt, keras.optimizers.Lamb)
    assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.878, 0.974, 1e-6)
    paths = ["electra/dense/kernel", "electra/dense/bias", "electra/LayerNorm/gamma"]
    variables = [make_variable(p, np.full((2,), 2.0)) for p in paths]
    kernel, bias, gamma = run_steps(opt, variables, [[np.zeros(2)] * 3])
    np.testing.assert_allclose(kernel, 2.0 * (1 - 0.1 * 0.5), rtol=1e-6)
    np.testing.assert_array_equal(bias, 2.0)
    np.testing.assert_array_equal(gamma, 2.0)
    assert set(opt.slot_variables()) == set(paths)


def test_get_config_round_trips():
    schedule = lr_schedules.WarmupThenDecay(1e-3, 1000, 100, power=0.5)
    for opt in (
        optimizers.create_optimizer(2e-4, 1000, 100, layerwise_lr_decay=0.8, num_layers=12,
                                    layerwise_variant="intended", gradient_accumulation_steps=2),
        optimizers.AdamWeightDecay(learning_rate=schedule, lr_multipliers={"a/kernel": 0.5},
                                   exclude_from_weight_decay=["bias"], global_clipnorm=1.0),
        optimizers.create_optimizer(1e-3, 1000, 100, optimizer="lamb", schedule="warmup_then_decay"),
    ):
        config = opt.get_config()
        clone = type(opt).from_config(config)
        assert clone.get_config() == config
        revived = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
        assert type(revived) is type(opt) and revived.get_config() == config
    clone = lr_schedules.WarmupThenDecay.from_config(schedule.get_config())
    for step in (0, 50, 100, 600, 1000):
        assert float(keras.ops.convert_to_numpy(clone(step))) == float(keras.ops.convert_to_numpy(schedule(step)))
    revived = keras.optimizers.deserialize(keras.optimizers.serialize(optimizers.create_optimizer(
        1e-3, 1000, 100, layerwise_lr_decay=0.8, num_layers=4)))
    assert isinstance(revived.lr_multipliers, layerwise_decay.LayerwiseLRDecay)
    assert revived.lr_multipliers("electra/encoder/layer_3/x/kernel") == pytest.approx(0.8 ** 2)
    assert "weight_decay" not in revived.get_config()
    with pytest.raises(ValueError, match="weight_decay_rate"):
        optimizers.AdamWeightDecay(weight_decay=0.01)


# keras.optimizers.serialize() output written before model/optimization.py was split into modules: the
# registered names (electra>ClassName) must keep such configs loadable although "module" names the old file.
_KERAS_DEFAULTS = {"clipnorm": None, "clipvalue": None, "use_ema": False, "ema_momentum": 0.99,
                   "ema_overwrite_frequency": None, "loss_scale_factor": None, "gradient_accumulation_steps": None}
_EXCLUDED = ["LayerNorm", "layer_norm", "bias", "(^|/)(gamma|beta)$"]
SAVED_BEFORE_THE_SPLIT = [
    {"module": "model.optimization", "class_name": "AdamWeightDecay", "registered_name": "electra>AdamWeightDecay",
     "config": {
         "name": "adam_weight_decay", **_KERAS_DEFAULTS, "global_clipnorm": 1.0, "weight_decay_rate": 0.01,
         "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-06, "exclude_from_weight_decay": _EXCLUDED,
         "learning_rate": {"module": "model.optimization", "class_name": "JointWarmupDecay",
                           "registered_name": "electra>JointWarmupDecay",
                           "config": {"learning_rate": 0.0002, "num_train_steps": 1000, "num_warmup_steps": 100,
                                      "power": 1.0}},
         "lr_multipliers": {"module": "model.optimization", "class_name": "LayerwiseLRDecay",
                            "registered_name": "electra>LayerwiseLRDecay",
                            "config": {"num_layers": 12, "decay": 0.8, "variant": "intended"}}}},
    {"module": "model.optimization", "class_name": "ElectraLamb", "registered_name": "electra>ElectraLamb",
     "config": {
         "name": "electra_lamb", **_KERAS_DEFAULTS, "global_clipnorm": 1.0, "weight_decay": 0.01,
         "beta_1": 0.878, "beta_2": 0.974, "epsilon": 1e-06, "exclude_from_weight_decay": _EXCLUDED,
         "lr_multipliers": None,
         "learning_rate": {"module": "model.optimization", "class_name": "WarmupThenDecay",
                           "registered_name": "electra>WarmupThenDecay",
                           "config": {"learning_rate": 0.001, "num_train_steps": 1000, "num_warmup_steps": 100,
                                      "power": 0.5}}}},
]


def test_configs_saved_before_the_split_still_deserialize():
    adamw = keras.optimizers.deserialize(SAVED_BEFORE_THE_SPLIT[0])
    assert type(adamw) is optimizers.AdamWeightDecay
    assert isinstance(adamw._learning_rate, lr_schedules.JointWarmupDecay)
    assert isinstance(adamw.lr_multipliers, layerwise_decay.LayerwiseLRDecay)
    assert adamw.lr_multipliers.variant == "intended" and adamw.global_clipnorm == 1.0
    lamb = keras.optimizers.deserialize(SAVED_BEFORE_THE_SPLIT[1])
    assert type(lamb) is optimizers.ElectraLamb and isinstance(lamb._learning_rate, lr_schedules.WarmupThenDecay)
    assert lamb._learning_rate.power == 0.5 and lamb.beta_1 == optimizers.LAMB_BETAS[0]


@TF_ONLY
def test_tf_train_checkpoint_round_trips_slots_and_iterations(tmp_path):
    import tensorflow as tf

    def model(seed):
        keras.utils.set_random_seed(seed)
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="dense"),
                                 keras.layers.LayerNormalization(name="LayerNorm")], name="electra")

    def step(net, opt, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(net(x) ** 2 * tf.range(4.0))
        opt.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))

    x = np.random.default_rng(0).normal(size=(2, 3)).astype("float32")
    net, opt = model(0), optimizers.create_optimizer(1e-2, 10, 2)
    for _ in range(3):
        step(net, opt, x)
    path = tf.train.Checkpoint(model=net, optimizer=opt).save(str(tmp_path / "ckpt"))

    net2, opt2 = model(1), optimizers.create_optimizer(1e-2, 10, 2)
    opt2.build(net2.trainable_variables)
    tf.train.Checkpoint(model=net2, optimizer=opt2).restore(path).assert_consumed()
    assert int(opt2.iterations) == 3
    slots, slots2 = opt.slot_variables(), opt2.slot_variables()
    assert set(slots2) == {w.path for w in net.trainable_variables}
    for var_path, pair in slots.items():
        for kind in ("adam_m", "adam_v"):
            assert np.abs(pair[kind].numpy()).max() > 0
            np.testing.assert_array_equal(slots2[var_path][kind].numpy(), pair[kind].numpy())
    step(net, opt, x)
    step(net2, opt2, x)
    for a, b in zip(net.weights, net2.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def run_script(script, backend):
    """`script` in a fresh Python under `backend`, started as the commands start (tests.helpers.LEAN_KERAS), JAX
    at its quickest compile."""
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="3",
               JAX_PLATFORMS="cpu", XLA_FLAGS=JAX_QUICK_XLA_FLAGS)
    done = subprocess.run([sys.executable, "-c", LEAN_KERAS + textwrap.dedent(script)], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


JAX_SCRIPT = """
import json, contextlib
import numpy as np, jax, keras
from model import optimizers
assert keras.backend.backend() == "jax"

rng = np.random.default_rng(0)
inits = [rng.normal(size=(3, 4)), rng.normal(size=(4,))]
grads = [[rng.normal(size=x.shape).astype("float32") for x in inits] for _ in range(3)]

def variables():
    out = []
    for name, x in zip(("kernel", "bias"), inits):
        with keras.name_scope("dense"):
            out.append(keras.Variable(x.astype("float32"), name=name))
    return out

eager_vars = variables()
eager = optimizers.AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.1, global_clipnorm=1.0)
for g in grads:
    eager.apply(g, eager_vars)

jit_vars = variables()
jitted = optimizers.AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.1, global_clipnorm=1.0)
jitted.build(jit_vars)
apply = jax.jit(jitted.stateless_apply)
tv, ov = [v.value for v in jit_vars], [v.value for v in jitted.variables]
for g in grads:
    tv, ov = apply(ov, g, tv)

keras.utils.set_random_seed(0)
net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="dense"),
                        keras.layers.LayerNormalization(name="LayerNorm"), keras.layers.Dense(1, name="out")])
before = [np.array(w) for w in net.get_weights()]
net.compile(optimizer=optimizers.create_optimizer(1e-2, 10, 2, gradient_accumulation_steps=2), loss="mse")
x, y = rng.normal(size=(16, 3)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")
net.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
after = net.get_weights()

# Stock Keras matches exclusions against `variable.name`, which under JAX is just "gamma".
def decayed_gamma(optimizer):
    with keras.name_scope("electra"):
        with keras.name_scope("LayerNorm"):
            gamma = keras.Variable(np.full((2,), 2.0, "float32"), name="gamma")
    optimizer.apply([np.zeros(2, "float32")], [gamma])
    return bool(not np.allclose(np.asarray(gamma.value), 2.0))
stock = keras.optimizers.Lamb(learning_rate=0.1, weight_decay=0.5)
stock.exclude_from_weight_decay(var_names=["LayerNorm"])
ours = optimizers.create_optimizer(0.1, 10, 0, optimizer="lamb", weight_decay_rate=0.5, clip_norm=None)
print(json.dumps({
    "stock_decays_layernorm": decayed_gamma(stock),
    "ours_decays_layernorm": decayed_gamma(ours),
    "eager": [np.asarray(v.value).tolist() for v in eager_vars],
    "jit": [np.asarray(v).tolist() for v in tv],
    "fit_iterations": int(net.optimizer.iterations),
    "fit_lr": float(net.optimizer.learning_rate),
    "fit_changed": bool(any(not np.allclose(a, b) for a, b in zip(before, after))),
    "fit_finite": bool(all(np.isfinite(a).all() for a in after)),
}))
"""


def test_works_under_the_jax_backend():
    pytest.importorskip("jax")
    out = run_script(JAX_SCRIPT, "jax")
    rng = np.random.default_rng(0)
    inits = [rng.normal(size=(3, 4)), rng.normal(size=(4,))]
    grads = [[rng.normal(size=x.shape).astype("float32") for x in inits] for _ in range(3)]
    want = reference_adamw(inits, grads, 0.01, decays=[True, False], weight_decay_rate=0.1, clip=1.0)
    for got_eager, got_jit, w in zip(out["eager"], out["jit"], want):
        np.testing.assert_allclose(got_eager, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_jit, w, rtol=1e-5, atol=1e-6)
    # 16 rows / batch 4 = 4 micro-batches = 2 updates; the schedule saw update 2, not micro-batch 4.
    assert out["fit_iterations"] == 2
    assert out["fit_lr"] == pytest.approx(joint_formula(2, 1e-2, 10, 2, 1.0), rel=1e-6)
    assert out["fit_changed"] and out["fit_finite"]
    assert out["stock_decays_layernorm"] and not out["ours_decays_layernorm"]


MIRRORED_SCRIPT = """
import json
import numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from model import optimizers

rng = np.random.default_rng(0)
x, y = rng.normal(size=(16, 3)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")

def train(strategy, make_optimizer):
    with strategy.scope():
        keras.utils.set_random_seed(1)
        net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="dense"),
                                keras.layers.Dense(1, name="out")], name="electra")
        net.compile(optimizer=make_optimizer(), loss="mse")
    start = [w.numpy() for w in net.weights]
    net.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    return start, [w.numpy() for w in net.weights]

mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
single = tf.distribute.get_strategy()
# epsilon = 1 keeps the step roughly linear in the gradient, so a wrong clip scale shows.
makers = {
    "ours": lambda: optimizers.AdamWeightDecay(learning_rate=1.0, epsilon=1.0, global_clipnorm=1e-2),
    "stock": lambda: keras.optimizers.AdamW(learning_rate=1.0, epsilon=1.0, global_clipnorm=1e-2),
}
out = {}
for name, make in makers.items():
    start, two = train(mirrored, make)
    _, one = train(single, make)
    out[name] = {
        "diff": max(float(np.abs(a - b).max()) for a, b in zip(two, one)),
        "moved": max(float(np.abs(a - b).max()) for a, b in zip(one, start)),
    }
print(json.dumps(out))
"""


@TF_ONLY
def test_mirrored_two_replicas_clip_like_one_replica_with_the_global_batch():
    out = run_script(MIRRORED_SCRIPT, "tensorflow")
    assert out["ours"]["moved"] > 1e-3
    assert out["ours"]["diff"] < 1e-4 * out["ours"]["moved"]
    # Stock Keras clips each replica's half-gradient before the sum: visibly different.
    assert out["stock"]["diff"] > 0.01 * out["stock"]["moved"]


OPTIMIZATION_MODULES = ("lr_schedules", "layerwise_decay", "optimizer_rules", "optimizers")


def test_module_imports_only_keras_numpy_and_stdlib():
    imported = set()
    for module in OPTIMIZATION_MODULES:
        tree = ast.parse((REPO_ROOT / "model" / f"{module}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module or "")
    imported = {name.split(".")[0] for name in imported - {f"model.{m}" for m in OPTIMIZATION_MODULES}}
    assert imported <= {"keras", "numpy", "re", "typing", "__future__"}, imported


@pytest.mark.parametrize("clip_norm", [100.0, 0.5])  # never clipping; clipping every step
def test_fused_update_equals_the_per_variable_one(clip_norm):
    """AdamWeightDecay(fused=True), the flat update the JAX path uses: the same variables and slots, bit for bit
    while the norm does not clip, within float32 rounding of the norm when it does."""
    rng = np.random.default_rng(0)
    paths = (QUERY_KERNEL, QUERY_BIAS, LN_GAMMA, "electra/encoder/layer_1/output/dense/kernel")
    shapes = ((4, 3), (3,), (3,), (2, 5))
    initial = [rng.normal(size=shape) for shape in shapes]
    grads = [[rng.normal(size=shape) for shape in shapes] for _ in range(3)]
    results = []
    for fused in (False, True):
        variables = [make_variable(path, value) for path, value in zip(paths, initial)]
        opt = optimizers.AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.3, global_clipnorm=clip_norm,
                                         lr_multipliers={paths[3]: 0.25}, fused=fused)
        run_steps(opt, variables, grads)
        results.append(values(variables) + values(opt.variables[2:]))  # the slots, after iterations and lr
        assert optimizers.AdamWeightDecay.from_config(opt.get_config()).fused is fused
    for per_variable, fused in zip(*results):
        if clip_norm == 100.0:
            np.testing.assert_array_equal(fused, per_variable)
        else:
            np.testing.assert_allclose(fused, per_variable, rtol=1e-6, atol=1e-7)
    assert not np.allclose(results[0][0], initial[0])
