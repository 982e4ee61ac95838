"""How fast data.record_reader (NumPy alone) reads pretraining shards into arrays, beside tf.data (the product's
evaluation reader, data.tfrecords.pretraining_dataset, what studies.device_path.export reads with): MB/s of shard
bytes and the ratio, in one process, each the best of --repeats runs from the page cache.

    python -m bench.record_reader_speed [--dataset DIR/pretrain_tfrecords] [--synthetic-mb 100] [--repeats 3]

The synthetic file holds random examples of 128 tokens from a 30522-token vocabulary (the real datasets'
shape), written with data.tfrecords' serializer.
"""
import argparse
import json
import pathlib
import platform
import tempfile
import time

import numpy as np

SYNTHETIC_LENGTH, SYNTHETIC_VOCAB = 128, 30522


def cpu_name():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_synthetic_dataset(folder, megabytes, seed=0):
    """A one-shard dataset folder of about `megabytes` MB: (folder, metadata)."""
    from data import tfrecords

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    serializer = tfrecords.ExampleSerializer(SYNTHETIC_VOCAB)
    writer = tfrecords.ShardWriter(folder, [0], 1)
    written = 0
    while written < megabytes * 1e6:
        used = int(rng.integers(SYNTHETIC_LENGTH // 2, SYNTHETIC_LENGTH + 1))
        ids = np.zeros(SYNTHETIC_LENGTH, np.int64)
        ids[:used] = rng.integers(5, SYNTHETIC_VOCAB, used)
        mask = (np.arange(SYNTHETIC_LENGTH) < used).astype(np.int64)
        segments = ((np.arange(SYNTHETIC_LENGTH) >= used // 2) & (mask == 1)).astype(np.int64)
        record = serializer.serialize(ids, mask, segments)
        writer.write(record)
        written += len(record) + 16
    shards = writer.commit()
    metadata = {"format_version": tfrecords.FORMAT_VERSION, "max_seq_length": SYNTHETIC_LENGTH, "shards": shards}
    (folder / tfrecords.METADATA_FILE).write_text(json.dumps(metadata))
    return folder, metadata


def read_with_numpy(folder, metadata):
    from data import record_reader

    return record_reader.read_examples(folder, metadata)


def read_with_tf_data(folder, metadata):
    from data import tfrecords

    parts = {}
    for batch in tfrecords.pretraining_dataset(folder, 4096, training=False, metadata=metadata):
        for name, value in batch.items():
            parts.setdefault(name, []).append(value.numpy())
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


def best_seconds(read, folder, metadata, repeats):
    """(fastest time, the arrays of the last run)."""
    best, arrays = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        arrays = read(folder, metadata)
        best = min(best, time.perf_counter() - start)
    return best, arrays


def measure(name, folder, metadata, repeats):
    size = sum(shard["bytes"] for shard in metadata["shards"]) / 1e6
    ours, our_arrays = best_seconds(read_with_numpy, folder, metadata, repeats)
    theirs, their_arrays = best_seconds(read_with_tf_data, folder, metadata, repeats)
    same = all(np.array_equal(our_arrays[key], their_arrays[key]) for key in their_arrays)
    return {"input": name, "mb": round(size, 2), "examples": int(len(our_arrays["input_ids"])),
            "numpy_s": round(ours, 3), "tf_data_s": round(theirs, 3), "numpy_mb_s": round(size / ours, 1),
            "tf_data_mb_s": round(size / theirs, 1), "numpy_over_tf_data": round(theirs / ours, 3), "equal": same}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=pathlib.Path, default=None, help="a built pretrain_tfrecords folder")
    parser.add_argument("--synthetic-mb", type=float, default=100.0, help="size of the synthetic shard (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work-dir", type=pathlib.Path, default=None, help="where the synthetic shard goes "
                                                                            "(default: a temporary folder)")
    return parser.parse_args(argv)


def main(argv=None):
    from common.quiet import quiet_tensorflow
    from data import tfrecords

    quiet_tensorflow()
    args = parse_args(argv)
    rows = []
    if args.dataset:
        rows.append(measure("dataset", args.dataset, tfrecords.load_metadata(args.dataset), args.repeats))
    if args.synthetic_mb:
        with tempfile.TemporaryDirectory(dir=args.work_dir) as work:
            folder, metadata = write_synthetic_dataset(pathlib.Path(work) / "synthetic", args.synthetic_mb)
            rows.append(measure(f"synthetic {args.synthetic_mb:g} MB", folder, metadata, args.repeats))
    print(f"CPU: {cpu_name()}; best of {args.repeats}, from the page cache")
    print(f"{'input':<22} {'MB':>8} {'examples':>9} {'numpy MB/s':>11} {'tf.data MB/s':>13} {'numpy/tf.data':>14} equal")
    for row in rows:
        print(f"{row['input']:<22} {row['mb']:>8} {row['examples']:>9} {row['numpy_mb_s']:>11} "
              f"{row['tf_data_mb_s']:>13} {row['numpy_over_tf_data']:>14} {row['equal']}")
    return rows


if __name__ == "__main__":
    main()
