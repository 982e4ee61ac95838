"""Shared fixtures.

The real-data tier reads ../shared/data through ELECTRA_SHARED_DATA: unset, those tests skip; set (as CI
does), missing data is a failure, never a skip.
"""
import os
import pathlib

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One intra-op and one inter-op thread in each TensorFlow process the suite runs (both workers and the commands
# they start; JAX's processes do not read these): the two workers already fill the 2 cores, and TensorFlow's own
# pools on top of them only contend. Six TensorFlow-heavy files with -n 2, alternated twice on a Zen 3 with 2 cores
# (docs/testing.md): 131.5 and 137.6 s of wall time with TensorFlow's pools, 122.2 and 120.3 s with one thread.
# What the tests compute does not depend on the threads; a user's own setting of either variable wins.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
from training.cpu_features import turn_on_onednn  # noqa: E402

turn_on_onednn(quiet=True)  # as the run scripts do: the suite runs ~2x faster on AVX2-only CPUs

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    root = os.environ.get("ELECTRA_SHARED_DATA")
    if not root:
        pytest.skip("ELECTRA_SHARED_DATA is not set: real-data tier skipped")
    path = pathlib.Path(root).resolve()
    required = [
        path / "vocab" / "bert-base-uncased-vocab.txt",
        path / "corpus" / "enwiki_wikiextractor" / "enwiki_part00.txt.gz",
    ]
    missing = [str(p) for p in required if not p.exists()]
    if missing:
        pytest.fail(f"ELECTRA_SHARED_DATA={root} but these files are missing: {missing}")
    return path


@pytest.fixture(scope="session")
def bert_vocab_file(shared_data) -> pathlib.Path:
    return shared_data / "vocab" / "bert-base-uncased-vocab.txt"


@pytest.fixture(scope="session")
def wiki_shards(shared_data) -> list:
    return sorted((shared_data / "corpus" / "enwiki_wikiextractor").glob("enwiki_part*.txt.gz"))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A 60-token vocabulary whose special ids are the tiny config's ([CLS] 1, [SEP] 2, [MASK] 3): the
    checkpoint tests' micro model folders (tests/checkpoint_fixtures.model_folder). A test module that
    defines its own `tokenizer` fixture gets its own."""
    from data.tokenization import load_tokenizer
    from tests.model_fixtures import VOCAB_SIZE

    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    tokens = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"] + [f"word{i}" for i in range(VOCAB_SIZE - 5)]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return load_tokenizer(vocab_file=path)


# ------------------------------------------------------------------------------------------ the two workers' load
# Seconds each slow file took (its tests' setup, call and teardown) in a whole run as CI runs it (`-n 2 --dist
# loadfile`, ELECTRA_SHARED_DATA set; 2026-11-30 at 5e05853, `python -m bench.suite_cost` on an AMD EPYC Zen 3 with 2
# cores, nothing else running); the files not named took under 15 s. Each of the two workers runs a whole file at a
# time, so the run ends when the worker with the last long file is done: the slowest files go first (the longest
# processing time first, as a scheduler would) and the quick ones fill in at the end. xdist's own order (the files
# with the most tests first) put long files of one to four tests (test_pretraining_real, test_build_real,
# test_distributed, test_data_parallel) last, behind which the other worker could sit idle for minutes. A new slow
# file belongs here; a file's weight need not be exact.
FILE_SECONDS = {
    "test_bench_modules": 162, "test_jax_run": 120, "test_run_pretraining": 115, "test_pretraining_real": 113,
    "test_study_rtd_vs_mlm_device": 108, "test_distributed": 96, "test_predict": 91, "test_mixed_precision_run": 87,
    "test_run_finetuning_jax": 85, "test_electric": 85, "test_import_gpu_runs": 84, "test_data_parallel": 81,
    "test_jax_pretraining": 80, "test_gpu_window_product": 77, "test_checkpoints_parity": 76,
    "test_run_pretraining_jax": 75, "test_damaged_data": 69, "test_finetune_custom": 65,
    "test_checkpoints_hf_tokenizer": 60, "test_jax_finetune_devices": 58, "test_build": 58, "test_finetune_mrqa": 58,
    "test_jax_finetune_speed": 58, "test_finetune_run": 52, "test_scan_layers": 51, "test_tokenization_python": 48,
    "test_pretrainer": 46, "test_build_real": 42, "test_xla_fusion": 42, "test_optimization": 40,
    "test_study_electric_device": 40, "test_jax_finetune_buckets": 38, "test_onnx_clients": 37,
    "test_bench_gpu_speed": 36, "test_finetune_multitask": 34, "test_flash_attention": 31, "test_tokenization": 30,
    "test_tf_trainer_speed_equivalence": 29, "test_encoder_learns_context": 29, "test_jax_finetune": 28,
    "test_inspect_model": 28, "test_backend_neutral": 25, "test_matmul_dtype": 25, "test_bench_dense_grad": 25,
    "test_checkpoints_saved_model": 25, "test_collapse_run": 25, "test_onnx_predict": 24, "test_finetune_chunk": 23,
    "test_quiet": 23, "test_vocab": 23, "test_onnx_export": 22, "test_saved_model_ids": 18, "test_finetune_squad": 18,
    "test_attention_dtype": 17, "test_checkpoints_variants": 17,
}


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's reordering by test count: keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The slowest files first (FILE_SECONDS), each file's tests in their own order; the rest as collected."""
    items.sort(key=lambda item: -FILE_SECONDS.get(pathlib.Path(str(item.fspath)).stem, 0))
