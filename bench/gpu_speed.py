"""Today's and the new JAX pretraining step side by side in one run, then the fine-tuning speed (issue 33).

    # on a GPU machine (JAX, Keras, NumPy; no TensorFlow); each variant compiles (about a minute at electra_small),
    # so name the ones to compare:
    KERAS_BACKEND=jax python -m bench.gpu_speed --model-size electra_small --batch-size 128 \\
        --precision mixed_bfloat16 --seconds 10 --variants 'today,new,new + bf16 softmax,new + rbg'
    # here, a smoke run of the script itself (tests/test_bench_gpu_speed.py runs it on a micro model):
    KERAS_BACKEND=jax JAX_PLATFORMS=cpu python -m bench.gpu_speed --model-size electra_tiny --batch-size 8 \\
        --seconds 2 --steps-per-dispatch 4

Variants of the same update (the same model, masking, sampling, losses and optimizer; the same numbers up to
float32 rounding, which tests/test_jax_pretraining.py, tests/test_optimization.py, tests/test_step_kernels.py and
tests/test_scan_layers.py check):
  today                 one dispatch per step, Q/K/V by three matmuls, Gumbel-max through top_k, AdamW per variable
  new                   what training_jax.pretrain runs by default on an accelerator: --steps-per-dispatch updates
                        per dispatch (lax.scan), one Q/K/V matmul, argmax
  new + scan_layers     and each encoder's layers as one scan over their stacked weights (--scan-layers: a
                        program that holds the layer once; compile seconds side by side)
  new + flat update     and AdamW on flat vectors with one global norm (training_jax.pretrain --flat-update)
  new + bf16 softmax    and the attention's scores, softmax and dropout in the compute dtype (bfloat16 under
                        mixed_bfloat16: no float32 [B,H,S,S]; training_jax.step.use_compute_dtype_softmax; the same
                        within bfloat16 rounding, tests/test_attention_dtype.py)
  new + rbg             and the random bits from XLA's RngBitGenerator instead of threefry (training_jax.rng; other
                        bits, the same distributions, tests/test_jax_rng.py)
and with --ablations "new" with each change taken out alone. Each variant compiles its own program: the first
block (compile + run) is reported apart, then steps/s over --seconds of blocks, its analytic TFLOP/s
(bench/flops.py) and share of the device's dense bf16 peak, and the lowered step's structure (dot_general,
sort/top_k and reduce counts), which the CPU can check too. Fine-tuning: bench/finetune_jax_speed.py.
"""
import argparse
import contextlib
import os
import re
import shlex
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

DEFAULT_CHANGES = ("blocks", "qkv", "argmax")  # what training_jax.pretrain runs on an accelerator
CHANGES = DEFAULT_CHANGES + ("scan_layers", "flat_update", "bf16_softmax", "rbg")


@contextlib.contextmanager
def step_pieces(changes):
    """Today's Q/K/V and top_k put back unless "qkv" / "argmax" are in `changes`, and RngBitGenerator's bits with
    "rbg", while a step is traced."""
    from model import attention
    from pretrain import sampling
    from training_jax.rng import DEFAULT_PRNG, use_prng

    saved = attention.SelfAttention.project_qkv, sampling.argmax_by_top_k
    if "qkv" not in changes:
        attention.SelfAttention.project_qkv = lambda self, hidden: (self.query(hidden), self.key(hidden),
                                                                    self.value(hidden))
    # the product picks by device (top_k on a CPU); a variant says which, wherever it runs
    sampling.argmax_by_top_k = lambda: "argmax" not in changes
    try:
        yield
    finally:
        attention.SelfAttention.project_qkv, sampling.argmax_by_top_k = saved
        use_prng(DEFAULT_PRNG)


def lowered_structure(lowered_text):
    """Counts in a lowered (StableHLO) program: matmuls, sorts / top_k, reductions."""
    return {"dot_general": len(re.findall(r"stablehlo\.dot_general", lowered_text)),
            "sort_or_top_k": len(re.findall(r"stablehlo\.sort|top_k|TopK", lowered_text)),
            "reduce": len(re.findall(r"stablehlo\.reduce[ (]", lowered_text))}


def measure_variant(args, name, changes, examples_np, device, timed=True):
    """{variant, steps_per_dispatch, compile_s, steps_per_s, structure, ...} of one way of stepping; with
    timed=False only the lowered step's structure (no compile)."""
    import jax
    import numpy as np

    from bench.pretrain_step_gpu import build
    from training_jax.pretrain import make_functions
    from training_jax.rng import DEFAULT_PRNG, use_prng
    from training_jax.step import use_compute_dtype_softmax, use_layer_scan

    with step_pieces(changes):
        config, model, optimizer = build(args)
        if hasattr(optimizer, "fused"):
            optimizer.fused = "flat_update" in changes
        use_layer_scan(model, "scan_layers" in changes)
        use_compute_dtype_softmax(model, "bf16_softmax" in changes)
        use_prng("rbg" if "rbg" in changes else DEFAULT_PRNG)  # after the build: the same initial weights
        train, _, zero_stats = make_functions(model, optimizer)
        examples = {k: jax.device_put(v, device) for k, v in examples_np.items()}
        state = jax.device_put(([v.value for v in model.trainable_variables],
                                [v.value for v in model.non_trainable_variables],
                                [v.value for v in optimizer.variables]), device)
        stats = jax.device_put(zero_stats(state, examples, args.batch_size), device)
        schedule = jax.device_put(np.array([1e6, 1e4], "float32"), device)
        k = args.steps_per_dispatch if "blocks" in changes else 1
        rng = np.random.default_rng(0)

        def indices():
            return jax.device_put(rng.integers(0, len(examples_np["input_ids"]), (k, args.batch_size))
                                  .astype("int32"), device)

        structure = lowered_structure(train.lower(state, stats, examples, indices(), schedule).as_text())
        if not timed:
            return {"variant": name, "steps_per_dispatch": k, "structure": structure}
        start = time.perf_counter()
        state, stats, loss = train(state, stats, examples, indices(), schedule)
        loss.block_until_ready()
        compile_s = time.perf_counter() - start
    blocks, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds or blocks < 2:
        state, stats, loss = train(state, stats, examples, indices(), schedule)
        blocks += 1
        if blocks % 8 == 0:
            loss.block_until_ready()
    loss.block_until_ready()
    elapsed = time.perf_counter() - start
    if args.profile:  # a device trace of one block (xplane.pb: open with xprof / TensorBoard's profile plugin)
        with jax.profiler.trace(os.path.join(args.profile, re.sub(r"\W+", "_", name))):
            state, stats, loss = train(state, stats, examples, indices(), schedule)
            loss.block_until_ready()
    return {"variant": name, "steps_per_dispatch": k, "compile_s": compile_s,
            "steps_per_s": blocks * k / elapsed, "loss": float(loss), "structure": structure}


def variants(ablations):
    """{name: changes}: today's, the default, the default with its layers scanned, with the flat update, with the
    attention in the compute dtype, with RngBitGenerator's bits; with
    `ablations` the default less each change."""
    chosen = {"today": (), "new": DEFAULT_CHANGES, "new + scan_layers": DEFAULT_CHANGES + ("scan_layers",),
              "new + flat update": DEFAULT_CHANGES + ("flat_update",),
              "new + bf16 softmax": DEFAULT_CHANGES + ("bf16_softmax",), "new + rbg": DEFAULT_CHANGES + ("rbg",)}
    if ablations:
        chosen.update({f"new without {change}": without(DEFAULT_CHANGES, change) for change in DEFAULT_CHANGES})
    return chosen


def without(changes, change):
    return tuple(c for c in changes if c != change)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--generator-hidden-size", type=float, default=None)
    parser.add_argument("--hparams", default=None, help="JSON of further PretrainingConfig fields (a micro model)")
    parser.add_argument("--steps-per-dispatch", type=int, default=25)
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per variant, after its compile")
    parser.add_argument("--examples", type=int, default=4096, help="synthetic examples resident on the device")
    parser.add_argument("--ablations", action="store_true", help="also new with each change taken out alone")
    parser.add_argument("--variants", default=None, help="comma-separated names to measure (default: all)")
    parser.add_argument("--no-finetuning", action="store_true")
    parser.add_argument("--finetune-args", default="--model-size electra_small --models 3 --before-models 1",
                        help="bench/finetune_jax_speed.py's arguments for the fine-tuning half")
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="also write a jax.profiler trace of one block of each variant under DIR/<variant>")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)

    import jax
    import keras
    import numpy as np

    from bench.flops import config_breakdown, train_flops
    from bench.pretrain_step_gpu import build, device_peak_tflops, synthetic_batch

    if keras.backend.backend() != "jax":
        sys.exit(f"run with KERAS_BACKEND=jax (got {keras.backend.backend()})")
    device = jax.devices()[0]
    print("command: KERAS_BACKEND=jax " + shlex.join([os.path.basename(sys.executable), "-m", "bench.gpu_speed",
                                                       *(argv if argv is not None else sys.argv[1:])]))
    print(f"device: {device.platform} {device.device_kind}; jax {jax.__version__}, keras {keras.__version__}, "
          f"numpy {np.__version__}; {time.strftime('%Y-%m-%d')}")
    config = build(args)[0]
    flops_per_step = train_flops(config_breakdown(config, args.seq_length)) * args.batch_size
    peak = args.peak_tflops or device_peak_tflops(device.device_kind)
    examples = synthetic_batch(np.random.default_rng(0), args.examples, args.seq_length, config.vocab_size)
    print(f"pretraining: {args.model_size}, batch {args.batch_size} x {args.seq_length}, {args.precision}, "
          f"{flops_per_step:.3e} FLOPs per step (bench/flops.py), peak {peak or 'unknown'} TFLOP/s")
    chosen = variants(args.ablations)
    names = args.variants.split(",") if args.variants else list(chosen)
    unknown = sorted(set(names) - set(chosen))
    if unknown:
        sys.exit(f"--variants: no variant {unknown}; give some of {', '.join(chosen)}")
    rows = [measure_variant(args, name, chosen[name], examples, device) for name in names]
    print("| variant | steps/dispatch | compile s | steps/s | x today | TFLOP/s | of bf16 peak | dot_general | "
          "sort/top_k | reduce |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        tflops = row["steps_per_s"] * flops_per_step / 1e12
        share = f"{tflops / peak:.1%}" if peak else "n/a"
        s = row["structure"]
        print(f"| {row['variant']} | {row['steps_per_dispatch']} | {row['compile_s']:.1f} | {row['steps_per_s']:.1f} | "
              f"{row['steps_per_s'] / rows[0]['steps_per_s']:.2f} | {tflops:.1f} | {share} | {s['dot_general']} | "
              f"{s['sort_or_top_k']} | {s['reduce']} |")
    if not all(np.isfinite(row["loss"]) for row in rows):
        sys.exit("a variant's loss is not finite")
    if not args.no_finetuning:
        finetuning(args)
    if "tensorflow" in sys.modules and sys.modules["tensorflow"] is not None:
        sys.exit("tensorflow was imported: this benchmark must run without it")
    return rows


def finetuning(args):
    """bench/finetune_jax_speed.py's side-by-side (the way before against one process for all models)."""
    from bench import finetune_jax_speed

    print(f"fine-tuning: python -m bench.finetune_jax_speed {args.finetune_args}", flush=True)
    return finetune_jax_speed.main(shlex.split(args.finetune_args))


if __name__ == "__main__":
    main()
