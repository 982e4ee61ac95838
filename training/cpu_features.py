"""The x86 CPU's model name and the features that decide matmul speed, read from /proc/cpuinfo.

No TensorFlow here: run_pretraining.py, run_finetuning.py and the benchmarks import it cheaply.

TensorFlow runs its oneDNN kernels by default only on CPUs with VNNI, AVX512_BF16 or AMX; on an AVX2-only
CPU it falls back to plain Eigen kernels, and our pretraining step is ~2x slower (turn_on_onednn).

"Native bfloat16" means AVX512_BF16 or AMX-BF16: without either, oneDNN and PyTorch emulate bfloat16
matmuls (convert to float32 and back), so mixed_bfloat16 is slower than float32 on that CPU (measured
0.85x of float32 for the electra_small pretraining step on a Zen 3 with AVX2 and FMA, issue 17).
"""
import dataclasses
import os
import sys

CPUINFO = "/proc/cpuinfo"
# The flags worth reporting, in the order printed.
RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
EMULATED_BF16_SLOWDOWN = "0.85x of float32 on a Zen 3"
# oneDNN ISA caps that still use native bfloat16 instructions; any other ONEDNN_MAX_CPU_ISA (AVX2,
# AVX512_CORE, ...) makes oneDNN emulate it, as does PyTorch's ATEN_CPU_CAPABILITY=avx2 or default.
ONEDNN_NATIVE_BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX",
                           "AVX10_1_512_AMX_FP16", "AVX10_2_512_AMX_2", "ALL", "DEFAULT")
ATEN_EMULATED_BF16 = ("avx2", "default")
# TensorFlow's Linux x86 builds turn their oneDNN kernels on by default only on CPUs with one of these
# (tensorflow/core/util/util.cc, IsMKLEnabled): an AVX2-only CPU such as a Zen 3 gets plain Eigen kernels.
TF_ONEDNN_DEFAULT_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"


@dataclasses.dataclass(frozen=True)
class CpuFeatures:
    model: str = "unknown"
    flags: frozenset = frozenset()
    caps: tuple = ()  # "NAME=value" of the environment variables that keep the libraries off bfloat16 units

    @property
    def known(self):
        """Whether /proc/cpuinfo gave any flags (False on non-Linux or non-x86 hosts)."""
        return bool(self.flags)

    @property
    def native_bf16(self):
        return not self.caps and any(flag in self.flags for flag in BF16_FLAGS)

    def has(self, flag):
        return flag in self.flags

    @property
    def tf_onednn_by_default(self):
        """Whether TensorFlow turns its oneDNN kernels on here without being asked."""
        return any(flag in self.flags for flag in TF_ONEDNN_DEFAULT_FLAGS)

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
        if self.caps:
            bf16 += f" under {' '.join(self.caps)}"
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


def bf16_caps(environ):
    """The ISA caps in `environ` under which oneDNN or PyTorch emulate bfloat16 although the CPU has it
    (the AVX2 stand-in for another CPU: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2)."""
    caps = []
    onednn = environ.get("ONEDNN_MAX_CPU_ISA", "").strip()
    if onednn and onednn.upper() not in ONEDNN_NATIVE_BF16_ISAS:
        caps.append(f"ONEDNN_MAX_CPU_ISA={onednn}")
    aten = environ.get("ATEN_CPU_CAPABILITY", "").strip()
    if aten.lower() in ATEN_EMULATED_BF16:
        caps.append(f"ATEN_CPU_CAPABILITY={aten}")
    return tuple(caps)


def read_cpu_features(path=CPUINFO, environ=None):
    """This machine's CpuFeatures as this process's libraries see it (ISA caps in the environment
    included); unknown model and no flags where the file cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            features = parse_cpuinfo(handle.read())
    except OSError:
        return CpuFeatures()
    return dataclasses.replace(features, caps=bf16_caps(os.environ if environ is None else environ))


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


# issue 44's measurements (docs/benchmarks.md, "Intel with AMX" and "AMD Zen 4"): SST-2 fine-tuning steps side by
# side, and six seeds
BF16_MATMULS_MEASURED = ("1.46x the float32 step on an Intel Xeon with AMX, 1.18x on an AMD Zen 4; over six seeds, "
                         "the same mean SST-2 dev accuracy, 79.91 against 79.95")


def bf16_matmuls_note(matmul_dtype, on_cpu, features, switch="--matmul-dtype bfloat16"):
    """The one-line note that this CPU could run the dense products with bfloat16 operands (model/matmul.py's
    option), or None: on a CPU with native bfloat16 where the option is off.

    The default stays float32, the original's arithmetic on CPUs and GPUs (bit for bit the code before the option,
    what the parity tests check), so the note says what the switch buys and lets the user choose. None on a GPU,
    with the option on, without native bfloat16 (emulated, it is slower) or where the CPU is unknown.
    """
    if matmul_dtype != "float32" or not on_cpu or not features.known or not features.native_bf16:
        return None
    return (f"note: this CPU has native bfloat16 ({features.model}): {switch} gives the dense layers' matmuls "
            f"bfloat16 operands and keeps the rest float32 (measured: {BF16_MATMULS_MEASURED}; docs/benchmarks.md); "
            "the default stays the original's float32")


def turn_on_onednn(environ=None, features=None, precision="float32", quiet=False):
    """Sets TF_ENABLE_ONEDNN_OPTS=1 where TensorFlow would leave oneDNN off (an x86 CPU without VNNI or
    AMX, such as AVX2-only ones) and the user has not set it; prints a one-line note on stderr (unless
    `quiet`) and returns it, or None when nothing changed.

    Must run before TensorFlow reads the variable (its first op). Why: the electra_small step takes
    21.4 s with TensorFlow's default there and 10.7 s with oneDNN on (an AVX2 stand-in, docs/benchmarks.md);
    oneDNN changes only floating-point rounding, the default on AVX-512 VNNI CPUs anyway.
    TF_ENABLE_ONEDNN_OPTS=0 keeps TensorFlow's default. Not for mixed_bfloat16, which stays as measured on
    the Zen 3 (TensorFlow's default emulates it: 0.85x of float32, and the scripts warn). On the AVX2
    stand-in with oneDNN on, bfloat16 matmuls abort (a dnnl error, or a segfault in the test suite); that
    is likely the stand-in's own: TensorFlow hands bfloat16 ops to oneDNN only where cpuid shows AVX512F
    (IsBF16SupportedByOneDNNOnThisCPU), which the stand-in's CPU has and its capped oneDNN cannot serve,
    while a real AVX2 CPU would get Eigen's kernels. Unmeasured on one, so the rule stays.
    """
    if precision == "mixed_bfloat16":
        return None
    environ = os.environ if environ is None else environ
    features = read_cpu_features(environ=environ) if features is None else features
    if ONEDNN_ENV in environ or not features.known or features.tf_onednn_by_default:
        return None
    environ[ONEDNN_ENV] = "1"
    note = (f"note: oneDNN kernels turned on ({ONEDNN_ENV}=1): TensorFlow leaves them off on this CPU "
            f"({features.model}: no {'/'.join(TF_ONEDNN_DEFAULT_FLAGS[:3])} or AMX), where they make a "
            f"training step about 2x faster; {ONEDNN_ENV}=0 keeps TensorFlow's default")
    if not quiet:
        print(note, file=sys.stderr, flush=True)
    return note
