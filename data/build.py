"""Corpus → tokenized, packed, sharded TFRecords, in one or several processes.

Process j packs the files assigned to it and owns shards i with i % P == j, as the original builder did,
so the output depends only on the inputs, the seed and the process count. Unlike the original, files are
balanced by size and large uncompressed files are cut at document boundaries (Parquet files between row
groups), so one big file still keeps every process busy. Shards are written under temporary names and
renamed when their process finishes; metadata.json, written last, marks the folder complete.
"""
import dataclasses
import math
import multiprocessing
import os
import pathlib
import random
import time
from typing import Dict, List, Optional, Sequence

from data import corpus as corpus_lib
from data import tfrecords
from common.errors import InputError
from common.quiet import quiet_tensorflow
from data.examples import ExampleBuilder
from data.progress import ProgressLine

TOKENIZE_BATCH_LINES = 2048
TOKENIZE_BATCH_BYTES = 1 << 20
TEXT_BYTES_PER_SHARD = 32 << 20
PART_BYTES = 32 << 20  # large uncompressed files are cut at document boundaries into parts of this size
MIN_AUTO_SHARDS = 8
MAX_AUTO_SHARDS = 1024
GZIP_TEXT_RATIO = 3  # typical compression of text (.gz, .zst, Parquet), to size shards before reading
COMPRESSED_SUFFIXES = corpus_lib.COMPRESSED_SUFFIXES + (".parquet",)
# Counters each process publishes for the progress line: disk bytes, text bytes, examples.
COUNTERS_PER_PROCESS = 3


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """What a worker needs to load the tokenizer itself (tokenizers don't cross process boundaries)."""

    vocab_file: Optional[str]
    spm_model: Optional[str]
    lower_case: bool
    strip_accents: Optional[bool]

    def load(self):
        from data.tokenization import load_tokenizer

        return load_tokenizer(vocab_file=self.vocab_file, spm_model=self.spm_model,
                              lower_case=self.lower_case, strip_accents=self.strip_accents)


@dataclasses.dataclass(frozen=True)
class BuildSettings:
    output_dir: str
    tokenizer: TokenizerSpec
    corpus_format: str = "plain"
    blanks_separate_docs: bool = True
    text_field: str = corpus_lib.DEFAULT_TEXT_FIELD  # jsonl and parquet: the field / column holding the text
    max_seq_length: int = 128
    num_processes: int = 1
    num_shards: int = 0  # 0: chosen from the corpus size
    seed: int = 12345
    strict: bool = False
    compression: str = "none"  # tfrecords.COMPRESSIONS: the shards' own compression


@dataclasses.dataclass
class PartResult:
    """What one process built."""

    shards: List[Dict]
    read: corpus_lib.ReadStats
    examples: int = 0
    tokens: int = 0
    truncated_tokens: int = 0
    seconds: float = 0.0  # packing time, after the tokenizer's one-off start-up


def auto_num_shards(files: Sequence[pathlib.Path], num_processes: int) -> int:
    """About 32 MB of text per shard, at least 8 (room for held-out shards and several readers)."""
    text_bytes = sum(p.stat().st_size * (GZIP_TEXT_RATIO if p.name.endswith(COMPRESSED_SUFFIXES) else 1)
                     for p in files)
    shards = min(MAX_AUTO_SHARDS, max(MIN_AUTO_SHARDS, math.ceil(text_bytes / TEXT_BYTES_PER_SHARD)))
    return math.ceil(shards / num_processes) * num_processes


def assign_parts(parts: Sequence[corpus_lib.CorpusPart], num_processes: int) -> List[List[corpus_lib.CorpusPart]]:
    """Balances parts over processes by size (largest first to the lightest), deterministically."""
    loads = [0] * num_processes
    assigned: List[List[corpus_lib.CorpusPart]] = [[] for _ in range(num_processes)]
    for part in sorted(parts, key=lambda p: (-p.size, str(p.path), p.start)):
        lightest = loads.index(min(loads))
        assigned[lightest].append(part)
        loads[lightest] += part.size
    return [sorted(group, key=lambda p: (str(p.path), p.start)) for group in assigned]


def process_rng(seed: int, process_index: int) -> random.Random:
    return random.Random(f"{seed}/{process_index}")


def build_part(settings: BuildSettings, process_index: int, parts: Sequence[corpus_lib.CorpusPart],
               counters=None) -> PartResult:
    """Packs `parts` into this process's shards. `counters` (a shared array) receives progress."""
    tokenizer = settings.tokenizer.load()
    tokenizer.encode_batch(["start TensorFlow and trace the tokenizer before the clock starts"])
    start = time.monotonic()
    special = tokenizer.special_ids
    rng = process_rng(settings.seed, process_index)
    parts = list(parts)
    rng.shuffle(parts)  # the original shuffled each process's files too
    builder = ExampleBuilder(settings.max_seq_length, special.cls, special.sep, special.pad, rng)
    serializer = tfrecords.ExampleSerializer(tokenizer.vocab_size, settings.max_seq_length)
    owned = list(range(process_index, settings.num_shards, settings.num_processes))
    writer = tfrecords.ShardWriter(pathlib.Path(settings.output_dir), owned, settings.num_shards,
                                   settings.compression)
    result = PartResult(shards=[], read=corpus_lib.ReadStats())
    offset = process_index * COUNTERS_PER_PROCESS

    def emit(example):
        if example is None:
            return
        writer.write(serializer.serialize_packed(example))
        result.examples += 1
        result.tokens += example.num_tokens
        result.truncated_tokens += example.truncated_tokens

    def pack(documents: List[List[str]]):
        lines = [line for document in documents for line in document]
        token_ids = iter(tokenizer.encode_batch(lines))
        for document in documents:
            for _ in document:
                emit(builder.add_line(next(token_ids).tolist()))
            emit(builder.end_document())

    try:
        for part in parts:
            stats = corpus_lib.ReadStats()
            batch, batch_lines, batch_bytes = [], 0, 0
            for document in corpus_lib.iter_documents(part, settings.corpus_format, settings.blanks_separate_docs,
                                                      stats, settings.strict, settings.text_field):
                batch.append(document)
                batch_lines += len(document)
                batch_bytes += sum(len(line) for line in document)
                if batch_lines >= TOKENIZE_BATCH_LINES or batch_bytes >= TOKENIZE_BATCH_BYTES:
                    pack(batch)
                    batch, batch_lines, batch_bytes = [], 0, 0
                    _publish(counters, offset, result.read, stats, result.examples)
            pack(batch)
            emit(builder.end_document())  # the end of a file (or part) ends a document, as in the original
            result.read.add(stats)
            _publish(counters, offset, result.read, corpus_lib.ReadStats(), result.examples)
        result.shards = writer.commit()
        result.seconds = time.monotonic() - start
    except BaseException:
        writer.abort()
        raise
    return result


def _publish(counters, offset: int, done: corpus_lib.ReadStats, current: corpus_lib.ReadStats,
             examples: int) -> None:
    if counters is not None:
        counters[offset] = done.disk_bytes + current.disk_bytes
        counters[offset + 1] = done.text_bytes + current.text_bytes
        counters[offset + 2] = examples


# --- orchestration -----------------------------------------------------------------------------------

_worker_counters = None


def _init_worker(counters):
    quiet_tensorflow()  # each worker imports TensorFlow itself
    os.environ["TF_NUM_INTRAOP_THREADS"] = "1"  # one core per process: P processes scale on P cores
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    global _worker_counters
    _worker_counters = counters


def _worker(settings: BuildSettings, process_index: int, parts: List[corpus_lib.CorpusPart]) -> PartResult:
    return build_part(settings, process_index, parts, _worker_counters)


def build_dataset(settings: BuildSettings, files: Sequence[pathlib.Path], metadata_extra: Dict) -> Dict:
    """Runs the build and writes metadata.json; returns the metadata. The output folder must be ready."""
    output_dir = pathlib.Path(settings.output_dir)
    if settings.num_shards < settings.num_processes:
        raise InputError(f"--num-shards {settings.num_shards} is fewer than --num-processes "
                         f"{settings.num_processes}; each process needs at least one shard")
    parts = assign_parts(corpus_lib.split_large_files(files, settings.corpus_format, settings.blanks_separate_docs,
                                                      PART_BYTES, settings.text_field), settings.num_processes)
    total_disk = sum(p.stat().st_size for p in files)
    counters = multiprocessing.get_context("spawn").Array("d", COUNTERS_PER_PROCESS * settings.num_processes,
                                                          lock=False)
    progress = ProgressLine("build", total_disk, lambda done, elapsed: _describe_build(counters, done, elapsed))
    try:
        if settings.num_processes == 1:
            results = [_run_in_process(settings, parts[0], counters, progress)]
        else:
            results = _run_in_pool(settings, parts, counters, progress)
    except BaseException:
        _remove_partial_build(output_dir)
        raise
    seconds = progress.finish(_sum_counter(counters, 0))
    return _finish(settings, output_dir, results, len(files), metadata_extra, seconds)


def _run_in_process(settings, parts, counters, progress) -> PartResult:
    import threading

    done = threading.Event()
    box = {}

    def run():
        try:
            box["result"] = build_part(settings, 0, parts, counters)
        except BaseException as error:  # re-raised in the caller's thread
            box["error"] = error
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while not done.wait(0.5):
        progress.update(_sum_counter(counters, 0))
    if "error" in box:
        raise box["error"]
    return box["result"]


def _run_in_pool(settings, parts, counters, progress) -> List[PartResult]:
    context = multiprocessing.get_context("spawn")
    with context.Pool(settings.num_processes, initializer=_init_worker, initargs=(counters,)) as pool:
        pending = [pool.apply_async(_worker, (settings, index, part)) for index, part in enumerate(parts)]
        try:
            while not all(job.ready() for job in pending):
                for job in pending:
                    if job.ready() and not job.successful():
                        job.get()  # raises the worker's error here
                progress.update(_sum_counter(counters, 0))
                time.sleep(0.5)
            return [job.get() for job in pending]
        except BaseException:
            pool.terminate()
            raise


def _sum_counter(counters, index: int) -> float:
    return sum(counters[index::COUNTERS_PER_PROCESS])


def _describe_build(counters, done_disk: float, elapsed: float) -> str:
    text_mb = _sum_counter(counters, 1) / 1e6
    examples = int(_sum_counter(counters, 2))
    return f"{text_mb:,.1f} MB text, {text_mb / elapsed:.2f} MB/s, {examples:,} examples"


def _remove_partial_build(output_dir: pathlib.Path) -> None:
    """After a failure: the folder was emptied of old shards before the build, so every shard in it,
    finished or not, belongs to this failed build."""
    for path in output_dir.glob(f"{tfrecords.SHARD_PREFIX}-*"):
        path.unlink(missing_ok=True)


def _finish(settings: BuildSettings, output_dir: pathlib.Path, results: List[PartResult], num_files: int,
            metadata_extra: Dict, seconds: float) -> Dict:
    read = corpus_lib.ReadStats()
    for result in results:
        read.add(result.read)
    shards = sorted((shard for result in results for shard in result.shards), key=lambda s: s["file"])
    examples = sum(r.examples for r in results)
    if examples == 0:
        for shard in shards:
            (output_dir / shard["file"]).unlink(missing_ok=True)
        raise InputError("the corpus has no text (every file is empty or blank); check --corpus-dir and "
                         "--corpus-format")
    metadata = {
        "format_version": tfrecords.FORMAT_VERSION,
        **({"compression": settings.compression} if settings.compression != "none" else {}),
        "features": {name: ["int64", settings.max_seq_length] for name in tfrecords.FEATURE_NAMES},
        "max_seq_length": settings.max_seq_length,
        "seed": settings.seed,
        "num_processes": settings.num_processes,
        "corpus_format": settings.corpus_format,
        "blanks_separate_docs": settings.blanks_separate_docs,
        **({"text_field": settings.text_field} if settings.corpus_format in corpus_lib.RECORD_FORMATS else {}),
        "counts": {
            "files": num_files,
            "documents": read.documents,
            "lines": read.lines,
            "examples": examples,
            "tokens": sum(r.tokens for r in results),
            "truncated_tokens": sum(r.truncated_tokens for r in results),
            "text_bytes": read.text_bytes,
            "bad_utf8_lines": read.bad_utf8_lines,
        },
        "shards": shards,
    }
    metadata.update(metadata_extra)
    tfrecords.write_metadata(output_dir, metadata)
    # Reported, not stored, so the folder stays byte-reproducible:
    metadata["build_seconds"] = seconds
    metadata["process_rates"] = [r.read.text_bytes / 1e6 / max(r.seconds, 1e-9) for r in results]
    return metadata
