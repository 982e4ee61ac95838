"""Every benchmark in bench/ runs at its smallest size (a micro model, one step, one setting), so that a change
that breaks one fails `make test` rather than the next person who runs it; and every module in bench/ names the
test that runs it (COVERED_BY), so that a new benchmark without one fails here.

Workers: the benchmarks that measure in fresh processes run their workers in this process here (`python -m
bench.X ARGS` as bench.X.main(ARGS), the output captured: tests.helpers.run_module_here), which keeps their
command lines, argument parsing and RESULT lines under test without seconds of imports per process; the real
process boundary (bench/worker_process.run_worker) is tests/test_bench_dense_grad.py's. The JAX benchmarks share
one JAX process, started with this module's first test so that it runs beside the TensorFlow ones. Only what the
benchmarks print is checked (rows parsed, finite numbers), never a speed."""
import gzip
import json
import math
import pathlib
import re
import textwrap
import types

import pytest

from tests.helpers import MICRO_MODEL, run_module_here, script_results, start_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
HERE = "tests/test_bench_modules.py"

# bench module -> the test that runs it
COVERED_BY = {
    "bf16_dev_score": HERE,
    "build_speed": HERE,
    "checkpoint_write_cpu": HERE,
    "dense_grad_cpu": "tests/test_bench_dense_grad.py",
    "dropout_rng_cpu": "tests/test_bench_dropout_rng.py",
    "elementwise_grad_cpu": HERE,
    "finetune_bucketing": HERE,
    "finetune_jax_speed": HERE,
    "finetune_threads": HERE,
    "flops": "tests/test_bench_flops.py",
    "gpu_speed": "tests/test_bench_gpu_speed.py",
    "gpu_window": "tests/test_gpu_window_product.py",
    "jax_startup": HERE,
    "matmul_dtype_step": HERE,
    "predict_vs_hf": HERE,
    "pretrain_step_cpu": HERE,
    "pretrain_step_gpu": "tests/test_bench_gpu_speed.py",
    "profile_step_cpu": "tests/test_bench_profile.py",
    "record_reader_speed": "tests/test_record_reader.py",
    "saved_model_padding": HERE,
    "step_hlo_cpu": HERE,
    "suite_cost": "tests/test_bench_suite_cost.py",
    "synthetic_glue": HERE,
    "worker_process": HERE,  # run_worker's side here; its real worker processes: tests/test_bench_dense_grad.py
}
MICRO_ONE_LAYER = {**MICRO_MODEL, "num_layers": 1}
NUMBER = r"[\d,]+(?:\.\d+)?"


def bench_modules():
    return sorted(path.stem for path in (REPO_ROOT / "bench").glob("*.py") if path.stem != "__init__")


def names_module(test_source, module):
    """Whether a test's source refers to bench's `module` (imported, run with -m, or named by path)."""
    return re.search(rf"bench[./]{module}\b|from bench import [\w, ]*\b{module}\b", test_source) is not None


def test_every_bench_module_has_a_test_that_runs_it():
    modules = bench_modules()
    assert [m for m in modules if m not in COVERED_BY] == [], "add the new bench module's test to COVERED_BY"
    assert [m for m in COVERED_BY if m not in modules] == [], "COVERED_BY names a module bench/ no longer has"
    for module, test in COVERED_BY.items():
        source = (REPO_ROOT / test).read_text(encoding="utf-8")
        assert names_module(source, module), f"{test} does not name bench.{module}"


def numbers(text):
    return [float(value.replace(",", "")) for value in re.findall(NUMBER, text)]


def assert_finite_positive(values):
    assert values and all(math.isfinite(v) and v > 0 for v in values), values


def table_row(printed, first_cell):
    """{column: cell} of the printed markdown table's row that starts with `first_cell`."""
    lines = printed.splitlines()
    row = next((i for i, line in enumerate(lines) if line.startswith(f"| {first_cell} |")), None)
    assert row is not None, (first_cell, printed[-3000:])
    header = next(lines[i] for i in range(row, -1, -1) if lines[i + 1].startswith("|---"))
    return dict(zip(table_cells(header), table_cells(lines[row])))


def table_cells(line):
    return [cell.strip() for cell in line.strip("|").split("|")]


# ------------------------------------------------------------------------------------------- workers in-process
def workers_here(monkeypatch, module):
    """`module`'s worker processes run in this process instead (tests.helpers.run_module_here)."""
    monkeypatch.setattr(module, "subprocess", types.SimpleNamespace(run=run_module_here))


# ------------------------------------------------------------------------------------------- shared data stand-in
@pytest.fixture(scope="module")
def shared_stand_in(tmp_path_factory):
    """../shared/data's layout, tiny: a vocabulary that spells any lower-case English (as BERT's), SST-2's
    train and dev TSVs, one WikiExtractor shard of gzipped English."""
    from tests.helpers import write_corpus
    from tests.onnx_fixtures import WORDS, write_vocab

    root = tmp_path_factory.mktemp("shared")
    write_vocab(root / "vocab" / "bert-base-uncased-vocab.txt")
    rows = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 9)) for i in range(96)]
    for split, count in (("train", 64), ("dev", 32)):
        lines = ["sentence\tlabel"] + [f"{rows[i]}\t{i % 2}" for i in range(count)]
        (root / "glue" / "SST-2").mkdir(parents=True, exist_ok=True)
        (root / "glue" / "SST-2" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = write_corpus(tmp_path_factory.mktemp("corpus"), num_files=1)
    paragraphs = corpus.joinpath("part0.txt").read_text(encoding="utf-8").split("\n\n")
    articles = "".join(f'<doc id="{i}" title="t{i}">\nt{i}\n\n{text}\n</doc>\n' for i, text in enumerate(paragraphs))
    shard = root / "corpus" / "enwiki_wikiextractor" / "enwiki_part00.txt.gz"
    shard.parent.mkdir(parents=True)
    with gzip.open(shard, "wt", encoding="utf-8") as f:
        f.write(articles)
    return root


# ------------------------------------------------------------------------------------------- TensorFlow, here
def test_pretrain_step_cpu(monkeypatch, capsys):
    from bench import pretrain_step_cpu, worker_process

    from common import matmul_gradients

    workers_here(monkeypatch, worker_process)
    monkeypatch.setenv(matmul_gradients.ENV, "onednn")  # restored after the test: the worker sets it here
    variants = ("tf-fp32", "tf-fp32-bf16mm", "tf-fp32-eigen-gradients")
    try:
        pretrain_step_cpu.main(["--variants", ",".join(variants), "--no-peak", "--batch-size", "2", "--seq-length",
                                "16", "--steps", "1", "--warmup", "1", "--threads", "1", "--model-size",
                                "electra_tiny", "--model-hparams", json.dumps(MICRO_ONE_LAYER)])
        assert matmul_gradients.installed()  # the last variant's worker routed them, in this process
    finally:
        matmul_gradients.uninstall()
    printed = capsys.readouterr().out
    assert '"eigen_weight_gradients": true' in printed.split("[tf-fp32-eigen-gradients] done")[1].splitlines()[0]
    for variant in variants:
        row = table_row(printed, variant)
        assert_finite_positive(numbers(row["first step s"] + " " + row["sequences/s"] + " " + row["tokens/s"]))
        assert row["× HF fp32"] == row["× HF bf16"] == "n/a" and f"[{variant}] done" in printed


def test_elementwise_grad_cpu(capsys):
    from bench import elementwise_grad_cpu

    elementwise_grad_cpu.main(["--rows", "32", "--widths", "8,16", "--repeats", "1", "--iterations", "1",
                               "--threads", "1"])
    rows = [table_cells(line) for line in capsys.readouterr().out.splitlines() if line.startswith("| LayerNorm |")
            or line.startswith("| GELU |")]
    assert [(op, width) for op, width, *_ in rows] == [("LayerNorm", "8"), ("GELU", "8"), ("LayerNorm", "16"),
                                                       ("GELU", "16")]
    assert_finite_positive([float(cell) for row in rows for cell in row[2:]])


def test_checkpoint_write_cpu(tmp_path, capsys):
    from bench import checkpoint_write_cpu

    checkpoint_write_cpu.main(["--model-size", "electra_tiny", "--work", str(tmp_path / "work"), "--repeats", "1"])
    printed = capsys.readouterr().out
    rows = re.findall(rf"^(write|read) .*?({NUMBER}) s +({NUMBER})x TensorFlow's time$", printed, re.M)
    assert [kind for kind, _, _ in rows] == ["write"] * 3 + ["read"] * 3, printed
    assert_finite_positive([float(ratio) for _, _, ratio in rows])


def test_finetune_bucketing(shared_stand_in, monkeypatch, capsys):
    from bench import finetune_bucketing

    monkeypatch.setenv("ELECTRA_SHARED_DATA", str(shared_stand_in))
    finetune_bucketing.main(["--tasks", "sst", "--model-size", "electra_tiny", "--model-hparams",
                             json.dumps(MICRO_ONE_LAYER), "--steps", "1", "--repeats", "1"])
    printed = capsys.readouterr().out
    rows = dict(re.findall(rf"^sst +(bucketed|fixed 128) +({NUMBER} +{NUMBER})$", printed, re.M))
    assert set(rows) == {"bucketed", "fixed 128"}, printed
    assert_finite_positive(numbers(" ".join(rows.values())))
    assert re.search(rf"^sst +speed-up of bucketing: {NUMBER}x$", printed, re.M), printed


def test_finetune_threads(shared_stand_in, monkeypatch, capsys):
    from bench import finetune_threads

    monkeypatch.setenv("ELECTRA_SHARED_DATA", str(shared_stand_in))
    workers_here(monkeypatch, finetune_threads)
    finetune_threads.main(["--tasks", "sst", "--steps", "1", "--repeats", "1", "--hparams",
                           json.dumps({"model_size": "electra_tiny", "model_hparam_overrides": MICRO_ONE_LAYER})])
    printed = capsys.readouterr().out
    rates = dict(re.findall(rf"^sst +inter-op (default|one) +examples/s ({NUMBER})$", printed, re.M))
    assert set(rates) == {"default", "one"}, printed
    assert_finite_positive(numbers(" ".join(rates.values())))
    assert re.search(rf"^sst +one inter-op thread / default: {NUMBER}x$", printed, re.M), printed


def test_build_speed(shared_stand_in, monkeypatch, capsys):
    from bench import build_speed

    monkeypatch.setenv("ELECTRA_SHARED_DATA", str(shared_stand_in))
    build_speed.main(["--megabytes", "0.02", "--baseline-megabytes", "0.01", "--processes", "1",
                      "--text-multiples", "1"])
    printed = capsys.readouterr().out
    original = table_row(printed, "original-style (Python tokenizer, protobuf per example), 1 process")
    ours = table_row(printed, "this builder, 1 process")
    assert_finite_positive(numbers(original["tokens/s"] + " " + ours["tokens/s"] + " " +
                                   ours["peak RSS (largest process)"]))  # MB/s of 20 kB can print as 0.00
    assert "Builder command: python build_pretraining_dataset.py" in printed


@pytest.fixture
def predict_work_dir(tmp_path, shared_stand_in):
    """bench.predict_vs_hf's --work-dir as its prepare() leaves it (a model folder, its fine-tuned SST-2 folder,
    their Hugging Face and ONNX exports), with a 1-layer micro model in place of electra_small: prepare() then
    finds everything made."""
    from bench.predict_vs_hf import MODEL_NAME
    from checkpoints import export
    from tests.checkpoint_fixtures import micro_model_folder
    from tests.onnx_fixtures import finetuned_folder

    work = tmp_path / "work"
    vocab = shared_stand_in / "vocab" / "bert-base-uncased-vocab.txt"
    folder = micro_model_folder(work / "data", vocab, step=1, name=MODEL_NAME, num_layers=1)
    finetuned = finetuned_folder(pathlib.Path(folder) / "finetuning_models" / "sst_model_1", vocab, "classification")
    export.main(["--model-dir", str(folder), "--format", "hf", "--output", str(work / "hf")])
    export.main(["--model-dir", str(finetuned), "--format", "onnx", "--output", str(work / "onnx")])
    return work


def test_predict_vs_hf(predict_work_dir, shared_stand_in, monkeypatch, capsys):
    import torch

    from bench import predict_vs_hf, worker_process
    from inference import onnx_folder, predict

    monkeypatch.setenv("ELECTRA_SHARED_DATA", str(shared_stand_in))
    workers_here(monkeypatch, worker_process)
    for module, name in ((predict, "load_predictor"), (onnx_folder, "open_session")):  # the workers replace them
        monkeypatch.setattr(module, name, getattr(module, name))
    monkeypatch.setattr(torch, "set_num_interop_threads", lambda threads: None)  # settable once per process
    threads = torch.get_num_threads()
    try:
        table = predict_vs_hf.main(["--work-dir", str(predict_work_dir), "--hf-batch-sizes", "8", "--repeats", "1",
                                    "--threads", "1", "--train-steps", "1", "--warmup-steps", "1", "--predict-bf16",
                                    "--train-settings", "random,hf,random-bf16,hf-bf16,random-bf16-matmuls"])
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    for label in ("ours, python -m inference.predict", "ONNX Runtime, the same command", "Hugging Face pipeline, "
                  "batch_size 8", "ours, the same command with --matmul-dtype bfloat16",
                  "Hugging Face pipeline, batch_size 8, the model in bfloat16",
                  "ours, random batches padded to their longest", "Hugging Face Trainer",
                  "ours, random batches, mixed_bfloat16", "Hugging Face Trainer, DataCollatorWithPadding, bf16=True",
                  "ours random batches, bf16 / Hugging Face dynamic padding, bf16",
                  "ours random batches: bf16 matmul operands / float32"):
        line = next((line for line in printed.splitlines() if line.strip().startswith(label)), None)
        assert line, (label, printed[-3000:])
        assert_finite_positive(numbers(line.split(":", 1)[1].split("(")[0]))
    assert re.search(r"labels: ONNX Runtime float32 equals TensorFlow on \d+ of 32 sentences", printed), printed
    for side in ("ours", "Hugging Face's"):
        assert re.search(rf"labels: {side} bfloat16 equals its float32 on \d+ of 32 sentences", printed), printed
    assert set(table) == {"predict", "train"} and math.isfinite(table["predict"]["ratio"])
    assert math.isfinite(table["predict"]["bf16_ratio"]) and table["predict"]["bf16_ratio"] > 0
    # the setting reaches the worker's model through the product's option, and only that setting's
    assert table["train"]["matmul_dtypes"] == {"random": "float32", "random-bf16": "float32",
                                               "random-bf16-matmuls": "bfloat16"}


def test_saved_model_padding(predict_work_dir, shared_stand_in, monkeypatch, capsys):
    from bench import saved_model_padding

    monkeypatch.setenv("ELECTRA_SHARED_DATA", str(shared_stand_in))
    folder = next((predict_work_dir / "data").glob("models/*/finetuning_models/sst_model_1"))
    result = saved_model_padding.main(["--model-dir", str(folder), "--work-dir", str(predict_work_dir / "served"),
                                       "--rows", "12", "--batch-size", "8", "--repeats", "1", "--threads", "1"])
    printed = capsys.readouterr().out
    for label in ("every position", "the real tokens' rows"):
        line = next(line for line in printed.splitlines() if line.strip().startswith(f"{label}:"))
        assert_finite_positive(numbers(line.split(":", 1)[1]))
    assert "the real tokens' rows / every position" in printed and math.isfinite(result["ratio"])
    assert result["max_difference"] < 1e-4  # the same function; different graphs (model/unpadding.py)


def test_bf16_dev_score(tmp_path, shared_stand_in, monkeypatch, capsys):
    """Both fine-tunes for two seeds (run_finetuning.main here, a 1-layer micro model in place of electra_small,
    2 updates), each model's dev labels under Keras float32 and bfloat16 operands and through its ONNX export
    (checkpoints.export.main here) in float32 and int8, and the summary over seeds."""
    import subprocess

    import run_finetuning
    from bench import bf16_dev_score
    from bench.predict_vs_hf import MODEL_NAME
    from checkpoints import export
    from tests.checkpoint_fixtures import micro_model_folder

    modules = {"run_finetuning": run_finetuning.main, "checkpoints.export": export.main}

    def here(command, **options):
        assert command[1] == "-m" and command[2] in modules, command
        modules[command[2]](command[3:])
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(bf16_dev_score, "subprocess", types.SimpleNamespace(run=here))
    monkeypatch.setenv("ELECTRA_SHARED_DATA", str(shared_stand_in))
    work = tmp_path / "work"
    micro_model_folder(work / "random", shared_stand_in / "vocab" / "bert-base-uncased-vocab.txt", step=1,
                       name=MODEL_NAME, num_layers=1)
    bf16_dev_score.main(["--work-dir", str(work), "--hparams", json.dumps({"max_train_steps": 2, "max_seq_length": 32,
                                                                           "train_batch_size": 8}),
                         "--seeds", "1,2", "--onnx-int8"])
    printed = capsys.readouterr().out

    def numbers(pattern):
        match = re.search(pattern, printed)
        assert match, (pattern, printed)
        values = [float(value.replace(",", "")) for value in match.groups()]
        assert all(math.isfinite(value) for value in values), match.group(0)
        return values

    ways = ("keras float32", "keras bfloat16 operands", "onnx float32", "onnx int8")
    for seed in (1, 2):
        for setting in ("float32", "bfloat16"):
            numbers(rf"seed {seed} \(FinetuningConfig seed {seed - 1}\), matmul_dtype {setting}: dev accuracy "
                    rf"({NUMBER}) after 2 updates, ({NUMBER}) s")
            values = numbers(rf"seed {seed}, trained with {setting}: accuracy "
                             + ", ".join(rf"{way} ({NUMBER})" for way in ways)
                             + "; labels agreeing with keras float32: "
                             + ", ".join(rf"{way} (\d+)" for way in ways[1:]) + r" of 32")
            assert all(0 <= value <= 100 for value in values[:4]) and all(value <= 32 for value in values[4:])
        assert re.search(rf"issue 44's bar, seed {seed}: every run above 75%: (yes|NO); ", printed), printed
    for setting in ("float32", "bfloat16"):
        numbers(rf"run trained with {setting}: dev accuracy ({NUMBER}), ({NUMBER}); mean ({NUMBER})")
        for way in ways[1:]:
            numbers(rf"model trained with {setting}, {way} against keras float32: largest \|difference\| "
                    rf"({NUMBER}) points, fewest labels agreeing (\d+) of 32")
    numbers(rf"largest \|float32 - bfloat16\| between the two runs of a seed: ({NUMBER}) points")
    assert re.search(r"issue 44's bar holds for every seed: (yes|no)", printed), printed
    # seed 1 keeps the earlier layout and hparams (the default seed); seed 2 its own folder and seed 1
    results = {seed: json.loads((folder / "bfloat16" / "models" / MODEL_NAME / "results" / "sst_results.json")
                                .read_text()) for seed, folder in ((1, work), (2, work / "seed_2"))}
    assert [results[seed]["config"]["matmul_dtype"] for seed in (1, 2)] == ["bfloat16", "bfloat16"]
    assert [results[seed]["trials"][0]["seed"] for seed in (1, 2)] == [0, 1]
    assert (work / "seed_2" / "float32" / "onnx_int8" / "model.onnx").is_file()


def test_matmul_dtype_step(tmp_path, shared_stand_in, monkeypatch, capsys):
    from bench import matmul_dtype_step
    from tests.checkpoint_fixtures import micro_model_folder

    monkeypatch.setenv("ELECTRA_SHARED_DATA", str(shared_stand_in))
    folder = micro_model_folder(tmp_path, shared_stand_in / "vocab" / "bert-base-uncased-vocab.txt", step=1,
                                num_layers=1)
    times = matmul_dtype_step.main(["--model-dir", str(folder), "--updates", "2", "--threads", "1"])
    printed = capsys.readouterr().out
    assert {setting: len(values) for setting, values in times.items()} == {"float32": 2, "bfloat16": 2}
    for setting in ("float32", "bfloat16"):
        line = next(line for line in printed.splitlines() if line.strip().startswith(f"matmul_dtype {setting}:"))
        assert_finite_positive([float(value) for value in re.findall(r"\d+\.\d+", line)])  # times and losses
    assert re.search(rf"float32 / bfloat16 operands: fastest {NUMBER}x, median {NUMBER}x, same batch \(median of 2\) "
                     rf"{NUMBER}x", printed), printed


# ------------------------------------------------------------------------------------------- JAX, one process
JAX_SCRIPT = textwrap.dedent('''
    import contextlib, io, json, sys, types
    sys.modules["tensorflow"] = None
    from bench import finetune_jax_speed, jax_startup, step_hlo_cpu, worker_process
    from studies.device_path import returned_sizes  # the device path's sizes: a study's, run in this JAX process
    from tests.helpers import run_module_here

    worker_process.subprocess = types.SimpleNamespace(run=run_module_here)  # the three builds in this process
    printed = {}
    for name, module, argv in (
            ("jax_startup", jax_startup, ["--model-size", "electra_tiny", "--hparams", HPARAMS, "--work", WORK]),
            ("returned_sizes", returned_sizes, ["--model-size", "electra_tiny", "--one-model", "--work",
                                                WORK + "/returned", "--vocab-file", VOCAB]),
            ("step_hlo_cpu", step_hlo_cpu, ["--model-hparams", HPARAMS, "--vocab-size", "120", "--batch-size", "2",
                                            "--seq-length", "16", "--variants", "cpu"]),
            # run_finetuning.py's own path, both ways in this process: two tasks (a classifier and a regression)
            ("finetune_jax_speed", finetune_jax_speed, [
                "--model-hparams", HPARAMS, "--tasks", "rte,sts", "--scale", "0.0001", "--max-seq-length", "32",
                "--vocab-size", "200", "--seeds", "2", "--steps-per-dispatch", "2", "--in-process",
                "--hparams", '{"max_train_steps": 3, "train_batch_size": 4, "eval_batch_size": 8}',
                "--work", WORK + "/finetune", "--json", WORK + "/finetune.json"])):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            module.main(argv)
        printed[name] = out.getvalue()
    printed["finetune_jax_speed.json"] = json.load(open(WORK + "/finetune.json"))
    print("RESULTS" + json.dumps(printed))
''')


@pytest.fixture(scope="module", autouse=True)
def jax_benchmarks(request, tmp_path_factory, shared_stand_in):
    """The JAX benchmarks' process, started with this module's first test (where its test is selected) so that
    it runs beside the TensorFlow ones; its test reads what it printed."""
    if not any(item.name == "test_jax_benchmarks_in_one_process" for item in request.session.items):
        yield None
        return
    work = tmp_path_factory.mktemp("jax_benchmarks")
    script = (JAX_SCRIPT.replace("HPARAMS", repr(json.dumps(MICRO_ONE_LAYER))).replace("WORK", repr(str(work)))
              .replace("VOCAB", repr(str(shared_stand_in / "vocab" / "bert-base-uncased-vocab.txt"))))
    process = start_script_under_jax(script, REPO_ROOT)
    yield process
    if process.poll() is None:
        process.kill()
        process.communicate()


def test_jax_benchmarks_in_one_process(jax_benchmarks):
    printed = script_results(jax_benchmarks)
    startup = printed["jax_startup"]
    for setting in ("no cache", "empty cache", "warm cache"):
        line = re.search(rf"^  {setting} *: +({NUMBER}) s; (\d+) compiles, ({NUMBER}) s of them$", startup, re.M)
        assert line, startup
        assert math.isfinite(float(line.group(1))) and float(line.group(1)) > 0
    assert re.search(rf"warm cache / no cache: {NUMBER}x the time; \d+ files cached", startup), startup
    sizes = printed["returned_sizes"]
    files = re.findall(rf"^\S+\t({NUMBER}) MiB$", sizes, re.M)
    assert files and all(float(mib) >= 0 for mib in files), sizes
    summary = re.search(rf"^(\d+) files \(limit \d+\), ({NUMBER}) MiB", sizes, re.M)
    assert summary and int(summary.group(1)) == len(files) and float(summary.group(2)) > 0, sizes
    row = re.search(r"^\| cpu \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| ({NUMBER}) \|$".replace("{NUMBER}", NUMBER),
                    printed["step_hlo_cpu"], re.M)
    assert row and int(row.group(1)) >= int(row.group(2)) > 0 and int(row.group(3)) > 0, printed["step_hlo_cpu"]
    # run_finetuning.py's speed ways: the same trials (updates) in both, every figure there, the new way's settings
    speed = printed["finetune_jax_speed.json"]
    today, new = speed["today"], speed["new"]
    assert today["settings"]["steps_per_dispatch"] == 1 and today["settings"]["length_buckets"] is None, today
    assert new["settings"]["steps_per_dispatch"] == 2 and new["settings"]["length_buckets"] == [32], new
    assert today["updates"] == new["updates"] == 2 * 2 * 3  # two tasks, two seeds, max_train_steps 3
    for way in (today, new):
        assert way["train_seconds"] > 0 and way["updates_per_second"] > 0 and way["steady_updates_per_second"] > 0
        assert sorted(way["dev_metrics"]) == ["rte", "sts"] and all(map(math.isfinite, way["dev_metrics"].values()))
    assert today["compiles"] > 0  # the first way compiles; the second reuses what it can in this process
    table = printed["finetune_jax_speed"]
    assert re.search(rf"^updates/s once compiled +{NUMBER} +{NUMBER}$", table, re.M), table
    assert re.search(rf"^new / today: wall_time {NUMBER}x, updates_per_second {NUMBER}x", table, re.M), table


def test_synthetic_glue_files_read_as_glue_with_glues_lengths(tmp_path):
    """bench.synthetic_glue's files: GLUE's readers take them, every word is one token of the made-up vocabulary,
    labels are the task's, and the featurised lengths follow the task's (GLUE_LENGTHS' median)."""
    import numpy as np

    from bench.synthetic_glue import GLUE_LENGTHS, write_glue_files, write_vocab
    from data.tokenization import load_tokenizer
    from finetune.registry import get_task

    vocab = write_vocab(tmp_path / "vocab.txt", size=300)
    write_glue_files(tmp_path / "glue", vocab, rows={"sst": (400, 8), "mrpc": (300, 8), "sts": (8, 8)})
    tokenizer = load_tokenizer(vocab, engine="python")
    unknown = tokenizer.encode_batch(["[UNK]"])[0][0]
    for name in ("sst", "mrpc", "sts"):
        task = get_task(name)
        train = task.read(tmp_path / "glue", "train")
        assert len(train) == {"sst": 400, "mrpc": 300, "sts": 8}[name]
        assert len(task.read(tmp_path / "glue", "dev")) == 8
        texts = [t for example in train for t in (example.text_a, example.text_b) if t]
        for ids, text in zip(tokenizer.encode_batch(texts), texts):
            assert unknown not in ids and len(ids) == len(text.split()), text
        if task.labels:
            assert {example.label for example in train} <= set(task.labels)
        else:
            assert all(0.0 <= float(example.label) <= 5.0 for example in train)
        if name != "sts":  # [CLS] text_a [SEP] (text_b [SEP])
            lengths = [len(e.text_a.split()) + (len(e.text_b.split()) + 1 if e.text_b else 0) + 2 for e in train]
            assert abs(np.median(lengths) - GLUE_LENGTHS[name][0]) <= 2, np.median(lengths)
