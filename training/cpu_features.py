"""The x86 CPU's model name and the features that decide matmul speed, read from /proc/cpuinfo.

No TensorFlow here: run_pretraining.py, run_finetuning.py and the benchmarks import it cheaply.

"Native bfloat16" means AVX512_BF16 or AMX-BF16: without either, oneDNN and PyTorch emulate bfloat16
matmuls (convert to float32 and back), so mixed_bfloat16 is slower than float32 on that CPU (measured
0.85x of float32 for the electra_small pretraining step on a Zen 3 with AVX2 and FMA, issue 17).
"""
import dataclasses

CPUINFO = "/proc/cpuinfo"
# The flags worth reporting, in the order printed.
RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
EMULATED_BF16_SLOWDOWN = "0.85x of float32 on a Zen 3"


@dataclasses.dataclass(frozen=True)
class CpuFeatures:
    model: str = "unknown"
    flags: frozenset = frozenset()

    @property
    def known(self):
        """Whether /proc/cpuinfo gave any flags (False on non-Linux or non-x86 hosts)."""
        return bool(self.flags)

    @property
    def native_bf16(self):
        return any(flag in self.flags for flag in BF16_FLAGS)

    def has(self, flag):
        return flag in self.flags

    def describe(self):
        """One line: the model and which relevant features it has, e.g.
        "AMD Ryzen 9 5900X; avx2 fma, no avx512f avx512_bf16 amx_tile amx_bf16 (bfloat16 emulated)"."""
        if not self.known:
            return f"{self.model}; CPU features unknown (no x86 flags in {CPUINFO})"
        present = [f for f in RELEVANT_FLAGS if f in self.flags]
        absent = [f for f in RELEVANT_FLAGS if f not in self.flags]
        parts = [" ".join(present) or "none of " + " ".join(RELEVANT_FLAGS)]
        if absent and present:
            parts.append("no " + " ".join(absent))
        bf16 = "native bfloat16" if self.native_bf16 else "bfloat16 emulated"
        return f"{self.model}; {', '.join(parts)} ({bf16})"


def parse_cpuinfo(text):
    """CpuFeatures from the text of /proc/cpuinfo (the first processor's model name and flags)."""
    model, flags = "unknown", None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "model name" and model == "unknown":
            model = value.strip() or "unknown"
        elif key == "flags" and flags is None:
            flags = frozenset(value.split())
        if model != "unknown" and flags is not None:
            break
    return CpuFeatures(model, flags or frozenset())


def read_cpu_features(path=CPUINFO):
    """This machine's CpuFeatures; unknown model and no flags where the file cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return parse_cpuinfo(handle.read())
    except OSError:
        return CpuFeatures()


def bf16_cpu_warning(precision, on_cpu, features,
                     switch='--hparams \'{"mixed_precision": "float32"}\''):
    """The one-line warning for mixed_bfloat16 on a CPU without native bfloat16, or None.

    None on a GPU/TPU, for any other precision, on a CPU with AVX512_BF16 or AMX-BF16, and where the
    CPU's features are unknown (not an x86 Linux host: nothing measured to warn about).
    """
    if precision != "mixed_bfloat16" or not on_cpu or not features.known or features.native_bf16:
        return None
    return (f"warning: mixed_bfloat16 on a CPU without native bfloat16 ({features.model}: no avx512_bf16 "
            f"or amx_bf16): bfloat16 is emulated there and slower than float32 (measured "
            f"{EMULATED_BF16_SLOWDOWN}); use float32 with {switch}")
