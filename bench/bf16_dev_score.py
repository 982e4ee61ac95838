"""Issue 44 item 3's dev-score check of matmul_dtype "bfloat16" (model/matmul.py): SST-2 fine-tuned from random
weights, in float32 and with bfloat16 matmul operands, until the dev accuracy is well above chance; then each
fine-tuned model's dev labels under both settings compared.

    ELECTRA_SHARED_DATA=../shared/data python -m bench.bf16_dev_score [--work-dir runs/bf16_dev_score]
        [--settings float32,bfloat16] [--hparams JSON] [--threads 2]

1. A randomly initialised electra_small folder with BERT's uncased vocabulary (bench.predict_vs_hf's), copied
   once per setting (each run writes its own results and fine-tuned model).
2. Per setting, `run_finetuning.py --task sst --matmul-dtype SETTING` with FROM_RANDOM's hyperparameters (over
   them --hparams): the same seed, so both start from the same weights and see the same batches; its dev
   accuracy (results/sst_results.json) and wall time.
3. Per fine-tuned model, inference.predictors.FolderPredictor's labels for the 872 dev sentences with the model
   in float32 and with matmul_dtype bfloat16 set on it: accuracy each, and how many labels agree.

Issue 44's bar: bfloat16 operands become the default on AMX / avx512_bf16 CPUs only where a fine-tuning run
reaches the same dev score (the issue: above 75% dev accuracy, labels agreeing, accuracy within 0.5 points).
Cost, an estimate (not run at full size yet): FROM_RANDOM's 3 epochs are about 6,300 updates of length-bucketed
batches; bucketed updates ran at 3.2/s on the 2-core Zen 4 machine of docs/benchmarks.md, and on the 2-core Intel AMX
one random batches run at about 1.1-1.3/s in float32, so roughly 35-55 minutes per setting, plus evaluation.
`--hparams '{"max_train_steps": 300}'` is a quick look.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

from bench.predict_vs_hf import MODEL_NAME, PRETRAINED_SCRIPT, REPO, dev_accuracy, dev_sentences

# From random weights there is no pretrained lower layer to protect: no layer-wise decay, and a learning rate
# a from-scratch small transformer trains with; SST-2's sentences fit 64 tokens (a few are cut).
FROM_RANDOM = {"length_bucketing": True, "num_train_epochs": 3, "learning_rate": 1e-4, "layerwise_lr_decay": 0,
               "max_seq_length": 64, "iterations_per_loop": 200, "save_finetuned_models": True}
SETTINGS = ("float32", "bfloat16")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work-dir", type=pathlib.Path, default=REPO / "runs" / "bf16_dev_score")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="matmul_dtype values to fine-tune with")
    parser.add_argument("--hparams", default="{}", help="JSON over FROM_RANDOM (e.g. {\"max_train_steps\": 300})")
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args(argv)


def run(command, threads):
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS=str(threads))
    start = time.monotonic()
    completed = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if completed.returncode:
        sys.exit(f"failed: {' '.join(map(str, command))}\n{completed.stderr[-3000:]}")
    return time.monotonic() - start


def random_folder(work, shared, threads):
    """The random electra_small folder (made once)."""
    folder = work / "random" / "models" / MODEL_NAME
    if not (folder / "config.json").is_file():
        run([sys.executable, "-c", PRETRAINED_SCRIPT, str(folder), str(shared / "vocab" / "bert-base-uncased-vocab.txt")],
            threads)
    return folder


def fine_tune(work, shared, source, setting, hparams, threads):
    """Fine-tunes a copy of `source` with matmul_dtype `setting`; (dev accuracy, seconds, fine-tuned folder)."""
    data_dir = work / setting
    folder = data_dir / "models" / MODEL_NAME
    results = folder / "results" / "sst_results.json"
    if not results.is_file() or not json.loads(results.read_text())["complete"]:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(source, folder)
        seconds = run([sys.executable, "-m", "run_finetuning", "--model-name", MODEL_NAME, "--data-dir",
                       str(data_dir), "--task", "sst", "--finetuning-data-dir", str(shared / "glue"),
                       "--matmul-dtype", setting, "--hparams", json.dumps(hparams)], threads)
        (folder / "results" / "wall_seconds.txt").write_text(f"{seconds:.0f}\n")
    values = json.loads(results.read_text())
    seconds = float((folder / "results" / "wall_seconds.txt").read_text())
    return (values["trials"][0]["metrics"]["accuracy"], seconds, values["num_train_steps"],
            folder / "finetuning_models" / "sst_model_1")


def dev_labels(finetuned, shared, matmul_dtype):
    """The model's labels for SST-2's dev sentences with matmul_dtype set on it (FolderPredictor, as
    inference.predict runs it)."""
    from inference.predictors import FolderPredictor
    from inference.rows import Row
    from inference.sources import resolve_model
    from model.matmul import set_matmul_dtype

    predictor = FolderPredictor(resolve_model(str(finetuned)), batch_size=64)
    set_matmul_dtype(predictor.model, matmul_dtype)  # before its first call traces the forward pass
    rows = [Row(line=number, texts=(sentence,)) for number, sentence in enumerate(dev_sentences(shared), 2)]
    return [result["label"] for result in predictor.predict(rows)]


def main(argv=None):
    args = parse_args(argv)
    shared = pathlib.Path(os.environ.get("ELECTRA_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()
    settings = args.settings.split(",")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        sys.exit(f"--settings: unknown {', '.join(unknown)}; choose from {', '.join(SETTINGS)}")
    hparams = {**FROM_RANDOM, **json.loads(args.hparams)}
    work = args.work_dir.resolve()
    source = random_folder(work, shared, args.threads)
    print(f"fine-tuning SST-2 from random weights: {json.dumps(hparams)}", flush=True)
    finetuned = {}
    for setting in settings:
        accuracy, seconds, steps, finetuned[setting] = fine_tune(work, shared, source, setting, hparams,
                                                                 args.threads)
        print(f"  matmul_dtype {setting}: dev accuracy {accuracy:.2f} after {steps} updates, {seconds:.0f} s "
              f"({steps / seconds:.2f} updates/s with evaluation and saving)", flush=True)
    print("each fine-tuned model's dev labels under both settings:")
    for trained, folder in finetuned.items():
        labels = {setting: dev_labels(folder, shared, setting) for setting in SETTINGS}
        agree = sum(a == b for a, b in zip(labels["float32"], labels["bfloat16"]))
        print(f"  trained with {trained}: accuracy float32 {100 * dev_accuracy(shared, labels['float32']):.2f}, "
              f"bfloat16 operands {100 * dev_accuracy(shared, labels['bfloat16']):.2f}; labels agree on {agree} of "
              f"{len(labels['float32'])}", flush=True)


if __name__ == "__main__":
    main()
