"""Fine-tuning under JAX compiles once and computes what it computed before (issue 33).

In one fresh JAX process, on a micro encoder with dropout and two synthetic two-class tasks whose last
training batch is smaller: the zero-weight rows that fill that batch leave its loss and gradients as they
were (sum and mean); a second trial, a second model and a second task compile nothing (jax.monitoring);
the shared program, with the schedule's step counts as inputs and the last batch filled, gives the losses
and learning rates of a trainer that compiles its own steps the old way (own programs, the last batch at
its size, step counts as constants); --bf16's encoder computes in bfloat16 and its first loss is
float32's within rounding; the CLI trains two models on both tasks in one process, the task
with more updates first, and writes each model's results file. The studies' benchmark's measure() runs today's path
and the new one (buckets, K updates per dispatch) on a tiny config and returns their figures: the new one
compiles at most one training program per bucket (speed is printed, never asserted).
"""
import json
import pathlib
import textwrap

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import dataclasses, functools, json, pathlib, sys
    sys.modules["tensorflow"] = None  # the accelerator machines have none
    import jax, keras, numpy as np
    from studies.device_path.synthetic_tasks import synthetic_tasks
    from configs.pretraining_config import PretrainingConfig
    from studies.device_path import task_arrays as arrays
    from finetune.batches import EXAMPLE_WEIGHT, grow_rows
    from finetune.loop import build_optimizer, model_inputs, task_batches
    from finetune.model import FinetuningModel, make_head
    from finetune.trials import TrialRunner
    from tests.finetune_fixtures import RecordingReporter
    from studies.device_path import finetune
    from training_jax.compiles import CompileCount

    root = pathlib.Path(ROOT)
    # rte: 12 examples (batches of 8 and 4), dev 8; mrpc: 20 (8, 8, 4), dev 13 (8 and 5)
    synthetic_tasks(root / "tasks", sizes={"rte": (12, 8), "mrpc": (20, 13)}, vocab_size=100, max_seq_length=32)
    pretraining = PretrainingConfig.create({"model_size": "electra_tiny", "model_hparam_overrides": MODEL,
                                            "vocab_size": 100})
    pretraining.save(root / "config.json")
    data = {d.task.name: d for d in arrays.load_task_data(root / "tasks")}
    hparams = {"train_batch_size": 8, "eval_batch_size": 8, "iterations_per_loop": 1, "warmup_proportion": 0.5,
               "pad_to_multiple": 32, "save_finetuned_models": False}
    configs = {"rte": arrays.task_config(root / "tasks", "rte", pretraining, {**hparams, "max_train_steps": 4}),
               "mrpc": arrays.task_config(root / "tasks", "mrpc", pretraining, {**hparams, "max_train_steps": 6})}
    loaders = [finetune.encoder_loader(pretraining, []),
               finetune.encoder_loader(dataclasses.replace(pretraining, seed=7), [])]
    record = finetune.pretrained_record(root / "config.json", pretraining, [])
    results = {}

    # 1. the padded last batch: the same loss and gradients, dropout on, sum and mean
    encoder = loaders[0](None)
    task = data["rte"].task
    head = make_head(task, encoder.hidden_size, configs["rte"], encoder.dtype_policy)
    model = FinetuningModel(encoder, {"rte": head})
    short = next(b for b in task_batches(task, data["rte"].train, configs["rte"], np.random.default_rng(0),
                                         training=True) if len(b["index"]) == 4)
    unpadded = model_inputs(short)
    padded = grow_rows(unpadded, 8)
    trainers = {reduction: finetune.JaxTrainer(model, [task], build_optimizer(configs["rte"], 4, 2),
                                               dataclasses.replace(configs["rte"], loss_reduction=reduction))
                for reduction in ("sum", "mean")}
    variables, others = model.trainable_variables, model.non_trainable_variables

    def loss(trainable, inputs, reduction):
        mapping = list(zip(variables, trainable)) + [(v, v.value) for v in others]
        with keras.StatelessScope(state_mapping=mapping):
            return trainers[reduction].batch_loss(task, inputs)

    @jax.jit
    def gradients(trainable, inputs):  # both reductions in one program: one compile per batch shape
        return {reduction: jax.value_and_grad(loss)(trainable, inputs, reduction) for reduction in trainers}

    values = [v.value for v in variables]
    before, after = gradients(values, unpadded), gradients(values, padded)
    unweighted = gradients(values, {**padded, EXAMPLE_WEIGHT: np.ones(8, np.float32)})  # the copies counted
    for reduction in trainers:
        (a, ga), (b, gb) = before[reduction], after[reduction]
        results[reduction] = {
            "loss": [float(a), float(b)], "unweighted": float(unweighted[reduction][0]),
            "gradient_difference": max(float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in zip(ga, gb)),
            "gradient_scale": max(float(np.abs(np.asarray(x)).max()) for x in ga)}

    # 2. compiles: trial 2, model 2 and task 2 compile nothing; one train program for the short batches
    def runner(name, loader, losses, **options):
        return TrialRunner(record, configs[name], [data[name]], root / "runs", say=lambda _: None,
                           trainer_class=functools.partial(finetune.JaxTrainer, **options), load_encoder=loader,
                           reporter_factory=lambda trial: RecordingReporter(losses), results_dir=root / "runs")

    counts, losses = {}, {}
    everything = CompileCount()
    for label, name, model_number, trial in (("first", "rte", 0, 0), ("second trial", "rte", 0, 1),
                                             ("second model", "rte", 1, 0), ("second task", "mrpc", 0, 0)):
        losses[label] = []
        with CompileCount() as count:
            runner(name, loaders[model_number], losses[label]).run_trial(trial)
        counts[label] = count.names
    results["compiled"] = counts
    results["update_programs"] = everything.names.count("jit(update)")

    # 3. the old way (own programs, the last batch at its size, T and W compiled in): the same numbers
    losses["old way"] = []
    with CompileCount() as count:
        runner("mrpc", loaders[0], losses["old way"], programs=None, fixed_shapes=False,
               sized_steps=False).run_trial(0)
    results["old_update_programs"] = count.names.count("jit(update)")

    # 4. --bf16's encoder: bfloat16 compute, the first trial's first loss near float32's (programs of its own)
    bf16 = finetune.encoder_loader(pretraining, [], "mixed_bfloat16")
    results["bf16_compute"] = bf16(None).dtype_policy.compute_dtype
    losses["bf16"] = []
    runner("rte", bf16, losses["bf16"]).run_trial(0)
    results["losses"] = losses

    # 5. the CLI: two models, both tasks, one process (the programs above are reused: nothing compiles)
    # (no max_train_steps: rte 2 batches x 10 epochs = 20 updates, mrpc 3 x 3 = 9, so rte goes first)
    finetune.main(["--tasks-dir", str(root / "tasks"), "--config", str(root / "config.json"), "--tasks", "rte,mrpc",
                   "--weights", "none", "--weights", "none", "--out", str(root / "a"), str(root / "b"),
                   "--hparams", json.dumps(hparams), "--stats", str(root / "stats.json")])
    try:
        finetune.main(["--tasks-dir", str(root / "tasks"), "--config", str(root / "config.json"),
                       "--weights", "none", "--weights", "none", "--out", str(root / "a")])
    except SystemExit as exit:
        results["mismatched_out_exit"] = exit.code

    # 6. the studies' benchmark of that command (--in-process): "today" is the CLI above; "new" the same with
    # buckets and K = 2 updates per dispatch (vmapping needs two models: tests/test_jax_finetune_buckets.py); one
    # layer of electra_tiny (other shapes than the micro model's above, so its ways compile their own programs)
    from studies.device_path.finetune_speed import measure, table
    bench = measure(root / "bench", model_size="electra_tiny", models=1, tasks=("rte",), scale=0.006,
                    hparams={"max_train_steps": 5}, synthetic_length=64, ways=("today", "new"), block_steps=2,
                    model_hparams={"num_layers": 1}, in_process=True)
    results["bench"] = {**bench, "table": table(bench)}
    print("RESULTS" + json.dumps(results))
''')


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Both tests' figures from one JAX process (one start-up, one set of imports)."""
    root = tmp_path_factory.mktemp("finetune_speed")
    # one layer: what is compared (padding, compiles, the old way, bfloat16) does not depend on the depth
    script = SCRIPT.replace("ROOT", repr(str(root))).replace("MODEL", repr({**MICRO_MODEL, "num_layers": 1}))
    return root, run_script_under_jax(script, REPO_ROOT)


def test_one_program_per_shape_and_the_same_numbers(results):
    tmp_path, results = results
    for reduction in ("sum", "mean"):
        figures = results[reduction]
        unpadded, padded = figures["loss"]
        print(f"{reduction}: loss {unpadded:.7f} padded {padded:.7f}, max |gradient difference| "
              f"{figures['gradient_difference']:.1e} (largest gradient {figures['gradient_scale']:.1e})")
        np.testing.assert_allclose(padded, unpadded, rtol=1e-6)
        assert figures["gradient_difference"] <= 1e-6 * figures["gradient_scale"]
        assert abs(figures["unweighted"] - unpadded) > 1e-3 * abs(unpadded)  # the weights are what removes them
    compiled = results["compiled"]
    assert "jit(update)" in compiled["first"] and "jit(forward)" in compiled["first"]
    assert compiled["second trial"] == compiled["second model"] == compiled["second task"] == []
    assert results["update_programs"] == 1  # batches of 8 and 4 rows: one program
    assert results["old_update_programs"] == 2  # the old way: one for 8 rows, one for 4
    new, old = np.array(results["losses"]["second task"]), np.array(results["losses"]["old way"])
    assert new.shape == old.shape == (6, 2)
    np.testing.assert_allclose(new[:, 1], old[:, 1], rtol=1e-6)  # learning rates: T and W as inputs
    np.testing.assert_allclose(new[:, 0], old[:, 0], rtol=1e-5)
    assert len(set(np.round(new[:, 1], 9))) > 2  # warmup and decay, not a constant rate

    assert results["bf16_compute"] == "bfloat16"
    first, bf16 = np.array(results["losses"]["first"]), np.array(results["losses"]["bf16"])
    assert 0 < abs(bf16[0, 0] - first[0, 0]) < 0.05 * abs(first[0, 0]) and np.isfinite(bf16).all()

    stats = json.loads((tmp_path / "stats.json").read_text())
    order = [(pathlib.Path(job["model"]).name, job["task"]) for job in stats["jobs"]]
    assert order == [("a", "rte"), ("b", "rte"), ("a", "mrpc"), ("b", "mrpc")]  # more updates first
    assert [job["updates"] for job in stats["jobs"]] == [20, 20, 9, 9]
    assert stats["compiles"] == 0 and all(job["updates"] > 0 for job in stats["jobs"])
    for model in ("a", "b"):
        for task in ("rte", "mrpc"):
            written = json.loads((tmp_path / model / f"{task}_results.json").read_text())
            assert written["complete"] and written["trials_done"] == 1
    assert results["mismatched_out_exit"] == 2


def test_the_benchmark_measures_today_against_the_new_path(results):
    from training_jax.finetune_buckets import bucket_lengths

    # in the JAX process above (the benchmark's --in-process): its ways' figures, not their speed
    results = results[1]["bench"]
    print(results["table"])
    for way in ("today", "new"):
        figures = results[way]
        assert figures["updates"] == 5 and figures["processes"] == 1 and figures["models"] == 1
        assert figures["compiles"] > 0 and figures["wall_seconds"] > 0 and figures["updates_per_second_per_model"] > 0
        assert 0 < figures["train_seconds"] < figures["wall_seconds"] and figures["updates_per_second_all_models"] > 0
    assert results["today"]["train_programs"] == 1  # one update program, every batch at 64
    assert results["new"]["settings"] == {"platform": "cpu", "bf16": False, "length_buckets": [32, 64],
                                          "steps_per_dispatch": 2, "vmap_models": True}
    assert 1 <= results["new"]["train_programs"] <= len(bucket_lengths(64))  # at most one per bucket
    assert results["today"]["settings"]["length_buckets"] is None
    assert set(results["ratios"]) == {"new/today"}
    assert set(results["ratios"]["new/today"]) == {"wall_time_per_model", "updates_per_second_per_model",
                                                   "updates_per_second_all_models", "steady_updates_per_second",
                                                   "compiles", "train_programs"}
    assert results["device"].startswith("cpu")
    assert "updates/s per model" in results["table"]
