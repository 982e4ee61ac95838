"""BertEncoder(scan_layers=True) runs its transformer layers as one keras.ops.scan over their stacked weights
(model/layer_scan.py): from the same weights and seeds it computes what the unrolled layers compute, forward
and in a whole pretraining update (loss, metric statistics, updated weights, optimizer moments and the dropout
seed states it advances), under JAX (a mixed_bfloat16 update, its LayerNorms in float32) and under TensorFlow
(float32); the lowered update holds the scanned layers' body once."""
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
    from tests.helpers import synthetic_batch
    from configs.pretraining_config import PretrainingConfig
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
    # the whole update of a micro ELECTRA (generator and discriminator, 3 layers each) under mixed precision, as
    # training_jax runs it: float32 LayerNorm weights in bfloat16 encoders, each first layer fed by a bfloat16
    # projection (so unrolled) and two scanned; beside it every discriminator layer's output (return_all_layers)
    config = PretrainingConfig.create({"model_size": "electra_small", "model_hparam_overrides": MODEL,
                                       "generator_hidden_size": 0.5, "vocab_size": 120, "max_seq_length": 16,
                                       "train_batch_size": 4, "num_warmup_steps": 0,
                                       "mixed_precision": "mixed_bfloat16"})
    model, optimizer = build_for_training(config)
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])

    def make_step_and_layers():  # a new function for each variant: jax.jit reuses a function's trace
        step_fn = make_step_fn(model, optimizer)

        def step_and_layers(state, batch):
            mapping = list(zip(model.trainable_variables, state[0]))
            mapping += list(zip(model.non_trainable_variables, state[1]))
            with keras.StatelessScope(state_mapping=mapping):
                layers = model.discriminator(batch, training=False, return_all_layers=True)
            return step_fn(state, batch), layers
        return step_and_layers

    runs = {}
    for scan in (False, True):
        use_layer_scan(model, scan)
        lowered = jax.jit(make_step_and_layers()).lower(state, batch)
        runs[scan] = lowered.compile()(copy(state), batch) + (lowered.as_text().count("stablehlo.dot_general"),)
    ((unrolled, loss, stats), layers, dots), ((scanned, scanned_loss, scanned_stats), scanned_layers, scanned_dots) = (
        runs[False], runs[True])
    results = {"loss": [float(loss), float(scanned_loss)], "stats": compare(stats, scanned_stats),
               "layers": compare(layers, scanned_layers), "weights": compare(unrolled[0], scanned[0]),
               "seeds": compare(unrolled[1], scanned[1]), "moments": compare(unrolled[2], scanned[2]),
               "dots": [dots, scanned_dots],
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
    step = run_script_under_jax(JAX_SCRIPT.replace("MODEL", repr({**MICRO_MODEL, "num_layers": 3})), REPO_ROOT)
    # the forward pass: the same operations in the same order, bit for bit: the loss, the metric statistics, every
    # layer's output, and the dropout seeds each layer advances (the masking seed's too)
    assert step["loss"][0] == step["loss"][1] and np.isfinite(step["loss"][0])
    assert step["stats"]["equal"] == step["stats"]["count"]
    assert step["layers"]["equal"] == step["layers"]["count"] == 3
    assert step["seeds"]["equal"] == step["seeds"]["count"] > 2 * 3 * 3 and step["seeds_advanced"]
    assert within_rounding(step["weights"]) and within_rounding(step["moments"]), step
    assert step["weights"]["diff"] < 1e-3 * step["update"], step  # the updates did happen, and agree
    # each encoder's first layer unrolled, the other two as one: one layer's matmuls (forward, backward) fewer
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


def test_training_jax_pretrain_scans_only_when_told(tmp_path):
    from configs.pretraining_config import PretrainingConfig
    from training_jax import from_dataset, pretrain, speed_settings

    required = ["--model-name", "electra"]  # run_pretraining.py's flags under JAX
    assert from_dataset.parse_args(required).scan_layers is None
    assert from_dataset.parse_args(required + ["--no-scan-layers"]).scan_layers is False
    assert pretrain.run_options("o").scan_layers is None and pretrain.run_options("o", scan_layers=True).scan_layers
    with pytest.raises(TypeError, match="scan_layer"):  # a misspelt option is not silently dropped
        pretrain.run_options("o", scan_layer=True)
    assert not any(speed_settings.resolve(platform).scan_layers for platform in ("cpu", "gpu", "tpu"))
    config_path = tmp_path / "config.json"
    PretrainingConfig.create({"model_size": "electra_small", "model_hparam_overrides": MICRO_MODEL,
                              "vocab_size": 120}).save(config_path)
    for scan in (False, True):
        model = pretrain.build(config_path, speed_settings.resolve("cpu", scan_layers=scan))[1]
        assert [encoder.scan_layers for encoder in model.encoders()] == [scan, scan]  # discriminator, generator
