"""training_jax.speed_settings: the step's precision and options per platform, and what a flag may change."""
import argparse

import pytest

from common.errors import InputError
from training_jax import speed_settings


def parsed(*flags):
    parser = argparse.ArgumentParser()
    speed_settings.add_step_flags(parser)
    return parser.parse_args(list(flags))


def test_an_accelerator_gets_bfloat16_and_every_proven_option_a_cpu_the_original():
    for platform in ("gpu", "cuda", "tpu", "rocm"):
        settings = speed_settings.resolve_from_args(parsed(), platform)
        assert settings.precision == "mixed_bfloat16" and settings.prng == "rbg"
        assert settings.flat_update and settings.bf16_attention
        assert not settings.scan_layers  # equal, measured slower on an H200
        assert settings.fused_attention == (platform in ("gpu", "cuda"))  # Triton's kernels: NVIDIA's alone
        assert settings.chosen == ()
    cpu = speed_settings.resolve_from_args(parsed(), "cpu")
    assert (cpu.precision, cpu.prng, cpu.flat_update, cpu.bf16_attention, cpu.steps_per_dispatch) == (
        "float32", "threefry2x32", False, False, 1)
    assert speed_settings.resolve_from_args(parsed(), "cpu", "mixed_bfloat16").precision == "mixed_bfloat16"


def test_a_flag_wins_over_the_platform_and_is_named_as_chosen():
    settings = speed_settings.resolve_from_args(parsed("--no-flat-update", "--prng", "threefry2x32", "--scan-layers",
                                                       "--steps-per-dispatch", "4"), "gpu")
    assert (settings.flat_update, settings.prng, settings.scan_layers, settings.steps_per_dispatch) == (
        False, "threefry2x32", True, 4)
    assert settings.chosen == ("flat_update", "prng", "scan_layers", "steps_per_dispatch")
    assert "flat update off; " in settings.describe() and "prng rbg" not in settings.describe()
    assert speed_settings.resolve_from_args(parsed("--precision", "auto"), "gpu").chosen == ()


def test_float32_turns_the_bf16_attention_default_off_and_refuses_the_flag():
    assert speed_settings.resolve_from_args(parsed("--precision", "float32"), "gpu").bf16_attention is False
    with pytest.raises(InputError, match="--bf16-attention: .* only under mixed_bfloat16"):
        speed_settings.resolve_from_args(parsed("--precision", "float32", "--bf16-attention"), "gpu")
    with pytest.raises(InputError, match="add --precision mixed_bfloat16"):
        speed_settings.resolve_from_args(parsed("--bf16-attention"), "cpu")


def test_the_settings_record_round_trips_through_json():
    import json

    settings = speed_settings.resolve_from_args(parsed("--prng", "rbg"), "cpu")
    record = json.loads(json.dumps(settings.to_dict()))
    assert speed_settings.StepSettings(**{**record, "chosen": tuple(record["chosen"])}) == settings
