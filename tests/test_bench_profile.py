"""bench/profile_step_cpu.py: op time of a real (tiny) pretraining step, read back from TensorFlow's
profiler and sorted into kinds by the ops' name scopes and types."""
import argparse

from bench import profile_step_cpu as profiler


def test_kinds_follow_scopes_before_types():
    kind = profiler.kind_of
    assert kind("electra/layer_0/LayerNorm_1/mul_1", "Mul") == "LayerNorm"
    assert kind("gradient_tape/electra/layer_1/output_dropout/stateless_dropout/SelectV2", "SelectV2") == \
        "dropout (random numbers and masks)"
    assert kind("generator/layer_1/dense_3/Gelu/mul_2", "Mul") == "GELU (exact, erf)"
    assert kind("gradient_tape/electra/layer_0/dense/Tensordot/MatMul/MatMul", "_MklMatMul") == "matmuls"
    assert kind("electra/layer_0/self/MatMul", "_MklNativeBatchMatMulV2") == "matmuls"
    assert kind("adam_weight_decay/mul_86", "Mul") == "optimizer and clipping"
    assert kind("stateless_random_uniform_1/StatelessRandomUniformV2", "StatelessRandomUniformV2") == \
        "masking and sampling random numbers"
    assert kind("add_9", "Sub") == profiler.OTHER


def test_profiles_a_tiny_step(capsys):
    args = argparse.Namespace(precision="fp32", model_size="electra_tiny", batch_size=4, seq_length=16,
                              steps=1, warmup=1, threads=2, inter_op_threads=1)
    per_step, wall, losses = profiler.profile(args)
    assert wall > 0 and per_step
    assert len(losses) == 2 and all(loss > 0 for loss in losses), losses
    by_kind = profiler.report(per_step, wall)
    for kind in ("matmuls", "dropout (random numbers and masks)", "LayerNorm", "GELU (exact, erf)",
                 "optimizer and clipping"):
        assert by_kind.get(kind, 0) > 0, (kind, by_kind)
    assert abs(sum(by_kind.values()) - sum(per_step.values())) < 1e-6 * sum(per_step.values())
    assert not any("::" in name or op_type in profiler.CONTAINERS for name, op_type in per_step)
    printed = capsys.readouterr().out
    assert "| matmuls |" in printed and "top 15 op types:" in printed
