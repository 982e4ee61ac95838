"""Where a CPU pretraining step spends its time: TensorFlow's profiler over our step, op time summed by
kind (matmuls, dropout random numbers, GELU, LayerNorm, softmax, casts, gathers and scatters, the
optimizer, other elementwise work).

    python -m bench.profile_step_cpu [--precision fp32|bf16] [--batch-size 128] [--steps 2] [--warmup 1]
    TF_ENABLE_ONEDNN_OPTS=0 python -m bench.profile_step_cpu      # TensorFlow's own default on AVX2 CPUs
    python -m bench.profile_step_cpu --xla-fuse-elementwise      # the config option (training/xla_fusion.py)

The step is bench/pretrain_step_cpu.py's (electra_small, generator 1/4, synthetic batch, one tf.function,
XLA off, one inter-op thread as the benchmark). Op time is each op's wall time on the thread that ran it,
its intra-op workers included, so with one inter-op thread the ops add up to about the step's wall time;
ops nested in function calls are counted once, at the leaves. Prints the CPU, the oneDNN state, a table
by kind and the most expensive op types, per step. Kinds come from the Keras layers' name scopes first
(a LayerNorm's multiplications are LayerNorm), then from op types.
"""
import argparse
import collections
import json
import os
import pathlib
import sys
import tempfile
import time

MATMUL_TYPES = ("MatMul", "_MklMatMul", "BatchMatMul*", "_MklBatchMatMul*", "_FusedMatMul", "_MklFusedMatMul",
                "_MklNativeMatMul", "_MklNativeBatchMatMul*", "_MklNativeFusedMatMul", "Einsum", "_MklEinsum")
# (kind, substrings of the op's name scope, op types): checked in order, the first rule that matches either
# wins; a type ending in * matches any type with that prefix. Scopes come from the Keras layers' names, so
# a LayerNorm's Mul counts as LayerNorm and a dropout's Select as dropout, backward passes included.
RULES = (
    ("matmuls", (), MATMUL_TYPES),
    ("XLA clusters (fused elementwise ops)", (), ("_XlaRun", "_XlaCompile", "_XlaMerge", "XlaLaunch")),
    ("dropout (random numbers and masks)", ("dropout",), ()),
    ("GELU (exact, erf)", ("/Gelu/", "gelu"), ("Erf", "Erfc")),
    ("LayerNorm", ("LayerNorm", "layer_norm"), ("_MklLayerNorm",)),
    ("optimizer and clipping", ("adam_weight_decay", "lamb", "optimizer", "clip_by_global_norm"),
     ("ResourceApply*", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")),
    ("masking and sampling random numbers", (), ("StatelessRandom*", "RandomUniform*", "StatelessTruncated*")),
    ("softmax, log-probabilities and losses", ("softmax", "Softmax", "loss"),
     ("Softmax", "_MklSoftmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits", "Log", "Log1p", "Exp",
      "Softplus")),
    ("gathers, scatters and top-k", (), ("GatherV2", "ResourceGather", "GatherNd", "UnsortedSegmentSum",
                                          "ScatterNd", "TensorScatter*", "OneHot", "TopKV2")),
    ("casts", (), ("Cast", "_MklCast")),
    ("reshapes, transposes and copies", (), ("Reshape", "Transpose", "_MklTranspose", "ConcatV2", "Pack",
                                             "Slice", "StridedSlice", "Tile", "BroadcastTo", "Identity",
                                             "Fill", "Roll", "_MklToTf", "_MklReshape", "Split")),
    ("bias adds and their gradients", (), ("BiasAdd", "BiasAddGrad")),
)
OTHER = "other elementwise and reductions"
# Ops that only call others (their time is their children's).
CONTAINERS = ("PartitionedCall", "StatefulPartitionedCall", "While", "If", "StatelessIf", "StatelessWhile",
              "Case")


def type_matches(op_type, patterns):
    return any(op_type == p or (p.endswith("*") and op_type.startswith(p[:-1])) for p in patterns)


def kind_of(op_name, op_type):
    for kind, scopes, types in RULES:
        if any(scope in op_name for scope in scopes) or type_matches(op_type, types):
            return kind
    return OTHER


def op_times(xspace):
    """{(op name, op type): total microseconds} over the host plane's op events: TensorFlow names an op's
    execution "name:Type"; runtime events ("ExecutorState::Process", "EagerExecute") are skipped."""
    totals = collections.Counter()
    for plane in xspace.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "")
                op_name, sep, op_type = name.rpartition(":")
                if (not sep or not op_name or "::" in name or " " in name or op_type in CONTAINERS
                        or not (op_type[:1].isupper() or op_type.startswith("_"))):
                    continue
                totals[(op_name, op_type)] += event.duration_ps / 1e6
    return totals


def read_xspace(logdir):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = sorted(pathlib.Path(logdir).rglob("*.xplane.pb"))
    if not files:
        raise SystemExit(f"{logdir}: the profiler wrote no .xplane.pb file")
    xspace = xplane_pb2.XSpace()
    xspace.ParseFromString(files[-1].read_bytes())
    return xspace


def profile(args):
    """({(op name, op type): µs per step}, wall s per profiled step, [loss of every step]); the weights and
    random streams are seeded, so two runs in two processes train on the same numbers."""
    import keras
    import tensorflow as tf

    from bench.pretrain_step_cpu import build_tf_step

    keras.utils.set_random_seed(0)
    overrides = getattr(args, "model_hparams", None)  # a caller's own Namespace may lack it
    train_step, batch, _ = build_tf_step(args, args.precision, xla=False, model_size=args.model_size,
                                         model_overrides=overrides)
    losses = [float(train_step(batch)[0]) for _ in range(args.warmup)]
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        for _ in range(args.steps):
            losses.append(float(train_step(batch)[0]))
        wall = (time.perf_counter() - start) / args.steps
        tf.profiler.experimental.stop()
        totals = op_times(read_xspace(logdir))
    return {key: us / args.steps for key, us in totals.items()}, wall, losses


def by_op_type(per_step):
    """Counter {op type: µs per step} of profile()'s {(op name, op type): µs per step}."""
    totals = collections.Counter()
    for (_, op_type), us in per_step.items():
        totals[op_type] += us
    return totals


def report(per_step, wall, top=15, out=None):
    """Prints op time per step by kind and the top op types (to `out`, default stdout); returns
    {kind: µs per step}."""
    out = out or sys.stdout
    total = sum(per_step.values())
    by_kind, by_type = collections.Counter(), by_op_type(per_step)
    for (op_name, op_type), us in per_step.items():
        by_kind[kind_of(op_name, op_type)] += us
    print(f"wall {wall:.2f} s/step while profiled; ops {total / 1e6:.2f} s/step (summed)", file=out)
    print("| kind | op s/step | share |", file=out)
    print("|---|---|---|", file=out)
    for kind, us in by_kind.most_common():
        print(f"| {kind} | {us / 1e6:.3f} | {us / total:.1%} |", file=out)
    print(f"\ntop {top} op types:", file=out)
    print("| op type | op s/step | share |", file=out)
    print("|---|---|---|", file=out)
    for op_type, us in by_type.most_common(top):
        print(f"| {op_type} | {us / 1e6:.3f} | {us / total:.1%} |", file=out)
    return dict(by_kind)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--model-hparams", type=json.loads, default=None, metavar="JSON",
                        help='the size\'s model_hparam_overrides, e.g. \'{"num_layers": 1}\' (a quick look)')
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=2, help="profiled steps")
    parser.add_argument("--warmup", type=int, default=1, help="steps before profiling (the first compiles)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--inter-op-threads", type=int, default=1)
    parser.add_argument("--xla-fuse-elementwise", action="store_true",
                        help="the pretraining option xla_fuse_elementwise: XLA fuses the elementwise ops")
    parser.add_argument("--json", type=pathlib.Path,
                        help="also write JSON here: µs per step by kind and by op type, every step's loss, "
                             "wall seconds per profiled step")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if args.xla_fuse_elementwise:
        from training.xla_fusion import fuse_elementwise_with_xla

        fuse_elementwise_with_xla()  # before TensorFlow is imported

    from bench.pretrain_step_cpu import onednn_state
    from training.cpu_features import read_cpu_features

    print(f"CPU: {read_cpu_features().describe()}")
    per_step, wall, losses = profile(args)
    print(f"oneDNN: {onednn_state()}; {args.model_size}, {args.precision}, batch {args.batch_size} x "
          f"{args.seq_length}, {args.threads} threads, {args.steps} profiled steps after {args.warmup}")
    by_kind = report(per_step, wall)
    if args.json:
        args.json.write_text(json.dumps({"kinds": by_kind, "op_types": by_op_type(per_step), "losses": losses,
                                         "wall_s_per_step": wall}, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    from common.quiet import quiet_tensorflow

    quiet_tensorflow()  # as the commands start: TensorFlow's start-up lines hidden, its import lean
    main()
