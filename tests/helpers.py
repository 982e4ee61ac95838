"""Test fixtures: a tiny WordPiece vocabulary and dataset from Python's docs, TensorBoard scalars."""
import collections
import json
import os
import pathlib
import re
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


def run_script_under_jax(script, repo_root, timeout=300):
    """Runs `script` in a fresh Python with KERAS_BACKEND=jax (the backend is fixed at import) and returns
    the JSON it printed after "RESULTS"; fails with the script's stderr if it did not get there."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(repo_root))
    completed = subprocess.run([sys.executable, "-c", script], cwd=repo_root, env=env, capture_output=True,
                               text=True, timeout=timeout)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULTS")]
    assert completed.returncode == 0 and lines, completed.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS"):])
