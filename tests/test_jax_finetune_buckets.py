"""Length buckets and blocks of K updates for JAX fine-tuning (training_jax.finetune_buckets, finetune_blocks).

The plan (NumPy): every example once per epoch, each batch within its block's bucket, blocks of one bucket and
of K batches (only the run's last shorter), the same plan from the same seed; without buckets, exactly
BaseTrainer.epoch_batches' random batches in its order. The platform's defaults and the flags that override them.

In one fresh JAX process on a micro encoder: a block's batch gathered from the task's padded arrays is
finetune.batches' host batch;
its loss and gradients at its bucket length are those at max_seq_length (dropout off: dropout's random bits
depend on the shape); K = 4 updates per dispatch (a full block and a short one, whose missing steps are
no-ops; one program for both) give the weights, logged losses and dev scores of today's single updates
(dropout on), and so do two models of one trial in one vmapped block update (studies.device_path.members). Tolerance:
a vmapped matmul is a batched one, which XLA may sum in another order; on the CPU they come out equal bit for
bit, and the test asks for 1e-6 of the largest weight. The CLI with --vmap-models, two models and two seeds
writes the results files of the run without it (the same seeds, metrics within rounding), the settings
recorded in each, and compiles no block program: the one above serves a second task of another size. With
buckets, the run whose training programs are compiled ahead (training_jax.compile_ahead) compiles none while
training and writes the metrics of the run that compiles each on first use, equal.
One block program per bucket: tests/test_jax_finetune_speed.py.
"""
import itertools
import json
import pathlib
import textwrap
import types

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL, run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def plan(lengths, rng, steps, buckets, block_steps=4, batch_size=4, pool_batches=3):
    from training_jax.finetune_buckets import training_blocks

    return list(training_blocks(lengths, batch_size, steps, rng, block_steps, buckets, 64, pool_batches))


def test_bucketed_blocks_cover_each_epoch_once_within_their_bucket():
    lengths = np.minimum(np.random.default_rng(0).geometric(1 / 16, 100) + 4, 64)  # short, as GLUE's; 25 batches
    blocks = plan(lengths, np.random.default_rng(1), 75, [16, 32, 64])  # three epochs
    assert sum(len(b.batches) for b in blocks) == 75
    assert all(len(b.batches) == 4 for b in blocks[:-1]) and 1 <= len(blocks[-1].batches) <= 4
    assert {b.length for b in blocks} == {16, 32, 64}  # more than one bucket used, each a few blocks
    for block in blocks:
        assert all(lengths[batch].max() <= block.length for batch in block.batches)
    batches = [batch for block in blocks for batch in block.batches]
    assert (np.bincount(np.concatenate(batches), minlength=100) == 3).all()  # three epochs: each example 3 times
    padded = sum(b.length * len(batch) for b in blocks for batch in b.batches)
    assert padded < 0.8 * 64 * 4 * 75  # the point: less padding than max_seq_length for every batch
    again = plan(lengths, np.random.default_rng(1), 75, [16, 32, 64])
    assert all(np.array_equal(x, y) for a, b in zip(blocks, again) for x, y in zip(a.batches, b.batches))
    other = plan(lengths, np.random.default_rng(2), 75, [16, 32, 64])
    assert not all(np.array_equal(x, y) for a, b in zip(blocks, other) for x, y in zip(a.batches, b.batches))


def test_without_buckets_the_blocks_are_todays_batches_in_order():
    from configs.finetuning_config import FinetuningConfig
    from finetune.loop import BaseTrainer
    from finetune.registry import get_task

    task = get_task("rte")
    lengths = np.random.default_rng(0).integers(5, 65, 18)  # 5 batches of 4 per epoch, the last of 2
    features = {"sequences": {"input_ids": [np.ones(n, np.int32) for n in lengths],
                              "segment_ids": [np.zeros(n, np.int32) for n in lengths]},
                "scalars": {"labels": np.zeros(18, np.int32)}, "count": 18}
    config = FinetuningConfig.create({"train_batch_size": 4, "max_seq_length": 64}, "small", ["rte"])
    today = types.SimpleNamespace(config=config, tasks={"rte": task}, mixed_tasks=lambda names: None)
    rng = np.random.default_rng(3)
    expected = [batch["index"] for _ in range(3) for _, batch in BaseTrainer.epoch_batches(today, {"rte": features}, rng)]
    blocks = plan(lengths, np.random.default_rng(3), 14, None, block_steps=4)
    assert [len(b.batches) for b in blocks] == [4, 4, 4, 2] and {b.length for b in blocks} == {64}
    got = [batch for block in blocks for batch in block.batches]
    assert all(np.array_equal(a, b) for a, b in zip(got, expected[:14]))


def test_bucket_lengths_and_the_platform_defaults():
    from common.errors import InputError
    from studies.device_path.finetune import parse_args
    from training_jax.finetune_buckets import bucket_lengths, parse_buckets
    from training_jax.finetune_settings import ACCELERATOR_BLOCK_STEPS, resolve

    assert bucket_lengths(128) == [32, 64, 128] and bucket_lengths(32) == [32] and bucket_lengths(100) == [32, 64, 100]
    assert parse_buckets("64,16", 128) == [16, 64, 128]
    with pytest.raises(ValueError, match="multiple of 8"):
        parse_buckets("20", 128)
    common = ["--tasks-dir", "t", "--config", "c", "--weights", "none", "--out", "o"]
    gpu, cpu = resolve(parse_args(common), "gpu"), resolve(parse_args(common), "cpu")
    assert (gpu.bf16, gpu.length_buckets, gpu.steps_per_dispatch, gpu.vmap_models) == (
        True, True, ACCELERATOR_BLOCK_STEPS, True)
    assert (cpu.bf16, cpu.length_buckets, cpu.steps_per_dispatch, cpu.vmap_models) == (False, False, 1, False)
    assert not cpu.device_blocks and gpu.device_blocks and gpu.buckets(128) == [32, 64, 128]
    assert gpu.compiles_ahead and not cpu.compiles_ahead  # the accelerator compiles its programs at once
    assert not resolve(parse_args(common + ["--no-compile-ahead"]), "gpu").compiles_ahead
    chosen = resolve(parse_args(common + ["--no-bf16", "--no-length-buckets", "--steps-per-dispatch", "1",
                                          "--no-vmap-models"]), "gpu")
    assert (chosen.bf16, chosen.length_buckets, chosen.steps_per_dispatch, chosen.vmap_models) == (
        False, False, 1, False)
    assert resolve(parse_args(common + ["--length-buckets"]), "cpu").device_blocks
    assert resolve(parse_args(common + ["--vmap-models"]), "cpu").device_blocks
    with pytest.raises(InputError, match="--bucket-lengths 12"):
        resolve(parse_args(common + ["--length-buckets", "--bucket-lengths", "12"]), "cpu").buckets(128)


SCRIPT = textwrap.dedent('''
    import dataclasses, functools, json, pathlib, sys
    sys.modules["tensorflow"] = None  # the accelerator machines have none
    import jax, keras, numpy as np
    from studies.device_path.synthetic_tasks import synthetic_tasks
    from configs.pretraining_config import PretrainingConfig
    from studies.device_path import task_arrays as arrays
    from finetune.batches import EXAMPLE_WEIGHT, grow_rows, pad_batch
    from finetune.loop import build_optimizer
    from finetune.model import FinetuningModel, make_head
    from finetune.trials import TrialRunner
    from tests.finetune_fixtures import RecordingReporter
    from studies.device_path import finetune
    from training_jax.compiles import CompileCount
    from training_jax.finetune_blocks import gather_batch, task_examples
    from studies.device_path.members import train_members

    root = pathlib.Path(ROOT)
    synthetic_tasks(root / "tasks", sizes={"rte": (40, 16), "mrpc": (12, 8)}, vocab_size=100, max_seq_length=64)
    pretraining = PretrainingConfig.create({"model_size": "electra_tiny", "model_hparam_overrides": MODEL,
                                            "vocab_size": 100})
    pretraining.save(root / "config.json")
    data = arrays.load_task_data(root / "tasks", ["rte"])[0]
    hparams = {"train_batch_size": 4, "eval_batch_size": 8, "iterations_per_loop": 1, "warmup_proportion": 0.5,
               "save_finetuned_models": False, "learning_rate": 1e-3, "max_train_steps": 6,
               "bucket_pool_batches": 2}
    config = arrays.task_config(root / "tasks", "rte", pretraining, hparams)
    record = finetune.pretrained_record(root / "config.json", pretraining, [])
    results = {}

    # 1. a block's batch is the host's; at its bucket length the same loss and gradients as at max_seq_length
    features = data.train
    lengths = np.array([len(v) for v in features["sequences"]["input_ids"]])
    short = np.flatnonzero(lengths <= 32)[:3]  # three examples: the batch of 4 gets one weight-0 fill row
    indices, weights = np.append(short, short[0]).astype(np.int32), np.array([1, 1, 1, 0], np.float32)
    examples = task_examples(features, 64)
    host = grow_rows({**pad_batch(features["sequences"], short, 64),
                      **{k: v[short] for k, v in features["scalars"].items()}}, 4)
    device = gather_batch(examples, indices, weights, 64)
    results["same_batch"] = sorted(host) == sorted(device) and all(
        np.array_equal(np.asarray(device[k]), host[k]) for k in host)
    loader = finetune.encoder_loader(pretraining, [])
    encoder = loader(None)
    for layer in encoder._flatten_layers():  # dropout's random bits depend on the shape: off for this comparison
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
        if hasattr(layer, "attention_dropout"):
            layer.attention_dropout = 0.0
    model = FinetuningModel(encoder, {"rte": make_head(data.task, encoder.hidden_size, config, encoder.dtype_policy)})
    trainer = finetune.JaxTrainer(model, [data.task], build_optimizer(config, 6, 1), config)
    variables, others = model.trainable_variables, model.non_trainable_variables

    @jax.jit
    def value_and_gradients(trainable, length32, length64):
        def loss(trainable, inputs):
            with keras.StatelessScope(state_mapping=list(zip(variables, trainable)) + [(v, v.value) for v in others]):
                return trainer.batch_loss(data.task, inputs)
        return [jax.value_and_grad(loss)(trainable, inputs) for inputs in (length32, length64)]

    (loss32, grads32), (loss64, grads64) = value_and_gradients(
        [v.value for v in variables], gather_batch(examples, indices, weights, 32), device)
    results["bucket"] = {"loss": [float(loss32), float(loss64)],
                         "gradient_difference": max(float(np.abs(a - b).max()) for a, b in zip(grads32, grads64)),
                         "gradient_scale": max(float(np.abs(a).max()) for a in grads64)}

    # 2. today's single updates of two models (dropout on); 3. K = 4 per dispatch (6 updates: a block of 4, then
    #    one of 2 whose two missing steps are no-ops), the same batches (no buckets); 4. the two models of the trial
    #    in one vmapped block update
    loaders = [loader, finetune.encoder_loader(dataclasses.replace(pretraining, seed=7), [])]

    def runner(model_number, losses, **options):
        return TrialRunner(record, config, [data], root / "runs", say=lambda _: None,
                           trainer_class=functools.partial(finetune.JaxTrainer, **options),
                           load_encoder=loaders[model_number], reporter_factory=lambda trial: RecordingReporter(losses),
                           results_dir=root / f"runs-{model_number}")

    def outcome(started, chosen, losses):
        return {"weights": [np.asarray(v.value).tolist() for v in started.model.trainable_variables],
                "losses": losses, "metrics": chosen.score_trial(started, 0.0)["rte"]["metrics"]}

    def alone(model_number, **options):
        losses = []
        chosen = runner(model_number, losses, **options)
        started = chosen.start_trial(0)
        started.trainer.train(*chosen.train_arguments(started))
        return outcome(started, chosen, losses)

    results["single"] = [alone(0), alone(1)]
    results["untrained"] = [np.asarray(v.value).tolist()
                            for v in runner(0, []).start_trial(0).model.trainable_variables]
    with CompileCount() as count:
        results["blocks"] = alone(0, block_steps=4)
    results["block_programs"] = count.names.count("jit(block)")
    losses = [[], []]
    runners = [runner(model, losses[model], block_steps=4) for model in (0, 1)]
    started = [r.start_trial(0) for r in runners]
    with CompileCount() as count:
        train_members([s.trainer for s in started], [r.train_arguments(s) for r, s in zip(runners, started)])
    results["vmapped_programs"] = count.names.count("jit(block)")
    results["vmapped"] = [outcome(s, r, losses[n]) for n, (r, s) in enumerate(zip(runners, started))]

    # 5. the CLI, two models, two seeds and two tasks, with and without --vmap-models (K = 4: the programs above
    #    serve MRPC too, a task of other size but the same head)
    common = ["--tasks-dir", str(root / "tasks"), "--config", str(root / "config.json"), "--seeds", "2",
              "--hparams", json.dumps({**hparams, "max_train_steps": 3}), "--weights", "none", "--weights", "none"]
    for way, extra in (("vmapped", ["--vmap-models", "--steps-per-dispatch", "4"]), ("separate", [])):
        finetune.main(common + ["--out", str(root / way / "a"), str(root / way / "b"), "--stats",
                                str(root / way / "stats.json")] + extra)
    # 6. the training programs compiled ahead, in threads at once (training_jax.compile_ahead), against jit's own
    #    compiles on first use: buckets 32 and 64, K = 2, one seed; programs of its own for the run ahead
    common = common[:common.index("--seeds")] + ["--seeds", "1", "--hparams", json.dumps(
        {**hparams, "max_train_steps": 8}), "--weights", "none", "--weights", "none", "--vmap-models",
        "--steps-per-dispatch", "2", "--length-buckets", "--bucket-lengths", "32"]
    for way, extra in (("on_first_use", []), ("ahead", ["--compile-ahead", "--no-shared-programs"])):
        finetune.main(common + ["--out", str(root / way / "a"), str(root / way / "b"), "--stats",
                                str(root / way / "stats.json")] + extra)
    print("RESULTS" + json.dumps(results))
''')


def test_buckets_blocks_and_vmapped_models_compute_todays_updates(tmp_path):
    script = SCRIPT.replace("ROOT", repr(str(tmp_path))).replace("MODEL", repr({**MICRO_MODEL, "num_layers": 1}))
    results = run_script_under_jax(script, REPO_ROOT)
    assert results["same_batch"]
    bucket = results["bucket"]
    print(f"bucket 32 vs 64: loss {bucket['loss']}, max |gradient difference| {bucket['gradient_difference']:.1e} "
          f"(largest {bucket['gradient_scale']:.1e})")
    np.testing.assert_allclose(*bucket["loss"], rtol=1e-6)
    assert bucket["gradient_difference"] <= 1e-6 * bucket["gradient_scale"]

    singles, untrained = results["single"], results["untrained"]
    assert results["block_programs"] == 1 and results["vmapped_programs"] == 1  # the short block too
    for label, runs in (("K=4", [results["blocks"]]), ("K=4, two models vmapped", results["vmapped"])):
        for single, mine in zip(singles, runs):
            scale = max(np.abs(np.array(w)).max() for w in single["weights"])
            worst = max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(single["weights"], mine["weights"]))
            print(f"{label} vs single updates: max |weight difference| {worst:.1e} (largest weight {scale:.1e})")
            assert worst <= 1e-6 * scale  # on the CPU bit for bit; a GPU may sum a batched matmul in another order
            assert single["metrics"].keys() == mine["metrics"].keys()
            assert all(abs(single["metrics"][k] - mine["metrics"][k]) <= 1e-4 for k in single["metrics"])
            # logged at the ends of the blocks (steps 4 and 6): the mean loss of their steps, the rate after them
            own, logged = np.array(single["losses"]), np.array(mine["losses"])
            assert own.shape == (6, 2) and logged.shape == (2, 2)
            np.testing.assert_allclose(logged[:, 0], [own[:4, 0].mean(), own[4:, 0].mean()], rtol=1e-5)
            np.testing.assert_allclose(logged[:, 1], own[[3, 5], 1], rtol=1e-6)
    moved = max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(singles[0]["weights"], untrained))
    models_differ = max(np.abs(np.array(a) - np.array(b)).max()
                        for a, b in zip(singles[0]["weights"], singles[1]["weights"]))
    assert moved > 1e-4 and models_differ > 1e-3  # training moved the weights, the two models differ: it can fail

    stats = {way: json.loads((tmp_path / way / "stats.json").read_text())
             for way in ("vmapped", "separate", "on_first_use", "ahead")}
    ahead = stats["ahead"]["compiled_ahead"]
    print(f"compiled ahead: {ahead}")
    assert stats["on_first_use"]["compiled_ahead"] is None and ahead["threads"] >= 1
    # every bucket a task can use, not only those its plan uses (these short tasks: 32 alone), so that a later task
    # of the head kind compiles nothing: two tasks (programs of their own here) x buckets 32 and 64
    assert ahead["programs"] == 2 * 2
    assert all("jit(block)" not in job["compiled"] for job in stats["ahead"]["jobs"])  # every one served ahead
    assert any("jit(block)" in job["compiled"] for job in stats["on_first_use"]["jobs"])  # the check can fail
    for model, task in itertools.product(("a", "b"), ("rte", "mrpc")):
        first_use, compiled_ahead = (json.loads((tmp_path / way / model / f"{task}_results.json").read_text())
                                     for way in ("on_first_use", "ahead"))
        assert first_use["jax_settings"]["length_buckets"] == [32, 64] and first_use["complete"]
        assert [t["metrics"] for t in compiled_ahead["trials"]] == [t["metrics"] for t in first_use["trials"]]
    assert [job["updates"] for job in stats["vmapped"]["jobs"]] == [job["updates"] for job in stats["separate"]["jobs"]]
    assert [job["trained_together"] for job in stats["vmapped"]["jobs"]] == [2] * 8
    assert all("jit(block)" not in job["compiled"] for job in stats["vmapped"]["jobs"])  # the ones above served
    # the models' states stacked and split, and the batches gathered, on the host: no program of their own
    assert not any(name.startswith(("jit(stack", "jit(member", "jit(gather", "jit(copy")) for way in ("vmapped", "ahead")
                   for job in stats[way]["jobs"] for name in job["compiled"])
    assert stats["vmapped"]["settings"]["vmap_models"] and not stats["separate"]["settings"]["vmap_models"]
    for model, task in itertools.product(("a", "b"), ("rte", "mrpc")):
        vmapped = json.loads((tmp_path / "vmapped" / model / f"{task}_results.json").read_text())
        separate = json.loads((tmp_path / "separate" / model / f"{task}_results.json").read_text())
        assert vmapped["complete"] and vmapped["trials_done"] == 2
        assert vmapped["jax_settings"] == {"platform": "cpu", "bf16": False, "length_buckets": None,
                                           "steps_per_dispatch": 4, "vmap_models": True}
        assert separate["jax_settings"]["steps_per_dispatch"] == 1 and not separate["jax_settings"]["vmap_models"]
        assert [t["seed"] for t in vmapped["trials"]] == [t["seed"] for t in separate["trials"]] == [0, 1]
        for ours, theirs in zip(vmapped["trials"], separate["trials"]):
            assert ours.keys() == theirs.keys()
            for name, value in theirs["metrics"].items():
                assert abs(ours["metrics"][name] - value) <= 1e-4 * max(1.0, abs(value)), name
