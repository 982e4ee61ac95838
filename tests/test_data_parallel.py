"""run_pretraining.py under JAX on every local device and over several processes: 8 virtual CPU devices train what 1
device trains at the same global batch (training_jax.data_parallel), the compiled step all-reduces across them, the
fused attention's kernels run on each device's rows and compute what one device computes, and two processes of 4
devices each (jax.distributed on localhost, as two hosts would) train what one process of 8 trains. Each run is the
product's command on one dataset folder, into <data-dir>/models/<name>."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from storage.checkpoint_bundle import read_model_weights
from tests.helpers import JAX_QUICK_XLA_FLAGS, LEAN_KERAS, MICRO_MODEL, build_tiny_dataset

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
STEPS, BATCH = 4, 8  # the global batch: 1 row per device on 8
HPARAMS = {"model_size": "electra_small", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
           "train_batch_size": BATCH, "eval_batch_size": 4, "num_eval_steps": 2, "num_train_steps": STEPS,
           "num_warmup_steps": 1, "learning_rate": 5e-4, "do_eval": True, "iterations_per_loop": 2,
           "save_checkpoints_steps": STEPS}
# TensorFlow unimportable, as on a GPU machine without it; then run_pretraining.py as a user types it
LAUNCH = ('import sys, runpy; sys.modules["tensorflow"] = None; sys.argv = ["run_pretraining.py"] + sys.argv[1:]; '
          'runpy.run_path("run_pretraining.py", run_name="__main__")')

SCRIPT = LEAN_KERAS + textwrap.dedent('''
    import contextlib, io, json, pathlib, sys
    sys.modules["tensorflow"] = None
    import jax
    from common.errors import InputError
    from configs.resolve import resolve_run
    from training_jax import from_dataset

    data_dir, hparams = sys.argv[1], sys.argv[2]
    results = {"local_devices": len(jax.local_devices())}

    def flags(name, devices, *extra):
        return ["--data-dir", data_dir, "--model-name", name, "--hparams", hparams, "--devices", str(devices),
                "--steps-per-dispatch", "2", *extra]

    for devices in (1, 8):
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            results[f"outcome{devices}"] = from_dataset.main(flags(f"d{devices}", devices))
        results[f"log{devices}"] = printed.getvalue()

    def opened(name, devices, *extra):  # the run the command would train, not trained
        args = from_dataset.parse_args(flags(name, devices, *extra))
        resolved = resolve_run(args.model_name, args.hparams, args.data_dir)
        return from_dataset.open_run(args, resolved, pathlib.Path(resolved.config.model_dir) / "jax_work")

    run = opened("hlo", 8)
    import numpy as np
    indices = run.placement.put_indices(np.zeros((2, run.config.train_batch_size), "int32"))
    compiled = run.train_fn.lower(run.state, run.stats_sum, run.train_examples, indices, run.schedule_steps).compile()
    results["all_reduces"] = compiled.as_text().count("all-reduce(")
    results["record_devices"] = run.run_record()["devices"]

    # The fused attention over the mesh: each device's rows through the kernels (shard_map), what one device computes
    fused = opened("fused", 8, "--fused-attention")
    attentions = [layer.attention_self for encoder in fused.model.encoders() for layer in encoder.transformer_layers]
    results["fused_meshes"] = [getattr(a.fused_attention_fn, "keywords", {}).get("mesh") is fused.placement.mesh
                               for a in attentions]
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec
    from training_jax.flash_attention import flash_attention
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(8, 24, 2, 8)), jnp.float32) for _ in range(3))
    mask = jnp.asarray((np.arange(24)[None] < rng.integers(5, 24, size=(8, 1))).astype("int32"))

    def attention_grads(mesh, *qkv):
        loss = lambda *x: jnp.sum(flash_attention(*x, mask, 0.3, 0.1, jnp.asarray([3, 7], jnp.uint32), True,
                                                  mesh=mesh) ** 2)
        step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
        return step(*qkv), step.lower(*qkv).as_text()

    split = [jax.device_put(x, NamedSharding(fused.placement.mesh, PartitionSpec("data"))) for x in (q, k, v)]
    ((loss1, grads1), _), ((loss8, grads8), text) = (attention_grads(None, q, k, v),
                                                     attention_grads(fused.placement.mesh, *split))
    results["fused_manual"] = "manual_computation" in text or "SPMDFullToShardShape" in text
    results["fused_loss"] = [float(loss1), float(loss8)]
    results["fused_grad_diff"] = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(grads1, grads8))
    try:
        opened("odd", 3)
        results["odd"] = None
    except InputError as error:
        results["odd"] = str(error)
    print("RESULTS" + json.dumps(results))
''')


def jax_environment(devices, **extra):
    return dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
                XLA_FLAGS=f"{JAX_QUICK_XLA_FLAGS} --xla_force_host_platform_device_count={devices}", **extra)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(the runs' folder, the script's results): 1 device, 8 devices and the 8-device checks in one process; then
    the same run as two processes of 4 devices (into <runs>/p2)."""
    data_dir = tmp_path_factory.mktemp("data_parallel") / "data"
    build_tiny_dataset(data_dir, max_seq_length=32, num_shards=2)
    completed = subprocess.run([sys.executable, "-c", SCRIPT, str(data_dir), json.dumps(HPARAMS)], cwd=REPO_ROOT,
                               env=jax_environment(8), capture_output=True, text=True, timeout=600)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULTS")]
    assert completed.returncode == 0 and lines, completed.stderr[-3000:]
    results = json.loads(lines[-1][len("RESULTS"):])
    results["two_processes"] = two_processes(data_dir)
    return data_dir / "models", results


def free_port():
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


def two_processes(data_dir):
    """run_pretraining.py as two processes of 4 devices each, coordinated on localhost through the environment
    variables a cluster would set, into the model folder p2; their exit codes and outputs."""
    command = [sys.executable, "-c", LAUNCH, "--data-dir", str(data_dir), "--model-name", "p2", "--hparams",
               json.dumps(HPARAMS), "--steps-per-dispatch", "2"]
    address = f"127.0.0.1:{free_port()}"
    processes = [subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=jax_environment(4, JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2",
                                                      JAX_PROCESS_ID=str(index)))
                 for index in range(2)]
    outputs = [process.communicate(timeout=600)[0] for process in processes]
    return [[process.returncode, output[-3000:]] for process, output in zip(processes, outputs)]


def test_eight_devices_train_the_weights_one_device_trains(runs):
    root, results = runs
    assert results["local_devices"] == 8
    assert results["outcome1"] == results["outcome8"] == "done"
    assert "device 8 x cpu" in results["log8"] and "data parallel" in results["log8"]
    one, eight = (read_model_weights(root / f"d{n}" / f"ckpt-{STEPS}") for n in (1, 8))
    assert sorted(one) == sorted(eight) and len(one) > 10
    for name in one:  # the same updates, up to the order the all-reduce sums in (weights saved as float16)
        np.testing.assert_allclose(eight[name].astype("float32"), one[name].astype("float32"), rtol=2e-3, atol=2e-4,
                                   err_msg=name)
    losses = [[r for r in map(json.loads, (root / f"d{n}" / "metrics.jsonl").read_text().splitlines())
               if r["split"] == "train"] for n in (1, 8)]
    assert len(losses[0]) == len(losses[1]) > 0
    for a, b in zip(*losses):
        assert a["step"] == b["step"]
        for key in ("disc_loss", "masked_lm_loss", "masked_lm_accuracy"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), (key, a["step"])


def test_the_compiled_step_all_reduces_and_the_record_counts_devices(runs):
    _, results = runs
    assert results["all_reduces"] >= 1  # the gradients' and the loss sums' reduction across the mesh
    assert results["record_devices"] == 8


def test_the_fused_attention_runs_on_each_devices_rows_and_computes_what_one_device_does(runs):
    """XLA's partitioner cannot split a Pallas call: over a mesh the kernels run under shard_map on each device's
    rows, with the dropout hashed for the whole batch, so the loss and gradients are one device's."""
    _, results = runs
    assert results["fused_meshes"] and all(results["fused_meshes"])
    assert results["fused_manual"]
    assert results["fused_loss"][1] == pytest.approx(results["fused_loss"][0], rel=1e-6)
    assert results["fused_grad_diff"] < 1e-5


def test_a_batch_that_does_not_split_over_the_devices_is_one_line(runs):
    _, results = runs
    assert results["odd"] and "train_batch_size 8 does not split evenly over 3 devices" in results["odd"]


def test_two_processes_train_what_one_process_of_as_many_devices_trains(runs):
    root, results = runs
    for code, output in results["two_processes"]:
        assert code == 0, output
    chief_log = results["two_processes"][0][1]
    assert "device 8 x cpu" in chief_log and "over 2 processes" in chief_log
    one, two = (read_model_weights(root / name / f"ckpt-{STEPS}") for name in ("d8", "p2"))
    assert sorted(one) == sorted(two) and len(one) > 10
    for name in one:
        np.testing.assert_allclose(two[name].astype("float32"), one[name].astype("float32"), rtol=2e-3, atol=2e-4,
                                   err_msg=name)
    # process 0 alone wrote the model folder's metrics (no line twice); process 1 kept its own resumable state
    records = [json.loads(line) for line in (root / "p2" / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records if r["split"] == "train"]
    assert steps == sorted(set(steps)) and records[-1]["split"] == "run" and records[-1]["devices"] == 8
    assert (root / "p2" / "jax_work.process-1" / "state").is_dir() and (root / "p2" / "jax_work" / "state").is_dir()
