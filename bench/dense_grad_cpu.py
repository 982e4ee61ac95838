"""One dense layer's three matmuls on the CPU (forward, input gradient, weight gradient), with TensorFlow's
oneDNN kernels on and off, side by side in one run.

    python -m bench.dense_grad_cpu [--rows 1280] [--in-size 256] [--out-size 1024] [--threads 2] [--repeats 50]

Why: the fine-tuning step's weight-gradient matmuls (x^T dy, K = batch x length) took about twice the forward
ones under oneDNN in the step's profile (docs/benchmarks.md); this isolates them at one layer's shapes. Each
setting runs in a fresh process (oneDNN is chosen when TensorFlow starts), the products alternated in it;
times are the mean of --repeats calls after one warm-up call. Prints the CPU and each product's ms, and the
weight gradient's and input gradient's time over the forward's.
"""
import argparse
import os
import sys
import time

from bench.worker_process import print_result, run_worker

PRODUCTS = ("forward x @ w", "input gradient dy @ w^T", "weight gradient x^T @ dy",
            "weight gradient on Eigen (BatchMatMulV3)", "weight gradient on Eigen, transposed (dy^T @ x)^T",
            "weight gradient as routed (common/matmul_gradients.py)")


def time_products(rows, in_size, out_size, repeats, threads):
    """{product: mean ms} of the three matmuls of a [rows, in] x [in, out] dense layer."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from common.matmul_gradients import weight_product

    x, w = tf.random.normal([rows, in_size]), tf.random.normal([in_size, out_size])
    dy = tf.random.normal([rows, out_size])

    def eigen(a, b):  # a^T b on TensorFlow's own kernel: oneDNN takes over MatMul, not BatchMatMulV3
        return tf.raw_ops.BatchMatMulV3(x=a, y=b, Tout=tf.float32, adj_x=True)

    functions = dict(zip(PRODUCTS, (tf.function(lambda: tf.matmul(x, w)),
                                    tf.function(lambda: tf.matmul(dy, w, transpose_b=True)),
                                    tf.function(lambda: tf.matmul(x, dy, transpose_a=True)),
                                    tf.function(lambda: eigen(x, dy)),
                                    tf.function(lambda: tf.transpose(eigen(dy, x))),
                                    tf.function(lambda: weight_product(x, dy)))))
    totals = dict.fromkeys(PRODUCTS, 0.0)
    for function in functions.values():
        function()
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function().numpy()
            totals[name] += time.perf_counter() - start
    return {name: 1000 * total / repeats for name, total in totals.items()}


def spawn(onednn, args):
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1" if onednn else "0", TF_CPP_MIN_LOG_LEVEL="2",
               OMP_NUM_THREADS=str(args.threads))
    command = [sys.executable, "-m", "bench.dense_grad_cpu", "--worker", "--rows", str(args.rows), "--in-size",
               str(args.in_size), "--out-size", str(args.out_size), "--threads", str(args.threads), "--repeats",
               str(args.repeats)]
    return run_worker(command, env, f"oneDNN {'on' if onednn else 'off'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1280, help="batch x length (32 x 40: SST-2's padded length)")
    parser.add_argument("--in-size", type=int, default=256)
    parser.add_argument("--out-size", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        times = time_products(args.rows, args.in_size, args.out_size, args.repeats, args.threads)
        print_result(times)
        return times
    from training.cpu_features import read_cpu_features

    print(f"CPU: {read_cpu_features().describe()}; {args.threads} threads; [{args.rows}, {args.in_size}] x "
          f"[{args.in_size}, {args.out_size}], mean of {args.repeats}")
    results = {}
    for onednn in (True, False):
        times = results[onednn] = spawn(onednn, args)
        forward = times[PRODUCTS[0]]
        print(f"oneDNN {'on ' if onednn else 'off'}: " + "; ".join(f"{name} {ms:.2f} ms" for name, ms in times.items())
              + f"; over the forward: input gradient {times[PRODUCTS[1]] / forward:.2f}x, weight gradient "
              f"{times[PRODUCTS[2]] / forward:.2f}x, as routed {times[PRODUCTS[5]] / forward:.2f}x")
    on, off = results[True][PRODUCTS[2]], results[False][PRODUCTS[2]]
    print(f"weight gradient, oneDNN on / off: {on / off:.2f}x the time")
    return results


if __name__ == "__main__":
    from common.quiet import quiet_tensorflow

    quiet_tensorflow()  # as the commands start: TensorFlow's start-up lines hidden, its import lean
    main()
