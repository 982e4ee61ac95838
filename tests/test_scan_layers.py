"""BertEncoder(scan_layers=True) runs its transformer layers as one keras.ops.scan over their stacked weights
(model/layer_scan.py): from the same weights and seeds it computes what the unrolled layers compute, forward
and in a whole pretraining update (loss, metric statistics, updated weights, optimizer moments and the dropout
seed states it advances), under JAX in float32 and mixed_bfloat16 and under TensorFlow; the lowered update holds
each encoder's layer once instead of once per layer."""
import json
import pathlib
import textwrap

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

JAX_SCRIPT = textwrap.dedent('''
    import json, sys
    sys.modules["tensorflow"] = None
    import jax, keras, numpy as np
    from bench.pretrain_step_gpu import synthetic_batch
    from configs.pretraining_config import PretrainingConfig
    from model.encoder import BertEncoder
    from pretrain.builder import build_for_training
    from training_jax.step import make_step_fn, use_layer_scan

    def largest(arrays):  # the largest magnitude in a list of arrays (a scale to measure differences by)
        return max(float(np.abs(np.asarray(a, "float32")).max()) for a in jax.tree_util.tree_leaves(arrays))

    def compare(a, b):
        """{diff: largest |a - b| over the arrays, scale: largest |a|, equal: arrays bit for bit equal, count}."""
        a, b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
        diff = max(float(np.abs(np.asarray(x, "float32") - np.asarray(y, "float32")).max()) for x, y in zip(a, b))
        return {"diff": diff, "scale": largest(a), "equal": int(sum(np.array_equal(x, y) for x, y in zip(a, b))),
                "count": len(a)}

    def copy(tree):
        return jax.tree_util.tree_map(lambda x: jax.numpy.array(x, copy=True), tree)

    batch = synthetic_batch(np.random.default_rng(0), 4, 16, 120)
    weights = np.random.default_rng(1).normal(size=(4, 16, MODEL["hidden_size"])).astype("float32")
    # one encoder under mixed precision: its outputs, gradients and seeds (float32 LayerNorm weights in a bfloat16
    # encoder, its first layer fed by a bfloat16 projection)
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(120, MODEL["hidden_size"], 3, MODEL["num_heads"], MODEL["intermediate_size"],
                          MODEL["embedding_size"], dtype="mixed_bfloat16")
    encoder.build()
    trainable, seeds = encoder.trainable_variables, encoder.non_trainable_variables
    start = ([v.value for v in trainable], [v.value for v in seeds])

    def loss_fn(values, states):
        with keras.StatelessScope(state_mapping=list(zip(trainable, values)) + list(zip(seeds, states))) as scope:
            outputs = encoder(batch, training=True, return_all_layers=True)
            loss = sum(keras.ops.sum(keras.ops.cast(o, "float32") * weights) for o in outputs)
        return loss, (outputs, [scope.get_current_value(v) for v in seeds])

    runs = {}
    for scan in (False, True):
        encoder.scan_layers = scan
        (loss, (outputs, advanced)), gradients = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(*start)
        runs[scan] = {"loss": float(loss), "outputs": outputs, "seeds": advanced, "gradients": gradients}
    unrolled, scanned = runs[False], runs[True]
    results = {"encoder": {"loss": [unrolled["loss"], scanned["loss"]],
                           **{key: compare(unrolled[key], scanned[key]) for key in ("outputs", "seeds", "gradients")},
                           "seeds_advanced": compare(start[1], scanned["seeds"])["equal"] == 0}}

    # the whole update of a micro ELECTRA (generator and discriminator, 2 layers each) in float32, as training_jax
    # runs it
    config = PretrainingConfig.create({"model_size": "electra_small", "model_hparam_overrides": MODEL,
                                       "generator_hidden_size": 0.5, "vocab_size": 120, "max_seq_length": 16,
                                       "train_batch_size": 4, "num_warmup_steps": 0})
    model, optimizer = build_for_training(config)
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    runs = {}
    for scan in (False, True):
        use_layer_scan(model, scan)
        lowered = jax.jit(make_step_fn(model, optimizer)).lower(state, batch)
        runs[scan] = lowered.compile()(copy(state), batch) + (lowered.as_text().count("stablehlo.dot_general"),)
    (unrolled, loss, stats, dots), (scanned, scanned_loss, scanned_stats, scanned_dots) = runs[False], runs[True]
    results["step"] = {"loss": [float(loss), float(scanned_loss)], "stats": compare(stats, scanned_stats),
                       "weights": compare(unrolled[0], scanned[0]), "seeds": compare(unrolled[1], scanned[1]),
                       "moments": compare(unrolled[2], scanned[2]), "dots": [dots, scanned_dots],
                       "update": largest([np.asarray(a) - np.asarray(b) for a, b in zip(unrolled[0], state[0])]),
                       "seeds_advanced": compare(state[1], scanned[1])["equal"] == 0}
    print("RESULTS" + json.dumps(results))
''')

# Float32 rounding: a scan's backward pass sums the same products as the unrolled one, but XLA fuses and orders
# the loop body's reductions apart from the unrolled program's, so gradients (and what an update makes of them)
# may differ by a few ulps of their largest value: 2 ** -20 relative (float32's epsilon is 2 ** -23).
ROUNDING = 2.0 ** -20


def within_rounding(compared):
    return compared["diff"] <= ROUNDING * compared["scale"]


def test_a_scanned_update_equals_the_unrolled_one_under_jax():
    results = run_script_under_jax(JAX_SCRIPT.replace("MODEL", repr(MICRO_MODEL)), REPO_ROOT)
    r = results["encoder"]  # mixed_bfloat16, 3 layers: the first unrolled (a bfloat16 input), two scanned
    # the forward pass: the same operations in the same order, bit for bit
    assert r["loss"][0] == r["loss"][1] and np.isfinite(r["loss"][0])
    assert r["outputs"]["equal"] == r["outputs"]["count"] == 3  # return_all_layers: every layer's output
    assert r["seeds"]["equal"] == r["seeds"]["count"] == 1 + 3 * 3 and r["seeds_advanced"]  # the embeddings' too
    assert within_rounding(r["gradients"]), r["gradients"]
    step = results["step"]
    assert step["loss"][0] == step["loss"][1] and step["stats"]["equal"] == step["stats"]["count"]
    assert step["seeds"]["equal"] == step["seeds"]["count"] and step["seeds_advanced"]  # masking seed included
    assert within_rounding(step["weights"]) and within_rounding(step["moments"]), step
    assert step["weights"]["diff"] < 1e-3 * step["update"], step  # the updates did happen, and agree
    # each encoder's layer once, not twice: one layer's matmuls (forward and backward) go from both encoders
    unrolled, scanned = step["dots"]
    assert scanned < unrolled and (unrolled - scanned) % 2 == 0, step["dots"]


def micro_encoder(**kwargs):
    from model.encoder import BertEncoder

    encoder = BertEncoder(120, hidden_size=32, num_layers=3, num_heads=2, intermediate_size=64, embedding_size=16,
                          **kwargs)
    encoder.build()
    return encoder


def micro_inputs():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 120, (3, 9)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def test_a_scanned_encoder_equals_the_unrolled_one_under_tensorflow():
    import keras
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the suite's in-process backend is not TensorFlow")
    keras.utils.set_random_seed(0)
    encoder, inputs = micro_encoder(), micro_inputs()
    weights = np.random.default_rng(1).normal(size=(3, 9, 32)).astype("float32")
    start, seeds_before = [v.numpy() for v in encoder.variables], [v.numpy() for v in encoder.non_trainable_variables]
    runs = {}
    for scan in (False, True):
        for variable, value in zip(encoder.variables, start):
            variable.assign(value)
        encoder.scan_layers = scan

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                outputs = encoder(inputs, training=True, return_all_layers=True)
                loss = tf.reduce_sum(outputs[-1] * weights) + tf.reduce_sum(outputs[0] * weights)
            return tape.gradient(loss, encoder.trainable_variables), outputs

        gradients, outputs = step()
        runs[scan] = ([g.numpy() for g in gradients], [o.numpy() for o in outputs],
                      [v.numpy() for v in encoder.non_trainable_variables], encoder(inputs).numpy())
    (gradients, outputs, seeds, inference), scanned = runs[False], runs[True]
    assert len(outputs) == len(scanned[1]) == 3
    for a, b in zip(outputs, scanned[1]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(inference, scanned[3])
    for a, b in zip(seeds, scanned[2]):
        np.testing.assert_array_equal(a, b)
    assert len(seeds) == 1 + 3 * 3 and not any(np.array_equal(a, b) for a, b in zip(seeds, seeds_before))
    scale = max(np.abs(g).max() for g in gradients)  # float32 rounding: a few ulps of the largest gradient
    for a, b in zip(gradients, scanned[0]):
        np.testing.assert_allclose(b, a, rtol=0, atol=2 ** -20 * scale)


def test_the_option_is_in_the_config_and_changes_no_variable():
    from model.encoder import BertEncoder

    unrolled, scanned = micro_encoder(), micro_encoder(scan_layers=True)
    assert scanned.get_config()["scan_layers"] and not unrolled.get_config()["scan_layers"]
    assert BertEncoder.from_config(scanned.get_config()).scan_layers
    assert [v.path for v in unrolled.weights] == [v.path for v in scanned.weights]  # checkpoint names
    assert json.dumps(unrolled.get_config()) != json.dumps(scanned.get_config())


def test_only_layers_with_the_same_variables_are_scanned():
    from model.layer_scan import check_identical
    from model.transformer import TransformerLayer

    layers = [TransformerLayer(32, 2, size) for size in (64, 64, 48)]
    for layer in layers:
        layer.build((None, None, 32))
    check_identical(layers[:2])
    with pytest.raises(ValueError, match="layer 2 .* other variables than layer 0"):
        check_identical(layers)


def test_training_jax_pretrain_scans_on_accelerators_unless_told(tmp_path):
    from configs.pretraining_config import PretrainingConfig
    from training_jax import pretrain

    required = ["--study", "s", "--arm", "electra", "--out", "o"]
    assert pretrain.parse_args(required).scan_layers is None
    assert pretrain.parse_args(required + ["--no-scan-layers"]).scan_layers is False
    assert not pretrain.default_scan_layers("cpu") and pretrain.default_scan_layers("gpu")
    config_path = tmp_path / "config.json"
    PretrainingConfig.create({"model_size": "electra_small", "model_hparam_overrides": MICRO_MODEL,
                              "vocab_size": 120}).save(config_path)
    for scan in (False, True):
        model = pretrain.build(config_path, scan_layers=scan)[1]
        assert [encoder.scan_layers for encoder in model.encoders()] == [scan, scan]  # discriminator, generator
