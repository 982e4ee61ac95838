"""XLA for the elementwise half of a TensorFlow training step, oneDNN for its matmuls (pretraining
config `xla_fuse_elementwise`).

Why: on a CPU, TensorFlow runs every elementwise op (GELU's erf and products, LayerNorm's moments, dropout's
masks, bias gradients) as its own pass over memory: about 40% of the electra_small step
(bench/profile_step_cpu.py). Compiling the whole step with XLA fuses them but moves the matmuls onto XLA's
CPU kernels, which makes the step 2-7x slower (docs/benchmarks.md). TensorFlow's auto-clustering, limited to
the ops XLA can fuse (`FUSIBLE`), gets both: the elementwise and reduction ops between two matmuls run as
one compiled XLA kernel, and the matmuls stay on oneDNN. Numerics are equal up to floating-point rounding
(the random ops stay TensorFlow's own, so the masks and samples are the same numbers); the first step
compiles the clusters (about 30 s more for electra_small on 2 cores).

No TensorFlow import here: the flags must be in the environment before TensorFlow reads them.
"""
import os
import sys

ENV = "TF_XLA_FLAGS"
# (flag name, flag): auto-clustering on, on CPU devices too, of fusible ops only (elementwise, reductions
# and the shape ops around them); MatMul and BatchMatMul are not fusible, so they stay oneDNN's.
FLAGS = (("--tf_xla_auto_jit", "--tf_xla_auto_jit=2"),
         ("--tf_xla_cpu_global_jit", "--tf_xla_cpu_global_jit"),
         ("--tf_xla_ops_to_cluster", "--tf_xla_ops_to_cluster=FUSIBLE"))


def fuse_elementwise_with_xla(environ=None, quiet=False):
    """Adds FLAGS to TF_XLA_FLAGS, keeping the user's own flags (a flag the user set wins over ours).

    Must run before TensorFlow's first tf.function: it parses TF_XLA_FLAGS once per process. Prints a one-line
    note on stderr (unless `quiet`) and returns it, or None when the user's flags already hold all three.
    """
    environ = os.environ if environ is None else environ
    existing = environ.get(ENV, "").split()
    names = {flag.split("=", 1)[0] for flag in existing}
    added = [flag for name, flag in FLAGS if name not in names]
    if not added:
        return None
    environ[ENV] = " ".join(existing + added)
    note = (f"note: XLA fuses the step's elementwise ops, matmuls stay on oneDNN ({ENV}={environ[ENV]}); "
            "the first step compiles the fused clusters")
    if not quiet:
        print(note, file=sys.stderr, flush=True)
    return note
