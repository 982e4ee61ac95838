"""The GPU window as the product's own commands (python -m bench.gpu_window --product), run as the device tool runs
its line, under the GPU image's stand-in (Python 3.12, JAX 0.11.2, NumPy 2.5.2; no TensorFlow; keras, namex and
optree from the carried wheels), on a carried folder with a gzip-compressed dataset and a GLUE-layout task: what
comes back fits the tool's limits, and here (TensorFlow) the float16 weights import as a model folder that
run_finetuning.py fine-tunes, beside the run's metrics and results."""
import json
import pathlib
import shutil
import subprocess
import tarfile

import pytest

from tests.helpers import MICRO_BENCH, MICRO_MODEL, carried_wheels, write_corpus, write_rte, write_vocab

REPO = pathlib.Path(__file__).resolve().parents[1]
MOST_FILES, MOST_FILE_BYTES = 8, 16 * 2 ** 20  # the device tool's limits on what comes back
MICRO_PRETRAINING = {"model_size": "electra_small", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
                     "train_batch_size": 4, "eval_batch_size": 4, "num_eval_steps": 2, "num_train_steps": 6,
                     "num_warmup_steps": 1, "do_eval": True, "iterations_per_loop": 3}


@pytest.fixture(scope="module")
def window(tmp_path_factory):
    """(root, $OUT, output): the product line run once on a micro model, the benchmark left out (the time-boxed
    run's test runs the same benchmark command)."""
    import build_pretraining_dataset
    from bench.gpu_window import product_line
    from tests.helpers import accelerator_python, image_python, repository_mirror, run_device_line

    python, wheels = image_python()
    root = tmp_path_factory.mktemp("window")
    repo = repository_mirror(REPO, root / "repo")
    carried_wheels(wheels, repo / ".whl")
    data = repo / "window"
    corpus = write_corpus(root / "corpus")
    vocab = write_vocab(corpus, root / "vocab.txt")
    build_pretraining_dataset.main(["--corpus-dir", str(corpus), "--vocab-file", str(vocab), "--data-dir", str(data),
                                    "--max-seq-length", "32", "--num-shards", "2", "--compression", "gzip"])
    vocab.unlink()  # the device machine has only what is carried: the dataset folder's own copy of its vocabulary
    text = (corpus / "part0.txt").read_text().replace("\n", " ")
    sentences = [" ".join(s.split()[:10]) for s in text.split(". ") if len(s.split()) >= 6]
    write_rte(data / "glue" / "RTE", sentences, {"train": 24, "dev": 8}, seed=0)
    line = product_line(tasks="rte", pretrain_hparams=MICRO_PRETRAINING, pretrain_minutes=6, finetune_until=560,
                        finetune_hparams={"max_train_steps": 2}, benchmark=False)
    out = root / "OUT"
    status, output = run_device_line(line, repo, out, accelerator_python(root / "py", python), 600)
    assert status == 0, output[-4000:]
    return root, out, output


def test_the_printed_line_is_the_documented_one_and_benchmarks_first(capsys):
    from bench.gpu_window import bench_command, main, product_line

    line = product_line()
    assert line in (REPO / "docs" / "jax_gpu.md").read_text()
    assert line.index(bench_command()) < line.index("run_pretraining.py") < line.index("run_finetuning.py")
    assert "training_jax" not in line and "--compression" not in line  # the product's commands alone
    micro = product_line(bench_args=MICRO_BENCH, benchmark=True)
    assert bench_command(MICRO_BENCH) in micro
    main([])
    assert capsys.readouterr().out.strip() == line  # what `python -m bench.gpu_window` prints


def test_what_comes_back_fits_the_device_tools_limits(window):
    _, out, output = window
    files = sorted(p for p in out.rglob("*") if p.is_file())
    names = [str(p.relative_to(out)) for p in files]
    assert names == ["hf16.tar.part00", "model_files.tar.gz", "window.log"], (names, output[-3000:])
    assert len(files) <= MOST_FILES and all(p.stat().st_size <= MOST_FILE_BYTES for p in files)
    assert "Under JAX" in output and "error" not in output.lower()


def test_the_weights_import_here_and_finetune_with_tensorflow(window, tmp_path):
    import run_finetuning
    from checkpoints import import_weights

    root, out, _ = window
    archive = tmp_path / "hf16.tar"
    with archive.open("wb") as joined:  # the parts joined, as `cat hf16.tar.part* > hf16.tar` does
        for part in sorted(out.glob("hf16.tar.part*")):
            joined.write(part.read_bytes())
    subprocess.run(["tar", "-C", str(tmp_path), "-xf", str(archive)], check=True)
    data = tmp_path / "data"
    folder = import_weights.main(["--source", str(tmp_path / "hf16"), "--model-name", "window_model",
                                  "--data-dir", str(data)])
    assert pathlib.Path(folder).is_dir()
    shutil.copytree(root / "repo" / "window" / "glue", tmp_path / "glue")
    run_finetuning.main(["--data-dir", str(data), "--model-name", "window_model", "--task", "rte",
                         "--finetuning-data-dir", str(tmp_path / "glue"),
                         "--hparams", json.dumps({"max_train_steps": 1, "save_finetuned_models": False})])
    assert json.loads((data / "models" / "window_model" / "results" / "rte_results.json").read_text())["complete"]


def test_the_model_folders_small_files_come_back(window):
    _, out, _ = window
    with tarfile.open(out / "model_files.tar.gz") as archive:
        names = archive.getnames()
        results = json.load(archive.extractfile("electra_small/results/rte_results.json"))
        metrics = archive.extractfile("electra_small/metrics.jsonl").read().decode().splitlines()
    assert not [n for n in names if "/ckpt" in n or "jax_work" in n]  # no checkpoint: the float16 export is it
    assert not [n for n in names if "finetuning_models" in n]  # save_finetuned_models false: results and logs only
    assert "electra_small/config.json" in names and any("/logs/" in n for n in names)
    assert results["complete"] and results["trials_done"] == 1 and results["jax_settings"]["platform"] == "cpu"
    evaluations = [json.loads(line) for line in metrics if json.loads(line).get("split") == "eval"]
    assert evaluations and evaluations[-1]["step"] == MICRO_PRETRAINING["num_train_steps"]
    assert any(json.loads(line).get("split") == "run" and json.loads(line)["backend"] == "jax" for line in metrics)


@pytest.mark.parametrize("until, runs", [(0, False), (3600, True)])
def test_finetuning_gets_what_is_left_of_the_call_and_none_when_nothing_is(until, runs):
    """The fine-tuning step's bound counts from the call's start, so that overruns before it shorten it rather
    than cut off the last tar; with no time left it does not start."""
    from bench.gpu_window import product_line

    line = product_line(finetune_until=until, benchmark=False)
    start = line.split(";")[0]
    step = line[line.index("left="):line.index("timeout $left")] + 'echo "ran $left"'
    done = subprocess.run(["bash", "-c", f"{start}; {step}; echo end"], capture_output=True, text=True)
    lines = done.stdout.split()
    assert lines[-1] == "end" and ("ran" in lines) == runs, done
    if runs:
        assert until - 5 <= int(lines[lines.index("ran") + 1]) <= until
