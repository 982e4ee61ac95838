"""CPU speed of one ELECTRA pretraining step: ours (Keras 3 on TensorFlow) against Hugging Face PyTorch.

    .venv/bin/python -m bench.pretrain_step_cpu [--steps 3] [--warmup 1] [--batch-size 128]
        [--variants tf-fp32-xla,tf-fp32,tf-bf16-xla,tf-bf16,hf-fp32] [--threads 2]
        [--model-size electra_small] [--model-hparams JSON]
    (also tf-fp32-fuse, tf-bf16-fuse: the config option xla_fuse_elementwise, training/xla_fusion.py;
    tf-fp32-3qkv, tf-bf16-3qkv: Q/K/V by three matmuls, as before model/attention.py's one-matmul projection;
    tf-fp32-bf16mm: float32 with the config's matmul_dtype "bfloat16" (the matmuls' operands in bfloat16,
    model/matmul.py; its "own-precision peak" the bfloat16 one);
    tf-fp32-eigen-gradients: the wide weight gradients on TensorFlow's Eigen kernels instead of oneDNN's
    (ELECTRA_MATMUL_GRADIENTS=eigen, common/matmul_gradients.py);
    tf-fp32-autodiff: LayerNorm's and GELU's gradients as autodiff builds them instead of the hand-written ones
    (ELECTRA_ELEMENTWISE_GRADIENTS=autodiff, model/elementwise_gradients.py);
    hf-bf16: Hugging Face's step with its forward passes under torch.autocast(bfloat16), the anchor of the bf16 rows)

One run measures, each in its own subprocess (so TensorFlow's and PyTorch's thread pools never
compete), one after the other:
- the machine's float32 and bfloat16 matmul peak (a 4096³ matmul, several reps, in PyTorch and in
  TensorFlow; the higher of the two is "the machine's measured peak"); the bfloat16 peak only where the
  CPU has native bfloat16 (AVX512_BF16 or AMX-BF16, from /proc/cpuinfo): emulated, PyTorch's took more than
  6 minutes on a Zen 3 (--force-bf16-peak measures it anyway);
- our training step: build_pretrainer(PretrainingConfig electra_small, generator fraction 1/4), the
  optimizer from pretrain.builder.build_optimizer, GradientTape over loss_denominators +
  train_loss_and_stats, apply_gradients, all under one tf.function (XLA on or off; `-fuse`: XLA for
  the elementwise ops only, the matmuls on oneDNN), float32 or
  mixed_bfloat16, on a synthetic batch of random token ids with a realistic input_mask;
- the same step assembled from transformers' PyTorch ELECTRA classes: ElectraForMaskedLM generator
  (hidden 64, 1 head, FFN 256) sharing the embeddings module of ElectraForPreTraining (hidden 256,
  4 heads, FFN 1024), both 12 layers, embedding 128, vocab 30522; 15% masking (19 positions per
  sequence, 85% [MASK]), Gumbel-max sampling without gradient, loss = MLM + 50·RTD, torch.optim.AdamW.

Throughput is timed over --steps steps after --warmup steps (the first one includes compilation).
FLOPs are analytic (bench/flops.py: matmuls as 2·m·n·k, backward = 2× forward); the table gives
sequences/s, tokens/s, TFLOP/s achieved (analytic FLOPs × sequences/s), the fraction of the measured
peak of the variant's precision and of the float32 peak, and the ratios to the Hugging Face steps (fp32, bf16).
--model-size / --model-hparams change our model (the tf- variants only: the Hugging Face step is
electra_small's), e.g. a micro model for a smoke run (tests/test_bench_modules.py).
"""
import argparse
import contextlib
import json
import os
import shlex
import sys
import time

from bench.worker_process import print_result, run_worker


VARIANTS = ("tf-fp32-xla", "tf-fp32", "tf-fp32-fuse", "tf-bf16-xla", "tf-bf16", "tf-bf16-fuse", "hf-fp32",
            "hf-bf16", "tf-fp32-3qkv", "tf-bf16-3qkv", "tf-fp32-bf16mm", "tf-fp32-eigen-gradients",
            "tf-fp32-autodiff")
DEFAULT_VARIANTS = "tf-fp32-xla,tf-fp32,tf-bf16-xla,tf-bf16,hf-fp32"
PEAK_N = 4096
PEAK_REPS = 5
CLS, SEP, MASK = 101, 102, 103
VOCAB = 30522


def synthetic_batch(batch_size, seq_length, seed=0):
    """Random WordPiece ids; 80% of the rows fill the whole length, the rest are 50-100% full.

    [CLS] first, [SEP] after each of two segments, padding 0 after the end (what the dataset builder
    writes: most examples are packed to the full length).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    input_ids = np.zeros((batch_size, seq_length), "int32")
    input_mask = np.zeros((batch_size, seq_length), "int32")
    segment_ids = np.zeros((batch_size, seq_length), "int32")
    for row in range(batch_size):
        full = rng.random() < 0.8
        length = seq_length if full else int(rng.integers(seq_length // 2, seq_length))
        middle = int(rng.integers(2, length - 2))
        input_ids[row, :length] = rng.integers(999, VOCAB, length)
        input_ids[row, 0] = CLS
        input_ids[row, middle] = SEP
        input_ids[row, length - 1] = SEP
        input_mask[row, :length] = 1
        segment_ids[row, middle + 1:length] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def timed_steps(run_step, warmup, steps):
    """(first step s, [timed step wall s], [timed step CPU s of this process, all threads]).

    run_step must block until the step is done. CPU seconds ≈ threads × wall when the process had the
    cores to itself; wall well above CPU/threads means it waited for cores (other load).
    """
    start = time.perf_counter()
    run_step()
    first = time.perf_counter() - start
    for _ in range(warmup - 1):
        run_step()
    times, cpu_times = [], []
    for _ in range(steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        run_step()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return first, times, cpu_times


@contextlib.contextmanager
def three_qkv_matmuls():
    """Q/K/V by three Dense layers, as before model/attention.py's one-matmul projection, and the Gumbel-max
    sample by argmax (not top_k), while a step is traced: the "-3qkv" variants (formerly
    bench.gpu_speed.step_pieces(("argmax",)), moved here with its only user)."""
    from model import attention
    from pretrain import sampling
    from training_jax.rng import DEFAULT_PRNG, use_prng

    saved = attention.SelfAttention.project_qkv, sampling.argmax_by_top_k
    attention.SelfAttention.project_qkv = lambda self, hidden: (self.query(hidden), self.key(hidden),
                                                                self.value(hidden))
    sampling.argmax_by_top_k = lambda: False
    try:
        yield
    finally:
        attention.SelfAttention.project_qkv, sampling.argmax_by_top_k = saved
        use_prng(DEFAULT_PRNG)


# ---------------------------------------------------------------------------------------- workers
def peak_precisions(args):
    return ("fp32", "bf16") if args.bf16_peak else ("fp32",)


def worker_peak_torch(args):
    import torch

    torch.set_num_threads(args.threads)
    result = {}
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    for name in peak_precisions(args):
        dtype = dtypes[name]
        a = torch.randn(PEAK_N, PEAK_N).to(dtype)
        b = torch.randn(PEAK_N, PEAK_N).to(dtype)
        torch.matmul(a, b)
        best = float("inf")
        for _ in range(PEAK_REPS):
            start = time.perf_counter()
            torch.matmul(a, b)
            best = min(best, time.perf_counter() - start)
        result[name] = 2 * PEAK_N ** 3 / best
    return result


def configure_tensorflow(threads, inter_op_threads=1):
    """intra-op = the cores; inter-op 1: with 2 cores, two concurrent ops that each spread over both
    cores oversubscribe them (measured: 1 inter-op thread is ~1.4x faster than 2 for this step)."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads)
    except RuntimeError:  # TensorFlow already ran (a test process): its pools stay; benchmark workers are fresh
        pass
    return tf


def onednn_state():
    """Whether this process's TensorFlow runs its oneDNN kernels, as TensorFlow itself reports it."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # a private module: say so rather than guess
        return "unknown"
    setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")
    return f"{'on' if _pywrap_util_port.IsMklEnabled() else 'off'} (TF_ENABLE_ONEDNN_OPTS {setting})"


def worker_peak_tf(args):
    tf = configure_tensorflow(args.threads, args.inter_op_threads)
    result = {}
    dtypes = {"fp32": tf.float32, "bf16": tf.bfloat16}
    for name in peak_precisions(args):
        dtype = dtypes[name]
        a = tf.cast(tf.random.normal((PEAK_N, PEAK_N)), dtype)
        b = tf.cast(tf.random.normal((PEAK_N, PEAK_N)), dtype)
        tf.matmul(a, b).numpy()
        best = float("inf")
        for _ in range(PEAK_REPS):
            start = time.perf_counter()
            tf.matmul(a, b).numpy()
            best = min(best, time.perf_counter() - start)
        result[name] = 2 * PEAK_N ** 3 / best
    return result


def build_tf_step(args, precision, xla, model_size="electra_small", model_overrides=None, matmul_dtype="float32"):
    """(train_step, batch, config): our whole pretraining step (forward, backward, optimizer) as one
    tf.function over a fixed synthetic batch; shared with bench/profile_step_cpu.py (model_overrides: its
    --model-hparams)."""
    tf = configure_tensorflow(args.threads, args.inter_op_threads)

    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_optimizer, build_pretrainer

    policy = "mixed_bfloat16" if precision == "bf16" else "float32"
    config = PretrainingConfig.create({
        "model_size": model_size, "max_seq_length": args.seq_length,
        "train_batch_size": args.batch_size, "mixed_precision": policy, "use_xla": xla,
        "matmul_dtype": matmul_dtype, "model_hparam_overrides": model_overrides or {}})
    from common.matmul_gradients import route_weight_gradients

    route_weight_gradients()  # as training/loop.py's run does on a CPU, before the step is traced
    model = build_pretrainer(config, dtype=config.mixed_precision)
    optimizer = build_optimizer(config)
    optimizer.build(model.trainable_variables)
    batch = {k: tf.constant(v) for k, v in synthetic_batch(args.batch_size, args.seq_length).items()}

    @tf.function(jit_compile=xla)
    def train_step(batch):
        denominators = model.loss_denominators(batch)
        with tf.GradientTape() as tape:
            loss, stats = model.train_loss_and_stats(batch, denominators)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, stats

    return train_step, batch, config


def worker_tf(args, precision, xla, matmul_dtype="float32"):
    import keras
    import tensorflow as tf

    from bench.flops import train_flops_per_sequence
    from common import matmul_gradients
    from model import elementwise_gradients

    train_step, batch, config = build_tf_step(args, precision, xla, args.model_size, json.loads(args.model_hparams),
                                              matmul_dtype)
    if args.model_size == "electra_small":
        assert config.generator_hidden_size == 0.25, config.generator_hidden_size
    generator = config.generator_model_config()
    losses = []

    def run_step():
        loss, _ = train_step(batch)
        losses.append(float(loss))

    first, times, cpu_times = timed_steps(run_step, args.warmup, args.steps)
    return {"first_step_s": first, "step_times_s": times, "step_cpu_s": cpu_times, "losses": losses,
            "flops_per_sequence": train_flops_per_sequence(config, args.seq_length),
            "generator": f"hidden {generator.hidden_size}, {generator.num_heads} head(s), "
                         f"FFN {generator.intermediate_size}, fraction {config.generator_hidden_size}",
            "onednn": onednn_state(), "tf_xla_flags": os.environ.get("TF_XLA_FLAGS", ""),
            "eigen_weight_gradients": matmul_gradients.installed(),
            "elementwise_gradients": "by hand" if elementwise_gradients.by_hand(True) else "autodiff",
            "tensorflow": tf.__version__, "keras": keras.__version__}


def hf_electra_pair(discriminator_config, generator_config, seed=0):
    """(discriminator, generator): transformers' ElectraForPreTraining and ElectraForMaskedLM at our towers' sizes
    (configs.model_config.ModelConfig each), the generator using the discriminator's embeddings module and its
    word table as output table, as our pretrainer shares them. Shared with bench/gpu_speed.py's HF row."""
    import torch
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    def electra_config(tower):
        return ElectraConfig(vocab_size=tower.vocab_size, embedding_size=tower.embedding_size,
                             hidden_size=tower.hidden_size, num_hidden_layers=tower.num_layers,
                             num_attention_heads=tower.num_heads, intermediate_size=tower.intermediate_size,
                             max_position_embeddings=tower.max_position_embeddings,
                             type_vocab_size=tower.type_vocab_size, hidden_act="gelu",
                             hidden_dropout_prob=tower.dropout, attention_probs_dropout_prob=tower.attention_dropout,
                             layer_norm_eps=tower.layer_norm_epsilon)

    torch.manual_seed(seed)
    discriminator = ElectraForPreTraining(electra_config(discriminator_config))
    generator = ElectraForMaskedLM(electra_config(generator_config))
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.tie_weights()  # the generator's output table is the shared word table
    discriminator.train()
    generator.train()
    return discriminator, generator


def hf_pretraining_step(discriminator, generator, batch, num_predictions, device="cpu", autocast_dtype=None,
                        fused_adamw=False):
    """run_step() -> the loss tensor (not synchronised): one ELECTRA update of transformers' pair on the NumPy
    `batch` (moved to `device`): 15%-style masking of `num_predictions` positions (85% [MASK]), Gumbel-max
    sampling without gradient, loss = MLM + 50 RTD, torch.optim.AdamW; the forward passes under autocast to
    `autocast_dtype` when given (bfloat16 on CUDA)."""
    import contextlib

    import torch

    discriminator.to(device)
    generator.to(device)
    params = {id(p): p for p in list(discriminator.parameters()) + list(generator.parameters())}
    optimizer = torch.optim.AdamW(list(params.values()), lr=5e-4, betas=(0.9, 0.999), eps=1e-6,
                                  weight_decay=0.01, **({"fused": True} if fused_adamw else {}))
    batch = {k: torch.from_numpy(v).long().to(device) for k, v in batch.items()}
    input_ids, input_mask, segment_ids = batch["input_ids"], batch["input_mask"], batch["segment_ids"]

    def autocast():
        if autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=torch.device(device).type, dtype=autocast_dtype)

    def run_step():
        batch_size = input_ids.shape[0]
        candidates = (input_mask == 1) & (input_ids != CLS) & (input_ids != SEP) & (input_ids != MASK)
        positions = torch.multinomial(candidates.float(), num_predictions, replacement=True)
        original = torch.gather(input_ids, 1, positions)
        use_mask = torch.rand(batch_size, num_predictions, device=device) < 0.85
        masked_ids = input_ids.scatter(1, positions, torch.where(use_mask, MASK, original))
        labels = torch.full_like(input_ids, -100).scatter(1, positions, original)
        with autocast():
            generator_out = generator(input_ids=masked_ids, attention_mask=input_mask,
                                      token_type_ids=segment_ids, labels=labels)
            with torch.no_grad():
                logits = torch.gather(generator_out.logits, 1,
                                      positions[:, :, None].expand(-1, -1, generator_out.logits.shape[-1]))
                uniform = torch.rand_like(logits, dtype=torch.float32)
                sampled = torch.argmax(logits.float() - torch.log(-torch.log(uniform + 1e-9) + 1e-9), dim=-1)
                fake_ids = input_ids.scatter(1, positions, sampled)
                fake_labels = (fake_ids != input_ids).long()
            disc_out = discriminator(input_ids=fake_ids, attention_mask=input_mask, token_type_ids=segment_ids,
                                     labels=fake_labels)
            loss = generator_out.loss + 50.0 * disc_out.loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return run_step


def worker_hf(args, precision="fp32"):
    import torch
    import transformers

    from configs.pretraining_config import PretrainingConfig

    torch.set_num_threads(args.threads)
    config = PretrainingConfig.create({"model_size": "electra_small", "max_seq_length": args.seq_length})
    discriminator, generator = hf_electra_pair(config.model_config(), config.generator_model_config())
    step = hf_pretraining_step(discriminator, generator, synthetic_batch(args.batch_size, args.seq_length),
                               config.max_predictions_per_seq,
                               autocast_dtype=torch.bfloat16 if precision == "bf16" else None)
    losses = []

    def run_step():
        losses.append(float(step()))

    first, times, cpu_times = timed_steps(run_step, args.warmup, args.steps)
    return {"first_step_s": first, "step_times_s": times, "step_cpu_s": cpu_times, "losses": losses,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "note": "ElectraForMaskedLM computes the vocabulary projection at every position "
                    "(its forward has no masked-position gather)"}


def run_in_worker(args):
    """The worker side: measures the named setting in this process and prints its RESULT line."""
    name = args.worker
    if name == "peak-torch":
        result = worker_peak_torch(args)
    elif name == "peak-tf":
        result = worker_peak_tf(args)
    elif name.startswith("tf-"):
        if name.endswith("-eigen-gradients"):
            from common.matmul_gradients import ENV

            os.environ[ENV] = "eigen"
        if name.endswith("-autodiff"):
            from model.elementwise_gradients import ENV

            os.environ[ENV] = "autodiff"
        if name.endswith("-fuse"):
            from training.xla_fusion import fuse_elementwise_with_xla

            fuse_elementwise_with_xla(quiet=True)  # before worker_tf imports TensorFlow
        with contextlib.ExitStack() as stack:
            if name.endswith("-3qkv"):  # Q/K/V by three matmuls, as before the one-matmul projection
                stack.enter_context(three_qkv_matmuls())
            result = worker_tf(args, "bf16" if name.startswith("tf-bf16") else "fp32", name.endswith("-xla"),
                               "bfloat16" if name.endswith("-bf16mm") else "float32")
    elif name in ("hf-fp32", "hf-bf16"):
        result = worker_hf(args, name[3:])  # hf-bf16: the forward passes under torch.autocast(bfloat16)
    else:
        raise SystemExit(f"unknown worker {name}")
    print_result(result)


# ---------------------------------------------------------------------------------------- parent
def spawn_worker(module, name, worker_args, threads):
    """Runs `python -m <module> --worker <name> <worker_args>` in a fresh process (its own thread pools) and
    returns its measurement (bench.worker_process), or None after printing why it failed."""
    command = [sys.executable, "-m", module, "--worker", name, *map(str, worker_args)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow", OMP_NUM_THREADS=str(threads))
    return run_worker(command, env, name, exit_on_failure=False)


def spawn(name, args):
    worker_args = ["--threads", args.threads, "--inter-op-threads", args.inter_op_threads,
                   "--batch-size", args.batch_size, "--seq-length", args.seq_length,
                   "--steps", args.steps, "--warmup", args.warmup, "--model-size", args.model_size,
                   "--model-hparams", args.model_hparams] + (["--bf16-peak"] if args.bf16_peak else [])
    start = time.perf_counter()
    result = spawn_worker("bench.pretrain_step_cpu", name, worker_args, args.threads)
    if result is not None:
        print(f"[{name}] done in {time.perf_counter() - start:.0f} s: "
              + json.dumps({k: v for k, v in result.items() if k not in ("losses",)}), flush=True)
    return result


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[:3]
    except OSError:
        return ["?"] * 3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help=f"comma-separated, from {', '.join(VARIANTS)}")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (compilation)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--inter-op-threads", type=int, default=1, help="TensorFlow inter-op threads")
    parser.add_argument("--no-peak", action="store_true", help="skip the matmul peak measurement")
    parser.add_argument("--force-bf16-peak", action="store_true",
                        help="measure the bfloat16 matmul peak even where the CPU emulates bfloat16 (slow: "
                             "minutes)")
    parser.add_argument("--model-size", default="electra_small",
                        help="our model's size (configs/model_sizes; the tf- variants only)")
    parser.add_argument("--model-hparams", default="{}", help="model_hparam_overrides as JSON (the tf- variants)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--bf16-peak", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return run_in_worker(args)

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}")
    if {"hf-fp32", "hf-bf16"} & set(variants) and (args.model_size != "electra_small" or json.loads(args.model_hparams)):
        parser.error("hf-fp32 and hf-bf16 are electra_small's step: it cannot be compared at another --model-size or "
                     "--model-hparams")
    print("command: " + " ".join(shlex.quote(a) for a in [sys.executable, "-m", "bench.pretrain_step_cpu", *sys.argv[1:]]))
    from training.cpu_features import read_cpu_features

    cpu = read_cpu_features()
    args.bf16_peak = cpu.native_bf16 or args.force_bf16_peak
    print(f"CPU: {cpu.describe()}")
    print(f"TensorFlow's oneDNN kernels by default on this CPU: {'on' if cpu.tf_onednn_by_default else 'off'}; "
          f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')} here (bench/ sets it as "
          "run_pretraining.py does; each TensorFlow variant reports the state it ran with)")
    print(f"machine: {cpu.model}, {os.cpu_count()} cores, threads used {args.threads}; "
          f"TF inter-op threads {args.inter_op_threads}; load average at start {' '.join(loadavg())}")
    print(f"batch {args.batch_size} x seq {args.seq_length}, {args.warmup} warm-up + {args.steps} timed steps")

    from bench.flops import config_breakdown, format_breakdown, train_flops
    from configs.pretraining_config import PretrainingConfig

    config = PretrainingConfig.create({"model_size": args.model_size, "max_seq_length": args.seq_length,
                                       "model_hparam_overrides": json.loads(args.model_hparams)})
    breakdown = config_breakdown(config)
    flops_per_sequence = train_flops(breakdown)
    print(format_breakdown(breakdown, f"analytic FLOPs, {args.model_size} (the same for both implementations):"))

    peaks = {"fp32": None, "bf16": None}
    if not args.no_peak:
        if not args.bf16_peak:
            print("bfloat16 matmul peak skipped: bfloat16 is emulated here (no avx512_bf16 or amx_bf16, or an ISA "
                  "cap in the environment); --force-bf16-peak measures it anyway (minutes)")
        for name in ("peak-torch", "peak-tf"):
            result = spawn(name, args)
            if result:
                for precision in result:
                    print(f"  {name} {precision}: {result[precision] / 1e12:.3f} TFLOP/s")
                    peaks[precision] = max(peaks[precision] or 0.0, result[precision])
        shown = ", ".join(f"{p} {peaks[p] / 1e12:.3f} TFLOP/s" for p in peaks if peaks[p])
        print(f"measured matmul peak ({PEAK_N}^3, best of {PEAK_REPS}, higher of torch/TF): {shown or 'failed'}")

    results = {}
    for name in variants:
        results[name] = spawn(name, args)

    hf_rates = {precision: args.batch_size / (sum(hf["step_times_s"]) / len(hf["step_times_s"]))
                for precision in ("fp32", "bf16") if (hf := results.get(f"hf-{precision}"))}
    print()
    print(f"load average at end {' '.join(loadavg())}")
    header = (f"| variant | s/step (mean of {args.steps}) | CPU s/step | first step s | sequences/s | "
              f"tokens/s | TFLOP/s | % of fp32 peak | % of own-precision peak | × HF fp32 | × HF bf16 |")
    print(header)
    print("|" + "---|" * 11)
    for name in variants:
        result = results[name]
        if not result:
            print(f"| {name} | failed | | | | | | | | | |")
            continue
        mean = sum(result["step_times_s"]) / len(result["step_times_s"])
        rate = args.batch_size / mean
        achieved = rate * flops_per_sequence
        own_peak = peaks["bf16"] if "bf16" in name else peaks["fp32"]
        fp32_share = f"{achieved / peaks['fp32']:.1%}" if peaks["fp32"] else "n/a"
        own_share = f"{achieved / own_peak:.1%}" if own_peak else "n/a"
        ratios = " | ".join(f"{rate / hf_rates[p]:.2f}" if p in hf_rates else "n/a" for p in ("fp32", "bf16"))
        cpu = sum(result["step_cpu_s"]) / len(result["step_cpu_s"])
        print(f"| {name} | {mean:.2f} | {cpu:.1f} | {result['first_step_s']:.1f} | {rate:.1f} | "
              f"{rate * args.seq_length:,.0f} | {achieved / 1e12:.3f} | {fp32_share} | {own_share} | {ratios} |")
    print(f"(FLOPs per sequence {flops_per_sequence:.3e}, analytic, see bench/flops.py; tokens/s counts "
          f"padded positions; CPU s/step = CPU time of the benchmark process, all threads: about "
          f"{args.threads} x s/step when nothing else competed for the cores)")


if __name__ == "__main__":
    main()
