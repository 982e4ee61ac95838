"""LayerNorm and exact GELU, forward and backward, in TensorFlow on the CPU: the hand-written gradients of
model/elementwise_gradients.py against the ones autodiff builds from Keras' ops, side by side in one process.

    python -m bench.elementwise_grad_cpu [--rows 16384] [--widths 64,256,1024] [--repeats 5] [--iterations 10]
        [--threads 2]

Each setting is one tf.function (the op's forward, a weighted sum, the gradients of its input and weights), run
alternately `--repeats` times for `--iterations` calls each; prints the median ms per call and autodiff / by hand.
electra_small's shapes at batch 128 x 128: LayerNorm 256 wide (the discriminator, twice a layer), 64 (the
generator), 128 (the embeddings); GELU 1,024 wide (the discriminator's FFN) and 256 (the generator's).
"""
import argparse
import os
import statistics
import time


def build(rows, width, threads):
    """{setting: (step, x)} for each op and gradient form at [rows, width]."""
    import numpy as np
    import tensorflow as tf
    from keras import ops

    from model import elementwise_gradients

    tf.get_logger().setLevel("ERROR")  # each width's new functions would read as retracing
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(rows, width)).astype("float32") * 2 + 1)
    upstream = tf.constant(rng.normal(size=(rows, width)).astype("float32"))
    gamma, beta = (tf.Variable(rng.normal(size=(width,)).astype("float32")) for _ in range(2))
    functions = {
        "LayerNorm, autodiff": (lambda v: ops.layer_normalization(v, gamma, beta, -1, 1e-12), [gamma, beta]),
        "LayerNorm, by hand": (lambda v: elementwise_gradients.layer_norm(v, gamma, beta, 1e-12), [gamma, beta]),
        "GELU, autodiff": (lambda v: ops.gelu(v, approximate=False), []),
        "GELU, by hand": (elementwise_gradients.gelu, []),
    }

    def step_of(function, weights):
        @tf.function(autograph=False)
        def step(value):
            with tf.GradientTape() as tape:
                tape.watch(value)
                loss = tf.reduce_sum(function(value) * upstream)
            return [loss] + tape.gradient(loss, [value] + weights)
        return step

    return {name: step_of(*spec) for name, spec in functions.items()}, x


def measure(steps, x, repeats, iterations):
    """{setting: [ms per call, one per repeat]}, the settings alternated within each repeat."""
    for step in steps.values():
        step(x)[0].numpy()  # trace
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(iterations):
                step(x)[0].numpy()
            times[name].append((time.perf_counter() - start) / iterations * 1000)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--widths", default="64,256,1024")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from training.cpu_features import read_cpu_features, turn_on_onednn

    turn_on_onednn()  # as the scripts train on a CPU
    print(f"CPU: {read_cpu_features().describe()}; {args.threads} threads; {args.rows} rows; median of "
          f"{args.repeats} repeats of {args.iterations} calls (forward and backward)")
    print("| op | width | autodiff ms | by hand ms | autodiff / by hand |")
    print("|---|---|---|---|---|")
    for width in (int(w) for w in args.widths.split(",")):
        steps, x = build(args.rows, width, args.threads)
        times = {name: statistics.median(values) for name, values in measure(steps, x, args.repeats,
                                                                              args.iterations).items()}
        for op in ("LayerNorm", "GELU"):
            slow, fast = times[f"{op}, autodiff"], times[f"{op}, by hand"]
            print(f"| {op} | {width} | {slow:.2f} | {fast:.2f} | {slow / fast:.2f} |", flush=True)


if __name__ == "__main__":
    main()
