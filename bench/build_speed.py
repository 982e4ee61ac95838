"""Dataset-builder speed and memory on real Wikipedia text, side by side with the original's approach.

    ELECTRA_SHARED_DATA=../shared/data python -m bench.build_speed [--megabytes 20] [--processes 1,2]
        [--text-multiples 1,4]

Measures, in one run:
- the original release's approach on this machine: pure-Python BERT tokenization line by line (the
  original's tokenization.py, here transformers' legacy Python BertTokenizer, the same code), a
  tf.train.Example built per example, one process;
- this project's builder with 1 and 2 processes on the same text (MB/s of text, tokens/s, scaling);
- peak memory (max RSS of the build process) for 1× and 4× the text, to show it does not grow with the
  corpus.
--processes and --text-multiples choose the builder runs (every count at every multiple of --megabytes); a
smoke run takes one of each (tests/test_bench_modules.py).
Every figure is printed; nothing is assumed.
"""
import argparse
import gzip
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def shared_data() -> pathlib.Path:
    root = os.environ.get("ELECTRA_SHARED_DATA")
    if not root:
        sys.exit("set ELECTRA_SHARED_DATA to the shared data folder (../shared/data)")
    return pathlib.Path(root)


def extract_wikipedia(shards, megabytes: float, folder: pathlib.Path, num_files: int) -> int:
    """Copies whole articles until `megabytes` of text, spread over `num_files` WikiExtractor files."""
    folder.mkdir(parents=True, exist_ok=True)
    outputs = [open(folder / f"wiki_{i:02d}.txt", "w", encoding="utf-8") for i in range(num_files)]
    written, article, index = 0, [], 0
    limit = int(megabytes * 1e6)
    for shard in shards:
        with gzip.open(shard, "rt", encoding="utf-8") as f:
            for line in f:
                article.append(line)
                if line.startswith("</doc>"):
                    text = "".join(article)
                    outputs[index % num_files].write(text)
                    written += len(text.encode())
                    article, index = [], index + 1
                    if written >= limit:
                        break
        if written >= limit:
            break
    for f in outputs:
        f.close()
    return written


def run_builder(corpus: pathlib.Path, vocab: pathlib.Path, processes: int, workdir: pathlib.Path) -> dict:
    """Runs build_pretraining_dataset.py as a child process; returns its figures and peak memory."""
    output = workdir / f"out_{processes}_{time.monotonic_ns()}"
    command = [sys.executable, "build_pretraining_dataset.py", "--corpus-dir", str(corpus), "--corpus-format",
               "wikiextractor", "--vocab-file", str(vocab), "--output-dir", str(output), "--data-dir",
               str(workdir), "--num-processes", str(processes), "--num-shards", str(2 * processes)]
    # A wrapper process reports the peak RSS of its own descendants only, so runs don't mix.
    wrapper = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
               "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)")
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-c", wrapper, *command], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - start
    if result.returncode:
        sys.exit(f"builder failed:\n{result.stderr}")
    peak_kb = int(re.search(r"PEAK_KB (\d+)", result.stdout).group(1))
    done = re.search(r"Done in ([\d.]+) s \(([\d.]+) MB/s of text\): ([\d,]+) documents, ([\d,]+) examples, "
                     r"([\d,]+) tokens", result.stdout)
    seconds, rate = float(done.group(1)), float(done.group(2))
    process_rates = [float(x) for x in re.search(r"Packing rate per process, after start-up: ([\d., ]+) MB/s",
                                                 result.stdout).group(1).split(",")]
    tokens = int(done.group(5).replace(",", ""))
    return {"command": " ".join(command[1:]), "seconds": seconds, "wall": wall, "mb_per_s": rate,
            "tokens_per_s": tokens / seconds, "examples": int(done.group(4).replace(",", "")),
            "peak_mb": peak_kb / 1024, "process_rates": process_rates}


def run_original_style(corpus: pathlib.Path, vocab: pathlib.Path, workdir: pathlib.Path) -> dict:
    """The original builder's inner loop: Python tokenization per line, a protobuf per example."""
    import tensorflow as tf
    from transformers.models.bert import BertTokenizerLegacy

    from data.corpus import ReadStats, iter_documents
    from data.examples import ExampleBuilder

    tokenizer = BertTokenizerLegacy(str(vocab), do_lower_case=True)
    vocab_ids = tokenizer.vocab
    builder = ExampleBuilder(128, vocab_ids["[CLS]"], vocab_ids["[SEP]"], 0, random.Random(0))
    stats, tokens = ReadStats(), 0
    writer = tf.io.TFRecordWriter(str(workdir / "original_style.tfrecord"))

    def write(example):
        nonlocal tokens
        if example is None:
            return
        features = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=getattr(example, name)))
                    for name in ("input_ids", "input_mask", "segment_ids")}
        writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
        tokens += example.num_tokens

    start = time.monotonic()
    for path in sorted(corpus.glob("*.txt")):
        for document in iter_documents(path, "wikiextractor", stats=stats):
            for line in document:
                write(builder.add_line(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))))
            write(builder.end_document())
    writer.close()
    seconds = time.monotonic() - start
    return {"seconds": seconds, "mb_per_s": stats.text_bytes / 1e6 / seconds, "tokens_per_s": tokens / seconds}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=float, default=20.0, help="text for the speed runs")
    parser.add_argument("--baseline-megabytes", type=float, default=5.0,
                        help="text for the (slow) original-style run; its rate does not depend on size")
    parser.add_argument("--processes", default="1,2", help="builder process counts, comma-separated")
    parser.add_argument("--text-multiples", default="1,4",
                        help="multiples of --megabytes each process count builds (the peak-memory comparison)")
    args = parser.parse_args(argv)
    process_counts = [int(count) for count in args.processes.split(",")]
    multiples = [int(multiple) for multiple in args.text_multiples.split(",")]
    data = shared_data()
    shards = sorted((data / "corpus" / "enwiki_wikiextractor").glob("enwiki_part*.txt.gz"))
    vocab = data / "vocab" / "bert-base-uncased-vocab.txt"
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        corpora = {}
        for multiple in multiples:
            corpora[multiple] = tmp / f"text_{multiple}x"
            extract_wikipedia(shards, multiple * args.megabytes, corpora[multiple], num_files=4)
        baseline_corpus = tmp / "baseline"
        extract_wikipedia(shards, args.baseline_megabytes, baseline_corpus, num_files=1)

        original = run_original_style(baseline_corpus, vocab, tmp)
        runs = {(processes, size): run_builder(corpus, vocab, processes, tmp)
                for processes in process_counts for size, corpus in corpora.items()}

    # End-to-end rates include a fixed start-up per process (Python and TensorFlow imports, tokenizer
    # tables, graph tracing); each process also reports its packing rate after that start-up.
    print(f"\nDataset builder on English Wikipedia (WikiExtractor format), BERT uncased vocabulary, "
          f"max_seq_length 128, {os.cpu_count()} cores, load average before the runs: {load_before}\n")
    print("| run | text | end-to-end MB/s | per-process MB/s after start-up | tokens/s | vs original-style | "
          "peak RSS (largest process) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| original-style (Python tokenizer, protobuf per example), 1 process | {args.baseline_megabytes:g} MB | "
          f"{original['mb_per_s']:.2f} | {original['mb_per_s']:.2f} | {original['tokens_per_s']:,.0f} | 1.0× | – |")
    for (processes, size), run in sorted(runs.items()):
        rates = " / ".join(f"{rate:.2f}" for rate in run["process_rates"])
        print(f"| this builder, {processes} process{'es' if processes > 1 else ''} | {size * args.megabytes:g} MB | "
              f"{run['mb_per_s']:.2f} | {rates} | {run['tokens_per_s']:,.0f} | "
              f"{ratio(min(run['process_rates']), original['mb_per_s'], '.1f')} | {run['peak_mb']:,.0f} MB |")
    largest, smallest = max(multiples), min(multiples)
    if 1 in process_counts and 2 in process_counts:
        one, two = runs[(1, largest)], runs[(2, largest)]
        print(f"\n2-process scaling at {largest * args.megabytes:g} MB: end-to-end "
              f"{ratio(two['mb_per_s'], one['mb_per_s'])} (ideal 2.0×), after start-up "
              f"{ratio(sum(two['process_rates']), one['process_rates'][0])}")
    fewest = min(process_counts)
    if largest != smallest:
        print(f"Peak memory at {largest}× the text: "
              f"{runs[(fewest, largest)]['peak_mb'] / runs[(fewest, smallest)]['peak_mb']:.2f}× of {smallest}× "
              "(the corpus is streamed)")
    print(f"Builder command: python {runs[(fewest, largest)]['command']}")


def ratio(numerator, denominator, form=".2f"):
    """numerator / denominator as "1.23×"; the builder prints its MB/s with two decimals, so a few kB of text
    can read 0.00: then "n/a (below 0.01 MB/s)" rather than a ZeroDivisionError after all the runs."""
    return f"{numerator / denominator:{form}}×" if denominator > 0 else "n/a (below 0.01 MB/s)"


if __name__ == "__main__":
    main()
