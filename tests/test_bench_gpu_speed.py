"""bench/gpu_speed.py on a micro model under JAX on the CPU: the script runs as a GPU would run it, and the
lowered steps have the structure the changes promise (fewer matmuls, no sort, fewer reductions, matmuls that do
not grow with depth)."""
import pathlib
import textwrap

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import json, sys
    sys.modules["tensorflow"] = None
    import jax, numpy as np
    from bench import gpu_speed
    from bench.pretrain_step_gpu import synthetic_batch
    flags = ["--model-size", "electra_small", "--batch-size", "4", "--seq-length", "32", "--seconds", "0.2",
             "--steps-per-dispatch", "3", "--examples", "32", "--no-finetuning", "--precision", "float32",
             "--hparams", HPARAMS]
    rows = gpu_speed.main(flags + ["--variants", "today,new"])
    args = gpu_speed.parse_args(flags)
    examples = synthetic_batch(np.random.default_rng(0), 32, 32, 120)
    flat = gpu_speed.variants(False)["new + flat update"]
    rows.append(gpu_speed.measure_variant(args, "flat", flat, examples, jax.devices()[0], timed=False))
    hparams = json.loads(HPARAMS)
    hparams["model_hparam_overrides"]["num_layers"] = 3
    deeper = gpu_speed.parse_args(flags[:-1] + [json.dumps(hparams)])
    for name in ("new + scan_layers", "new"):  # lowered only: the structure of a 3-layer model's step
        rows.append(gpu_speed.measure_variant(deeper, name, gpu_speed.variants(False)[name], examples,
                                              jax.devices()[0], timed=False))
    print("RESULTS" + json.dumps(rows))
''')


def test_today_and_new_steps_side_by_side():
    import json

    hparams = {"model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}, "generator_hidden_size": 0.5,
               "vocab_size": 120}  # above the default [CLS] / [SEP] / [MASK] ids the synthetic batches use
    script = SCRIPT.replace("HPARAMS", repr(json.dumps(hparams)))
    today, new, flat, scanned, unrolled = run_script_under_jax(script, REPO_ROOT)
    assert [r["variant"] for r in (today, new)] == ["today", "new"]
    assert (today["steps_per_dispatch"], new["steps_per_dispatch"]) == (1, 3)
    assert all(r["steps_per_s"] > 0 and r["compile_s"] > 0 for r in (today, new))
    # one Q/K/V matmul instead of three, forward and both backward products: 6 fewer per layer, 2 towers
    assert today["structure"]["dot_general"] - new["structure"]["dot_general"] == 6 * 2
    assert today["structure"]["sort_or_top_k"] > 0 and new["structure"]["sort_or_top_k"] == 0
    # the flat update: one squared-norm reduction over all gradients instead of one per variable (dozens here)
    assert new["structure"]["reduce"] - flat["structure"]["reduce"] > 20
    # each encoder's layers as one scan: a 3-layer step holds the layer's matmuls once, as the 1-layer step does,
    # where unrolled they are there three times
    assert scanned["structure"]["dot_general"] == new["structure"]["dot_general"]
    assert unrolled["structure"]["dot_general"] - scanned["structure"]["dot_general"] > 2 * 2 * 6
