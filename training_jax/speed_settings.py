"""What a JAX training step runs with on each platform: the precision and the step's speed options, resolved once.

A GPU window is rare and short, so on an accelerator everything that computes the same update (within rounding)
or draws from the same distributions is on by default; an option that is only equal, not yet measured faster on a
GPU, stays off until a row of bench.gpu_speed shows it pays. On the CPU the defaults are the original release's:
float32 and every option off. A flag the user gives always wins over the platform's default.

Proof that each default-on option is the same computation, on the CPU:
  mixed_bfloat16   bfloat16 compute, float32 weights, losses and optimizer (Keras's policy, as the TF path runs it)
  prng rbg         other draws from the same distributions (tests/test_jax_rng.py)
  flat_update      AdamW on flat vectors, the same update within float32 rounding (tests/test_optimization.py)
  bf16_attention   scores, softmax and dropout in bfloat16, equal within bfloat16 rounding
                   (tests/test_attention_dtype.py); only meaningful under mixed_bfloat16
  fused_attention  attention with dropout in Pallas Triton kernels (training_jax/flash_attention.py: equal to the
                   explicit path in interpret mode, its own dropout bits from the same distribution), on NVIDIA GPUs
                   alone (Triton's): 73.3 and 73.5 steps/s against 68.3 and 67.7 at electra_small, batch 128, on
                   two H200 windows (docs/jax_gpu.md, "The second window"); over several devices it runs under
                   shard_map on each device's rows (tests/test_data_parallel.py)
Off, measured: scan_layers (tests/test_scan_layers.py: equal; on the H200 it compiled in 38 s against 64 but ran at
42.1 steps/s against 68.3).
"""
import dataclasses

from common.errors import InputError

ACCELERATORS = ("gpu", "tpu", "cuda", "rocm")  # jax's device.platform names of what is not a CPU
FUSED_ATTENTION_PLATFORMS = ("gpu", "cuda")  # NVIDIA's (platform_of names an AMD GPU "rocm"): Triton's kernels
PRECISIONS = ("auto", "float32", "mixed_bfloat16")


def is_accelerator(platform):
    return str(platform).lower() in ACCELERATORS


@dataclasses.dataclass(frozen=True)
class StepSettings:
    """The resolved settings of one run's step; `chosen` names the ones the user gave (the rest are defaults)."""
    platform: str
    precision: str
    prng: str
    flat_update: bool
    bf16_attention: bool
    scan_layers: bool
    fused_attention: bool
    steps_per_dispatch: int  # 0: the largest divisor of the log window up to 32 (1 on the CPU)
    chosen: tuple = ()

    def describe(self):
        """One line, the way a log or a dry run shows it."""
        def mark(name):
            return "" if name in self.chosen else " (default)"
        dispatch = self.steps_per_dispatch or "per log window"
        return (f"platform {self.platform}: precision {self.precision}{mark('precision')}; prng {self.prng}"
                f"{mark('prng')}; flat update {on_off(self.flat_update)}{mark('flat_update')}; bf16 attention "
                f"{on_off(self.bf16_attention)}{mark('bf16_attention')}; fused attention "
                f"{on_off(self.fused_attention)}{mark('fused_attention')}; scan layers {on_off(self.scan_layers)}"
                f"{mark('scan_layers')}; steps per dispatch {dispatch}{mark('steps_per_dispatch')}")

    def to_dict(self):
        record = dataclasses.asdict(self)
        record["chosen"] = list(self.chosen)
        return record


def on_off(flag):
    return "on" if flag else "off"


def platform_of(device):
    """The device's platform as the settings are resolved for it: jax's name ("gpu", "tpu", "cpu"), with "rocm" for
    an AMD GPU, which jax also calls "gpu" but whose Triton the fused attention has not run on."""
    version = str(getattr(getattr(device, "client", None), "platform_version", "")).lower()
    return "rocm" if device.platform == "gpu" and "rocm" in version else device.platform


def platform_defaults(platform, configured_precision="float32"):
    """{setting: value} before any flag: the fast path on an accelerator, the original's on a CPU (where the
    config's precision stands)."""
    if is_accelerator(platform):
        return {"precision": "mixed_bfloat16", "prng": "rbg", "flat_update": True, "bf16_attention": True,
                "scan_layers": False, "fused_attention": str(platform).lower() in FUSED_ATTENTION_PLATFORMS,
                "steps_per_dispatch": 0}
    return {"precision": configured_precision, "prng": "threefry2x32", "flat_update": False, "bf16_attention": False,
            "scan_layers": False, "fused_attention": False, "steps_per_dispatch": 1}


def resolve(platform, configured_precision="float32", **given):
    """StepSettings for `platform` from its defaults and the `given` settings (None: not given). A precision of
    "auto" is not given. bf16 attention asked for under float32 is an InputError (it would do nothing); as a
    default it follows the precision."""
    given = {name: value for name, value in given.items() if value is not None and value != "auto"}
    unknown = sorted(set(given) - set(platform_defaults(platform)))
    if unknown:
        raise ValueError(f"no step setting {unknown}")
    values = {**platform_defaults(platform, configured_precision), **given}
    if values["precision"] != "mixed_bfloat16":
        if given.get("bf16_attention"):
            raise InputError(f"--bf16-attention: the attention is in bfloat16 only under mixed_bfloat16, and this "
                             f"run computes in {values['precision']}; add --precision mixed_bfloat16 or drop the flag")
        values["bf16_attention"] = False
    return StepSettings(platform=str(platform).lower(), chosen=tuple(sorted(given)), **values)


def add_step_flags(parser):
    """The step's flags, each defaulting to None (the platform decides), on an argparse parser."""
    import argparse

    from training_jax.rng import PRNG_IMPLS

    parser.add_argument("--precision", default="auto", choices=PRECISIONS,
                        help="the Keras dtype policy of the step (auto: mixed_bfloat16 on a GPU or TPU, the "
                             "config's own, float32 by default, on a CPU)")
    parser.add_argument("--flat-update", action=argparse.BooleanOptionalAction, default=None,
                        help="AdamW on flat vectors with one global norm (AdamWeightDecay(fused=True)): the same "
                             "update in a few kernels instead of several per variable (default: on an accelerator)")
    parser.add_argument("--scan-layers", action=argparse.BooleanOptionalAction, default=None,
                        help="run each encoder's transformer layers as one scan over their stacked weights: the same "
                             "update within float32 rounding; it compiles faster but ran slower on an H200 (default: "
                             "off)")
    parser.add_argument("--bf16-attention", action=argparse.BooleanOptionalAction, default=None,
                        help="keep the attention's scores, softmax and dropout in bfloat16 under mixed_bfloat16 (no "
                             "float32 [batch, heads, seq, seq]; dropout keep probability rounded to 1/1024): equal "
                             "within bfloat16 rounding (default: on under mixed_bfloat16 on an accelerator)")
    parser.add_argument("--fused-attention", action=argparse.BooleanOptionalAction, default=None,
                        help="attention with dropout in one fused kernel that stores no [batch, heads, seq, seq] "
                             "tensor for the backward pass (training_jax/flash_attention.py; default: on an NVIDIA "
                             "GPU, where it measured 1.07x the step, off elsewhere)")
    parser.add_argument("--prng", default=None, choices=PRNG_IMPLS,
                        help="the random bits of dropout, masking and sampling: threefry2x32 (JAX's default) or "
                             "XLA's RngBitGenerator (rbg, unsafe_rbg: one kernel on an accelerator; the same "
                             "distributions, other draws; default: rbg on an accelerator, threefry2x32 on a CPU)")
    parser.add_argument("--steps-per-dispatch", type=int, default=None, metavar="K",
                        help="updates run by one dispatch of the compiled step (lax.scan; the same updates bit for "
                             "bit); 0: the largest divisor of the log window up to 32 (default: 0 on an "
                             "accelerator, 1 on the CPU)")


STEP_FLAG_NAMES = ("precision", "flat_update", "scan_layers", "bf16_attention", "fused_attention", "prng",
                   "steps_per_dispatch")


def resolve_from_args(args, platform, configured_precision="float32"):
    """StepSettings from parsed add_step_flags arguments."""
    return resolve(platform, configured_precision, **{name: getattr(args, name) for name in STEP_FLAG_NAMES})


def with_precision(config, settings):
    """The pretraining config computing in the settings' precision (what the model folder's config.json records)."""
    if config.mixed_precision == settings.precision:
        return config
    return dataclasses.replace(config, mixed_precision=settings.precision)


def apply_to_step(settings, model, optimizer):
    """Sets the options on a built pretrainer and its optimizer, before the step is traced. The PRNG last: the
    initial weights were drawn with the default's bits, so every setting starts from the same weights."""
    from training_jax.rng import use_prng
    from training_jax.step import use_compute_dtype_softmax, use_layer_scan

    if hasattr(optimizer, "fused"):
        optimizer.fused = settings.flat_update
    use_layer_scan(model, settings.scan_layers)
    use_compute_dtype_softmax(model, settings.bf16_attention)
    if settings.fused_attention:
        from training_jax.step import use_fused_attention

        use_fused_attention(model, True)
    use_prng(settings.prng)

