"""training_jax.pretrain in pieces: a run stopped (at a planned step, by its time limit) and resumed equals
one that never stopped, bit for bit; a lost state starts over and says so; nothing imports TensorFlow. The
whole run takes blocks of 4 updates per dispatch (--steps-per-dispatch, lax.scan) and the pieces one update
per dispatch, so the same equality shows that a block computes what single steps do, bit for bit; a block
moves nothing between host and device but its indices."""
import json
import pathlib
import textwrap

import numpy as np
import pytest

from storage.checkpoint_bundle import read_model_weights
from tests.helpers import JAX_TEST_XLA_FLAGS, export_tiny_run, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


PIECES_SCRIPT = textwrap.dedent('''
    import contextlib, io, json, sys
    sys.modules["tensorflow"] = None  # as on the accelerator machines: any use of TensorFlow fails
    import jax
    from studies.device_path import pretrain_export as pretrain

    study, root = sys.argv[1], sys.argv[2]

    from training_jax.compiles import CompileCount

    train_compiles = []  # per piece: programs of the update compiled (a persistent-cache read counts)
    all_compiles = []  # per piece: every program, the weight initializers' included

    def piece(name, *flags):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), CompileCount() as count:
            outcome = pretrain.main(["--export", study, "--model", "electra", "--out", f"{root}/{name}",
                                     "--state-dir", f"{root}/{name}_state", *flags])
        train_compiles.append(count.names.count("jit(train)"))
        all_compiles.append(count.compiles)
        return outcome, printed.getvalue()

    whole = piece("whole", "--steps-per-dispatch", "4")  # blocks of 4 where no log window, eval or save is nearer
    results = {"whole": whole[0], "whole_blocks": "4 update(s) per dispatch" in whole[1]}
    import pathlib  # the export's cache holds every program, the quick ones too (use_compile_cache's threshold 0)
    results["cached_programs"] = sum(1 for p in (pathlib.Path(study) / "jax_cache").rglob("*") if p.is_file())
    results["first_piece_compiles"] = all_compiles[0]
    results["measured"] = pretrain.measure(study, "config_electra.json", "electra", 3)  # the step compiled above
    results["pieces"] = [piece("pieces", "--pause-at-step", "5"),
                         piece("pieces", "--time-limit-minutes", "0.0001"),  # stops after its first step
                         piece("pieces"), piece("pieces")]
    import shutil
    shutil.copyfile(f"{root}/pieces/metrics.jsonl", f"{root}/pieces_metrics.jsonl")
    shutil.rmtree(f"{root}/pieces_state")  # a new machine: the state is gone, the earlier output is not
    results["lost"] = piece("pieces", "--pause-at-step", "2")

    # One block with every implicit transfer forbidden: only the explicitly placed indices cross.
    guarded = pretrain.open_run(pretrain.parse_args(["--export", study, "--model", "electra", "--out", f"{root}/guarded",
                                                "--steps-per-dispatch", "4"]))
    state, stats, _ = guarded.train_steps(guarded.state, guarded.stats_sum)  # compiled outside the guard
    with jax.transfer_guard("disallow"):
        jax.block_until_ready(guarded.train_steps(state, stats))
    results["guarded_block"] = guarded.block_steps
    results["train_compiles"] = train_compiles

    # The GPU's settings as the command line gives them on this CPU: bfloat16 compute, bf16 attention on every
    # attention layer, the flat update, the bits from rbg; the run record names them.
    optioned = pretrain.open_run(pretrain.parse_args(["--export", study, "--model", "electra", "--out", f"{root}/optioned",
                                                 "--precision", "mixed_bfloat16", "--bf16-attention", "--prng", "rbg",
                                                 "--flat-update"]))
    layers = [layer.attention_self for encoder in optioned.model.encoders() for layer in encoder.transformer_layers]
    results["bf16_attention"] = [layer.compute_dtype_softmax for layer in layers]
    results["prng"] = jax.config.jax_default_prng_impl
    results["optioned_compute_dtype"] = layers[0].compute_dtype
    results["optioned_config_precision"] = optioned.config.mixed_precision
    results["optioned_flat"] = optioned.optimizer.fused
    results["optioned_record"] = optioned.run_record()["step_settings"]
    _, _, loss = optioned.train_steps(optioned.state, optioned.stats_sum)
    results["optioned_loss"] = float(loss)

    # --out is a model folder: a second run on it while the first writes stops at once (exit 2, one line).
    from storage import folder_lock
    with folder_lock.acquire(f"{root}/whole", "pretraining"), contextlib.redirect_stderr(io.StringIO()) as said:
        try:
            pretrain.main(["--export", study, "--model", "electra", "--out", f"{root}/whole"])
            results["second_writer"] = None
        except SystemExit as stop:
            results["second_writer"] = [stop.code, said.getvalue()]
    print("RESULTS" + json.dumps(results))
''')


def without_timing(records):
    from pretrain_loop.base import TIMING_KEYS  # a window's rates

    # and the step's settings: the whole run dispatches blocks of 4, the pieces single steps (the same updates)
    drop = TIMING_KEYS + ("wall_clock_seconds", "compile_seconds", "step_settings")
    return [{k: v for k, v in record.items() if k not in drop} for record in records]


@pytest.fixture(scope="module")
def pieces_run(tmp_path_factory):
    """(the export, its export.json, the runs' folder, what the script returned) of the whole run and the pieces."""
    tmp_path = tmp_path_factory.mktemp("jax_pieces")
    export = export_tiny_run(tmp_path, steps=12, checkpoints=2)
    study = json.loads((export / "export.json").read_text())
    study["log_every"] = 4  # windows that a pause splits: their partial sums must survive it
    study["eval_every"]["electra"] = 4  # (not every step, or no block of 4 would fit between evaluations)
    (export / "export.json").write_text(json.dumps(study))
    root = tmp_path / "runs"
    script = PIECES_SCRIPT.replace("sys.argv[1], sys.argv[2]", f"{str(export)!r}, {str(root)!r}")
    # XLA's default CPU emitters: the bit-for-bit equality of a block of 4 updates and 4 single steps is theirs
    # (tests.helpers.quick_xla_flags)
    return export, study, root, run_script_under_jax(script, REPO_ROOT, xla_flags=JAX_TEST_XLA_FLAGS)


def test_the_gpu_speed_options_reach_the_model_and_the_random_bits(pieces_run):
    results = pieces_run[3]
    assert results["bf16_attention"] and all(results["bf16_attention"])  # every layer of both encoders
    assert results["prng"] == "rbg" and np.isfinite(results["optioned_loss"])
    assert results["optioned_compute_dtype"] == "bfloat16" and results["optioned_config_precision"] == "mixed_bfloat16"
    assert results["optioned_flat"] is True
    recorded = results["optioned_record"]
    assert recorded["precision"] == "mixed_bfloat16" and recorded["platform"] == "cpu"
    assert sorted(recorded["chosen"]) == ["bf16_attention", "flat_update", "precision", "prng"]


def test_the_studies_dry_run_prints_the_gpu_settings_without_building_anything(pieces_run, tmp_path, capsys):
    """The device path's dry runs resolve what run_pretraining.py's does (tests/test_run_pretraining_jax.py checks
    the settings themselves), from an export's config, with a flag passed through."""
    from studies.device_path import pretrain_export as pretrain, run

    export = pieces_run[0]
    gpu = pretrain.main(["--export", str(export), "--model", "electra", "--out", str(tmp_path / "never"), "--dry-run",
                         "--platform", "gpu"])
    assert (gpu.precision, gpu.prng, gpu.flat_update, gpu.bf16_attention) == ("mixed_bfloat16", "rbg", True, True)
    assert "pretraining electra: platform gpu: precision mixed_bfloat16 (default)" in capsys.readouterr().out
    assert not (tmp_path / "never").exists()

    run.main(["--export", str(export), "--out", str(tmp_path / "OUT"), "--dry-run", "--platform", "gpu",
              "--pretrain-flags=--no-flat-update"])
    printed = capsys.readouterr().out
    assert "pretraining electra: platform gpu: precision mixed_bfloat16 (default); prng rbg (default); flat update " \
           "off; " in printed
    assert not (tmp_path / "OUT").exists() and not (tmp_path / "run_work").exists()


def test_a_second_run_on_the_same_out_folder_stops_at_once(pieces_run):
    _, _, root, results = pieces_run
    code, said = results["second_writer"]
    assert code == 2 and f"{root / 'whole'}: another run is pretraining here (pid " in said


def test_a_run_in_pieces_equals_a_run_that_never_stopped(pieces_run):
    export, study, root, results = pieces_run

    assert results["whole"] == "done" and results["whole_blocks"] and results["guarded_block"] == 4
    # the whole run: the block of 4 and the single step (checkpoints at 6 and 12 are no block ends); each piece,
    # resumed or not, its one program; the finished run's rerun ("done already") none
    assert results["train_compiles"] == [2, 1, 1, 1, 0, 1], results["train_compiles"]
    # every program the first piece compiled went into the export's cache, not only those over JAX's 1 s default
    assert results["first_piece_compiles"] > 10 and results["cached_programs"] >= results["first_piece_compiles"]
    rate, first_step_seconds = results["measured"]  # what --device-size measures
    assert rate > 0 and first_step_seconds > 0
    (first, first_log), (second, second_log), (third, third_log), (again, again_log) = results["pieces"]
    assert (first, second, third, again) == ("paused", "paused", "done", "done")
    assert "paused at step 5" in first_log
    assert "resumed at step 5" in second_log and "stopped at step 6/12" in second_log
    assert "resumed at step 6" in third_log and "done already" in again_log

    whole, pieces = root / "whole", root / "pieces"
    for step in study["models"]["electra"]["checkpoint_steps"]:  # 6 and 12, the model folder's checkpoints
        a, b = (read_model_weights(folder / f"ckpt-{step}") for folder in (whole, pieces))
        assert sorted(a) == sorted(b) and len(a) > 10
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    # Every logged metric, training windows and held-out evaluations, is the same number.
    lines = [[json.loads(line) for line in path.read_text().splitlines()]
             for path in (whole / "metrics.jsonl", root / "pieces_metrics.jsonl")]
    assert [r["step"] for r in lines[0] if r["split"] == "train"] == [4, 8, 12]
    assert without_timing(lines[0]) == without_timing(lines[1])

    lost, lost_log = results["lost"]
    assert lost == "paused" and "no saved state" in lost_log and "starting over at step 0" in lost_log
    records = [json.loads(line) for line in (pieces / "metrics.jsonl").read_text().splitlines()]
    # begun again (the earlier lines up to step 12 dropped), not complete
    assert all(r["step"] <= 2 and r["split"] != "run" for r in records)


def test_the_tensorflow_run_writes_the_same_metrics_file(pieces_run, capsys):
    """run_pretraining.py on the export's dataset and config, at the JAX run's cadence (windows of 4, checkpoints
    at 6 and 12, evaluations every 4 and at each checkpoint): its metrics.jsonl has the same lines (split and
    step), the same keys in each, and a run record with the same keys; both are TensorBoard's scalars too."""
    import run_pretraining

    export, study, root, _ = pieces_run
    config = json.loads((export / "config_electra.json").read_text())
    overrides = {key: config[key] for key in ("model_size", "model_hparam_overrides", "train_batch_size",
                                               "eval_batch_size", "num_eval_steps", "num_train_steps",
                                               "num_warmup_steps", "learning_rate", "do_eval")}
    overrides.update(iterations_per_loop=study["log_every"], eval_every_steps=study["eval_every"]["electra"],
                     save_checkpoints_steps=6, extra_checkpoint_steps=[6])
    data_dir = export.parent / "data"
    run_pretraining.main(["--model-name", "electra_tf", "--data-dir", str(data_dir), "--hparams",
                          json.dumps(overrides)])
    assert "step 12/12 (100%)" in capsys.readouterr().out
    tf_lines, jax_lines = ([json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
                           for folder in (data_dir / "models" / "electra_tf", root / "whole"))
    assert [(r["split"], r.get("step")) for r in tf_lines] == [(r["split"], r.get("step")) for r in jax_lines]
    assert [(r["split"], r["step"]) for r in jax_lines if r["split"] == "eval"] == [
        ("eval", 4), ("eval", 6), ("eval", 8), ("eval", 12)]
    assert [sorted(r) for r in tf_lines] == [sorted(r) for r in jax_lines]
    assert tf_lines[-1]["backend"] == "tensorflow" and jax_lines[-1]["backend"] == "jax"
    assert tf_lines[-1]["config"]["num_train_steps"] == jax_lines[-1]["config"]["num_train_steps"] == 12
    for folder in (data_dir / "models" / "electra_tf", root / "whole"):
        for split in ("train", "eval"):
            assert list((folder / "logs" / split).glob("events.out.tfevents.*")), (folder, split)
    assert (data_dir / "models" / "electra_tf" / "logs" / "curves.png").is_file()


def test_packed_examples_round_trip():
    import numpy as np

    from training_jax.arrays import pack_examples, unpack_examples

    ids = np.array([[101, 7, 8, 102, 9, 102, 0, 0], [101, 5, 102, 0, 0, 0, 0, 0]])
    mask = (ids > 0).astype("int64")
    segments = np.array([[0, 0, 0, 0, 1, 1, 0, 0], [0] * 8])
    unpacked = unpack_examples(pack_examples(ids, mask, segments))
    for name, expected in (("input_ids", ids), ("input_mask", mask), ("segment_ids", segments)):
        np.testing.assert_array_equal(unpacked[name], expected)
    with pytest.raises(ValueError, match="one run of 1s"):
        pack_examples(ids, mask, np.array([[0, 1, 0, 0, 1, 1, 0, 0], [0] * 8]))


def test_default_block_divides_the_log_window():
    from training_jax.pretrain import default_block_steps

    assert default_block_steps("cpu", 100) == 1
    assert default_block_steps("gpu", 100) == 25
    assert default_block_steps("gpu", 64) == 32
    assert default_block_steps("tpu", 7) == 7
