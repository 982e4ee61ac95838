"""bench/gpu_speed.py on a micro model under JAX on the CPU, as a GPU window runs it: one bounded run whose rows
reach gpu_speed.jsonl as they are measured (a header first, Hugging Face's row before the first JAX variant
starts, every row before the final table), which ends inside its bound plus one measurement's overrun, skips
what would not fit with the line that says so, and times each compile from before tracing. No speed is
asserted. bench/pretrain_step_gpu.py's build and synthetic batches are what it runs on."""
import json
import pathlib
import re
import textwrap

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BOUND_S = 40.0  # the micro run: about 5 s of imports, 10-25 s of Hugging Face, 13-25 s per JAX variant
SLACK_S = 5.0  # the final table and the last records, after the last measurement

SCRIPT = textwrap.dedent('''
    import contextlib, io, json, sys, time
    sys.modules["tensorflow"] = None  # the GPU image has none
    from bench import gpu_speed
    from training_jax.speed_settings import resolve
    OUT, FLAGS = sys.argv[1], json.loads(sys.argv[2])
    jsonl = gpu_speed.pathlib.Path(OUT) / gpu_speed.JSONL
    seen = {}

    def snapshot(moment, function):
        def wrapped(*args, **kwargs):
            seen.setdefault(moment, [json.loads(line) for line in jsonl.read_text().splitlines()])
            return function(*args, **kwargs)
        return wrapped

    gpu_speed.measure_variant = snapshot("first JAX variant", gpu_speed.measure_variant)
    gpu_speed.table = snapshot("final table", gpu_speed.table)
    printed = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(printed):
        rows = gpu_speed.main(["--out", OUT] + FLAGS)
    elapsed = time.perf_counter() - start
    gpu = resolve("gpu")
    names = {name: resolve("gpu", "mixed_bfloat16", **overrides).to_dict()
             for name, overrides in gpu_speed.variant_overrides(gpu, "gpu").items()}
    print("RESULTS" + json.dumps({"rows": rows, "elapsed": elapsed, "printed": printed.getvalue(), "seen": seen,
                                  "file": [json.loads(line) for line in jsonl.read_text().splitlines()],
                                  "gpu_defaults": gpu.to_dict(), "gpu_variants": names}, default=str))
''')


def run_bounded(tmp_path):
    hparams = {"model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}, "generator_hidden_size": 0.5,
               "vocab_size": 120}  # above the [CLS] / [SEP] / [MASK] ids the synthetic batches use
    flags = ["--max-seconds", str(BOUND_S), "--first-estimate", "1", "--model-size", "electra_small",
             "--batch-size", "4", "--seq-length", "32", "--seconds", "1", "--examples", "32", "--precision",
             "float32", "--hparams", json.dumps(hparams), "--variants", "defaults,defaults + scan_layers"]
    script = SCRIPT.replace("sys.argv[1], json.loads(sys.argv[2])", f"{str(tmp_path)!r}, {flags!r}")
    return run_script_under_jax(script, REPO_ROOT)


def test_a_bounded_run_keeps_each_row_as_it_is_measured(tmp_path):
    result = run_bounded(tmp_path)
    rows, printed, records = result["rows"], result["printed"], result["file"]

    header = records[0]
    assert header["kind"] == "header" and header["platform"] == "cpu" and header["jax"] and header["keras"]
    assert "--max-seconds" in header["command"] and header["date"] and header["defaults"]["precision"] == "float32"
    assert records[1:] == rows + [r for r in records if r.get("variant") == "fine-tuning"]

    hf, defaults = rows[0], rows[1]
    assert hf["variant"] == "hf"
    if "error" in hf:  # torch or transformers missing: said in the row
        assert "not available" in hf["error"]
    else:
        assert hf["precision"] == "float32" and hf["steps_per_s"] > 0 and hf["hf_device"] == "cpu", hf
    assert defaults["variant"] == "defaults" and defaults["settings"]["platform"] == "cpu"
    assert defaults["settings"]["chosen"] == ["precision"] and defaults["steps_per_dispatch"] == 1
    assert 0 < defaults["lower_s"] < defaults["compile_s"] and 0 < defaults["xla_s"] < defaults["compile_s"]
    assert defaults["compile_s"] >= defaults["lower_s"] + defaults["xla_s"] + defaults["first_block_s"] - 1e-6
    assert defaults["steps_per_s"] > 0 and defaults["loss"] > 0 and defaults["structure"]["dot_general"] > 0
    if "error" not in hf:
        assert abs(defaults["x_hf"] - defaults["steps_per_s"] / hf["steps_per_s"]) < 1e-9
    for row in rows:
        assert row["device"] == "cpu cpu" and row["batch_size"] == 4 and row["seq_length"] == 32

    # on the disk before the next measurement began, and all of them before the final table
    assert [r["kind"] for r in result["seen"]["first JAX variant"]] == ["header", "hf"]
    assert result["seen"]["final table"] == records

    # whatever did not fit was skipped with its line: the fine-tuning half always here (its estimate is minutes),
    # and the second variant unless the machine was quick enough for it
    assert re.search(r"fine-tuning: skipped: would not fit \(needs ~300 s, -?\d+ s left\)", printed)
    for row in rows[2:]:
        if row["kind"] == "skipped":
            assert re.search(r"needs ~\d+ s, \d+ s left", row["reason"]), row  # rounded in the line: "14 s, 14 s"
            assert row["needs_s"] > row["left_s"] and f"row {row['variant']}: skipped: would not fit" in printed
        else:
            assert row["kind"] == "variant" and row["steps_per_s"] > 0
    overrun = max(row.get("took_s", 0.0) for row in rows)
    assert result["elapsed"] <= BOUND_S + overrun + SLACK_S, (result["elapsed"], overrun)
    assert "| defaults | 1 |" in printed and "| hf | 1 | none (eager) |" in printed

    # on a GPU: the product's defaults first, then each option toggled alone, the latest decided first
    gpu_variants = result["gpu_variants"]
    assert list(gpu_variants) == ["defaults", "defaults - fused_attention", "defaults - flat_update",
                                  "defaults - rbg", "defaults - bf16_attention", "defaults - blocks",
                                  "defaults in float32", "defaults + scan_layers"]
    assert gpu_variants["defaults"] == result["gpu_defaults"]
    for name, settings in gpu_variants.items():
        differing = {k for k, v in settings.items() if v != result["gpu_defaults"][k] and k != "chosen"}
        expected = {"defaults": set(), "defaults - blocks": {"steps_per_dispatch"},
                    "defaults - rbg": {"prng"}, "defaults in float32": {"precision", "bf16_attention"}}
        assert differing == expected.get(name, {name.split()[-1]}), (name, differing)
