"""Accelerator speed of one ELECTRA pretraining step under KERAS_BACKEND=jax (TensorFlow never imported).

    KERAS_BACKEND=jax python -m bench.pretrain_step_gpu --model-size electra_small --batch-size 1024 \\
        --seq-length 128 --precision mixed_bfloat16 [--steps 20] [--warmup 3] [--peak-tflops 989]

    # CPU smoke test of the script itself:
    KERAS_BACKEND=jax JAX_PLATFORMS=cpu python -m bench.pretrain_step_gpu --model-size electra_tiny \\
        --batch-size 8 --steps 2

The step is what a training loop runs: model.loss_denominators + model.train_loss_and_stats inside a
keras.StatelessScope (so the masking/sampling seed state and dropout seeds advance functionally), the
gradient by jax.value_and_grad, and the optimizer from pretrain.builder.build_optimizer applied with
optimizer.stateless_apply; all of it under one jax.jit with the state buffers donated. Batches are
synthetic (random token ids, 80% of rows full length), already on the device.

Reports sequences/s, tokens/s, the analytic TFLOP/s (bench/flops.py: matmuls as 2·m·n·k, backward =
2× forward, generator + discriminator) and its fraction of the device's dense bf16 peak (table below,
or --peak-tflops). Targets on one H100 at seq 128: electra_small ≥ 10,000 sequences/s, electra_base
≥ 2,000 sequences/s.
"""
import argparse
import json
import os
import sys
import time


os.environ.setdefault("KERAS_BACKEND", "jax")
from common.quiet import lean_keras_import  # noqa: E402
lean_keras_import()  # Keras without scikit-learn and matplotlib, as the commands import it

# Dense (no sparsity) bf16 tensor-core peaks, TFLOP/s, by a substring of jax's device_kind.
BF16_PEAK_TFLOPS = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),  # SXM
    ("A100", 312.0),
    ("L4", 121.0),
    ("V100", 125.0),  # fp16 tensor cores (no bf16 on V100)
)
CLS, SEP = 101, 102


def device_peak_tflops(device_kind):
    for name, peak in BF16_PEAK_TFLOPS:
        if name.lower() in device_kind.lower():
            return peak
    return None


def synthetic_batch(rng, batch_size, seq_length, vocab_size):
    import numpy as np

    input_ids = rng.integers(999 if vocab_size > 1000 else 4, vocab_size, (batch_size, seq_length))
    input_mask = np.ones((batch_size, seq_length), "int32")
    segment_ids = np.zeros((batch_size, seq_length), "int32")
    lengths = np.where(rng.random(batch_size) < 0.8, seq_length,
                       rng.integers(seq_length // 2, seq_length, batch_size))
    positions = np.arange(seq_length)[None, :]
    input_mask = (positions < lengths[:, None]).astype("int32")
    input_ids = np.where(input_mask == 1, input_ids, 0)
    input_ids[:, 0] = CLS
    input_ids[np.arange(batch_size), lengths - 1] = SEP
    middle = lengths // 2
    input_ids[np.arange(batch_size), middle] = SEP
    segment_ids = ((positions > middle[:, None]) & (input_mask == 1)).astype("int32")
    return {"input_ids": input_ids.astype("int32"), "input_mask": input_mask, "segment_ids": segment_ids}


def make_config(args, precision=None):
    """The PretrainingConfig of --model-size, --seq-length, --batch-size, --generator-hidden-size and (bench/
    gpu_speed.py's) --hparams, computing in `precision` (default --precision)."""
    from configs.pretraining_config import PretrainingConfig

    hparams = {"model_size": args.model_size, "max_seq_length": args.seq_length,
               "train_batch_size": args.batch_size, "mixed_precision": precision or args.precision}
    if args.generator_hidden_size is not None:
        hparams["generator_hidden_size"] = args.generator_hidden_size
    hparams.update(json.loads(getattr(args, "hparams", None) or "{}"))
    return PretrainingConfig.create(hparams)


def build(args, settings=None):
    """(config, pretrainer, built optimizer). With `settings` (training_jax.speed_settings.StepSettings) exactly
    as training_jax.pretrain builds a run: the config in the settings' precision, built and seeded by
    pretrain.builder.build_for_training, the step's options set by speed_settings.apply_to_step."""
    from pretrain.builder import build_for_training, build_optimizer, build_pretrainer

    if settings is None:
        config = make_config(args)
        model = build_pretrainer(config, dtype=config.mixed_precision)
        optimizer = build_optimizer(config)
        optimizer.build(model.trainable_variables)
        return config, model, optimizer
    from training_jax import speed_settings

    config = speed_settings.with_precision(make_config(args, settings.precision), settings)
    model, optimizer = build_for_training(config)
    speed_settings.apply_to_step(settings, model, optimizer)
    return config, model, optimizer


def make_train_step(model, optimizer):
    import jax

    from training_jax.step import make_step_fn

    return jax.jit(make_step_fn(model, optimizer), donate_argnums=(0,))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-size", default="electra_small",
                        help="a file in configs/model_sizes (electra_small, electra_base, electra_tiny, ...)")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--generator-hidden-size", type=float, default=None,
                        help="generator fraction (default: the model size's: 1/4 small, 1/3 base)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation)")
    parser.add_argument("--num-batches", type=int, default=4, help="distinct synthetic batches to cycle")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the device's dense bf16 peak (default: from a table by device kind)")
    args = parser.parse_args(argv)

    import keras

    if keras.backend.backend() != "jax":
        sys.exit(f"run with KERAS_BACKEND=jax (got {keras.backend.backend()})")
    import jax
    import numpy as np

    from bench.flops import config_breakdown, format_breakdown, train_flops

    device = jax.devices()[0]
    print("command: KERAS_BACKEND=jax " + " ".join([sys.executable, "-m", "bench.pretrain_step_gpu", *sys.argv[1:]]))
    print(f"device: {device.platform} {device.device_kind} (x{jax.device_count()}, this script uses one); "
          f"jax {jax.__version__}, keras {keras.__version__}")

    config, model, optimizer = build(args)
    generator = config.generator_model_config()
    print(f"model: {args.model_size} (discriminator hidden {config.model_config().hidden_size}, "
          f"generator hidden {generator.hidden_size} = fraction {config.generator_hidden_size}), "
          f"batch {args.batch_size} x seq {args.seq_length}, {config.max_predictions_per_seq} masked slots, "
          f"policy {args.precision}")
    breakdown = config_breakdown(config, args.seq_length)
    flops_per_sequence = train_flops(breakdown)
    print(format_breakdown(breakdown, "analytic FLOPs per sequence:"))

    rng = np.random.default_rng(0)
    batches = [{k: jax.device_put(v, device) for k, v in
                synthetic_batch(rng, args.batch_size, args.seq_length, config.vocab_size).items()}
               for _ in range(args.num_batches)]
    state = ([v.value for v in model.trainable_variables],
             [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    train_step = make_train_step(model, optimizer)

    start = time.perf_counter()
    state, loss, _ = train_step(state, batches[0])
    loss.block_until_ready()
    compile_s = time.perf_counter() - start
    for i in range(1, args.warmup):
        state, loss, _ = train_step(state, batches[i % len(batches)])
    loss.block_until_ready()
    start = time.perf_counter()
    for i in range(args.steps):
        state, loss, _ = train_step(state, batches[i % len(batches)])
    loss.block_until_ready()
    elapsed = time.perf_counter() - start

    step_s = elapsed / args.steps
    rate = args.batch_size / step_s
    achieved = rate * flops_per_sequence
    peak = args.peak_tflops or device_peak_tflops(device.device_kind)
    share = f"{achieved / (peak * 1e12):.1%} of {peak:g} TFLOP/s bf16 peak" if peak else \
        "n/a (unknown device peak: pass --peak-tflops)"
    print(f"first step (compile + run) {compile_s:.1f} s; last loss {float(loss):.4f} "
          f"(finite: {bool(np.isfinite(float(loss)))})")
    print("| model | precision | batch | seq | s/step | sequences/s | tokens/s | TFLOP/s | of peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.model_size} | {args.precision} | {args.batch_size} | {args.seq_length} | {step_s:.4f} | "
          f"{rate:,.1f} | {rate * args.seq_length:,.0f} | {achieved / 1e12:.3f} | {share} |")
    tensorflow_loaded = "tensorflow" in sys.modules
    print(f"tensorflow imported: {tensorflow_loaded}")
    if tensorflow_loaded:
        sys.exit("tensorflow was imported: this script must run without it")


if __name__ == "__main__":
    main()
