"""Does the way dropout draws its random numbers matter for the CPU pretraining step? Keras' TensorFlow
dropout (tf.nn.experimental.stateless_dropout: float32 uniforms the input's size) against the same mask
from float32 or float16 uniforms (half the random bits), each in its own process, side by side.

    python -m bench.dropout_rng_cpu [--steps 3]
    ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 python -m bench.dropout_rng_cpu   # the AVX2 stand-in

The step is bench/pretrain_step_cpu.py's (electra_small float32, batch 128 x 128, XLA off). The float16
variant changes the random stream and rounds the keep probability to float16's grid, so it could only
ever be a named option; this measures whether it would be worth one.
"""
import argparse
import os
import time

from bench.worker_process import print_result

VARIANTS = ("keras", "float32", "float16")


def patch_dropout(dtype_name):
    """Replaces Keras' TensorFlow dropout with a mask drawn from `dtype_name` uniforms."""
    import keras
    import tensorflow as tf
    from keras.src.backend.tensorflow import random as tf_random

    dtype = {"float32": tf.float32, "float16": tf.float16}[dtype_name]

    def dropout(inputs, rate, noise_shape=None, seed=None):
        if rate == 0.0:
            return inputs
        seed = tf_random._cast_seed(tf_random.draw_seed(seed))
        uniform = tf.random.stateless_uniform(tf.shape(inputs), seed, dtype=dtype)
        return tf.where(uniform >= rate, inputs / (1.0 - rate), tf.zeros_like(inputs))

    keras.src.backend.random.dropout = dropout


def worker(args):
    from bench.pretrain_step_cpu import build_tf_step

    if args.worker != "keras":
        patch_dropout(args.worker)
    step, batch, _ = build_tf_step(args, "fp32", xla=False)
    float(step(batch)[0])
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        float(step(batch)[0])
        times.append(time.perf_counter() - start)
    print_result({"s_per_step": sum(times) / len(times)})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per variant, after one untimed")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--inter-op-threads", type=int, default=1)
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    from training.cpu_features import read_cpu_features

    print(f"CPU: {read_cpu_features().describe()}; electra_small float32, batch {args.batch_size} x "
          f"{args.seq_length}, {args.steps} timed steps per variant")
    from bench.pretrain_step_cpu import spawn_worker

    seconds = {}
    for variant in VARIANTS:
        result = spawn_worker("bench.dropout_rng_cpu", variant, [
            "--steps", args.steps, "--batch-size", args.batch_size, "--seq-length", args.seq_length,
            "--threads", args.threads, "--inter-op-threads", args.inter_op_threads], args.threads)
        if result is not None:
            seconds[variant] = result["s_per_step"]
    print("| dropout random numbers | s/step | x Keras' |")
    print("|---|---|---|")
    for variant, value in seconds.items():
        ratio = f"{seconds['keras'] / value:.3f}" if "keras" in seconds else "n/a"
        print(f"| {variant} | {value:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
