"""python -m studies.device_path.run: the time-boxed run in one device call, as the export prints it (with --also-mlm),
under the GPU image's Python stand-in (Python 3.12, JAX 0.11.2, NumPy 2.5.2 in .venv312; no TensorFlow; keras,
namex, optree from the carried wheels), then imported here and fine-tuned by run_finetuning.py; a run
continued from the weights it returned starts from exactly them and counts its steps on."""
import concurrent.futures
import json
import pathlib
import shlex

import numpy as np
import pytest

from tests.helpers import (JAX_TEST_XLA_FLAGS, MICRO_BENCH, MICRO_MODEL, carried_wheels, export_tiny_run,
                           run_script_under_jax, write_rte)

REPO = pathlib.Path(__file__).resolve().parents[1]
# A micro model: minutes to spare (the run stops at the exported 8 steps), fine-tuning of one short trial.
TINY = " --minutes 7 --finetune-minutes 2 --seeds 1 --measure-steps 5 --finetune-hparams " + shlex.quote(
    json.dumps({"max_train_steps": 2}))
@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    from studies.device_path import task_arrays as arrays
    from studies.device_path.window import window_line
    from tests.helpers import accelerator_python, image_python, repository_mirror

    python, wheels = image_python()
    root = tmp_path_factory.mktemp("jax_run")
    repo = repository_mirror(REPO, root / "repo")
    carried_wheels(wheels, repo / ".whl")
    export = export_tiny_run(root, steps=8, checkpoints=1)
    study = json.loads((export / "export.json").read_text())
    assert study["fit"]["models"] == ["electra"] and study["fit"]["max_units"] == 8  # the export's fit block
    text = (root / "data" / "corpus" / "part0.txt").read_text().replace("\n", " ")
    sentences = [" ".join(s.split()[:10]) for s in text.split(". ") if len(s.split()) >= 6]
    write_rte(root / "glue" / "rte", sentences, {"train": 24, "dev": 8}, seed=0)
    arrays.main(["--tasks", "rte", "--finetuning-data-dir", str(root / "glue"), "--vocab-file",
                 str(export / "vocab.txt"), "--out", str(export / "tasks")])
    (repo / "jax_export").symlink_to(export)
    # the GPU window's line (bench.gpu_window): the bounded benchmark, then the time-boxed run, at micro sizes
    line = window_line("jax_export", bench_args=MICRO_BENCH, run_args=TINY.strip() + " --also-mlm")
    python_dir = accelerator_python(root / "py", python)
    status, output = device_call(line, repo, root / "OUT", python_dir, root)
    assert status == 0, output[-4000:]
    return root, export, output, (repo, python_dir)


def device_call(line, repo, out, python_dir, root):
    """A device call's line here; the module's calls share one JAX compilation cache (the continued run's
    compiles are the first call's), as the pieces of a run on one machine do."""
    from tests.helpers import run_device_line

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XLA_FLAGS", JAX_TEST_XLA_FLAGS)  # the device tool's environment, XLA at its quickest compile
        patch.setenv("JAX_COMPILATION_CACHE_DIR", str(root / "jax_cache"))
        return run_device_line(line, repo, out, python_dir, 600)


def test_the_window_line_benchmarks_first_and_keeps_its_rows(first_run):
    """bench.gpu_window's line: the benchmark's header and its measured row are in $OUT/bench before the run."""
    root = first_run[0]
    records = [json.loads(line) for line in (root / "OUT" / "bench" / "gpu_speed.jsonl").read_text().splitlines()]
    header = records[0]
    assert header["kind"] == "header" and header["python"].startswith("3.12.") and header["jax"] == "0.11.2"
    measured = [r for r in records[1:] if r["kind"] == "variant" and r["variant"] == "defaults"]
    assert len(measured) == 1 and measured[0]["steps_per_s"] > 0 and measured[0]["settings"]["precision"] == "float32"
    bench_file, run_file = root / "OUT" / "bench" / "gpu_speed.jsonl", root / "OUT" / "run.json"
    assert bench_file.stat().st_mtime <= run_file.stat().st_mtime  # the benchmark ended before the run wrote


def test_the_documented_window_line_is_the_one_the_study_window_prints():
    from studies.device_path.window import window_line

    assert window_line("jax_export") in (REPO / "studies" / "device_path" / "README.md").read_text()


def test_the_one_call_runs_as_printed_then_imports_and_finetunes_here(first_run):
    """The window's run with --also-mlm, under Python 3.12, JAX 0.11.2 and NumPy 2.5.2 (the GPU image's): both
    models pretrained at equal FLOPs and fine-tuned with the control; both import here (TensorFlow)."""
    import run_finetuning
    from studies.device_path import import_jax
    from configs import flops
    from configs.pretraining_config import PretrainingConfig

    root, export, output, _ = first_run
    out = root / "OUT"
    summary = output[output.index("=" * 20 + " summary"):]
    for part in ("pretraining: ok", "pretraining (mlm): ok", "fine-tuning, 1 seed(s): ok"):
        assert part in summary, summary
    record = json.loads((out / "run.json").read_text())
    assert record["versions"]["python"].startswith("3.12.") and record["versions"]["jax"] == "0.11.2"
    assert record["versions"]["numpy"] == "2.5.2" and record["versions"]["keras"] == "3.15.1"
    assert record["steps"] == record["total_steps"] == 8 and record["config"]["num_train_steps"] == 8
    assert record["device"].startswith("cpu") and record["optimizer"] == "from the start"
    electra, mlm = (PretrainingConfig.create(c) for c in (record["config"], record["mlm"]["config"]))
    assert not mlm.electra_objective and mlm.model_config() == electra.model_config()
    assert record["flops"] == 8 * flops.train_flops_per_step(electra) == record["total_flops"]
    assert record["mlm"]["steps"] == mlm.num_train_steps > 8  # the cheaper step: more of them at equal FLOPs
    assert abs(record["mlm"]["flops"] / record["flops"] - 1) < 0.2  # equal FLOPs, to a whole step of 8
    results = json.loads((out / "results.json").read_text())
    assert set(results) == {"pretrained", "mlm", "control"}
    assert all(results[m]["rte"]["trials_done"] == 1 for m in results)
    assert results["control"]["rte"]["checkpoint"].startswith("none")
    back = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    steps = record["mlm"]["steps"]
    assert back == ["bench/gpu_speed.jsonl", "metrics.jsonl", "mlm/metrics.jsonl", "models.tar.part1of1",
                    "results.json", "run.json"]
    lines = [line for line in summary.splitlines() if "python -m studies.device_path.import_jax" in line]
    here = {"OUT/": f"{out}/", "electra_data": str(root / "data"), "jax_export": str(export)}  # the folders here
    folders = []
    for line in lines:
        for name, path in here.items():
            line = line.replace(name, path)
        folders.append(import_jax.main(shlex.split(line)[3:]))
    assert [f.name for f in folders] == ["electra_8", f"mlm_{steps}"]
    run_finetuning.main(["--data-dir", str(root / "data"), "--model-name", "electra_8", "--task", "rte",
                         "--finetuning-data-dir", str(root / "glue"),
                         "--hparams", json.dumps({"max_train_steps": 1, "save_finetuned_models": False})])
    assert json.loads((folders[0] / "results" / "rte_results.json").read_text())["complete"]


START_FROM = '''
import json, sys
sys.modules["tensorflow"] = None
import numpy as np
from studies.device_path import pretrain_export as pretrain
from studies.device_path.returned import extract_member
from training_jax.weights import read_checkpoint
folder = extract_member(MEMBER, SCRATCH)
returned = read_checkpoint(folder)


def equal_to_returned(run):
    pairs = zip([v.path for v in run.model.trainable_variables], run.state[0])
    return [np.array_equal(np.asarray(value), returned[path].astype("float32")) for path, value in pairs]


args = ["--export", EXPORT, "--model", "electra", "--out", OUT]
continued = equal_to_returned(pretrain.open_run(pretrain.parse_args(args + ["--init-from", str(folder)])))
fresh = equal_to_returned(pretrain.open_run(pretrain.parse_args(args)))  # a new model: not those weights
print("RESULTS" + json.dumps({"same": all(continued), "count": len(continued), "fresh_same": all(fresh)}))
'''


def test_a_continued_run_starts_from_the_returned_weights_and_counts_steps_on(first_run, tmp_path):
    from studies.device_path import import_jax

    root, export, _, (repo, python_dir) = first_run
    member = root / "OUT" / "models.tar" / "pretrained"  # the model folder in the archive's parts
    names = {"EXPORT": root / "run_work" / "export", "OUT": tmp_path / "unused", "MEMBER": member,
             "SCRATCH": tmp_path / "scratch"}
    script = START_FROM
    for name, path in names.items():
        script = script.replace(name, repr(str(path)))
    # A later call on the device (the wheels as the first call installed them, the returned parts carried), and
    # beside it the check that --init-from holds exactly the returned weights: two processes, two cores.
    out = tmp_path / "OUT2"
    line = (f"export PYTHONPATH=$PWD/.whl/site KERAS_BACKEND=jax; python3 -m studies.device_path.run --export jax_export "
            f"--out $OUT --minutes 5 --finetune-minutes 0 --measure-steps 5 --init-from {member} "
            "--pretrain-flags '--prng rbg --flat-update'")  # the speed options, under the GPU image's JAX
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        call = pool.submit(device_call, line, repo, out, python_dir, root)
        started = run_script_under_jax(script, REPO)
        status, output = call.result()
    assert started["same"] and started["count"] > 10 and not started["fresh_same"]
    assert status == 0, output[-4000:]
    assert "precision float32 (default); prng rbg; flat update on; " in output, output[-4000:]
    record = json.loads((out / "run.json").read_text())
    assert record["steps_before"] == 8 and record["total_steps"] == 8 + record["steps"] and record["steps"] > 0
    assert record["optimizer"].startswith("fresh moments") and len(record["runs"]) == 2
    assert record["config"]["num_warmup_steps"] == max(1, int(record["steps"] * 0.01))
    assert (out / "models.tar.part1of1").is_file()
    folder = import_jax.main(["--vocab-file", str(export / "vocab.txt"), "--weights", str(out / "models.tar" /
                              "pretrained"), "--model-name", "continued", "--data-dir", str(tmp_path / "data")])
    assert (folder / f"ckpt-{record['total_steps']}.index").is_file()


def test_training_arrays_travel_as_xz_and_old_exports_still_read(tmp_path):
    from common.errors import InputError
    from training_jax.arrays import load_packed, pack_examples, save_packed

    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 16, 50)
    positions = np.arange(16)[None, :]
    ids = np.where(positions < lengths[:, None], rng.integers(1, 30522, (50, 16)), 0)
    mask = (positions < lengths[:, None]).astype("int32")
    segments = ((positions >= 2) & (positions < lengths[:, None])).astype("int32")
    packed = pack_examples(ids, mask, segments)
    written = save_packed(tmp_path / "train.npz", packed)
    assert written.name == "train.npz.xz" and not (tmp_path / "train.npz").exists()
    for name, value in load_packed(tmp_path / "train.npz").items():
        np.testing.assert_array_equal(value, packed[name])
    (tmp_path / "old").mkdir()
    np.savez_compressed(tmp_path / "old" / "train.npz", **packed)  # as exports before the .xz wrote it
    assert np.array_equal(load_packed(tmp_path / "old" / "train.npz")["input_ids"], packed["input_ids"])
    with pytest.raises(InputError, match="eval.npz: missing"):
        load_packed(tmp_path / "eval.npz")
    written.write_bytes(written.read_bytes()[:40])
    with pytest.raises(InputError, match="train.npz: not readable"):
        load_packed(tmp_path / "train.npz")


def test_steps_before_a_continued_run_come_from_its_run_json_else_the_weights_name(tmp_path):
    from studies.device_path.run import earlier_run

    shard = tmp_path / "weights-11144.part1of2.npz"
    assert earlier_run(None) == {}
    assert earlier_run([shard])["total_steps"] == 11144  # the H200 run came back without a run.json
    (tmp_path / "run.json").write_text(json.dumps({"total_steps": 20000, "runs": [{"steps": 20000}]}))
    assert earlier_run([shard])["total_steps"] == 20000
    (tmp_path / "models.tar.part1of1").write_bytes(b"")
    assert earlier_run([tmp_path / "models.tar" / "pretrained"])["total_steps"] == 20000  # the archive's run.json


def test_returned_model_folders_travel_as_one_archive_in_parts_and_extract_safely(tmp_path):
    import io
    import tarfile

    from common.errors import InputError
    from studies.device_path.returned import archive_parts, extract_member, write_archive

    folders = {}
    for name in ("pretrained", "mlm"):
        folders[name] = tmp_path / "back" / name
        folders[name].mkdir(parents=True)
        for index in range(3):
            (folders[name] / f"file{index}").write_bytes(np.random.default_rng(index).bytes(30_000))
    out = tmp_path / "OUT"
    out.mkdir()
    parts = write_archive(out, folders, tmp_path, part_bytes=40_000)
    assert len(parts) > 3 and archive_parts(out) == parts and all(p.stat().st_size <= 40_000 for p in parts)
    for name, folder in folders.items():
        extracted = extract_member(out / "models.tar" / name, tmp_path / "here")
        assert sorted(p.name for p in extracted.iterdir()) == ["file0", "file1", "file2"]
        assert all((extracted / f.name).read_bytes() == f.read_bytes() for f in folder.iterdir())
    with pytest.raises(InputError, match="holds no folder nothing"):
        extract_member(out / "models.tar" / "nothing", tmp_path / "here")
    parts[1].unlink()
    with pytest.raises(InputError, match=f"OUT: {len(parts) - 1} of the {len(parts)} parts of models.tar"):
        extract_member(out / "models.tar" / "mlm", tmp_path / "here")
    evil = tmp_path / "evil"
    evil.mkdir()
    with tarfile.open(evil / "models.tar.part1of1", "w") as archive:  # a member that climbs out
        info = tarfile.TarInfo("mlm/../../outside")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"no"))
    with pytest.raises(InputError, match="not a plain file of a model folder"):
        extract_member(evil / "models.tar" / "mlm", tmp_path / "there")
    assert not (tmp_path / "outside").exists()


def test_the_documented_device_line_is_the_one_the_export_prints_and_this_file_runs():
    from studies.device_path.run import device_line

    for doc in ("studies/device_path/README.md", "docs/results.md"):
        assert device_line("jax_export") in (REPO / doc).read_text(), doc
    assert device_line("jax_export", also_mlm=True) == device_line("jax_export") + " --also-mlm"


def test_pretrain_flags_pass_only_the_step_speed_options():
    from common.errors import InputError
    from studies.device_path.run import speed_flags

    assert speed_flags("--bf16-attention --prng rbg --steps-per-dispatch=8") == [
        "--bf16-attention", "--prng", "rbg", "--steps-per-dispatch=8"]
    with pytest.raises(InputError, match="--fit-minutes is not one of"):
        speed_flags("--prng rbg --fit-minutes 3")  # the run's own settings are not for the caller to change
