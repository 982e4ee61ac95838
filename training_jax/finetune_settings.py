"""What a JAX fine-tuning run computes with, resolved once from its flags and the platform, logged and recorded.

As for pretraining (training_jax.speed_settings), an accelerator's window is short, so there every option that
computes the same update (within rounding) is on by default: bfloat16 compute, length buckets (the same update
for the same examples; the batches are other random sets), K updates per dispatch (K single updates) and the
models of a task vmapped (the separate runs' numbers within float32 rounding), and the training programs compiled
ahead, at once (the same programs: on the first H200 window compiles took most of each task's time, one after
another, on a host with 16 cores; not yet measured at once there). On the CPU the defaults are today's: float32,
every batch max_seq_length long in the original's order, one update per dispatch, one model after another,
programs compiled on first use. A flag the user gives always wins.
"""
import argparse
import dataclasses
from typing import Optional

from common.errors import InputError
from training_jax.finetune_buckets import bucket_lengths, parse_buckets
from training_jax.speed_settings import is_accelerator

ACCELERATOR_BLOCK_STEPS = 16  # updates per dispatch on an accelerator: GLUE's smallest task (RTE) has 78 per epoch


@dataclasses.dataclass(frozen=True)
class FinetuneSettings:
    platform: str
    bf16: bool
    length_buckets: bool
    bucket_lengths: str  # --bucket-lengths as given ("": 32, 64, ... up to max_seq_length)
    steps_per_dispatch: int
    vmap_models: bool
    compile_ahead: bool = False  # asked for; it applies to training in blocks only (compiles_ahead)

    @property
    def device_blocks(self):
        """Training in blocks of K updates per dispatch (training_jax.finetune_blocks), not one batch at a time:
        with buckets, K > 1 or vmapped models (studies.device_path.members trains blocks)."""
        return self.length_buckets or self.steps_per_dispatch > 1 or self.vmap_models

    @property
    def compiles_ahead(self):
        """The block programs compiled before training, in threads at once (training_jax.compile_ahead)."""
        return self.compile_ahead and self.device_blocks

    def buckets(self, max_seq_length) -> Optional[list]:
        """The bucket lengths of a task of this max_seq_length; None without length buckets."""
        if not self.length_buckets:
            return None
        try:
            return (parse_buckets(self.bucket_lengths, max_seq_length) if self.bucket_lengths
                    else bucket_lengths(max_seq_length))
        except ValueError as error:
            raise InputError(f"--bucket-lengths {self.bucket_lengths}: {error}") from None

    def describe(self):
        return (f"{'bfloat16' if self.bf16 else 'float32'}; length buckets "
                f"{(self.bucket_lengths or 'auto') if self.length_buckets else 'off'}; {self.steps_per_dispatch} "
                f"update(s) per dispatch; models {'vmapped together' if self.vmap_models else 'one after another'}"
                f"{'; training programs compiled ahead, at once' if self.compiles_ahead else ''}")

    def record(self, max_seq_length):
        """What a results file records: the choices as resolved, the task's buckets spelled out."""
        return {"platform": self.platform, "bf16": self.bf16, "length_buckets": self.buckets(max_seq_length),
                "steps_per_dispatch": self.steps_per_dispatch, "vmap_models": self.vmap_models}


FLAG_NAMES = ("bf16", "length_buckets", "bucket_lengths", "steps_per_dispatch", "vmap_models", "compile_ahead",
              "devices")


def add_flags(parser, several_models=False):
    """The flags of these settings (python -m studies.device_path.finetune's, and run_finetuning.py's under JAX, which
    fine-tunes one model: --vmap-models is the former's alone, --devices the latter's)."""
    group = parser.add_argument_group("speed under KERAS_BACKEND=jax (defaults by platform: the accelerator's "
                                      "or the CPU's)")
    group.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                       help="compute in bfloat16 (mixed_bfloat16: float32 weights and losses); default on an "
                            "accelerator, off on the CPU (the original fine-tunes in float32)")
    group.add_argument("--length-buckets", action=argparse.BooleanOptionalAction, default=None,
                       help="pad each training batch to the smallest of a few lengths that holds it, examples of "
                            "similar length batched together (training_jax.finetune_buckets; other batches than "
                            "without, the same update for the same examples); default on an accelerator, off on "
                            "the CPU (--no-length-buckets: every batch max_seq_length long, in the original's order)")
    group.add_argument("--bucket-lengths", default="",
                       help="the buckets, e.g. 32,64 (multiples of 8; max_seq_length is always one); default 32, "
                            "64, ... up to max_seq_length")
    group.add_argument("--steps-per-dispatch", type=int, default=None, metavar="K",
                       help=f"updates per dispatch, their batches sent as one block (lax.scan; the same as K single "
                            f"updates); default {ACCELERATOR_BLOCK_STEPS} on an accelerator, 1 on the CPU, where "
                            "without --length-buckets each batch is built and sent on its own as before")
    if several_models:
        group.add_argument("--vmap-models", action=argparse.BooleanOptionalAction, default=None,
                           help="train the models of a task (of one seed) together, one update vmapped over them "
                                "(studies.device_path.members; the separate runs' numbers within float32 rounding, "
                                "tests/test_jax_finetune_buckets.py); default on an accelerator, off on the CPU")
    group.add_argument("--compile-ahead", action=argparse.BooleanOptionalAction, default=None,
                       help="when training in blocks (buckets or K > 1): compile the training programs (one per "
                            "head kind and bucket length) before the first update, several at once in threads "
                            "(training_jax.compile_ahead; the same programs). Default on an accelerator (the first "
                            "H200 window spent most of each task's time compiling one program after another: STS-B "
                            "90 of 101 s), off on the CPU (on 2 cores each compile took twice as long beside another: "
                            "docs/benchmarks.md)")
    if not several_models:
        group.add_argument("--devices", type=int, default=None, metavar="N",
                           help="fine-tune on the first N local devices, data parallel (the global train_batch_size "
                                "split over them; default: every local device)")


def given_flags(args):
    """The flags of add_flags the user gave (for a backend that has none of them to refuse them by name)."""
    return [f"--{name.replace('_', '-')}" for name in FLAG_NAMES
            if getattr(args, name, None) not in (None, "")]


def resolve(args, platform) -> FinetuneSettings:
    """The run's settings: each flag as given, or the platform's default (module docstring)."""
    accelerator = is_accelerator(platform)

    def chosen(value, default):
        return default if value is None else value

    steps = chosen(args.steps_per_dispatch, ACCELERATOR_BLOCK_STEPS if accelerator else 1)
    if steps < 1:
        raise InputError(f"--steps-per-dispatch {steps}: must be at least 1")
    return FinetuneSettings(platform=str(platform), bf16=chosen(args.bf16, accelerator),
                            length_buckets=chosen(args.length_buckets, accelerator),
                            bucket_lengths=args.bucket_lengths, steps_per_dispatch=steps,
                            vmap_models=chosen(getattr(args, "vmap_models", None), accelerator),
                            compile_ahead=chosen(getattr(args, "compile_ahead", None), accelerator))
