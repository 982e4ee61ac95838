"""Test fixtures: a tiny WordPiece vocabulary and dataset from Python's docs, TensorBoard scalars, scripts
run under JAX, an AVX2-only CPU's /proc/cpuinfo, the accelerator's Python emulated here."""
import collections
import json
import os
import pathlib
import random
import re
import shlex
import subprocess
import sys

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# A 2-layer, 32-wide model (generator 16 wide): a step takes milliseconds on a CPU.
MICRO_MODEL = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64,
               "embedding_size": 16}


def write_corpus(folder, num_files=2, max_documents=None):
    """Plain-format files of Python's language-reference topics (real English)."""
    from data.default_corpus import _topic_documents

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    documents = [paragraphs for _, paragraphs in _topic_documents() if paragraphs][:max_documents]
    for index in range(num_files):
        text = "\n\n".join("\n".join(p) for p in documents[index::num_files])
        (folder / f"part{index}.txt").write_text(text + "\n", encoding="utf-8")
    return folder


def write_vocab(corpus_dir, path, num_words=1500):
    """Specials, every character (and its ## form), the most frequent lower-cased words."""
    text = "".join(p.read_text() for p in sorted(pathlib.Path(corpus_dir).glob("*.txt"))).lower()
    words = collections.Counter(re.findall(r"[a-z0-9]+", text))
    chars = sorted({c for c in text if not c.isspace()})
    tokens = SPECIALS + chars + ["##" + c for c in chars if c.isalnum()]
    tokens += [w for w, _ in words.most_common(num_words) if w not in tokens]
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def build_tiny_dataset(data_dir, max_seq_length=32, num_shards=2, max_documents=None):
    """<data_dir>/pretrain_tfrecords with its metadata.json; returns the metadata."""
    import build_pretraining_dataset

    data_dir = pathlib.Path(data_dir)
    corpus = write_corpus(data_dir / "corpus", max_documents=max_documents)
    vocab = write_vocab(corpus, data_dir / "vocab.txt")
    return build_pretraining_dataset.main([
        "--corpus-dir", str(corpus), "--vocab-file", str(vocab), "--data-dir", str(data_dir),
        "--max-seq-length", str(max_seq_length), "--num-shards", str(num_shards)])


def write_rte(folder, sentences, counts, seed):
    """RTE's layout; the hypothesis is a piece of the premise (entailment) or, after "no", of another
    sentence: a cue a tiny model learns within 50 updates, so the dev scores say something."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in counts.items():
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for number in range(count):
            premise, other = rng.sample(sentences, 2)
            source, label = (premise, "entailment") if number % 2 else (other, "not_entailment")
            words = source.split()
            start = rng.randrange(max(1, len(words) - 4))
            hypothesis = ("" if number % 2 else "no no no ") + " ".join(words[start:start + 4])
            lines.append(f"{number}\t{premise}\t{hypothesis}\t{label}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def train_scalars(model_dir, tag):
    """{step: value} of one scalar a run logged under logs/train (TensorBoard event files)."""
    import tensorflow as tf

    values = {}
    for path in sorted((pathlib.Path(model_dir) / "logs" / "train").glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


# XLA's CPU back end at its lowest optimisation level: micro models compile 2-3x faster (30 s -> 13 s for a
# pretraining step), and these scripts check behaviour and equalities, never speed. Any JAX's flags (the GPU
# image's 0.11.2 too): the device lines run as printed use these.
JAX_TEST_XLA_FLAGS = "--xla_backend_optimization_level=0"


def quick_xla_flags():
    """JAX_TEST_XLA_FLAGS and, where XLA still has them (jaxlib < 0.11), the CPU's older loop emitters for fusions
    instead of the new MLIR ones: a micro pretraining step compiles ~2x faster (4.3 s -> 2.1 s) and a JAX test
    process takes ~35% less CPU (16 s -> 10 s). The numbers are XLA's own, within float32 rounding of the default
    emitters' but not always bit for bit equal across programs of another shape (a block of 4 updates under
    lax.scan against 4 single steps differed in one weight's last bit): a test whose claim is such a bit-for-bit
    equality between two programs runs under JAX_TEST_XLA_FLAGS (tests/test_jax_pretraining.py). JAX 0.11 refuses
    the flag (its CPU has the new emitters only), so the GPU image's Python never gets it."""
    from importlib.metadata import version

    if tuple(int(part) for part in version("jaxlib").split(".")[:2]) < (0, 11):
        return f"{JAX_TEST_XLA_FLAGS} --xla_cpu_use_fusion_emitters=false"
    return JAX_TEST_XLA_FLAGS


JAX_QUICK_XLA_FLAGS = quick_xla_flags()


# A test script's first lines, as a command's are (common.quiet): Keras imports without scikit-learn and matplotlib,
# about 2 of a JAX process's 5 CPU s of imports.
LEAN_KERAS = "from common.quiet import lean_keras_import\nlean_keras_import()\n"


def run_script_under_jax(script, repo_root, timeout=300, xla_flags=JAX_QUICK_XLA_FLAGS):
    """Runs `script` in a fresh Python of this virtualenv with KERAS_BACKEND=jax (the backend is fixed at import)
    and XLA's quickest compiles (`xla_flags`), and returns the JSON it printed after "RESULTS"; fails with the
    script's stderr if it did not get there."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(repo_root),
               XLA_FLAGS=xla_flags)
    completed = subprocess.run([sys.executable, "-c", LEAN_KERAS + script], cwd=repo_root, env=env,
                               capture_output=True, text=True, timeout=timeout)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULTS")]
    assert completed.returncode == 0 and lines, completed.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS"):])


def export_tiny_run(tmp_path, steps=12, checkpoints=2):
    """A 1-layer micro model (it compiles fastest under JAX) on a tiny dataset, exported by the product's
    studies.device_path.export as the arm "electra": the export folder."""
    from studies.device_path.export import export_pretraining

    build_tiny_dataset(tmp_path / "data", max_seq_length=32, num_shards=2)
    hparams = {"model_size": "electra_small", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
               "train_batch_size": 4, "eval_batch_size": 4, "num_eval_steps": 2, "num_train_steps": steps,
               "num_warmup_steps": steps // 10 or 1, "learning_rate": 5e-4, "do_eval": True}
    export_pretraining("electra", json.dumps(hparams), tmp_path / "data", tmp_path / "export", checkpoints)
    return tmp_path / "export"


# ---------------------------------------------------------------- an AVX2-only CPU's /proc/cpuinfo (no VNNI/AMX)
ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand avx2 bmi2 sha_ni

processor\t: 1
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma avx avx2
"""


# ---------------------------------------------------------------- the accelerator's Python, emulated here
# The distributions of the GPU machines' image ('cuda'), as /work/.library/device/KINDS.md listed them on
# 2026-11-17: a command meant for that machine runs here with only these (and the wheels it installs).
ACCELERATOR_IMAGE = set("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax
fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2
joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch
mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-ml-py onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow
pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov
pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio
torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions
typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())

ACCELERATOR_PYTHON = '''#!{python}
"""python3 as on the accelerator: a distribution of this virtualenv that the image lacks cannot be imported
(it has to come from the wheels on PYTHONPATH), and TensorFlow is not there."""
import importlib.abc, importlib.machinery, importlib.metadata, os, re, runpy, sys

SITE = {site!r}
IMAGE = {image!r}
owners = importlib.metadata.packages_distributions()


def in_image(name):
    return any(re.sub(r"[-_.]+", "-", d).lower() in IMAGE for d in owners.get(name, []))


class AcceleratorImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if "." in name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, sys.path)
        if spec and (spec.origin or "").startswith(SITE) and not in_image(name):
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the accelerator's image)", name=name)
        return None


sys.meta_path.insert(0, AcceleratorImage())
sys.executable = __file__  # the processes it starts are the accelerator's python3 too
if sys.argv[1:2] == ["-m"]:
    module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
    sys.path.insert(0, os.getcwd())
    runpy.run_module(module, run_name="__main__", alter_sys=True)
elif sys.argv[1:2] and sys.argv[1].endswith(".py"):  # python3 run_pretraining.py ...: the script's folder first
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    sys.exit("this stand-in runs python3 -m MODULE or python3 SCRIPT.py only")
'''


def accelerator_python(folder, python=None):
    """A folder whose `python3` stands in for the accelerator's (put it first on PATH): `python` (default this
    interpreter) limited to the image's distributions."""
    python = str(python or sys.executable)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python3"
    shim.write_text(ACCELERATOR_PYTHON.format(python=python, site=site, image=sorted(ACCELERATOR_IMAGE)))
    shim.chmod(0o755)
    return folder


# The image's own versions (Python 3.12, JAX 0.11.2, NumPy 2.5.2) and the wheels a call carries, for Python 3.12:
# `make .venv312/.installed` (a prerequisite of `make test`) builds them before pytest's workers start.
IMAGE_VENV = pathlib.Path(__file__).resolve().parents[1] / ".venv312"


def image_python():
    """(the GPU image's Python as built here, the folder of its carried wheels); the test is skipped only where
    no Python 3.12 is installed, and fails with the fix where one is but the virtualenv is not built."""
    import shutil

    if (IMAGE_VENV / ".installed").is_file():
        return IMAGE_VENV / "bin" / "python", IMAGE_VENV / "wheels"
    candidates = [shutil.which("python3.12"), *sorted(pathlib.Path.home().glob(".pyenv/versions/3.12*/bin/python"))]
    check = "import sys; assert sys.version_info[:2] == (3, 12)"
    runs = [c for c in candidates if c and subprocess.run([str(c), "-c", check], capture_output=True).returncode == 0]
    if not runs:
        import pytest

        pytest.skip("no Python 3.12 here for the GPU image's stand-in (make .venv312/.installed needs one)")
    raise AssertionError(f"{IMAGE_VENV}: not built; run `make .venv312/.installed` (Python 3.12 at {runs[0]})")


def repack_wheels(requirements, folder):
    """NAME==VERSION wheels rebuilt from this virtualenv's installed files (no download): what the export's
    `pip download` would fetch for the accelerator, for this machine's Python."""
    import importlib.metadata
    import zipfile

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for requirement in requirements:
        name, version = requirement.split("==")
        distribution = importlib.metadata.distribution(name)
        assert distribution.version == version, (requirement, distribution.version)
        with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
            for file in distribution.files:
                if not str(file).startswith("..") and "__pycache__" not in str(file):
                    wheel.write(distribution.locate_file(file), str(file))
    return folder


def repository_mirror(repo_root, folder):
    """A folder that is a repository root to commands run in it: the repository's packages and scripts as
    links (what a device call's copy of the working tree holds), so that a test may add ignored folders
    (.whl, an export) beside them without touching the checkout."""
    repo_root, folder = pathlib.Path(repo_root), pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for entry in repo_root.iterdir():
        if (entry.is_dir() and (entry / "__init__.py").is_file()) or entry.suffix == ".py":
            (folder / entry.name).symlink_to(entry)
    return folder


def run_device_line(line, repo, out, python_dir, timeout, xla_flags=JAX_TEST_XLA_FLAGS):
    """Runs one device call's shell line as the device tool would (bash, in the repository's root, $OUT set)
    with the accelerator's python3; returns (exit status, output). `xla_flags`: any JAX's quickest compile by
    default (the GPU image's Python); JAX_QUICK_XLA_FLAGS where python3 is this virtualenv's (its JAX)."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "KERAS_BACKEND")}
    env.update(PATH=f"{python_dir}{os.pathsep}{env['PATH']}", OUT=str(out), JAX_PLATFORMS="cpu",
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", XLA_FLAGS=xla_flags)
    pathlib.Path(out).mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(["bash", "-c", line], cwd=repo, env=env, capture_output=True, text=True,
                               timeout=timeout)
    return completed.returncode, completed.stdout + completed.stderr


# ---------------------------------------------------------------- synthetic pretraining batches
def synthetic_batch(rng, batch_size, seq_length, vocab_size, cls_id=101, sep_id=102):
    """Random token ids, 80% of the rows full length and the rest 50-100% full, [CLS] first and [SEP] in the
    middle and at the end, two segments: the batches bench/pretrain_step_gpu.py times, the same draws from the
    same `rng`, here so that the product's tests need nothing from bench/."""
    import numpy as np

    input_ids = rng.integers(999 if vocab_size > 1000 else 4, vocab_size, (batch_size, seq_length))
    lengths = np.where(rng.random(batch_size) < 0.8, seq_length,
                       rng.integers(seq_length // 2, seq_length, batch_size))
    positions = np.arange(seq_length)[None, :]
    input_mask = (positions < lengths[:, None]).astype("int32")
    input_ids = np.where(input_mask == 1, input_ids, 0)
    input_ids[:, 0] = cls_id
    input_ids[np.arange(batch_size), lengths - 1] = sep_id
    middle = lengths // 2
    input_ids[np.arange(batch_size), middle] = sep_id
    segment_ids = ((positions > middle[:, None]) & (input_mask == 1)).astype("int32")
    return {"input_ids": input_ids.astype("int32"), "input_mask": input_mask, "segment_ids": segment_ids}


# ---------------------------------------------------------------- a benchmark's workers in this process
def run_module_here(command, *unused, check=False, **options):
    """subprocess.run's stand-in for a benchmark's worker `python -m bench.X ARGS`: bench.X.main(ARGS) in this
    process, its stdout captured and returned as subprocess.run(..., capture_output=True, text=True) returns it
    (tests/test_bench_modules.py: the workers' code runs without seconds of imports per process)."""
    import contextlib
    import importlib
    import io

    python, flag, module, *args = command
    assert (python, flag) == (sys.executable, "-m") and module.startswith("bench."), command
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            importlib.import_module(module).main(args)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
    completed = subprocess.CompletedProcess(command, code, out.getvalue(), "")
    if check:
        completed.check_returncode()
    return completed


def start_script_under_jax(script, repo_root):
    """run_script_under_jax's process, started and not waited for (it runs beside the caller's own work): read
    its RESULTS with script_results."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(repo_root),
               XLA_FLAGS=JAX_QUICK_XLA_FLAGS)
    return subprocess.Popen([sys.executable, "-c", LEAN_KERAS + script], cwd=repo_root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def script_results(process, timeout=300):
    """The JSON a start_script_under_jax process printed after "RESULTS"; fails with its stderr if it did not."""
    stdout, stderr = process.communicate(timeout=timeout)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULTS")]
    assert process.returncode == 0 and lines, stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS"):])


# ---------------------------------------------------------------- the dataset folder read by tf.data
class InputContext:
    """What tf.distribute hands pretraining_dataset: the worker count and this worker's index."""

    def __init__(self, num_input_pipelines, input_pipeline_id):
        self.num_input_pipelines, self.input_pipeline_id = num_input_pipelines, input_pipeline_id


def tf_batches(folder, metadata, batch_size, count=None, workers=1, index=0, **kwargs):
    """The first `count` batches (all: None) of the product's tf.data reader for worker `index` of `workers`."""
    import itertools

    from data import tfrecords

    dataset = tfrecords.pretraining_dataset(folder, batch_size, metadata=metadata,
                                            input_context=InputContext(workers, index), **kwargs)
    return [{name: value.numpy() for name, value in batch.items()} for batch in itertools.islice(dataset, count)]


def assert_same_batches(ours, theirs):
    """Batch for batch, the same names, int32 arrays and values."""
    import numpy as np

    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        assert sorted(mine) == sorted(reference)
        for name in reference:
            assert mine[name].dtype == np.int32
            np.testing.assert_array_equal(mine[name], reference[name])


# ---------------------------------------------------------------- a device call's pieces
# The window's benchmark at a micro size: one variant, a second's timing, inside 60 s.
MICRO_BENCH = ("--max-seconds 60 --no-finetuning --first-estimate 1 --batch-size 4 --seq-length 32 --seconds 1 "
               "--examples 32 --precision float32 --variants defaults --hparams " + shlex.quote(json.dumps(
                   {"model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}, "vocab_size": 120})))


def carried_wheels(source, folder):
    """The wheels the image lacks, as a call carries them: the ones downloaded for Python 3.12 beside the image's
    stand-in, at this virtualenv's versions (the export's `pip download` pins these)."""
    import shutil
    from importlib.metadata import version

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("keras", "namex", "optree"):
        [wheel] = source.glob(f"{name}-{version(name)}-*.whl")
        shutil.copy(wheel, folder)


# ---------------------------------------------------------------- several commands of one script in one JAX process
LAUNCH_EACH = '''  # argv: the script, then the commands as JSON [[log file, argv], ...]
import json, os, runpy, sys, traceback
sys.modules["tensorflow"] = None
script, commands = sys.argv[1], json.loads(sys.argv[2])
codes = []
for number, (log, argv) in enumerate(commands):
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "w") as output:
        os.dup2(output.fileno(), 1), os.dup2(output.fileno(), 2)
    try:
        sys.argv = [script] + argv
        runpy.run_path(script, run_name="__main__")
        stop = SystemExit(0)
    except SystemExit as raised:
        stop = raised
    except BaseException:
        traceback.print_exc()
        stop = SystemExit(1)
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(saved[0], 1), os.dup2(saved[1], 2)
    codes.append(stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1))
    print("CODES" + json.dumps(codes), flush=True)
    if number == len(commands) - 1:
        raise stop
'''


def run_each_under_jax(script, commands, repo, **environment):
    """Each (log file, argv) of `commands` as `python SCRIPT ARGV` would run it under KERAS_BACKEND=jax with TensorFlow
    unimportable, all in one process (a process each costs seconds of start-up), each with its own log, with
    `environment` added: the exit codes, in order. A traceback anywhere fails the test."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(repo),
           "XLA_FLAGS": JAX_TEST_XLA_FLAGS, **environment}
    done = subprocess.run([sys.executable, "-c", LAUNCH_EACH, script, json.dumps(commands)], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)
    codes = [json.loads(line[len("CODES"):]) for line in done.stdout.splitlines() if line.startswith("CODES")]
    assert codes and len(codes[-1]) == len(commands), done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == codes[-1][-1] and "Traceback" not in done.stderr, done.stderr[-2000:]
    return codes[-1]


def write_micro_model_folder(folder, vocab_file, num_layers=1):
    """A pretrained model folder as a JAX run writes it (checkpoint_bundle, no TensorFlow): a micro encoder's random
    weights as ckpt-1, its config and vocabulary (as tests/test_run_finetuning_jax.py's, for any backend)."""
    import numpy as np

    from configs.pretraining_config import PretrainingConfig
    from finetune.pretrained import build_encoder
    from storage import model_folder

    vocab_size = sum(1 for _ in open(vocab_file, encoding="utf-8"))
    config = PretrainingConfig.create({"model_size": "electra_small", "vocab_size": vocab_size,
                                       "model_hparam_overrides": {**MICRO_MODEL, "num_layers": num_layers}})
    encoder = build_encoder(config.model_config())
    weights = {variable.path: np.asarray(variable.numpy()) for variable in encoder.weights}
    model_folder.write_weights_checkpoint(folder, 1, weights, config, vocab_file)
    return config


def saved_model_ops(folder):
    """Every op type in a SavedModel's graph and its functions (read from saved_model.pb, nothing loaded)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((pathlib.Path(folder) / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    return {node.op for node in graph.node} | {node.op for f in graph.library.function for node in f.node_def}
