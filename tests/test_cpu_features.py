"""training/cpu_features.py: /proc/cpuinfo parsing and the emulated-bfloat16 warning (no TensorFlow)."""
import os

import pytest

from tests.helpers import ZEN3
from training.cpu_features import (CpuFeatures, bf16_cpu_warning, bf16_matmuls_note, parse_cpuinfo,
                                   read_cpu_features)

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9B14 96-Core Processor
flags\t\t: fpu sse sse2 fma avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 avx512_vnni
"""


def test_parse_zen3_avx2_only():
    cpu = parse_cpuinfo(ZEN3)
    assert cpu.model == "AMD EPYC 7B13 64-Core Processor"
    assert cpu.has("avx2") and cpu.has("fma") and not cpu.has("avx512f")
    assert cpu.known and not cpu.native_bf16
    assert cpu.describe() == ("AMD EPYC 7B13 64-Core Processor; avx2 fma, no avx512f avx512_bf16 amx_tile "
                              "amx_bf16 (bfloat16 emulated)")


def test_parse_zen4_native_bf16():
    cpu = parse_cpuinfo(ZEN4)
    assert cpu.model == "AMD EPYC 9B14 96-Core Processor"
    assert cpu.has("avx512f") and cpu.has("avx512_bf16") and cpu.native_bf16
    assert "native bfloat16" in cpu.describe()
    assert parse_cpuinfo("model name : X\nflags : avx2 amx_tile amx_bf16\n").native_bf16


def test_an_isa_cap_in_the_environment_makes_bfloat16_emulated(tmp_path):
    """The AVX2 stand-in (ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2) on a native-bfloat16 CPU: the
    libraries emulate bfloat16, so the benchmark must skip its bfloat16 peak as on a Zen 3."""
    (tmp_path / "cpuinfo").write_text(ZEN4)
    assert read_cpu_features(tmp_path / "cpuinfo", environ={}).native_bf16
    assert read_cpu_features(tmp_path / "cpuinfo", environ={"ONEDNN_MAX_CPU_ISA": "avx512_core_amx"}).native_bf16
    capped = read_cpu_features(tmp_path / "cpuinfo",
                               environ={"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"})
    assert not capped.native_bf16 and capped.has("avx512_bf16")
    assert capped.describe().endswith("(bfloat16 emulated under ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2)")
    assert not read_cpu_features(tmp_path / "cpuinfo", environ={"ATEN_CPU_CAPABILITY": "default"}).native_bf16


def test_unreadable_or_non_x86_is_unknown(tmp_path):
    assert not read_cpu_features(tmp_path / "missing").known
    assert not parse_cpuinfo("processor : 0\nBogoMIPS : 50.00\nFeatures : fp asimd\n").known


def test_warning_decision():
    zen3, zen4 = parse_cpuinfo(ZEN3), parse_cpuinfo(ZEN4)
    message = bf16_cpu_warning("mixed_bfloat16", True, zen3)
    assert message and "\n" not in message
    assert message.startswith("warning: mixed_bfloat16 on a CPU without native bfloat16 (AMD EPYC 7B13")
    assert "emulated" in message and "0.85x of float32" in message
    assert '--hparams \'{"mixed_precision": "float32"}\'' in message
    assert bf16_cpu_warning("mixed_bfloat16", True, zen4) is None  # native bfloat16
    assert bf16_cpu_warning("mixed_bfloat16", False, zen3) is None  # a GPU or TPU runs it
    assert bf16_cpu_warning("float32", True, zen3) is None
    assert bf16_cpu_warning("mixed_float16", True, zen3) is None
    assert bf16_cpu_warning("mixed_bfloat16", True, CpuFeatures()) is None  # features unknown


def test_run_pretraining_prints_one_line(monkeypatch, capsys):
    import run_pretraining
    from training import cpu_features

    monkeypatch.setattr(cpu_features, "read_cpu_features", lambda: parse_cpuinfo(ZEN3))
    run_pretraining.warn_emulated_bf16("mixed_bfloat16", "CPU")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: mixed_bfloat16")
    for precision, kind in (("mixed_bfloat16", "GPU"), ("mixed_bfloat16", "TPU"), ("float32", "CPU")):
        run_pretraining.warn_emulated_bf16(precision, kind)
    monkeypatch.setattr(cpu_features, "read_cpu_features", lambda: parse_cpuinfo(ZEN4))
    run_pretraining.warn_emulated_bf16("mixed_bfloat16", "CPU")
    assert capsys.readouterr().err == ""


def test_the_bf16_matmuls_note_only_where_the_cpu_has_native_bfloat16_and_the_option_is_off():
    zen3, zen4 = parse_cpuinfo(ZEN3), parse_cpuinfo(ZEN4)
    note = bf16_matmuls_note("float32", True, zen4)
    assert note.count("\n") == 0 and note.startswith("note: this CPU has native bfloat16 (AMD EPYC 9B14")
    assert "--matmul-dtype bfloat16" in note and "the default stays the original's float32" in note
    assert bf16_matmuls_note("bfloat16", True, zen4) is None  # already on
    assert bf16_matmuls_note("float32", False, zen4) is None  # a GPU
    assert bf16_matmuls_note("float32", True, zen3) is None  # emulated bfloat16: slower, nothing to suggest
    assert bf16_matmuls_note("float32", True, CpuFeatures()) is None  # features unknown


def test_run_finetuning_says_it_once_unless_a_config_has_the_option(monkeypatch, capsys):
    import types

    import run_finetuning
    from training import cpu_features

    import tensorflow as tf

    gpus = []  # what TensorFlow sees, whatever this machine has
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: gpus if kind == "GPU" else [])
    monkeypatch.setattr(cpu_features, "read_cpu_features", lambda: parse_cpuinfo(ZEN4))
    plain, option = types.SimpleNamespace(matmul_dtype="float32"), types.SimpleNamespace(matmul_dtype="bfloat16")
    run_finetuning.note_bf16_matmuls([plain, plain])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: this CPU has native bfloat16")
    run_finetuning.note_bf16_matmuls([plain, option])
    gpus.append("GPU:0")  # TensorFlow trains on the GPU: no note
    run_finetuning.note_bf16_matmuls([plain])
    gpus.clear()
    monkeypatch.setattr(cpu_features, "read_cpu_features", lambda: parse_cpuinfo(ZEN3))
    run_finetuning.note_bf16_matmuls([plain])
    assert capsys.readouterr().err == ""


def test_onednn_is_turned_on_only_where_tensorflow_leaves_it_off():
    """TensorFlow's default is on with VNNI/BF16/AMX (Zen 4) and off on an AVX2-only CPU (Zen 3), where
    the step runs ~2x slower without it; a value the user set is never overridden."""
    from training.cpu_features import turn_on_onednn

    zen3, zen4 = parse_cpuinfo(ZEN3), parse_cpuinfo(ZEN4)
    assert zen4.tf_onednn_by_default and not zen3.tf_onednn_by_default
    environ = {}
    note = turn_on_onednn(environ, zen3, quiet=True)
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": "1"} and note.count("\n") == 0
    assert "AMD EPYC 7B13" in note and "TF_ENABLE_ONEDNN_OPTS=0" in note
    for user_choice in ("0", "1"):
        environ = {"TF_ENABLE_ONEDNN_OPTS": user_choice}
        assert turn_on_onednn(environ, zen3, quiet=True) is None
        assert environ == {"TF_ENABLE_ONEDNN_OPTS": user_choice}
    for features in (zen4, CpuFeatures()):  # on already; or not an x86 Linux host
        environ = {}
        assert turn_on_onednn(environ, features, quiet=True) is None and environ == {}


def test_run_finetuning_turns_on_onednn_first(monkeypatch, capsys, tmp_path):
    """main() sets it and says so in one line on stderr before reading anything (here: a missing data
    dir, exit 2), so before TensorFlow is imported in a fresh process. (run_pretraining.py: in prepare(),
    once the precision is known; tests/test_run_pretraining.py.)"""
    import run_finetuning
    from training import cpu_features

    monkeypatch.setattr(cpu_features, "read_cpu_features", lambda **_: parse_cpuinfo(ZEN3))
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    with pytest.raises(SystemExit):
        run_finetuning.main(["--model-name", "m", "--data-dir", str(tmp_path / "missing"), "--task", "rte"])
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "1"
    assert capsys.readouterr().err.startswith("note: oneDNN kernels turned on (TF_ENABLE_ONEDNN_OPTS=1)")


def test_not_for_mixed_bfloat16():
    """oneDNN has no bfloat16 matmul without AVX-512: TensorFlow's default (Eigen's emulation) stays."""
    from training.cpu_features import turn_on_onednn

    environ = {}
    assert turn_on_onednn(environ, parse_cpuinfo(ZEN3), quiet=True, precision="mixed_bfloat16") is None
    assert environ == {}
