"""The members of a task trained at once (training_jax.members, --vmap-models) compute what separate runs do.

In one fresh JAX process, micro encoder with dropout, a synthetic task whose last training batch is
smaller: two models of one trial (the same batches) and two trials of one model (each its own batch
order) are trained by one vmapped update; each member's logged losses and learning rates, dev
metrics and final weights equal the member trained alone by TrialRunner's own steps. Tolerance: a
vmapped matmul is a batched one, which XLA may sum in another order, so the two differ by float32
rounding (a few ulps a step) that training carries along: losses within 1e-5 relative, weights within
1e-5 of the largest weight, well below what one update moves them (on the CPU they come out equal
bit for bit). Compiles: one vmapped train program for every member and step (the last batch grown, no
second shape), none for the second pair of members or the CLI's. The CLI with
--vmap-models and two seeds writes the results files of the run without it (same keys, trials, seeds,
metrics within rounding).
"""
import json
import pathlib
import textwrap

import numpy as np

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import dataclasses, functools, json, pathlib, sys, time
    sys.modules["tensorflow"] = None  # the accelerator machines have none
    import jax, numpy as np
    from bench.finetune_jax_speed import synthetic_tasks
    from configs.pretraining_config import PretrainingConfig
    from finetune import arrays
    from finetune.trials import TrialRunner
    from tests.finetune_fixtures import RecordingReporter
    from training_jax import finetune
    from training_jax.compiles import CompileCount
    from training_jax.members import train_members

    root = pathlib.Path(ROOT)
    synthetic_tasks(root / "tasks", sizes={"rte": (20, 13)}, vocab_size=100, max_seq_length=32)  # batches 8, 8, 4
    pretraining = PretrainingConfig.create({"model_size": "electra_tiny", "model_hparam_overrides": MODEL,
                                            "vocab_size": 100})
    pretraining.save(root / "config.json")
    data = arrays.load_task_data(root / "tasks")[0]
    hparams = {"train_batch_size": 8, "eval_batch_size": 8, "iterations_per_loop": 1, "warmup_proportion": 0.5,
               "pad_to_multiple": 32, "save_finetuned_models": False, "learning_rate": 1e-3}
    config = arrays.task_config(root / "tasks", "rte", pretraining, {**hparams, "max_train_steps": 5})
    loaders = [finetune.encoder_loader(pretraining, []),
               finetune.encoder_loader(dataclasses.replace(pretraining, seed=7), [])]
    record = finetune.pretrained_record(root / "config.json", pretraining, [])

    def runner(model_number, losses):
        return TrialRunner(record, config, [data], root / "runs", say=lambda _: None,
                           trainer_class=finetune.JaxTrainer, load_encoder=loaders[model_number],
                           reporter_factory=lambda trial: RecordingReporter(losses.setdefault(trial, [])),
                           results_dir=root / f"runs-{model_number}")

    def weights(started):
        return [np.asarray(v.value).tolist() for v in started.model.trainable_variables]

    def outcome(started, scored, losses):
        return {"losses": losses, "metrics": scored["rte"]["metrics"], "weights": weights(started)}

    results = {}
    for label, members in (("two models", [(0, 0), (1, 0)]), ("two trials", [(0, 0), (0, 1)])):
        losses = [{} for _ in members]
        runners = [runner(model, losses[n]) for n, (model, _) in enumerate(members)]
        started = [r.start_trial(trial) for r, (_, trial) in zip(runners, members)]
        count = CompileCount()
        train_members([s.trainer for s in started], [r.train_arguments(s) for r, s in zip(runners, started)])
        compiled = count.names
        together = [outcome(s, r.score_trial(s, 0.0), losses[n][trial])
                    for n, (r, s, (_, trial)) in enumerate(zip(runners, started, members))]
        alone = []
        for model, trial in members:
            own = {}
            single = runner(model, own)
            begun = single.start_trial(trial)
            begun.trainer.train(*single.train_arguments(begun))
            alone.append(outcome(begun, single.score_trial(begun, 0.0), own[trial]))
        results[label] = {"together": together, "alone": alone, "compiled": compiled}

    # the CLI, one model and two seeds (the programs above serve: no new compile), with and without --vmap-models
    common = ["--tasks-dir", str(root / "tasks"), "--config", str(root / "config.json"), "--seeds", "2",
              "--hparams", json.dumps({**hparams, "max_train_steps": 3}), "--weights", "none"]
    for way, extra in (("vmapped", ["--vmap-models"]), ("separate", [])):
        finetune.main(common + ["--out", str(root / way), "--stats", str(root / way / "stats.json")] + extra)
    print("RESULTS" + json.dumps(results))
''')


def test_vmapped_members_equal_separate_runs(tmp_path):
    script = SCRIPT.replace("ROOT", repr(str(tmp_path))).replace("MODEL", repr({**MICRO_MODEL, "num_layers": 1}))
    results = run_script_under_jax(script, REPO_ROOT)
    for label in ("two models", "two trials"):
        run = results[label]
        assert run["compiled"].count("jit(update)") == (1 if label == "two models" else 0), run["compiled"]
        for together, alone in zip(run["together"], run["alone"]):
            losses, own = np.array(together["losses"]), np.array(alone["losses"])
            assert losses.shape == own.shape == (5, 2)
            np.testing.assert_allclose(losses[:, 1], own[:, 1], rtol=1e-6)  # learning rates
            np.testing.assert_allclose(losses[:, 0], own[:, 0], rtol=1e-5)
            scale = max(np.abs(np.array(w)).max() for w in alone["weights"])
            worst = max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(together["weights"], alone["weights"]))
            print(f"{label}: max |weight difference| {worst:.1e} (largest weight {scale:.1e})")
            assert worst <= 1e-5 * scale
            assert together["metrics"].keys() == alone["metrics"].keys()
            for name, value in alone["metrics"].items():
                assert abs(together["metrics"][name] - value) <= 1e-4 * max(1.0, abs(value)), name
        first, second = run["alone"]
        assert not np.allclose(first["losses"], second["losses"])  # the members differ: the test can fail

    stats = {way: json.loads((tmp_path / way / "stats.json").read_text()) for way in ("vmapped", "separate")}
    assert [job["updates"] for job in stats["vmapped"]["jobs"]] == [job["updates"] for job in stats["separate"]["jobs"]]
    assert all("jit(update)" not in job["compiled"] for job in stats["vmapped"]["jobs"])  # the one above served
    vmapped = json.loads((tmp_path / "vmapped" / "rte_results.json").read_text())
    separate = json.loads((tmp_path / "separate" / "rte_results.json").read_text())
    assert vmapped.keys() == separate.keys() and vmapped["complete"] and vmapped["trials_done"] == 2
    seeds = [t["seed"] for t in vmapped["trials"]]
    assert seeds == [t["seed"] for t in separate["trials"]] and len(set(seeds)) == 2
    for ours, theirs in zip(vmapped["trials"], separate["trials"]):
        assert ours.keys() == theirs.keys()
        for name, value in theirs["metrics"].items():
            assert abs(ours["metrics"][name] - value) <= 1e-4 * max(1.0, abs(value)), name


def test_members_batches_of_other_bucket_lengths_are_padded_as_the_longer_bucket():
    """With length bucketing the members' batches of one step can differ in length: each is padded to the
    longest exactly as a batch of that bucket would be (zeros, input_mask 0); scalars are only stacked."""
    from finetune.batches import pad_batch
    from training_jax.members import stack_batches

    rng = np.random.default_rng(0)
    sequences = {"input_ids": [rng.integers(5, 100, n).astype(np.int32) for n in (5, 30, 12, 7)],
                 "segment_ids": [np.ones(n, np.int32) for n in (5, 30, 12, 7)]}
    short, long = pad_batch(sequences, [0, 2], 32), pad_batch(sequences, [1, 3], 64)
    labels = {"labels": np.array([1, 0])}
    stacked = stack_batches([{**short, **labels}, {**long, **labels}])
    as_long_bucket = pad_batch(sequences, [0, 2], 64)
    for key in ("input_ids", "segment_ids", "input_mask"):
        assert stacked[key].shape == (2, 2, 64)
        np.testing.assert_array_equal(stacked[key][0], as_long_bucket[key])
        np.testing.assert_array_equal(stacked[key][1], long[key])
    assert stacked["labels"].tolist() == [[1, 0], [1, 0]]
    same = stack_batches([short, short])  # equal lengths: stacked as they are
    assert same["input_ids"].shape == (2, 2, 32) and (same["input_ids"][1] == short["input_ids"]).all()
