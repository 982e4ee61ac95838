"""Global-batch semantics under tf.distribute: N replicas × b equals 1 replica × N·b (loss, gradients,
update), gradient accumulation equals the full batch, and a 2-worker MultiWorkerMirroredStrategy run on
localhost trains and checkpoints. Devices are configured before TensorFlow starts, so each case runs in
a subprocess."""
import json
import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

EQUIVALENCE_SCRIPT = r'''
import json, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from configs.pretraining_config import PretrainingConfig
from training.loop import build
from training.step import PretrainingSteps
from tests.helpers import MICRO_MODEL

config = PretrainingConfig.create({
    "model_size": "electra_tiny", "vocab_size": 50, "cls_token_id": 2, "sep_token_id": 3, "mask_token_id": 4,
    "max_seq_length": 16, "num_warmup_steps": 0, "learning_rate": 1e-2, "clip_norm": 0.05,
    "num_train_steps": 10,
    "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1, "dropout": 0.0, "attention_dropout": 0.0}})
GLOBAL, SEQ, N = 8, 16, config.max_predictions_per_seq
rng = np.random.default_rng(0)
lengths = rng.integers(6, SEQ + 1, GLOBAL)
ids = rng.integers(5, 50, (GLOBAL, SEQ)).astype("int32")
mask = (np.arange(SEQ)[None] < lengths[:, None]).astype("int32")
ids[:, 0] = 2
ids[np.arange(GLOBAL), lengths - 1] = 3
ids = ids * mask
segments = ((np.arange(SEQ)[None] >= lengths[:, None] // 2) * mask).astype("int32")
examples = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}

def make_loss_fn(pretrainer):
    """The real loss with the randomness taken out: slots 1..N (inside the sequence) are masked and the
    'sampled' token is a fixed function of the original, so both layouts see the same corruption."""
    def loss_fn(batch, denominators, seed_generator):
        input_ids, input_mask = batch["input_ids"], batch["input_mask"]
        lengths = tf.reduce_sum(input_mask, axis=1, keepdims=True)
        positions = tf.tile(tf.range(1, N + 1)[None], [tf.shape(input_ids)[0], 1])
        weights = tf.cast(positions < lengths - 1, tf.float32)
        positions = positions * tf.cast(weights, tf.int32)
        targets = tf.gather(input_ids, positions, batch_dims=1) * tf.cast(weights, tf.int32)
        seq = tf.range(tf.shape(input_ids)[1])[None]
        masked = tf.where((seq >= 1) & (seq <= N) & (seq < lengths - 1), 4, input_ids)
        sampled = tf.where(tf.range(N)[None] % 2 == 0, (targets + 7) % 50, targets)
        out = pretrainer.compute_losses(batch, training=True, denominators=denominators,
            masked_inputs={"input_ids": masked, "masked_lm_positions": positions, "masked_lm_ids": targets,
                           "masked_lm_weights": weights}, sampled_ids=sampled)
        return out.total_loss, out.stats
    return loss_fn

initial = None
def one_step(strategy, accumulation=1):
    global initial
    pretrainer, optimizer = build(config, strategy)
    if initial is None:
        initial = [v.numpy() for v in pretrainer.weights]
    else:
        for v, value in zip(pretrainer.weights, initial):
            v.assign(value)
    steps = PretrainingSteps(strategy, pretrainer, optimizer, accumulation_steps=accumulation,
                             loss_fn=make_loss_fn(pretrainer))
    dataset = tf.data.Dataset.from_tensor_slices(examples).batch(GLOBAL // accumulation).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    stats = {k: np.asarray(v) for k, v in steps.train(iterator, 1).items()}
    metrics = pretrainer.finalize_metrics(stats)
    m = [np.asarray(s) for s in optimizer._adam_m]
    grad_norm = float(np.sqrt(sum(float(((x / 0.1) ** 2).sum()) for x in m)))  # the clipped norm
    return {"loss": metrics["total_loss"], "mlm": metrics["masked_lm_loss"], "disc": metrics["disc_loss"],
            "weights": [v.numpy() for v in pretrainer.trainable_variables], "m": m,
            "iterations": int(optimizer.iterations.numpy()), "grad_norm": grad_norm,
            "replicas": strategy.num_replicas_in_sync}

single = one_step(tf.distribute.get_strategy())
mirrored = one_step(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
accumulated = one_step(tf.distribute.get_strategy(), accumulation=2)
def compare(a, b):
    return {"loss_diff": abs(a["loss"] - b["loss"]),
            "max_weight_diff": max(float(np.abs(x - y).max()) for x, y in zip(a["weights"], b["weights"])),
            "max_m_diff": max(float(np.abs(x - y).max()) for x, y in zip(a["m"], b["m"])),
            "max_m": max(float(np.abs(x).max()) for x in a["m"]),
            "weight_change": max(float(np.abs(x - y).max()) for x, y in zip(a["weights"], initial)),
            "iterations": [a["iterations"], b["iterations"]], "replicas": [a["replicas"], b["replicas"]],
            "loss": a["loss"], "grad_norm": a["grad_norm"]}
print("RESULT " + json.dumps({"mirrored": compare(single, mirrored), "accumulated": compare(single, accumulated)}))
'''


def subprocess_env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow", PYTHONPATH=str(REPO_ROOT))
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def equivalence():
    result = subprocess.run([sys.executable, "-c", EQUIVALENCE_SCRIPT], cwd=REPO_ROOT, env=subprocess_env(),
                            capture_output=True, text=True, timeout=300)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def check_same_step(case):
    assert case["iterations"] == [1, 1]  # one optimizer update each, accumulation included
    # The applied gradient has norm clip_norm (0.05): clipping was active, once, on the global sum
    # (clipping each replica's half before the sum would give a norm up to 0.1).
    assert abs(case["grad_norm"] - 0.05) < 1e-4
    assert case["weight_change"] > 1e-3  # the update really moved the weights
    assert case["loss_diff"] < 1e-5 * max(1.0, case["loss"])
    # adam_m = 0.1 × the clipped gradient: averaging instead of summing would halve it.
    assert case["max_m_diff"] < 1e-6 + 1e-4 * case["max_m"]
    assert case["max_weight_diff"] < 1e-5


def test_two_replicas_equal_one_replica_on_the_global_batch(equivalence):
    """MirroredStrategy on 2 logical CPUs × 4 = one device × 8: same loss, clipped gradient and weights."""
    case = equivalence["mirrored"]
    assert case["replicas"] == [1, 2]
    check_same_step(case)


def test_gradient_accumulation_equals_the_full_batch(equivalence):
    """2 accumulated micro-batches of 4 = one batch of 8, counted as one optimizer update."""
    check_same_step(equivalence["accumulated"])


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_two_worker_multi_worker_mirrored_run_trains_and_checkpoints(tmp_path):
    """2 processes on localhost (TF_CONFIG): 2 replicas, a few steps, the chief writes the checkpoint,
    the other worker's scratch checkpoint folder is removed."""
    from tests.helpers import MICRO_MODEL, build_tiny_dataset

    build_tiny_dataset(tmp_path, max_seq_length=32, num_shards=2, max_documents=30)
    workers = [f"localhost:{port}" for port in free_ports(2)]
    hparams = json.dumps({"model_size": "electra_tiny", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
                          "train_batch_size": 8, "num_train_steps": 6, "iterations_per_loop": 3,
                          "save_checkpoints_steps": 3, "num_warmup_steps": 2})
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        processes.append(subprocess.Popen(
            [sys.executable, "run_pretraining.py", "--model-name", "mw", "--data-dir", str(tmp_path),
             "--hparams", hparams], cwd=REPO_ROOT, env=subprocess_env(TF_CONFIG=tf_config),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=240)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in processes] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert "with 2 replica(s)" in outputs[0], outputs[0][-2000:]
    assert "Pretraining" not in outputs[1]  # only the chief reports
    assert "step 6/6" in outputs[0]
    model_dir = tmp_path / "models" / "mw"
    assert (model_dir / "ckpt-6.index").is_file() and (model_dir / "ckpt-3.index").is_file()
    assert (model_dir / "config.json").is_file()
    assert not (model_dir / ".worker_scratch" / "worker_1").exists()
