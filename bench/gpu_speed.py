"""The JAX pretraining step's speed on this device, bounded in time, every row kept as it is measured (issue 42).

    # a GPU window (one call of at most 10 minutes; python -m bench.gpu_window): from the repository root
    KERAS_BACKEND=jax python3 -m bench.gpu_speed --out $OUT/bench --max-seconds 220
    # here, a smoke run (tests/test_bench_gpu_speed.py runs a micro model):
    KERAS_BACKEND=jax JAX_PLATFORMS=cpu python -m bench.gpu_speed --model-size electra_tiny --batch-size 8 \\
        --seconds 2 --max-seconds 120 --no-finetuning

A GPU window is rare and short, and a run cut off at its limit used to lose every number, so:
- the run is bounded (--max-seconds, default 150 s from the start of main(), JAX's import included): before each
  measurement it estimates what that one needs (a JAX variant: the previous JAX variant's build + compile +
  timed window, the first one a guess from the depth, --first-estimate; Hugging Face's row: its window + 20 s
  of start-up; the fine-tuning half: --finetune-estimate) and skips what would not fit, printing "skipped: would
  not fit (needs ~X s, Y s left)". It ends inside its bound, plus at most one measurement's overrun where its
  estimate was short (a measurement, once started, runs to its end), plus the final table;
- every row is printed the moment it is measured and appended, one JSON object a line, flushed and fsynced, to
  --out/gpu_speed.jsonl (default $OUT, else runs/gpu_speed): a header record first (device, versions, command,
  date, the defaults), then one record per row or skip. The markdown table at the end is printed from the rows;
  nothing depends on reaching it.

The rows, in this order:
  hf                         Hugging Face's PyTorch ELECTRA (ElectraForPreTraining + ElectraForMaskedLM at our
                             config's sizes, the replaced-token-detection update of bench/pretrain_step_cpu.py's
                             worker_hf: bf16 autocast and fused AdamW on CUDA, float32 on a CPU) in its own process
                             (bench/worker_process.run_worker: torch and JAX never share one), steps/s over the same
                             window after 3 warm-up steps. First: it compiles nothing, and every JAX row after it
                             shows "x HF". Missing torch / transformers, or CUDA where JAX sees a GPU: said in its row.
  defaults                   exactly what training_jax.pretrain runs on this platform: training_jax.speed_settings.
                             resolve(platform), the config in its precision (with_precision), the options set by
                             apply_to_step, K = the log window's updates per dispatch (default_block_steps)
  defaults +/- fused_attention, defaults +/- scan_layers: the options the product has still to decide
  defaults +/- flat_update, +/- rbg (prng threefry2x32), - bf16_attention, - blocks (one update per dispatch),
  defaults in float32 (or in mixed_bfloat16): each ablation alone
(--variants names which, comma-separated; a variant whose option does not import prints "skipped: not available
(<error>)"; one that fails prints "failed: <error>" and the run goes on.)

Per JAX row: compile_s from before tracing (the metric-sum's shapes, then jit(...).lower()) to the end of the
first block, with lower_s (tracing + lowering) and xla_s (.compile()) apart; steps/s over --seconds of blocks
after it (the compiled object called, one block in flight while the host waits for the one before); TFLOP/s by
bench/flops.py's analytic count and its share of the device's dense bf16 peak; the loss; the lowered step's
dot_general / sort / reduce counts. After the rows the fine-tuning half (bench/finetune_jax_speed.py's main) when
it fits (--no-finetuning leaves it out). TensorFlow is kept out of this process, as the GPU image has none
(Keras's seeding would import it where it is installed). JAX preallocates most of the GPU's memory at start-up;
Hugging Face's worker uses what is left (a quarter of an H200: ample at electra_small, batch 128).
"""
import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import re
import shlex
import sys
import time
import traceback

os.environ.setdefault("KERAS_BACKEND", "jax")
from common.quiet import lean_keras_import  # noqa: E402
lean_keras_import()  # Keras without scikit-learn and matplotlib, as the commands import it

from training_jax.speed_settings import platform_of  # noqa: E402  (after the backend is set)

JSONL = "gpu_speed.jsonl"
DEFAULT_OUT = "runs/gpu_speed"
HF_STARTUP_GUESS_S = 20.0  # torch + transformers imports, the models, CUDA's start, 3 warm-up steps
HF_WARMUP_STEPS = 3
COMPILE_GUESS_S_PER_LAYER = 3.0  # the H200 compiled electra_small's 24 layers (both towers) in 76 s
BUILD_GUESS_S = 15.0  # building the model and tracing, before XLA compiles
FINETUNE_GUESS_S = 300.0  # bench/finetune_jax_speed.py's default: two run_finetuning.py processes, each compiling
# Each option toggled alone after the defaults, the latest decided (fused_attention) first, then flat_update as
# before: the second H200 window (2026-11-30) made fused_attention a GPU default (73.3 steps/s against 68.3) and
# left scan_layers off (42.1: it compiled in 38 s against 64 but ran slower), so scan_layers comes last, for its
# compile time.
TOGGLED_FIRST = ("fused_attention", "flat_update")
TOGGLED_LAST = ("scan_layers",)


# ---------------------------------------------------------------------------------------- the time bound
class Budget:
    """The run's wall-clock bound: what is left, and whether a measurement needing `needed` seconds fits."""

    def __init__(self, max_seconds):
        self.max_seconds = max_seconds
        self.start = time.perf_counter()

    def elapsed(self):
        return time.perf_counter() - self.start

    def left(self):
        return float("inf") if not self.max_seconds else self.max_seconds - self.elapsed()

    def fits(self, needed):
        return needed <= self.left()


def skip_reason(budget, needed):
    """None when `needed` seconds fit in what is left, else the skipped row's fields: the line the run prints and
    the two figures unrounded (the line rounds them, so "needs ~14 s, 14 s left" can be a true skip)."""
    if budget.fits(needed):
        return None
    left = max(budget.left(), 0.0)
    return {"reason": f"skipped: would not fit (needs ~{needed:.0f} s, {left:.0f} s left)",
            "needs_s": needed, "left_s": left}


def first_guess(config, seconds):
    """A guess of the first JAX variant's build + compile + window from the towers' depth (97 s at electra_small,
    about what the H200's 76 s compile of the earlier step and 10 s of steps add up to), so that the window's
    150 s hold Hugging Face's row and the defaults."""
    layers = config.model_config().num_layers + config.generator_model_config().num_layers
    return BUILD_GUESS_S + COMPILE_GUESS_S_PER_LAYER * layers + seconds


# ---------------------------------------------------------------------------------------- rows kept as they come
class RowLog:
    """DIR/gpu_speed.jsonl, appended one record a line, each flushed and fsynced before the run goes on."""

    def __init__(self, folder):
        self.path = pathlib.Path(folder) / JSONL
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record):
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(json.dumps(record, default=str) + "\n")
            file.flush()
            os.fsync(file.fileno())


def default_out():
    return os.environ.get("OUT") or DEFAULT_OUT


# ---------------------------------------------------------------------------------------- variants
def toggled(name, on):
    return f"defaults {'+' if on else '-'} {name}"


def variant_overrides(defaults, platform):
    """{name: the settings given on top of the defaults}: the defaults, then each option toggled alone (the order
    of TOGGLED_FIRST, then the other ablations, then TOGGLED_LAST)."""
    from training_jax.pretrain import default_block_steps

    chosen = {"defaults": {}}

    def toggle_alone(option):  # a boolean setting flipped from the defaults
        chosen[toggled(option, not getattr(defaults, option))] = {option: not getattr(defaults, option)}

    for option in TOGGLED_FIRST:
        toggle_alone(option)
    rbg_on = defaults.prng != "rbg"
    chosen[toggled("rbg", rbg_on)] = {"prng": "rbg" if rbg_on else "threefry2x32"}
    if defaults.precision == "mixed_bfloat16":  # bf16 attention does nothing under float32
        chosen[toggled("bf16_attention", not defaults.bf16_attention)] = {"bf16_attention": not defaults.bf16_attention}
    blocks_on = block_steps(defaults, platform) == 1  # on a CPU: the accelerator's K
    chosen[toggled("blocks", blocks_on)] = {"steps_per_dispatch": default_block_steps("gpu", log_every()) if blocks_on
                                            else 1}
    other = "float32" if defaults.precision == "mixed_bfloat16" else "mixed_bfloat16"
    chosen[f"defaults in {other}"] = {"precision": other}
    for option in TOGGLED_LAST:
        toggle_alone(option)
    return chosen


def log_every():
    """The log window of run_pretraining.py's default config (its updates per dispatch divide it)."""
    from configs.pretraining_config import PretrainingConfig

    return PretrainingConfig.iterations_per_loop


def block_steps(settings, platform):
    """Updates per dispatch as training_jax.pretrain.Run resolves them for that log window."""
    from training_jax.pretrain import default_block_steps

    return settings.steps_per_dispatch or default_block_steps(platform, log_every())


def resolve_settings(args, platform, overrides=None):
    """StepSettings of this run's flags on `platform` with `overrides`; --precision auto: the product's choice for a
    config computing in mixed_bfloat16 (mixed_bfloat16 on every platform)."""
    from training_jax import speed_settings

    given = {"precision": args.precision, "steps_per_dispatch": args.steps_per_dispatch, **(overrides or {})}
    return speed_settings.resolve(platform, "mixed_bfloat16", **given)


def unavailable(settings):
    """None, or why this variant's options cannot run in this checkout (an option still being built)."""
    if not settings.fused_attention:
        return None
    try:
        import training_jax.flash_attention  # noqa: F401
        from training_jax.step import use_fused_attention  # noqa: F401
    except Exception as error:  # an ImportError, or a module that fails as it loads
        return f"skipped: not available ({type(error).__name__}: {error})"
    return None


# ---------------------------------------------------------------------------------------- one JAX variant
class PreparedStep:
    """A variant's model built the way the product builds it, its state, examples and index batches on the
    device, and its block function (training_jax.pretrain.make_functions), not yet traced."""

    def __init__(self, args, settings, examples_np, device):
        import jax
        import numpy as np

        from bench.pretrain_step_gpu import build
        from training_jax.pretrain import make_functions
        from training_jax.rng import DEFAULT_PRNG, use_prng

        use_prng(DEFAULT_PRNG)  # a fresh process's bits for the initial weights, whatever the last variant set
        self.config, model, optimizer = build(args, settings)
        self.train, _, self.zero_stats = make_functions(model, optimizer)
        self.device, self.batch_size = device, args.batch_size
        self.steps_per_dispatch = block_steps(settings, device.platform)
        self.examples = {k: jax.device_put(v, device) for k, v in examples_np.items()}
        self.state = jax.device_put(([v.value for v in model.trainable_variables],
                                     [v.value for v in model.non_trainable_variables],
                                     [v.value for v in optimizer.variables]), device)
        self.schedule = jax.device_put(np.array([1e6, 1e4], "float32"), device)
        self.num_examples = len(examples_np["input_ids"])
        self.rng = np.random.default_rng(0)

    def indices(self):
        import jax

        shape = (self.steps_per_dispatch, self.batch_size)
        return jax.device_put(self.rng.integers(0, self.num_examples, shape).astype("int32"), self.device)


def compile_step(step):
    """(compiled, lowered, the first block's loss, timings): the clock starts before anything is traced (the
    metric sums' shapes, then jit(...).lower()) and stops when the first block's loss is on the host."""
    import jax

    start = time.perf_counter()
    step.stats = jax.device_put(step.zero_stats(step.state, step.examples, step.batch_size), step.device)
    lowered = step.train.lower(step.state, step.stats, step.examples, step.indices(), step.schedule)
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    compiled_at = time.perf_counter()
    step.state, step.stats, loss = compiled(step.state, step.stats, step.examples, step.indices(), step.schedule)
    loss.block_until_ready()
    done = time.perf_counter()
    return compiled, lowered, loss, {"lower_s": lowered_at - start, "xla_s": compiled_at - lowered_at,
                                     "first_block_s": done - compiled_at, "compile_s": done - start}


def timed_window(step, compiled, seconds):
    """(steps, seconds, last loss): blocks for `seconds` (at least two), one in flight while the host waits for
    the one before, so the device never waits on the clock check."""
    blocks, start = 0, time.perf_counter()
    pending = None
    while True:
        step.state, step.stats, loss = compiled(step.state, step.stats, step.examples, step.indices(), step.schedule)
        if pending is not None:
            pending.block_until_ready()
        pending, blocks = loss, blocks + 1
        if blocks >= 2 and time.perf_counter() - start >= seconds:
            break
    loss.block_until_ready()
    return blocks * step.steps_per_dispatch, time.perf_counter() - start, float(loss)


def profile_block(step, compiled, folder, name):
    """A device trace of one block (xplane.pb: open with xprof / TensorBoard's profile plugin)."""
    import jax

    with jax.profiler.trace(os.path.join(folder, re.sub(r"\W+", "_", name))):
        step.state, step.stats, loss = compiled(step.state, step.stats, step.examples, step.indices(), step.schedule)
        loss.block_until_ready()


def measure_variant(args, name, settings, examples_np, device):
    """{variant, settings, steps_per_dispatch, build_s, compile_s (lower_s, xla_s, first_block_s), steps,
    window_s, steps_per_s, loss, structure} of one way of stepping, built as the product builds it."""
    from training_jax.compiles import lowered_structure

    start = time.perf_counter()
    step = PreparedStep(args, settings, examples_np, device)
    build_s = time.perf_counter() - start
    compiled, lowered, _, timings = compile_step(step)
    steps, window_s, loss = timed_window(step, compiled, args.seconds)
    if args.profile:
        profile_block(step, compiled, args.profile, name)
    return {"kind": "variant", "variant": name, "settings": settings.to_dict(), "precision": settings.precision,
            "steps_per_dispatch": step.steps_per_dispatch, "build_s": build_s, **timings, "steps": steps,
            "window_s": window_s, "steps_per_s": steps / window_s, "loss": loss,
            "structure": lowered_structure(lowered.as_text())}


# ---------------------------------------------------------------------------------------- Hugging Face's row
def hf_worker(args):
    """The worker's side: Hugging Face's ELECTRA pretraining update (bench/pretrain_step_cpu.py) at this config's
    sizes, batch and seq; {steps_per_s, ...} over --seconds after HF_WARMUP_STEPS, or {error} where it cannot run."""
    try:
        import torch
        import transformers
    except ImportError as error:
        return {"error": f"not available ({type(error).__name__}: {error})"}
    import numpy as np

    from bench.pretrain_step_cpu import hf_electra_pair, hf_pretraining_step
    from bench.pretrain_step_gpu import make_config, synthetic_batch

    cuda = torch.cuda.is_available()
    if args.hf_expect_cuda and not cuda:
        return {"error": f"CUDA not available to torch {torch.__version__} (JAX sees a GPU)"}
    device = "cuda" if cuda else "cpu"
    bf16 = cuda and args.precision != "float32"
    config = make_config(args, "float32")
    discriminator, generator = hf_electra_pair(config.model_config(), config.generator_model_config())
    batch = synthetic_batch(np.random.default_rng(0), args.batch_size, args.seq_length, config.vocab_size)
    run_step = hf_pretraining_step(discriminator, generator, batch, config.max_predictions_per_seq, device,
                                   torch.bfloat16 if bf16 else None, fused_adamw=cuda)
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    start = time.perf_counter()
    for _ in range(HF_WARMUP_STEPS):
        loss = run_step()
    float(loss)
    warmup_s = time.perf_counter() - start
    steps, start = 0, time.perf_counter()
    while steps < 2 or time.perf_counter() - start < args.seconds:
        loss = run_step()
        steps += 1
    synchronize()
    window_s = time.perf_counter() - start
    return {"steps": steps, "window_s": window_s, "steps_per_s": steps / window_s, "warmup_s": warmup_s,
            "loss": float(loss), "torch": torch.__version__, "transformers": transformers.__version__,
            "hf_device": torch.cuda.get_device_name() if cuda else "cpu",
            "precision": "bf16 autocast" if bf16 else "float32",
            "optimizer": "torch AdamW" + (" (fused)" if cuda else ""),
            "attention": getattr(discriminator.config, "_attn_implementation", None) or "unknown",
            "note": "eager PyTorch; ElectraForMaskedLM projects every position onto the vocabulary"}


def hf_command(args, expect_cuda):
    """`python -m bench.gpu_speed --hf-worker ...` with this run's sizes."""
    command = [sys.executable, "-m", "bench.gpu_speed", "--hf-worker", "--model-size", args.model_size,
               "--batch-size", str(args.batch_size), "--seq-length", str(args.seq_length), "--precision",
               args.precision, "--seconds", str(args.seconds)]
    if args.generator_hidden_size is not None:
        command += ["--generator-hidden-size", str(args.generator_hidden_size)]
    if args.hparams:
        command += ["--hparams", args.hparams]
    return command + (["--hf-expect-cuda"] if expect_cuda else [])


def measure_hf(args, device):
    """Hugging Face's row, measured in a fresh process: {kind: hf, variant: hf, steps_per_s, ...} or, where it
    could not run, the same row with its error."""
    from bench.worker_process import run_worker

    env = dict(os.environ, USE_TF="0", USE_JAX="0", TF_CPP_MIN_LOG_LEVEL="2")
    result = run_worker(hf_command(args, device.platform == "gpu"), env, "hf", exit_on_failure=False)
    if result is None:
        result = {"error": "the worker failed (its stderr is printed above)"}
    return {"kind": "hf", "variant": "hf", "steps_per_dispatch": 1, **result}


# ---------------------------------------------------------------------------------------- printing
def rate(value):
    """steps/s with three significant digits below 10 (a CPU's), one decimal above."""
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def measured(row):
    return row.get("steps_per_s") is not None


def enrich(row, context, hf_rate):
    """The row with the run's context and its derived columns (TFLOP/s, share of peak, x HF)."""
    row = {**context, **row}
    if measured(row):
        tflops = row["steps_per_s"] * context["flops_per_step"] / 1e12
        row["tflops"] = tflops
        row["share_of_peak"] = tflops / context["peak_tflops"] if context["peak_tflops"] else None
        row["x_hf"] = row["steps_per_s"] / hf_rate if hf_rate else None
    return row


def describe(row):
    """The row as one printed line."""
    if not measured(row):
        return f"row {row['variant']}: {row.get('error') or row.get('reason')}"
    share = f"{row['share_of_peak']:.1%} of peak" if row.get("share_of_peak") is not None else "peak unknown"
    x_hf = f"{row['x_hf']:.2f}x HF" if row.get("x_hf") is not None else "x HF n/a"
    if row["kind"] == "hf":
        head = f"row hf ({row['precision']}, {row['optimizer']}, attention {row['attention']}, {row['hf_device']})"
        timing = f"warm-up {row['warmup_s']:.1f} s"
    else:
        head = f"row {row['variant']} (K={row['steps_per_dispatch']})"
        timing = (f"build {row['build_s']:.1f} s, compile {row['compile_s']:.1f} s (trace + lower "
                  f"{row['lower_s']:.1f}, XLA {row['xla_s']:.1f}, first block {row['first_block_s']:.2f})")
    return (f"{head}: {timing}; {rate(row['steps_per_s'])} steps/s over {row['window_s']:.1f} s, {x_hf}, "
            f"{row['tflops']:.2f} TFLOP/s, {share}, loss {row['loss']:.4f}; took {row.get('took_s', 0):.1f} s")


def table(rows):
    """The markdown table of every row (measured, skipped or failed)."""
    lines = ["| variant | steps/dispatch | compile s (lower + XLA) | steps/s | x HF | TFLOP/s | of bf16 peak | loss |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if not measured(row):
            lines.append(f"| {row['variant']} | | {row.get('error') or row.get('reason')} | | | | | |")
            continue
        compile_cell = "none (eager)" if row["kind"] == "hf" else \
            f"{row['compile_s']:.1f} ({row['lower_s']:.1f} + {row['xla_s']:.1f})"
        share = f"{row['share_of_peak']:.1%}" if row.get("share_of_peak") is not None else "n/a"
        x_hf = f"{row['x_hf']:.2f}" if row.get("x_hf") is not None else "n/a"
        lines.append(f"| {row['variant']} | {row['steps_per_dispatch']} | {compile_cell} | {rate(row['steps_per_s'])} "
                     f"| {x_hf} | {row['tflops']:.2f} | {share} | {row['loss']:.4f} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- the run
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-seconds", type=float, default=150.0,
                        help="the whole run's bound (0: none); what would not fit is skipped")
    parser.add_argument("--out", default=None, help=f"folder of {JSONL} (default: $OUT, else {DEFAULT_OUT})")
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--precision", default="auto", choices=("auto", "float32", "mixed_bfloat16"),
                        help="auto: the product's (mixed_bfloat16 for a config computing in it, on every platform)")
    parser.add_argument("--generator-hidden-size", type=float, default=None)
    parser.add_argument("--hparams", default=None, help="JSON of further PretrainingConfig fields (a micro model)")
    parser.add_argument("--steps-per-dispatch", type=int, default=None,
                        help="K for every variant (default: the product's, the log window's on an accelerator)")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per row, after its compile")
    parser.add_argument("--examples", type=int, default=4096, help="synthetic examples resident on the device")
    parser.add_argument("--variants", default=None, help="comma-separated names to measure (default: all)")
    parser.add_argument("--hf", action=argparse.BooleanOptionalAction, default=True,
                        help="Hugging Face's PyTorch ELECTRA row (default: on)")
    parser.add_argument("--first-estimate", type=float, default=None,
                        help="seconds the first JAX variant is expected to take (default: a guess by depth)")
    parser.add_argument("--no-finetuning", action="store_true")
    parser.add_argument("--finetune-estimate", type=float, default=FINETUNE_GUESS_S,
                        help="seconds the fine-tuning half is expected to take (it runs only if they fit)")
    parser.add_argument("--finetune-args", default="--model-size electra_small --ways today,new",
                        help="bench/finetune_jax_speed.py's arguments for the fine-tuning half")
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="also write a jax.profiler trace of one block of each variant under DIR/<variant>")
    parser.add_argument("--hf-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hf-expect-cuda", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def chosen_variants(args, defaults, platform):
    """[(name, overrides)] in the run's order; an unknown --variants name ends the run with the known ones."""
    known = variant_overrides(defaults, platform)
    names = [n.strip() for n in args.variants.split(",") if n.strip()] if args.variants else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"--variants: no variant {unknown} on this platform; give some of {', '.join(known)}")
    return [(name, known[name]) for name in names]


def header_record(args, argv, device, config, defaults, context):
    import jax
    import keras
    import numpy as np

    command = shlex.join(["KERAS_BACKEND=jax", "python3", "-m", "bench.gpu_speed",
                          *(argv if argv is not None else sys.argv[1:])])
    return {"kind": "header", "command": command, "date": datetime.datetime.now().astimezone().isoformat(
        timespec="seconds"), "device": context["device"], "platform": device.platform,
        "device_count": jax.device_count(), "jax": jax.__version__, "keras": keras.__version__,
        "numpy": np.__version__, "python": sys.version.split()[0], "max_seconds": args.max_seconds,
        "seconds": args.seconds, "defaults": defaults.to_dict(), "hparams": args.hparams,
        "discriminator": dataclasses.asdict(config.model_config()),
        "generator": dataclasses.asdict(config.generator_model_config()),
        **{k: context[k] for k in ("model_size", "batch_size", "seq_length", "flops_per_step", "peak_tflops")}}


def run_context(args, device, config):
    """The fields every row carries: the device, versions, sizes, FLOPs per step and the device's peak."""
    import jax
    import keras

    from bench.flops import config_breakdown, train_flops
    from bench.pretrain_step_gpu import device_peak_tflops

    return {"device": f"{device.platform} {device.device_kind}", "jax": jax.__version__, "keras": keras.__version__,
            "model_size": args.model_size, "batch_size": args.batch_size, "seq_length": args.seq_length,
            "flops_per_step": train_flops(config_breakdown(config, args.seq_length)) * args.batch_size,
            "peak_tflops": args.peak_tflops or device_peak_tflops(device.device_kind)}


def keep(row, rows, log, context, hf_rate):
    """Adds the row's context, prints it, appends it to the jsonl; returns it."""
    row = enrich(row, context, hf_rate)
    rows.append(row)
    log.write(row)
    print(describe(row), flush=True)
    return row


def skipped(name, reason, rows, log, context):
    """`reason`: skip_reason's fields, or the line alone where the variant is unavailable."""
    fields = reason if isinstance(reason, dict) else {"reason": reason}
    return keep({"kind": "skipped", "variant": name, **fields}, rows, log, context, None)


def main(argv=None):
    args = parse_args(argv)
    if args.hf_worker:
        from bench.worker_process import print_result

        return print_result(hf_worker(args))
    budget = Budget(args.max_seconds)
    sys.modules.setdefault("tensorflow", None)  # as on the GPU image: Keras's seeding must not pull TensorFlow in

    import jax
    import keras
    import numpy as np

    from bench.pretrain_step_gpu import make_config, synthetic_batch

    if keras.backend.backend() != "jax":
        sys.exit(f"run with KERAS_BACKEND=jax (got {keras.backend.backend()})")
    device = jax.devices()[0]
    defaults = resolve_settings(args, platform_of(device))
    config = make_config(args, defaults.precision)
    context = run_context(args, device, config)
    log = RowLog(args.out or default_out())
    log.write(header_record(args, argv, device, config, defaults, context))
    print(f"device: {context['device']}; jax {jax.__version__}, keras {keras.__version__}; rows to {log.path}; "
          f"bound {args.max_seconds:g} s, {budget.left():.0f} s left", flush=True)
    print(f"defaults on {device.platform}: {defaults.describe()}; K = {block_steps(defaults, device.platform)}")
    print(f"pretraining: {args.model_size}, batch {args.batch_size} x {args.seq_length}, "
          f"{context['flops_per_step']:.3e} FLOPs per step (bench/flops.py), peak "
          f"{context['peak_tflops'] or 'unknown'} TFLOP/s", flush=True)
    variants = chosen_variants(args, defaults, device.platform)
    rows, hf_rate = [], None
    if args.hf:
        hf_rate = run_hf(args, device, budget, rows, log, context)
    examples = synthetic_batch(np.random.default_rng(0), args.examples, args.seq_length, config.vocab_size)
    estimate = args.first_estimate if args.first_estimate is not None else first_guess(config, args.seconds)
    for name, overrides in variants:
        estimate = run_variant(args, name, overrides, examples, device, budget, estimate, rows, log, context,
                               hf_rate)
    if not args.no_finetuning:
        run_finetuning(args, budget, rows, log, context)
    print(f"\nall rows ({budget.elapsed():.0f} s of a {args.max_seconds:g} s bound; {log.path}):")
    print(table(rows), flush=True)
    return rows


def run_hf(args, device, budget, rows, log, context):
    """Hugging Face's row if it fits; its steps/s (None where it did not run)."""
    reason = skip_reason(budget, args.seconds + HF_STARTUP_GUESS_S)
    if reason:
        skipped("hf", reason, rows, log, context)
        return None
    start = time.perf_counter()
    row = measure_hf(args, device)
    row["took_s"] = time.perf_counter() - start
    return keep(row, rows, log, context, row.get("steps_per_s")).get("steps_per_s")


def run_variant(args, name, overrides, examples, device, budget, estimate, rows, log, context, hf_rate):
    """Measures one JAX variant if it is available and fits; returns the estimate for the next one (this one's
    whole time once measured)."""
    settings = resolve_settings(args, platform_of(device), overrides)
    reason = unavailable(settings) or skip_reason(budget, estimate)
    if reason:
        skipped(name, reason, rows, log, context)
        return estimate
    start = time.perf_counter()
    try:
        row = measure_variant(args, name, settings, examples, device)
    except Exception as error:  # e.g. a kernel that does not lower on this device: the other rows still count
        traceback.print_exc()
        row = {"kind": "failed", "variant": name, "settings": settings.to_dict(),
               "error": f"failed: {type(error).__name__}: {one_line(str(error))}"}
    row["took_s"] = time.perf_counter() - start
    keep(row, rows, log, context, hf_rate)
    return row["took_s"] if measured(row) else estimate


def one_line(message, most=400):
    """An error message as one table cell: terminal colours and line breaks out, at most `most` characters."""
    message = re.sub(r"\s+", " ", re.sub(r"\x1b\[[0-9;]*m", "", message)).strip()
    return message if len(message) <= most else message[:most - 3] + "..."


def run_finetuning(args, budget, rows, log, context):
    """bench/finetune_jax_speed.py's side-by-side, if its estimate fits in what is left."""
    reason = skip_reason(budget, args.finetune_estimate)
    if reason:
        print(f"fine-tuning: {reason['reason']}", flush=True)
        log.write({"kind": "skipped", "variant": "fine-tuning", **reason})
        return None
    from bench import finetune_jax_speed

    print(f"fine-tuning: python -m bench.finetune_jax_speed {args.finetune_args}", flush=True)
    start = time.perf_counter()
    result = finetune_jax_speed.main(shlex.split(args.finetune_args))
    log.write({"kind": "finetuning", "command": args.finetune_args, "seconds": time.perf_counter() - start,
               "result": result, **{k: context[k] for k in ("device", "jax", "keras")}})
    return result


if __name__ == "__main__":
    main()
