"""training/xla_fusion.py: the TF_XLA_FLAGS it sets, and on a real (tiny) step that XLA then runs the
elementwise ops while the matmuls stay oneDNN's, with the same losses up to rounding."""
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import JAX_QUICK_XLA_FLAGS
from training.xla_fusion import ENV, fuse_elementwise_with_xla

OURS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE"


def test_sets_the_three_flags_and_says_so(capsys):
    environ = {}
    note = fuse_elementwise_with_xla(environ)
    assert environ[ENV] == OURS
    assert capsys.readouterr().err.strip() == note and "FUSIBLE" in note


def test_keeps_the_users_flags_and_lets_theirs_win():
    environ = {ENV: "--tf_xla_clustering_debug --tf_xla_auto_jit=1"}
    fuse_elementwise_with_xla(environ, quiet=True)
    assert environ[ENV] == ("--tf_xla_clustering_debug --tf_xla_auto_jit=1 --tf_xla_cpu_global_jit "
                            "--tf_xla_ops_to_cluster=FUSIBLE")
    assert fuse_elementwise_with_xla(environ, quiet=True) is None  # nothing left to add
    assert environ[ENV].count("--tf_xla_cpu_global_jit") == 1


def profile_tiny_steps(tmp_path, runs):
    """{name: the profile's JSON} of one tiny step per {name: extra flags}, the processes run at once (each
    pays TensorFlow's start-up and, with fusion, XLA's compile). One layer, and XLA's back end at its lowest
    optimisation level with its older fusion emitters (tests.helpers.JAX_QUICK_XLA_FLAGS: this file ~15% less
    CPU, the compile 2x cheaper): which ops run where does not depend on either."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", XLA_FLAGS=JAX_QUICK_XLA_FLAGS)
    processes = {name: subprocess.Popen(
        [sys.executable, "-m", "bench.profile_step_cpu", "--model-size", "electra_tiny", "--model-hparams",
         json.dumps({"num_layers": 1}), "--batch-size", "4", "--seq-length", "16", "--steps", "1", "--warmup", "1",
         "--json", str(tmp_path / f"{name}.json"), *flags],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for name, flags in runs.items()}
    for name, process in processes.items():
        output, _ = process.communicate()
        assert process.returncode == 0, (name, output[-3000:])
    return {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in runs}


def test_xla_runs_the_elementwise_ops_and_onednn_the_matmuls(tmp_path):
    profiles = profile_tiny_steps(tmp_path, {"plain": [], "fused": ["--xla-fuse-elementwise"]})
    plain, fused = profiles["plain"], profiles["fused"]
    assert "_XlaRun" not in plain["op_types"]
    assert fused["op_types"].get("_XlaRun", 0) > 0, fused["op_types"]
    matmuls = ("_MklMatMul", "MatMul", "_MklBatchMatMulV2", "BatchMatMulV2")
    assert sum(fused["op_types"].get(t, 0) for t in matmuls) > 0, fused["op_types"]
    # GELU's erf, LayerNorm's rsqrt (model/elementwise_gradients.py), the bias gradients: TensorFlow kernels
    # before, inside the clusters now.
    for elementwise in ("Erf", "Rsqrt", "BiasAddGrad"):
        assert elementwise in plain["op_types"] and elementwise not in fused["op_types"], elementwise
    # Same weights, batch and random streams: the first loss and the one after an update agree to rounding.
    assert fused["losses"] == pytest.approx(plain["losses"], rel=1e-5)
