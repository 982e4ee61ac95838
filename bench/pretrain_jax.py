"""Pretrains one arm of the RTD-vs-MLM study on an accelerator under KERAS_BACKEND=jax (no TensorFlow).

    # here (TensorFlow): build the dataset and write what the accelerator needs
    python bench/rtd_vs_mlm.py --work-dir runs/rtd_vs_mlm --device-export device_study
    # on the accelerator (JAX and Keras only):
    KERAS_BACKEND=jax python bench/pretrain_jax.py --study device_study --arm electra --out OUT/electra
    # here again: import the checkpoints and fine-tune them
    python bench/rtd_vs_mlm.py --work-dir runs/rtd_vs_mlm --device-results OUT

Why it exists: accelerator machines here hold JAX but no TensorFlow, so run_pretraining.py (tf.data,
tf.distribute, tf.train.Checkpoint) cannot run there. What trains is the same: the config is resolved by
run_pretraining.py's own functions when the study is exported (config_<arm>.json), the model, masking,
sampling, losses, optimizer and schedule are pretrain.builder's, and one update is bench/pretrain_step_gpu's
step (value_and_grad + optimizer.stateless_apply under one jit). What differs is the outer loop: batches
are drawn from NumPy arrays of the dataset's examples (a fresh permutation per epoch) instead of tf.data,
and the masking/sampling randomness comes from the model's own SeedGenerator instead of the TF loop's
per-step seeds (same distributions, another stream).

Writes to --out:
  weights-<step>.npz  every model weight by its Keras path at each of the study's checkpoint steps
                      (float weights rounded to float16 to fit the transfer limits; see --weights-dtype)
  metrics.jsonl       one JSON line per log window ({"split": "train", "step", metric...}, averaged over
                      the window) and per evaluation on the held-out examples ({"split": "eval", ...}); last,
                      {"split": "run", ...}: the config, device, steps, wall-clock and throughput, which
                      marks the run complete
Four files per arm, so both arms' outputs come back from a machine that returns at most eight.
"""
import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

STUDY_FILE = "study.json"
TRAIN_ARRAYS = "train.npz"
EVAL_ARRAYS = "eval.npz"
METRICS_FILE = "metrics.jsonl"
LEGACY_RUN_FILE = "run.json"  # where the first runs (docs/data/h100_probe) wrote the run record


def read_metrics(folder):
    """({"train": [...], "eval": [...]}, the run record or None while unfinished) of a run's folder."""
    path = pathlib.Path(folder) / METRICS_FILE
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    splits = {split: [r for r in records if r["split"] == split] for split in ("train", "eval")}
    runs = [r for r in records if r["split"] == "run"]
    legacy = pathlib.Path(folder) / LEGACY_RUN_FILE
    run = runs[-1] if runs else json.loads(legacy.read_text()) if legacy.is_file() else None
    return splits, run


def weights_file(step):
    return f"weights-{step}.npz"


# ---------------------------------------------------------------- the arrays (written by rtd_vs_mlm.py)
def pack_examples(input_ids, input_mask, segment_ids):
    """Compact arrays of packed examples: uint16 ids, per-row lengths and the start of segment B.

    Packing writes [CLS] A [SEP] (B [SEP]) then padding, so the mask is a prefix (its length) and the
    segment ids are 1 from B's first token to the end of the example (0 when there is no B)."""
    import numpy as np

    input_ids, input_mask, segment_ids = (np.asarray(a) for a in (input_ids, input_mask, segment_ids))
    lengths = input_mask.sum(axis=1)
    positions = np.arange(input_ids.shape[1])[None, :]
    if not np.array_equal(input_mask, (positions < lengths[:, None]).astype(input_mask.dtype)):
        raise ValueError("input_mask is not a prefix of each row")
    has_b = segment_ids.max(axis=1) > 0
    b_start = np.where(has_b, np.argmax(segment_ids > 0, axis=1), lengths)
    expected = ((positions >= b_start[:, None]) & (positions < lengths[:, None])).astype(segment_ids.dtype)
    if not np.array_equal(segment_ids, expected):
        raise ValueError("segment_ids are not one run of 1s ending at the example's end")
    if input_ids.max() >= 2 ** 16:
        raise ValueError("token ids do not fit uint16")
    return {"input_ids": input_ids.astype("uint16"), "lengths": lengths.astype("int32"),
            "b_start": b_start.astype("int32")}


def unpack_examples(arrays):
    """The model's int32 {input_ids, input_mask, segment_ids} from pack_examples' arrays."""
    import numpy as np

    input_ids = arrays["input_ids"].astype("int32")
    positions = np.arange(input_ids.shape[1])[None, :]
    lengths, b_start = arrays["lengths"][:, None], arrays["b_start"][:, None]
    return {"input_ids": input_ids, "input_mask": (positions < lengths).astype("int32"),
            "segment_ids": ((positions >= b_start) & (positions < lengths)).astype("int32")}


# ---------------------------------------------------------------- training
def build(config_path):
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_for_training

    config = PretrainingConfig.load(config_path)
    model, optimizer = build_for_training(config)
    return config, model, optimizer


def add_stats(a, b):
    import jax

    return jax.tree_util.tree_map(lambda x, y: x + y, a, b)


def make_functions(model, optimizer):
    """(train, evaluate, zero_stats): train (jitted) gathers its batch by index from the device-resident
    examples and adds the step's metric statistics to a running sum (no host round trip per step);
    zero_stats(state, examples, batch_size) is that sum's starting value."""
    import jax
    import keras

    from bench.pretrain_step_gpu import make_step_fn

    step_fn = make_step_fn(model, optimizer)
    trainable_vars, non_trainable_vars = model.trainable_variables, model.non_trainable_variables

    def train(state, stats_sum, examples, indices):
        batch = {key: value[indices] for key, value in examples.items()}
        state, loss, stats = step_fn(state, batch)
        return state, add_stats(stats_sum, stats), loss

    def evaluate(trainable, non_trainable, batch):
        mapping = list(zip(trainable_vars, trainable)) + list(zip(non_trainable_vars, non_trainable))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            stats = model.compute_losses(batch, training=False)["stats"]
        return stats, [scope.get_current_value(v) for v in non_trainable_vars]

    def zero_stats(state, examples, batch_size):
        batch = {key: jax.ShapeDtypeStruct((batch_size, *value.shape[1:]), value.dtype)
                 for key, value in examples.items()}
        shapes = jax.eval_shape(step_fn, state, batch)[2]
        return jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), shapes)

    return jax.jit(train, donate_argnums=(0, 1)), jax.jit(evaluate), zero_stats


class Batches:
    """Index batches over n examples: a fresh seeded permutation per epoch, the remainder carried over."""

    def __init__(self, n, batch_size, seed):
        import numpy as np

        self.n, self.batch_size = n, batch_size
        self.rng = np.random.default_rng(seed)
        self.pending = np.empty(0, "int32")

    def next(self):
        import numpy as np

        while len(self.pending) < self.batch_size:
            self.pending = np.concatenate([self.pending, self.rng.permutation(self.n).astype("int32")])
        indices, self.pending = self.pending[:self.batch_size], self.pending[self.batch_size:]
        return indices


def save_weights(path, model, dtype):
    """{keras path: value}; float weights cast to `dtype`, integer state (seed generators) as is."""
    import numpy as np

    values = {}
    for variable in model.weights:
        value = np.asarray(variable.value)
        values[variable.path] = value.astype(dtype) if np.issubdtype(value.dtype, np.floating) else value
    temp = path.with_name(path.name + ".tmp.npz")
    np.savez(temp, **values)
    temp.replace(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", type=pathlib.Path, required=True,
                        help="the folder rtd_vs_mlm.py --device-export wrote")
    parser.add_argument("--arm", required=True, choices=("electra", "mlm"))
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--weights-dtype", default="float16", choices=("float16", "float32"))
    args = parser.parse_args(argv)

    import jax
    import keras
    import numpy as np

    if keras.backend.backend() != "jax":
        sys.exit(f"run with KERAS_BACKEND=jax (got {keras.backend.backend()})")
    study = json.loads((args.study / STUDY_FILE).read_text())
    arm = study["arms"][args.arm]
    checkpoint_steps = arm["checkpoint_steps"]
    config, model, optimizer = build(args.study / arm["config_file"])
    device = jax.devices()[0]
    args.out.mkdir(parents=True, exist_ok=True)
    log = lambda message: print(f"[{time.strftime('%H:%M:%S')}] {args.arm}: {message}", flush=True)  # noqa: E731
    log(f"device {device.platform} {device.device_kind}; jax {jax.__version__}, keras {keras.__version__}; "
        f"{config.num_train_steps} steps of batch {config.train_batch_size}, checkpoints {checkpoint_steps}")

    with np.load(args.study / TRAIN_ARRAYS) as packed:
        train_examples = {k: jax.device_put(v, device) for k, v in unpack_examples(packed).items()}
    with np.load(args.study / EVAL_ARRAYS) as packed:
        eval_examples = unpack_examples(packed)
    num_train = int(train_examples["input_ids"].shape[0])
    eval_batches = [{k: jax.device_put(v[i:i + config.eval_batch_size], device) for k, v in eval_examples.items()}
                    for i in range(0, len(eval_examples["input_ids"]) - config.eval_batch_size + 1,
                                   config.eval_batch_size)][:config.num_eval_steps]
    log(f"{num_train} training examples, {len(eval_batches)} held-out batches of {config.eval_batch_size}")

    train, evaluate, zero_stats = make_functions(model, optimizer)
    # Everything committed to the device up front: the jitted functions' outputs are, and inputs placed
    # otherwise would make the second call compile again (seen: the compile time twice over).
    state = jax.device_put(([v.value for v in model.trainable_variables],
                            [v.value for v in model.non_trainable_variables],
                            [v.value for v in optimizer.variables]), device)
    # The same masks at every evaluation; copies, since the training state's buffers are donated.
    eval_state0 = jax.device_put([jax.numpy.array(v.value, copy=True) for v in model.non_trainable_variables],
                                 device)
    batches = Batches(num_train, config.train_batch_size, config.seed)
    stats_sum = jax.device_put(zero_stats(state, train_examples, config.train_batch_size), device)
    log_every, eval_every = study["log_every"], study["eval_every"][args.arm]
    metrics_path = args.out / METRICS_FILE
    metrics_path.write_text("")
    start = time.monotonic()
    compile_seconds = None

    def write_metrics(record):
        with metrics_path.open("a") as out:
            out.write(json.dumps(record) + "\n")

    for step in range(1, config.num_train_steps + 1):
        indices = jax.device_put(batches.next(), device)
        state, stats_sum, loss = train(state, stats_sum, train_examples, indices)
        if compile_seconds is None:
            loss.block_until_ready()
            compile_seconds = time.monotonic() - start
            log(f"first step (compile + run) {compile_seconds:.1f} s")
            timed_start, timed_from = time.monotonic(), step
        if step % log_every == 0 or step == config.num_train_steps:
            host_stats = jax.device_get(stats_sum)
            stats_sum = jax.tree_util.tree_map(jax.numpy.zeros_like, stats_sum)
            values = model.finalize_metrics(host_stats)
            if not np.isfinite(values["total_loss"]):
                sys.exit(f"{args.arm}: the loss is not finite at step {step}")
            elapsed = time.monotonic() - timed_start
            rate = (step - timed_from) / elapsed if elapsed > 0 else 0.0
            write_metrics({"split": "train", "step": step, "steps_per_second": rate, **values})
            eta = (config.num_train_steps - step) / rate if rate else 0.0
            log(f"step {step}/{config.num_train_steps} {rate:.1f} steps/s, ETA {eta:.0f} s; "
                + ", ".join(f"{k} {values[k]:.4f}" for k in ("masked_lm_accuracy", "disc_auc", "total_loss")
                            if k in values))
        if step % eval_every == 0 or step == config.num_train_steps or step in checkpoint_steps:
            non_trainable, summed = eval_state0, None
            for batch in eval_batches:
                stats, non_trainable = evaluate(state[0], non_trainable, batch)
                summed = stats if summed is None else add_stats(summed, stats)
            values = model.finalize_metrics(jax.device_get(summed))
            write_metrics({"split": "eval", "step": step, **values})
        if step in checkpoint_steps:
            for variable, value in zip(model.trainable_variables, state[0]):
                variable.assign(value)
            for variable, value in zip(model.non_trainable_variables, state[1]):
                variable.assign(value)
            save_weights(args.out / weights_file(step), model, args.weights_dtype)
            log(f"saved {weights_file(step)}")
    wall = time.monotonic() - start
    steps_timed = config.num_train_steps - timed_from
    run = {"split": "run", "arm": args.arm, "config": config.to_dict(),
           "device": f"{device.platform} {device.device_kind}", "jax": jax.__version__,
           "keras": keras.__version__, "num_train_steps": config.num_train_steps,
           "checkpoint_steps": checkpoint_steps, "wall_clock_seconds": round(wall, 1),
           "compile_seconds": round(compile_seconds, 1),
           "steps_per_second": round(steps_timed / (time.monotonic() - timed_start), 2),
           "weights_dtype": args.weights_dtype, "train_examples": num_train,
           "eval_examples": len(eval_batches) * config.eval_batch_size}
    write_metrics(run)
    log(f"done in {wall:.0f} s")


if __name__ == "__main__":
    main()
