"""The raw-text SavedModel (`checkpoints.export --format saved_model`) computing every position against the real
tokens' rows only (`skip_padding`, model/unpadding.py): rows/s on SST-2's dev sentences, side by side.

    ELECTRA_SHARED_DATA=../shared/data python -m bench.saved_model_padding --model-dir FINE_TUNED_FOLDER \\
        [--work-dir runs/saved_model_padding] [--batch-size 64] [--repeats 3] [--rows 0] [--threads 2]

The graph tokenizes and pads every input to the folder's max_seq_length (128 by default), so a sentence of 13
tokens computes 128 positions unless the encoder skips the padding. Both exports are loaded in this one process
and timed alternately, each after a warm-up call, so that both see the same machine; the medians and their ratio
are printed, with the largest difference between the two exports' float outputs.
"""
import argparse
import os
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = {"every position": False, "the real tokens' rows": True}


def dev_sentences(shared, rows):
    lines = (pathlib.Path(shared) / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    sentences = [line.split("\t")[0] for line in lines[1:] if line.strip()]
    return sentences[:rows] if rows else sentences


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=pathlib.Path, required=True, help="a fine-tuned single-sentence "
                                                                             "classifier's folder")
    parser.add_argument("--work-dir", type=pathlib.Path, default=REPO / "runs" / "saved_model_padding")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=0, help="the first N dev sentences (0: all 872)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args(argv)
    shared = os.environ.get("ELECTRA_SHARED_DATA")
    if not shared:
        raise SystemExit("set ELECTRA_SHARED_DATA to the shared data folder (its glue/SST-2/dev.tsv is read)")

    import numpy as np
    import tensorflow as tf

    from checkpoints.saved_model import export_finetuned
    from training.cpu_features import read_cpu_features

    try:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    except RuntimeError:  # TensorFlow already ran in this process (a test): its pools stay
        pass
    print(f"CPU: {read_cpu_features().describe()}; {os.cpu_count()} cores; threads {args.threads}")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; tensorflow {tf.__version__}")
    sentences = dev_sentences(shared, args.rows)
    batches = [tf.constant(sentences[i:i + args.batch_size]) for i in range(0, len(sentences), args.batch_size)]
    served, rates, outputs = {}, {label: [] for label in SETTINGS}, {}
    for label, skip in SETTINGS.items():
        folder = args.work_dir / ("real_rows" if skip else "every_position")
        export_finetuned(args.model_dir, folder, overwrite=True, skip_padding=skip)
        served[label] = tf.saved_model.load(str(folder)).signatures["serving_default"]
        served[label](text=batches[0])  # the warm-up call
    for repeat in range(args.repeats):
        for label, serve in served.items():
            start = time.perf_counter()
            results = [serve(text=batch) for batch in batches]
            rates[label].append(len(sentences) / (time.perf_counter() - start))
            floats = sorted(key for key, value in results[0].items() if value.dtype == tf.float32)
            outputs[label] = np.concatenate([np.concatenate([r[key].numpy().reshape(len(r[key]), -1)
                                                             for key in floats], -1) for r in results])
        print(f"  repeat {repeat + 1}: " + "; ".join(f"{label} {rates[label][-1]:.1f}" for label in SETTINGS),
              flush=True)
    medians = {label: statistics.median(values) for label, values in rates.items()}
    print(f"\nThe raw-text SavedModel on {len(sentences)} SST-2 dev sentences, batch {args.batch_size} "
          f"(rows/s, median of {args.repeats}):")
    for label, values in rates.items():
        print(f"  {label}: {medians[label]:.1f} ({', '.join(f'{v:.1f}' for v in values)})")
    every, real = (outputs[label] for label in SETTINGS)
    ratio = medians["the real tokens' rows"] / medians["every position"]
    print(f"  the real tokens' rows / every position: {ratio:.2f}x; largest output difference "
          f"{float(np.max(np.abs(every - real))):.2e}")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    sys.stdout.flush()
    return {"rates": medians, "ratio": ratio, "max_difference": float(np.max(np.abs(every - real)))}


if __name__ == "__main__":
    main()
