"""run_pretraining.py under mixed_bfloat16 and mixed_float16 (a few steps of a micro model): finite
losses close to float32's at the same first step, checkpoints with every weight stored in float32; and
the float16 dynamic loss scale of training/step.py: an overflowing step is skipped (weights, optimizer
state and step counter unchanged, scale halved) and the scale doubles after the configured number of
good steps."""
import json
import math
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import run_pretraining
from configs.pretraining_config import PretrainingConfig
from training.step import SKIPPED
from tests.helpers import MICRO_MODEL, build_tiny_dataset, train_scalars

ONE_LAYER = {**MICRO_MODEL, "num_layers": 1}  # what these tests prove does not depend on depth
FAST = {"model_size": "electra_tiny", "model_hparam_overrides": ONE_LAYER, "train_batch_size": 8,
        "eval_batch_size": 8, "num_warmup_steps": 2, "iterations_per_loop": 1, "save_checkpoints_steps": 3,
        "num_train_steps": 6, "do_eval": True, "num_eval_steps": 2}


@pytest.fixture(autouse=True)
def global_policy_stays_float32():
    """The runs give their models the config's policy; Keras' global one is never set."""
    yield
    assert keras.config.dtype_policy().name == "float32"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed_data")
    build_tiny_dataset(folder, max_seq_length=32, num_shards=2, max_documents=40)
    return folder




def run(data_dir, name, policy):
    run_pretraining.main(["--model-name", name, "--data-dir", str(data_dir),
                          "--hparams", json.dumps({**FAST, "mixed_precision": policy})])
    return data_dir / "models" / name


@pytest.fixture(scope="module")
def float32_run(data_dir):
    return run(data_dir, "fp32", "float32")


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_run_is_finite_checkpoints_float32_weights(data_dir, float32_run, policy, capsys):
    model_dir = run(data_dir, policy, policy)
    out = capsys.readouterr().out
    assert "step 6/6" in out and policy in out.splitlines()[0]
    # Finite losses at every logged step and in the held-out evaluation.
    for tag in ("total_loss", "masked_lm_loss", "disc_loss", "disc_auc"):
        values = train_scalars(model_dir, tag)
        assert sorted(values) == list(range(1, 7)), (tag, values)
        assert all(math.isfinite(v) for v in values.values()), (tag, values)
    results = json.loads((model_dir / "eval_results.json").read_text())
    assert results["step"] == 6
    assert all(math.isfinite(results[k]) for k in ("total_loss", "masked_lm_loss", "disc_loss", "disc_auc"))
    # Step 1 sees the same initial weights (config.seed), batch and random draws as float32: only the
    # precision differs, so its loss is close to float32's but (computed in 16 bits) not bit-identical.
    reference = train_scalars(float32_run, "total_loss")[1]
    got = train_scalars(model_dir, "total_loss")[1]
    assert got != reference and abs(got - reference) < 0.01 * reference, (got, reference)
    # Checkpoints: every model weight and optimizer slot is stored in float32 (mixed precision keeps
    # float32 variables and computes in 16 bits); 6 optimizer updates were made.
    state = tf.train.get_checkpoint_state(str(model_dir))
    assert [pathlib.Path(p).name for p in state.all_model_checkpoint_paths] == ["ckpt-3", "ckpt-6"]
    reader = tf.train.load_checkpoint(str(model_dir / "ckpt-6"))
    dtypes = reader.get_variable_to_dtype_map()
    weights = {k: d for k, d in dtypes.items() if k.startswith("model/weights_by_path/") and "seed" not in k}
    assert len(weights) > 20
    assert all(d == tf.float32 for d in weights.values()), {k: d for k, d in weights.items() if d != tf.float32}
    slots = {k: d for k, d in dtypes.items() if k.startswith("optimizer/") and d.is_floating}
    assert slots and all(d == tf.float32 for d in slots.values())
    assert int(reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == 6
    if policy == "mixed_float16":
        # The dynamic loss scale is part of the checkpoint (a resume continues with it).
        assert "loss_scale/.ATTRIBUTES/VARIABLE_VALUE" in dtypes
        assert float(reader.get_tensor("loss_scale/.ATTRIBUTES/VARIABLE_VALUE")) >= 1.0
    else:
        assert not any(k.startswith("loss_scale") for k in dtypes)


# ------------------------------------------------------------------ the dynamic loss scale, step by step
GROWTH_INTERVAL = 3


@pytest.fixture(scope="module")
def float16_steps():
    """One float16 model and its traced steps (2^40 initial loss scale, doubling after 3 good steps), shared by
    the tests below: each sets the scale it starts from and counts updates from where it starts."""
    from training.loop import build
    from training.step import PretrainingSteps

    config = PretrainingConfig.create({
        "model_size": "electra_tiny", "vocab_size": 50, "cls_token_id": 2, "sep_token_id": 3,
        "mask_token_id": 4, "max_seq_length": 16, "num_warmup_steps": 0, "learning_rate": 1e-3,
        "num_train_steps": 100, "mixed_precision": "mixed_float16",
        "model_hparam_overrides": {**ONE_LAYER, "dropout": 0.0, "attention_dropout": 0.0}})
    strategy = tf.distribute.get_strategy()
    pretrainer, optimizer = build(config, strategy)
    assert pretrainer.discriminator.transformer_layers[0].attention_self.query.compute_dtype == "float16"
    steps = PretrainingSteps(strategy, pretrainer, optimizer, dynamic_loss_scale=True,
                             initial_loss_scale=2.0 ** 40, loss_scale_growth_interval=GROWTH_INTERVAL)
    assert float(steps.loss_scale.numpy()) == 2.0 ** 40 and int(steps.good_steps.numpy()) == 0
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 50, (8, 16)).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 3
    examples = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    iterator = iter(tf.data.Dataset.from_tensor_slices(examples).batch(8).repeat())
    return steps, pretrainer, optimizer, iterator


def starting_from(float16_steps, loss_scale):
    steps = float16_steps[0]
    steps.loss_scale.assign(loss_scale)
    steps.good_steps.assign(0)
    return float16_steps


def snapshot(pretrainer, optimizer, steps):
    return {"weights": [np.array(v) for v in pretrainer.trainable_variables],
            "slots": [np.array(v) for v in optimizer.variables if "float" in str(v.dtype)],
            "iterations": int(optimizer.iterations.numpy()), "scale": float(steps.loss_scale.numpy()),
            "good": int(steps.good_steps.numpy())}


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_float16_overflow_skips_the_update_and_halves_the_scale(float16_steps):
    """A loss scale of 2^40 overflows float16 in the backward pass (a real overflow, not an injected
    inf): the update is skipped everywhere, the scale halves each time until the gradients are finite,
    then updates resume."""
    steps, pretrainer, optimizer, iterator = starting_from(float16_steps, 2.0 ** 40)
    before = snapshot(pretrainer, optimizer, steps)
    stats = steps.train(iterator, 1, 16)
    after = snapshot(pretrainer, optimizer, steps)
    assert float(stats[SKIPPED]) == 1.0
    assert all(math.isfinite(float(v)) for k, v in stats.items() if "loss" in k)  # the forward pass is fine
    assert same(before["weights"], after["weights"]) and same(before["slots"], after["slots"])
    assert after["iterations"] == before["iterations"]
    assert after["scale"] == 2.0 ** 39 and after["good"] == 0
    for attempt in range(30):  # halves until float16 holds the scaled gradients
        scale = float(steps.loss_scale.numpy())
        stats = steps.train(iterator, 1, 16)
        if float(stats[SKIPPED]) == 0.0:
            break
        assert float(steps.loss_scale.numpy()) == scale / 2
    else:
        pytest.fail("the loss scale never came down to a finite-gradient value")
    applied = snapshot(pretrainer, optimizer, steps)
    assert applied["iterations"] == before["iterations"] + 1 and applied["good"] == 1 and applied["scale"] == scale
    assert 1.0 <= scale <= 2.0 ** 30  # it came down far from 2^40, and not below 1
    assert not same(after["weights"], applied["weights"])
    assert all(np.isfinite(w).all() for w in applied["weights"])


def test_float16_scale_doubles_after_the_growth_interval_of_good_steps(float16_steps):
    steps, pretrainer, optimizer, iterator = starting_from(float16_steps, 4.0)
    start = int(optimizer.iterations.numpy())
    history = []
    for _ in range(7):
        stats = steps.train(iterator, 1, 16)
        assert float(stats[SKIPPED]) == 0.0  # 4 × the loss is far from float16's range
        history.append((int(optimizer.iterations.numpy()) - start, float(steps.loss_scale.numpy()),
                        int(steps.good_steps.numpy())))
    assert history == [(1, 4.0, 1), (2, 4.0, 2), (3, 8.0, 0), (4, 8.0, 1), (5, 8.0, 2), (6, 16.0, 0),
                       (7, 16.0, 1)]
    # Several steps in one call (the loop's host loop) follow the same rule.
    steps.train(iterator, 2, 16)
    assert (int(optimizer.iterations.numpy()) - start, float(steps.loss_scale.numpy())) == (9, 32.0)


def test_a_run_counts_updates_not_skipped_steps(data_dir, monkeypatch, capsys):
    """A float16 run whose loss scale starts far too high (2^40) skips its first ~30 steps; it still makes
    num_train_steps real updates, and each checkpoint's number is its optimizer step (what a resume
    restarts from)."""
    import functools

    import training.loop
    from training.step import PretrainingSteps

    monkeypatch.setattr(training.loop, "PretrainingSteps",
                        functools.partial(PretrainingSteps, initial_loss_scale=2.0 ** 40))
    hparams = {**FAST, "mixed_precision": "mixed_float16", "num_train_steps": 4, "iterations_per_loop": 2,
               "save_checkpoints_steps": 2, "do_eval": False}
    run_pretraining.main(["--model-name", "skips", "--data-dir", str(data_dir), "--hparams", json.dumps(hparams)])
    out = capsys.readouterr().out
    assert "update(s) skipped for non-finite float16 gradients" in out
    assert "step 2/4" in out and "step 4/4" in out
    assert sorted(train_scalars(data_dir / "models" / "skips", "total_loss")) == [2, 4]  # logged once each
    model_dir = data_dir / "models" / "skips"
    for number in (2, 4):
        reader = tf.train.load_checkpoint(str(model_dir / f"ckpt-{number}"))
        assert int(reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == number
        assert float(reader.get_tensor("loss_scale/.ATTRIBUTES/VARIABLE_VALUE")) < 2.0 ** 30
