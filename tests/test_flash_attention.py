"""training_jax/flash_attention.py: the Pallas flash attention with dropout (interpret mode on the CPU) computes the
explicit attention: without dropout it is explicit_attention, forward and gradients, with padding; with dropout it
is the explicit attention with the kernel's own mask (materialised by dropout_keep_mask), whose keep rate is 1 - rate,
whose neighbours are independent and which changes with the seed; bfloat16 inputs agree with float32 within bfloat16
rounding; a SelfAttention under the option computes the same from the seed its generator draws, causal layers keep
the explicit path, and its jitted gradient holds no [batch, heads, seq, seq]; a pretraining update with
use_fused_attention runs. All in one JAX process (this one is TensorFlow-backed)."""
import json
import pathlib
import textwrap

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BF16_ROUNDOFF = 2.0 ** -8
RATE = 0.1

SCRIPT = textwrap.dedent('''
    import json, re, sys, time
    sys.modules["tensorflow"] = None
    import jax, jax.numpy as jnp, keras, numpy as np
    from model.attention import SelfAttention, explicit_attention
    from training_jax.flash_attention import dropout_keep_mask, flash_attention, use_fused_attention_in

    B, S, H, D, BLOCK, RATE = 2, 64, 2, 16, 16, RATE_VALUE
    SCALE = 1.0 / np.sqrt(D)
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(B, S, H, D)).astype("float32")) for _ in range(3))
    input_mask = np.ones((B, S), "int32")
    input_mask[1, 40:] = 0  # a padded example
    mask = jnp.asarray(input_mask, bool)[:, None, None, :]
    SEED = jnp.asarray([3, 7], jnp.uint32)
    results, started = {}, time.time()

    def largest_difference(a, b):
        return max(float(jnp.abs(jnp.asarray(x, jnp.float32) - jnp.asarray(y, jnp.float32)).max())
                   for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))

    def largest(a):
        return max(float(jnp.abs(jnp.asarray(x, jnp.float32)).max()) for x in jax.tree_util.tree_leaves(a))

    def reference(q, k, v, keep):
        """explicit_attention's float32 softmax, then the given mask's dropout."""
        logits = jnp.where(mask, jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) * SCALE, -1e9)
        probs = jax.nn.softmax(logits, axis=-1)
        if keep is not None:
            probs = jnp.where(keep, probs / (1 - RATE), 0.0)
        return jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v)

    def value_and_grads(attend):
        """The outputs and the gradients of a loss that weighs every output differently; `attend(q, k, v, *rest)`."""
        weights = jnp.asarray(np.random.default_rng(1).normal(size=(B, S, H, D)).astype("float32"))
        loss = lambda q, k, v, *rest: jnp.sum(attend(q, k, v, *rest).astype(jnp.float32) * weights)
        return jax.jit(lambda q, k, v, *rest: (attend(q, k, v, *rest), jax.grad(loss, (0, 1, 2))(q, k, v, *rest)))

    # (a, b) without dropout (a layer's dropout rate, not training): explicit_attention, forward and gradients
    flash = value_and_grads(lambda q, k, v: flash_attention(q, k, v, mask, SCALE, RATE, SEED, False,
                                                            block_size=BLOCK))
    explicit = value_and_grads(lambda q, k, v: explicit_attention(q, k, v, mask, SCALE))
    (out, grads), (ref_out, ref_grads) = flash(q, k, v), explicit(q, k, v)
    results["plain"] = {"out": largest_difference(out, ref_out), "grads": largest_difference(grads, ref_grads),
                        "grad_scale": largest(ref_grads), "out_scale": largest(ref_out)}
    undropped_out = ref_out

    # (c) with dropout: the explicit attention with the kernel's mask
    keep = dropout_keep_mask(SEED, B, H, S, RATE)
    dropped = value_and_grads(lambda q, k, v, seed: flash_attention(q, k, v, mask, SCALE, RATE, seed, True,
                                                                    block_size=BLOCK))
    (out, grads) = dropped(q, k, v, SEED)
    (ref_out, ref_grads) = value_and_grads(lambda q, k, v: reference(q, k, v, keep))(q, k, v)
    other_seed, _ = dropped(q, k, v, jnp.asarray([3, 8], jnp.uint32))
    results["dropout"] = {"out": largest_difference(out, ref_out), "grads": largest_difference(grads, ref_grads),
                          "grad_scale": largest(ref_grads), "out_scale": largest(ref_out),
                          "differs_from_undropped": largest_difference(out, undropped_out),
                          "other_seed": largest_difference(other_seed, out)}
    results["seconds_kernels"] = time.time() - started

    # (d) the mask alone, large: keep rate, neighbours along keys, queries and heads, another seed
    big = np.asarray(dropout_keep_mask(SEED, 4, 4, 256, RATE), "float32")
    centred = big - big.mean()
    def correlation(a, b):
        return float((a * b).mean() / np.sqrt((a * a).mean() * (b * b).mean()))
    another = np.asarray(dropout_keep_mask(jnp.asarray([3, 8], jnp.uint32), 4, 4, 256, RATE), "float32")
    results["mask"] = {"kept": float(big.mean()), "count": int(big.size),
                       "keys": correlation(centred[..., 1:], centred[..., :-1]),
                       "queries": correlation(centred[:, :, 1:], centred[:, :, :-1]),
                       "heads": correlation(centred[:, 1:], centred[:, :-1]),
                       "batch": correlation(centred[1:], centred[:-1]),
                       "other_seed_agrees": float((big == another).mean())}

    results["seconds_mask"] = time.time() - started

    # (e) bfloat16 inputs against float32 ones (the same rounded inputs), with dropout
    q16, k16, v16 = (x.astype(jnp.bfloat16) for x in (q, k, v))
    out16, grads16 = dropped(q16, k16, v16, SEED)
    out32, grads32 = dropped(*(x.astype(jnp.float32) for x in (q16, k16, v16)), SEED)
    results["bf16"] = {"dtypes": [str(out16.dtype)] + [str(g.dtype) for g in grads16],
                       "out": largest_difference(out16, out32), "out_scale": largest(out32),
                       "grads": [largest_difference(a, b) for a, b in zip(grads16, grads32)],
                       "grad_scales": [largest(g) for g in grads32]}

    results["seconds_bf16"] = time.time() - started

    # a SelfAttention under the option: the mask of the seed its generator draws; causal keeps the explicit path;
    # (f) its jitted gradient holds no [batch, heads, seq, seq]
    def layer_and_inputs(causal=None):
        keras.utils.set_random_seed(0)
        layer = SelfAttention(H * D, H, attention_dropout=RATE, causal=causal)
        hidden = jnp.asarray(np.random.default_rng(2).normal(size=(B, S, H * D)).astype("float32"))
        layer.build(hidden.shape)
        return layer, hidden

    layer, hidden = layer_and_inputs()
    results["layers_set"] = use_fused_attention_in(layer)
    trainable = [v.value for v in layer.trainable_variables]
    seed_state = layer.probs_dropout.seed_generator.state.value
    call = jax.jit(lambda seeds: layer.stateless_call(trainable, seeds, hidden, input_mask, training=True))
    fused, advanced = call([seed_state])
    again, _ = call(advanced)
    split = lambda x: x.reshape(B, S, H, D)
    query, key, value = (split(x) for x in layer.project_qkv(hidden))
    expected = reference(query, key, value, dropout_keep_mask(seed_state, B, H, S, RATE)).reshape(B, S, H * D)
    results["layer"] = {"out": largest_difference(fused, expected), "scale": largest(expected),
                        "seed_advanced": bool((np.asarray(advanced[0]) != np.asarray(seed_state)).any()),
                        "next_call_differs": largest_difference(again, fused)}
    causal_layer, _ = layer_and_inputs("ltr")
    calls = []
    causal_layer.fused_attention_fn = lambda *args: calls.append(args)
    causal_layer(hidden, input_mask, training=True)
    results["causal_calls"] = len(calls)

    def lowered_gradient(layer):
        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]
        def loss(trainable):
            out, _ = layer.stateless_call(trainable, non_trainable, hidden, input_mask, training=True)
            return jnp.sum(out * out)
        return jax.jit(jax.grad(loss)).lower(trainable).as_text()

    def scores_tensors(text, batch=B, heads=H, seq=S):
        """How many [batch, heads, seq, seq] float32 and bfloat16 tensors the lowered program names."""
        return {dtype: len(re.findall(rf"tensor<{batch}x{heads}x{seq}x{seq}x{dtype}>", text)) for dtype in ("f32", "bf16")}
    results["lowered"] = {"fused": scores_tensors(lowered_gradient(layer))}
    use_fused_attention_in(layer, False)
    results["lowered"]["explicit"] = scores_tensors(lowered_gradient(layer))
    results["seconds_layer"] = time.time() - started

    # the kernels lower for a GPU through Pallas's Triton backend (lowered only: no GPU here), at electra_small's
    # attention shapes (seq 128, 4 heads of 64) in bfloat16, forward and backward
    shaped = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
    def gpu_loss(q, k, v, mask, seed):
        out = flash_attention(q, k, v, mask, 0.125, RATE, seed, True, interpret=False)
        return jnp.sum(out.astype(jnp.float32))
    gpu_text = jax.jit(jax.grad(gpu_loss, (0, 1, 2))).trace(
        shaped, shaped, shaped, jax.ShapeDtypeStruct((2, 1, 1, 128), jnp.bool_),
        jax.ShapeDtypeStruct((2,), jnp.uint32)).lower(lowering_platforms=("cuda",)).as_text()
    results["gpu_lowering"] = {"triton_calls": gpu_text.count("__gpu$xla.gpu.triton"),
                               "scores": scores_tensors(gpu_text, 2, 4, 128)}
    results["seconds_gpu_lowering"] = time.time() - started

    # (g) a pretraining update of a micro ELECTRA with use_fused_attention (float32: under mixed_bfloat16 the
    # interpreted kernels double the compile time; bfloat16 inputs are checked above)
    from tests.helpers import synthetic_batch
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_for_training
    from training_jax.step import make_step_fn, use_fused_attention
    config = PretrainingConfig.create({
        "model_size": "electra_small", "model_hparam_overrides": {**MODEL, "num_layers": 1},
        "generator_hidden_size": 0.5, "vocab_size": 120, "max_seq_length": 16, "train_batch_size": 4,
        "num_warmup_steps": 0})
    model, optimizer = build_for_training(config)
    use_fused_attention(model)
    set_on = [layer.attention_self.fused_attention_fn is flash_attention
              for encoder in model.encoders() for layer in encoder.transformer_layers]
    state = tuple([v.value for v in variables] for variables in
                  (model.trainable_variables, model.non_trainable_variables, optimizer.variables))
    batch = synthetic_batch(np.random.default_rng(0), 4, 16, 120)
    lowered = jax.jit(make_step_fn(model, optimizer)).lower(state, batch)
    step = lowered.compile()
    new_state, loss, _ = step(state, batch)
    _, second_loss, _ = step(new_state, batch)
    results["step"] = {"set_on": set_on, "losses": [float(loss), float(second_loss)],
                       "seeds_advanced": largest_difference(new_state[1], state[1]) > 0,
                       "text_scores": [scores_tensors(lowered.as_text(), 4, heads, 16)
                                       for heads in sorted({l.attention_self.num_heads for e in model.encoders()
                                                            for l in e.transformer_layers})]}
    results["seconds"] = time.time() - started
    print("RESULTS" + json.dumps(results))
''').replace("RATE_VALUE", repr(RATE))


@pytest.fixture(scope="module")
def results():
    return run_script_under_jax(SCRIPT.replace("MODEL", json.dumps(MICRO_MODEL)), REPO_ROOT)


def test_without_dropout_it_is_explicit_attention_forward_and_backward(results):
    """Not training, a layer's dropout rate drops nothing: explicit_attention within float32 rounding."""
    plain = results["plain"]
    assert plain["out"] <= 1e-5 * plain["out_scale"], plain
    assert plain["grads"] <= 1e-5 * plain["grad_scale"], plain


def test_with_dropout_it_is_the_explicit_attention_with_the_kernels_mask(results):
    dropout = results["dropout"]
    assert dropout["out"] <= 1e-5 * dropout["out_scale"], dropout
    assert dropout["grads"] <= 1e-5 * dropout["grad_scale"], dropout
    assert dropout["differs_from_undropped"] > 0.1 and dropout["other_seed"] > 0.1, dropout  # the mask acts


def test_the_mask_keeps_one_minus_rate_independently_and_follows_the_seed(results):
    mask = results["mask"]
    count, spread = mask["count"], np.sqrt(RATE * (1 - RATE) / mask["count"])
    assert abs(mask["kept"] - (1 - RATE)) < 5 * spread, mask
    for axis in ("keys", "queries", "heads", "batch"):  # a correlation's spread is about 1/sqrt(count)
        assert abs(mask[axis]) < 5 / np.sqrt(count / 2), (axis, mask)
    expected_agreement = (1 - RATE) ** 2 + RATE ** 2  # two independent masks agree this often
    assert abs(mask["other_seed_agrees"] - expected_agreement) < 0.01, mask


def test_bfloat16_inputs_agree_with_float32_within_bfloat16_rounding(results):
    """The output is a convex combination of the values (scaled by 1 / (1 - rate)), its weights float32: a few
    bfloat16 roundings of the largest output. The gradients pass through more roundings (dO·vᵀ, dS in bfloat16
    before its matmul): a few percent of each gradient's scale (measured: about 1 %)."""
    bf16 = results["bf16"]
    assert bf16["dtypes"] == ["bfloat16"] * 4, bf16
    assert bf16["out"] <= 4 * BF16_ROUNDOFF * bf16["out_scale"], bf16
    for difference, scale in zip(bf16["grads"], bf16["grad_scales"]):
        assert difference <= 16 * BF16_ROUNDOFF * scale, bf16


def test_a_self_attention_under_the_option_draws_its_seed_and_causal_layers_keep_the_explicit_path(results):
    layer = results["layer"]
    assert results["layers_set"] == 1
    assert layer["out"] <= 1e-5 * layer["scale"], layer
    assert layer["seed_advanced"] and layer["next_call_differs"] > 0.01, layer
    assert results["causal_calls"] == 0


def test_the_jitted_gradient_under_the_option_holds_no_scores_tensor(results):
    lowered = results["lowered"]
    assert lowered["explicit"]["f32"] > 0, lowered  # the check can fail: the explicit path holds them
    assert lowered["fused"] == {"f32": 0, "bf16": 0}, lowered


def test_the_kernels_lower_for_a_gpu_through_triton(results):
    """Pallas's Triton lowering accepts the three kernels (forward, dK/dV, dQ); Triton's own compile to PTX happens
    only on a GPU."""
    lowering = results["gpu_lowering"]
    assert lowering == {"triton_calls": 3, "scores": {"f32": 0, "bf16": 0}}, lowering


def test_a_pretraining_update_with_use_fused_attention_runs(results):
    step = results["step"]
    assert step["set_on"] == [True, True], step  # the generator's and the discriminator's layer
    assert all(np.isfinite(step["losses"])) and step["losses"][0] > 0, step
    assert step["seeds_advanced"], step
    # seq 16 here: the micro model's whole step
    assert all(found == {"f32": 0, "bf16": 0} for found in step["text_scores"]), step
