"""training_jax.pretrain's blocks of updates (--steps-per-dispatch K, lax.scan): a run in blocks computes the
same weights and metrics as one dispatch per step, bit for bit; a block moves nothing between host and device
but its indices; log windows, evaluations and checkpoints still land on their exact steps."""
import json
import pathlib
import textwrap

import numpy as np

from tests.helpers import export_tiny_run, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

BLOCKS_SCRIPT = textwrap.dedent('''
    import contextlib, io, json, sys
    sys.modules["tensorflow"] = None
    import jax
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # later runs load the programs
    from training_jax import pretrain

    study, root = sys.argv[1], sys.argv[2]

    def run(name, *flags):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            outcome = pretrain.main(["--study", study, "--arm", "electra", "--out", f"{root}/{name}",
                                     "--state-dir", f"{root}/{name}_state", *flags])
        return outcome, printed.getvalue()

    results = {"single": run("single", "--steps-per-dispatch", "1"),
               "blocks": run("blocks", "--steps-per-dispatch", "4")}

    # One block with every implicit transfer forbidden: only the explicitly placed indices cross.
    args = pretrain.parse_args(["--study", study, "--arm", "electra", "--out", f"{root}/guarded",
                                "--steps-per-dispatch", "4"])
    guarded = pretrain.Run(args)
    state, stats, _ = guarded.train_steps(guarded.state, guarded.stats_sum)  # compiled outside the guard
    with jax.transfer_guard("disallow"):
        state, stats, loss = guarded.train_steps(state, stats)
        jax.block_until_ready(loss)
    results["guarded_block"] = guarded.block_steps
    print("RESULTS" + json.dumps(results))
''')


def test_blocks_of_updates_equal_one_dispatch_per_step(tmp_path):
    export = export_tiny_run(tmp_path, steps=14, checkpoints=2)  # checkpoints at 7 and 14: not block ends
    study = json.loads((export / "study.json").read_text())
    study["log_every"] = 4
    (export / "study.json").write_text(json.dumps(study))
    root = tmp_path / "runs"
    script = BLOCKS_SCRIPT.replace("sys.argv[1], sys.argv[2]", f"{str(export)!r}, {str(root)!r}")
    results = run_script_under_jax(script, REPO_ROOT)

    assert results["single"][0] == results["blocks"][0] == "done"
    assert "4 update(s) per dispatch" in results["blocks"][1]
    assert results["guarded_block"] == 4
    single, blocks = root / "single", root / "blocks"
    for step in study["arms"]["electra"]["checkpoint_steps"]:
        a, b = np.load(single / f"weights-{step}.npz"), np.load(blocks / f"weights-{step}.npz")
        assert sorted(a.files) == sorted(b.files) and len(a.files) > 10
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    records = [[json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
               for folder in (single, blocks)]
    timing = ("steps_per_second", "wall_clock_seconds", "compile_seconds")
    assert [r["step"] for r in records[1] if r["split"] == "train"] == [4, 8, 12, 14]
    assert [{k: v for k, v in r.items() if k not in timing} for r in records[0]] == \
        [{k: v for k, v in r.items() if k not in timing} for r in records[1]]


def test_default_block_divides_the_log_window():
    from training_jax.pretrain import default_block_steps

    assert default_block_steps("cpu", 100) == 1
    assert default_block_steps("gpu", 100) == 25
    assert default_block_steps("gpu", 64) == 32
    assert default_block_steps("tpu", 7) == 7
