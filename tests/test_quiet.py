"""Quiet start: TensorFlow's start-up lines are hidden unless the user's logging variables ask for them,
and nothing else is (our lines, Python's warnings, tracebacks, a fatal line before a crash)."""
import os
import subprocess
import sys
import textwrap

import pytest

from common import quiet
from tests.conftest import REPO_ROOT
from tests.helpers import write_corpus, write_vocab

NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
INFO = "I0000 00:00:1795669493.175722    4781 port.cc:153] oneDNN custom operations are on."
WARNING = "W0000 00:00:1795669493.175993    4781 cuda_dnn.cc:8] Unable to register cuDNN factory."
ERROR = "E0000 00:00:1795669502.353730    4927 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)"
FATAL = "F0000 00:00:1795669502.353730    4927 port.cc:9] This TensorFlow binary was compiled for AVX."
OURS = "Building electra_data/pretrain_tfrecords from 1 file(s)"


def env_without_log_variables(**extra):
    env = {k: v for k, v in os.environ.items() if k not in quiet.LOG_VARIABLES}
    return dict(env, PYTHONUNBUFFERED="1", **extra)


@pytest.mark.parametrize("level, shown", [
    (0, [NOTICE, INFO, WARNING, OURS, NOTICE, ERROR, NOTICE, FATAL]),
    (1, [NOTICE, WARNING, OURS, NOTICE, ERROR, NOTICE, FATAL]),
    (2, [OURS, NOTICE, ERROR, NOTICE, FATAL]),
    (3, [OURS, NOTICE, FATAL]),
])
def test_filter_drops_tensorflow_s_lines_below_the_level_only(level, shown):
    lines = [NOTICE, INFO, WARNING, OURS, NOTICE, ERROR, NOTICE, FATAL]
    kept = [line.decode() for line in quiet.filter_log_lines([f"{x}\n".encode() for x in lines], level)]
    assert [line.rstrip("\n") for line in kept] == shown


FAKE_TENSORFLOW = f'''
import os, warnings
os.write(2, b"{NOTICE}\\n{INFO}\\n{WARNING}\\n")  # as TensorFlow's C++ start-up writes them
warnings.warn("a Python warning during the import")
if os.environ.get("FAKE_TF_CRASH"):
    os.write(2, b"{FATAL}\\n")
    os.abort()
if os.environ.get("FAKE_TF_RAISE"):
    raise ImportError("a broken install")
for optional in ("sklearn", "jax"):  # as TensorFlow and Keras import them: only if installed
    try:
        __import__(optional)
        print("tensorflow imported", optional)
    except ImportError:
        print("tensorflow went without", optional)
'''


def run_with_fake_tensorflow(tmp_path, **env):
    """A stand-in `tensorflow` package that writes start-up lines to fd 2, imported after quiet_tensorflow()."""
    package = tmp_path / "fake" / "tensorflow"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(FAKE_TENSORFLOW)
    for optional in ("sklearn", "jax"):  # stand-ins, installed
        (package.parent / optional).mkdir(exist_ok=True)
        (package.parent / optional / "__init__.py").write_text("INSTALLED = True\n")
    script = textwrap.dedent("""
        from common.quiet import quiet_tensorflow
        quiet_tensorflow()
        import tensorflow
        import jax, sklearn
        assert jax.INSTALLED and sklearn.INSTALLED  # imported after TensorFlow, they import as usual
        print("ours")
    """)
    env = env_without_log_variables(PYTHONPATH=f"{package.parent}{os.pathsep}{REPO_ROOT}", **env)
    completed = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=60)
    return completed.returncode, completed.stdout.splitlines()


def test_start_up_lines_are_hidden_and_python_s_warnings_are_not(tmp_path):
    code, lines = run_with_fake_tensorflow(tmp_path)
    assert code == 0 and lines[-1] == "ours"
    assert not any(line.startswith(("I0000", "W0000", NOTICE)) for line in lines), lines
    assert any("a Python warning during the import" in line for line in lines)


@pytest.mark.parametrize("env, without", [
    ({}, ["jax", "sklearn"]),
    ({"TF_CPP_MIN_LOG_LEVEL": "0"}, ["jax", "sklearn"]),  # every line shown, the import still lean
    ({"KERAS_BACKEND": "jax"}, ["sklearn"]),  # Keras on JAX needs JAX during TensorFlow's import
])
def test_tensorflow_imports_without_the_optional_packages_it_does_not_need_here(tmp_path, env, without):
    code, lines = run_with_fake_tensorflow(tmp_path, **env)
    assert code == 0 and lines[-1] == "ours", lines
    went_without = sorted(line.split()[-1] for line in lines if line.startswith("tensorflow went without"))
    assert went_without == without, lines


def test_a_logging_variable_the_user_set_wins(tmp_path):
    _, lines = run_with_fake_tensorflow(tmp_path, TF_CPP_MIN_LOG_LEVEL="0")
    assert lines[:3] == [NOTICE, INFO, WARNING]
    _, lines = run_with_fake_tensorflow(tmp_path, TF_CPP_MIN_LOG_LEVEL="1")
    assert WARNING in lines and INFO not in lines


def test_a_crash_or_a_broken_install_during_the_import_is_still_shown(tmp_path):
    code, lines = run_with_fake_tensorflow(tmp_path, FAKE_TF_CRASH="1")
    assert code != 0 and FATAL in lines and "ours" not in lines
    code, lines = run_with_fake_tensorflow(tmp_path, FAKE_TF_RAISE="1")
    assert code == 1 and lines[-1] == "ImportError: a broken install"


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    corpus = write_corpus(tmp_path_factory.mktemp("corpus"), num_files=1, max_documents=5)
    return corpus, write_vocab(corpus, tmp_path_factory.mktemp("vocab") / "vocab.txt")


def run_builder(tmp_path, tiny_corpus, **env):
    corpus, vocab = tiny_corpus
    command = [sys.executable, str(REPO_ROOT / "build_pretraining_dataset.py"), "--corpus-dir", str(corpus),
               "--vocab-file", str(vocab), "--data-dir", str(tmp_path), "--max-seq-length", "32",
               "--num-shards", "1", "--overwrite"]
    completed = subprocess.run(command, cwd=tmp_path, env=env_without_log_variables(**env), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout[-3000:]
    return completed.stdout.splitlines()


def test_a_command_s_first_line_is_ours_unless_the_user_asks_for_tensorflow_s(tmp_path, tiny_corpus):
    """The builder imports TensorFlow before its first line when it learns a vocabulary, after it with one
    given (here): either way, no line of TensorFlow's unless the user sets TF_CPP_MIN_LOG_LEVEL=0."""
    lines = run_builder(tmp_path, tiny_corpus)
    assert lines[0].startswith("Building "), lines[:5]
    noise = ("oneDNN", "cuInit", "cuda", "absl::InitializeLog", "cpu_feature_guard")
    assert not [line for line in lines if any(word in line for word in noise)], lines
    assert lines[-2].startswith("Done in "), "our own lines all came through"

    lines = run_builder(tmp_path, tiny_corpus, TF_CPP_MIN_LOG_LEVEL="0")
    assert NOTICE in lines and any(line.startswith("I0000 ") for line in lines), lines[:8]


def test_keras_on_jax_imports_without_scikit_learn_and_matplotlib_which_import_later_as_usual():
    """The real Keras under KERAS_BACKEND=jax (a JAX command's, device call's or test script's process)."""
    script = textwrap.dedent("""
        import sys
        from common.quiet import quiet_tensorflow
        quiet_tensorflow()
        import keras
        import numpy as np
        left_out = [name for name in ("sklearn", "matplotlib", "tensorflow") if name not in sys.modules]
        dense = keras.layers.Dense(2, kernel_initializer="ones")
        assert np.allclose(keras.ops.convert_to_numpy(dense(np.ones((1, 3), "float32"))), 3.0)
        import matplotlib, sklearn  # installed, so they import as usual afterwards
        print("left out", *left_out)
    """)
    env = dict(env_without_log_variables(), KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT))
    completed = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.splitlines()[-1] == "left out sklearn matplotlib tensorflow"
