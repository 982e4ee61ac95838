"""Prediction and fine-tuning speed of a fine-tuned electra_small against Hugging Face on the CPU, side by
side in one run.

    ELECTRA_SHARED_DATA=../shared/data python -m bench.predict_vs_hf [--work-dir runs/bench_predict]
        [--hf-batch-sizes 1,8,32,64,128] [--batch-size 64] [--train-steps 30] [--repeats 3] [--threads 2]
        [--skip predict] [--train-settings bucketed,random,hf,hf-grouped,random-bf16,hf-bf16,jax-random,...]
        [--predict-bf16] [--onnx-int8]
        [--onnx-compare FOLDER]

Prepared once in --work-dir (reused by later runs): a randomly initialised electra_small model folder with
BERT's uncased vocabulary (speed does not depend on the weights), fine-tuned a few steps on SST-2 by
run_finetuning.py, exported by `python -m checkpoints.export --format onnx` (model.onnx beside its
tokenizer), and by `python -m checkpoints.export --format hf`, whose discriminator Hugging
Face loads as ElectraForSequenceClassification (its classifier newly initialised: a dense layer more than
ours on [CLS], about 0.1% of the model's multiply-adds at these lengths).

1. Predictions: the 872 SST-2 dev sentences, every class probability out. Ours: `python -m
   inference.predict` (predict.main on the dev TSV, JSON lines written; length-bucketed batches of
   --batch-size); Hugging Face: `pipeline("text-classification", top_k=None)` at each --hf-batch-sizes
   (PyTorch CPU), the best one compared; the same JSON lines written. Each timed after a warm-up call on
   the first 64 sentences (compilation and first-call costs not timed). --predict-bf16 adds ours with
   --matmul-dtype bfloat16 (inference.predict's option: bfloat16 matmul operands, everything else float32) and the
   pipeline with the model loaded in bfloat16 (dtype=torch.bfloat16) at each batch size, the bfloat16 rows
   compared with each other and each side's labels with its float32 labels. ONNX Runtime: the same command on
   the ONNX export folder (the same featurisation and batches, model.onnx's forward pass, float32);
   --onnx-int8 adds the export with model.onnx quantised by onnxruntime.quantization.quantize_dynamic
   (int8 weights of the matrix multiplies), and prints its SST-2 dev accuracy beside float32's;
   --onnx-compare FOLDER adds another export folder of the same model (e.g. an older exporter's graph).
2. Fine-tuning updates per second on SST-2's training set, batch 32: ours (the fine-tuning model, optimizer
   and compiled step of run_finetuning.py) with length_bucketing (dynamic padding; pools of 50 batches
   sorted by length, the fast option) and with bucket_pool_batches 1 (random batches, each padded to its
   longest: exactly Hugging Face's dynamic padding); Hugging Face's Trainer with DataCollatorWithPadding
   (random batches padded to their longest) and with train_sampling_strategy "group_by_length" (its own
   length-grouped sampler: megabatches of 50 batches sorted by length).
   --train-steps timed updates after --warmup-steps untimed ones. --train-settings picks the settings;
   "random-inline" is ours with TFTrainer's compiled_update off (the optimizer update run inline in the
   step, as before it was compiled), so the step before and after can be compared in one run;
   Ours under TensorFlow runs the encoder's per-position work on the real tokens' rows only (skip_padding, the
   fine-tuning default there: model/unpadding.py); "random-every-position" turns that off (every position
   computed, as the original and Hugging Face do) to compare the two in one run; "fixed" and
   "fixed-every-position" do the same on the original's batches (length_bucketing off: each padded to 128).
   "random-no-onednn" is ours without oneDNN turned on (TensorFlow's default kernels where it leaves it off);
   "random-eigen-gradients" ours with the wide weight gradients on TensorFlow's Eigen kernels
   (ELECTRA_MATMUL_GRADIENTS=eigen, common/matmul_gradients.py).
   "random-autodiff" ours with LayerNorm's and GELU's gradients as autodiff builds them
   (ELECTRA_ELEMENTWISE_GRADIENTS=autodiff, model/elementwise_gradients.py).
   bfloat16: "random-bf16" is ours with the encoder and head under mixed_bfloat16 (bfloat16 compute, float32
   weights, optimizer and loss), "hf-bf16" the Trainer with bf16=True (its forward under torch.autocast);
   "random-bf16-matmuls" is ours in float32 with the product's matmul_dtype "bfloat16" (the dense projections'
   matmuls take bfloat16 operands, everything else float32: model/matmul.py, run_finetuning.py --matmul-dtype).
   Under KERAS_BACKEND=jax on the CPU ("jax-random", "jax-bucketed", "jax-random-bf16"): JaxTrainer's single
   updates, as run_finetuning.py runs them there; its jit compiles one program per padded length, so the
   lengths are rounded up to a multiple of 16 (more padding than the others: the mean length is printed) and
   each length the timed updates use is compiled by an untimed update first (its seconds printed). XLA's
   CPU pool is held to --threads cores by the worker's CPU affinity.
   Ours turns oneDNN on where TensorFlow leaves it off (AVX2-only CPUs), as run_finetuning.py does
   (training.cpu_features.turn_on_onednn; TF_ENABLE_ONEDNN_OPTS=0 in the environment keeps it off).

Every measurement runs in a fresh process with --threads threads: TensorFlow's intra-op pool (and one
inter-op thread when --threads is 1), PyTorch's torch.set_num_threads and set_num_interop_threads;
alternated --repeats times, the median compared. Prints the CPU, the
load average before and after, each figure and the ratios.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

from bench.worker_process import print_result, run_worker

REPO = pathlib.Path(__file__).resolve().parents[1]
MODEL_NAME = "electra_small_random"
WARMUP_ROWS = 64


# ------------------------------------------------------------------------------------------------ preparing


def prepare(work, shared, finetune_steps):
    """The model folder, its fine-tuned SST-2 folder and its Hugging Face export (made once)."""
    data_dir = work / "data"
    folder = data_dir / "models" / MODEL_NAME
    finetuned = folder / "finetuning_models" / "sst_model_1"
    hf = work / "hf" / "discriminator"
    onnx = work / "onnx"
    if not (folder / "config.json").is_file():
        vocab = shared / "vocab" / "bert-base-uncased-vocab.txt"
        _run([sys.executable, "-c", PRETRAINED_SCRIPT, str(folder), str(vocab)])
    if not (finetuned / "finetuning_info.json").is_file():
        _run([sys.executable, str(REPO / "run_finetuning.py"), "--model-name", MODEL_NAME, "--data-dir", str(data_dir),
              "--task", "sst", "--finetuning-data-dir", str(shared / "glue"),
              "--hparams", json.dumps({"max_train_steps": finetune_steps, "length_bucketing": True,
                                       "iterations_per_loop": finetune_steps})])
    if not (hf / "config.json").is_file():
        _run([sys.executable, "-m", "checkpoints.export", "--model-dir", str(folder), "--format", "hf",
              "--output", str(work / "hf"), "--overwrite"])
    if not _current_onnx_export(onnx):
        _run([sys.executable, "-m", "checkpoints.export", "--model-dir", str(finetuned), "--format", "onnx",
              "--output", str(onnx), "--overwrite"])
        shutil.rmtree(work / "onnx_int8", ignore_errors=True)  # quantised from the export it replaces
    return folder, finetuned, hf, onnx


def _current_onnx_export(onnx):
    """Whether the export folder holds a model.onnx of today's exporter (electra_onnx.json names its
    converter since the graph is written directly; an older tf2onnx export is made again)."""
    try:
        return "converter" in json.loads((onnx / "electra_onnx.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def onnx_float32():
    import onnx

    return onnx.TensorProto.FLOAT


def quantised_copy(onnx, target):
    """The ONNX export folder with model.onnx's weights quantised to int8 (dynamic quantisation)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if not (target / "model.onnx").is_file():
        shutil.copytree(onnx, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("model.onnx"))
        # The written graph's com.microsoft ops (Attention, BiasGelu) have no ONNX shape inference, so the
        # quantiser is told their outputs' type (float32, as every activation of the export is).
        quantize_dynamic(str(onnx / "model.onnx"), str(target / "model.onnx"), weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": onnx_float32()})
    return target


PRETRAINED_SCRIPT = """
import os, sys, shutil, pathlib
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import tensorflow as tf
from configs.pretraining_config import PretrainingConfig
from pretrain.builder import build_pretrainer
from storage.model_folder import model_trackable
folder, vocab = pathlib.Path(sys.argv[1]), sys.argv[2]
folder.mkdir(parents=True, exist_ok=True)
config = PretrainingConfig.create({"model_size": "electra_small", "model_name": folder.name})
config.save(folder / "config.json")
shutil.copyfile(vocab, folder / "vocab.txt")
manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model_trackable(build_pretrainer(config))),
                                     str(folder), max_to_keep=1, checkpoint_name="ckpt")
manager.save(checkpoint_number=1)
"""


def _run(command):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    completed = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if completed.returncode:
        sys.exit(f"failed: {' '.join(command)}\n{completed.stderr[-3000:]}")


def dev_sentences(shared):
    lines = (shared / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index("sentence")
    return [line.split("\t")[column] for line in lines[1:] if line.strip()]


# ------------------------------------------------------------------------------------------------ workers


def configure_tensorflow(threads):
    """`threads` intra-op threads; with one, one inter-op thread too, so that TensorFlow uses one core as
    PyTorch does (with more, TensorFlow's default inter-op pool, as the commands run)."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        if threads == 1:
            tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already ran (a test process): its pools stay; benchmark workers are fresh
        pass


def worker_ours_predict(args):
    """Rows/s of inference.predict on the dev TSV (after a warm-up on its first rows); with args.model_dir
    (an ONNX export folder) ONNX Runtime's, its session on args.threads threads; the labels written."""
    configure_tensorflow(args.threads)
    import functools

    from inference import onnx_folder, predict

    onnx_folder.open_session = functools.partial(onnx_folder.open_session, threads=args.threads)

    dev = pathlib.Path(args.shared) / "glue" / "SST-2" / "dev.tsv"
    warm = pathlib.Path(args.work) / "warmup.tsv"
    warm.write_text("\n".join(dev.read_text(encoding="utf-8").splitlines()[:WARMUP_ROWS + 1]) + "\n", encoding="utf-8")
    out = pathlib.Path(args.work) / f"predictions_{os.getpid()}.jsonl"
    common = ["--model-dir", getattr(args, "model_dir", None) or args.finetuned, "--batch-size",
              str(args.batch_size), "--output", str(out), "--matmul-dtype", getattr(args, "matmul_dtype", "float32")]
    predictor = {}
    original = predict.load_predictor

    def load_once(*a, **k):  # one model for the warm-up and the timed call, as one command's run
        if "p" not in predictor:
            predictor["p"] = original(*a, **k)
        return predictor["p"]

    predict.load_predictor = load_once
    with open(os.devnull, "w") as quiet:
        stderr, sys.stderr = sys.stderr, quiet
        try:
            predict.main(common + [str(warm)])
            summary = predict.main(common + [str(dev)])
        finally:
            sys.stderr = stderr
    labels = [json.loads(line)["label"] for line in out.read_text(encoding="utf-8").splitlines()]
    out.unlink()
    return {"rows": summary["rows"], "seconds": summary["seconds"], "labels": labels}


def worker_hf_predict(args):
    """Rows/s of pipeline("text-classification") at one batch size (args.dtype "bfloat16": the model loaded in
    bfloat16, as Hugging Face's bf16 inference runs), JSON lines written as ours; the labels returned."""
    import torch
    from transformers import pipeline
    from transformers.utils import logging

    logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    sentences = dev_sentences(pathlib.Path(args.shared))
    dtype = torch.bfloat16 if getattr(args, "dtype", "float32") == "bfloat16" else torch.float32
    pipe = pipeline("text-classification", model=args.hf, tokenizer=args.hf, device=-1, top_k=None, dtype=dtype)
    pipe(sentences[:WARMUP_ROWS], batch_size=args.batch_size, truncation=True, max_length=128)
    start = time.perf_counter()
    results = pipe(sentences, batch_size=args.batch_size, truncation=True, max_length=128)
    labels = []
    with open(os.devnull, "w") as out:
        for line, scores in enumerate(results, 2):
            best = max(scores, key=lambda s: s["score"])
            labels.append(best["label"])
            out.write(json.dumps({"line": line, "label": best["label"],
                                  "probabilities": {s["label"]: s["score"] for s in scores}}) + "\n")
    return {"rows": len(results), "seconds": time.perf_counter() - start, "labels": labels}


def worker_ours_train(args):
    """Updates/s of the fine-tuning step run_finetuning.py runs, on SST-2 training batches: TensorFlow's
    (TFTrainer) or, with backend "jax", JAX's on the CPU (JaxTrainer, one update per dispatch: its jit compiles
    one program per padded length, so pad_to_multiple rounds the lengths up and every length the timed batches
    have is compiled by an untimed update first; those seconds are reported as compile_seconds)."""
    jax_backend = getattr(args, "backend", "tensorflow") == "jax"
    if jax_backend:  # XLA's CPU pool takes as many threads as the process may use cores
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:args.threads])
    elif getattr(args, "onednn", True):
        from training.cpu_features import turn_on_onednn

        turn_on_onednn(quiet=True)  # as run_finetuning.py does, before TensorFlow is imported
    else:
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"  # TensorFlow's own choice of kernels on this CPU
    if not jax_backend:
        if getattr(args, "matmul_gradients", None):
            from common.matmul_gradients import ENV

            os.environ[ENV] = args.matmul_gradients
        if getattr(args, "elementwise_gradients", None):
            os.environ["ELECTRA_ELEMENTWISE_GRADIENTS"] = args.elementwise_gradients  # before Keras is imported
        configure_tensorflow(args.threads)
    return train_updates(args, jax_backend)


def train_updates(args, jax_backend):
    """worker_ours_train's measurement, once its backend and kernels are chosen."""
    import dataclasses

    import keras
    import numpy as np

    from configs.finetuning_config import FinetuningConfig
    from finetune.loop import build_optimizer, task_batches
    from finetune.model import FinetuningModel, make_head
    from finetune.pretrained import build_encoder, read_model_folder
    from finetune.registry import get_task
    from finetune.trials import skips_padding
    from model.matmul import matmul_dtype_of, set_matmul_dtype

    pretrained = read_model_folder(pathlib.Path(args.folder))
    task = get_task("sst")
    config = FinetuningConfig.create({"length_bucketing": getattr(args, "length_bucketing", True),
                                      "bucket_pool_batches": args.pool_batches,
                                      "pad_to_multiple": getattr(args, "pad_to_multiple", 0),
                                      "matmul_dtype": getattr(args, "matmul_dtype", "float32"),
                                      "skip_padding": getattr(args, "skip_padding", None)},
                                     pretrained.recipe_size, ["sst"])
    config = dataclasses.replace(config, train_batch_size=32)
    features = task.featurize(task.read(pathlib.Path(args.shared) / "glue", "train"), pretrained.tokenizer(), config,
                              training=True)
    keras.utils.set_random_seed(args.seed)
    encoder = build_encoder(pretrained.model_config, dtype=getattr(args, "dtype", "float32"))
    model = FinetuningModel(encoder, {"sst": make_head(task, encoder.hidden_size, config, encoder.dtype_policy)})
    set_matmul_dtype(model, config.matmul_dtype)  # as finetune.trials.TrialRunner sets them
    encoder.skip_padding = skips_padding(config)
    optimizer = build_optimizer(config, 10000, encoder.num_layers)
    if jax_backend:
        from training_jax.finetune import JaxTrainer

        trainer = JaxTrainer(model, [task], optimizer, config)
    else:
        from finetune.tf_trainer import TFTrainer

        trainer = TFTrainer(model, [task], optimizer, config, compiled_update=getattr(args, "compiled_update", True))
    batches = []
    rng = np.random.default_rng(args.seed)
    while len(batches) < args.warmup_steps + args.steps:
        batches += list(task_batches(task, features, config, rng, training=True))
    warmup, timed = batches[:args.warmup_steps], batches[args.warmup_steps:args.warmup_steps + args.steps]
    if jax_backend:  # one untimed update at each length the timed ones have, after the warm-up's
        warmed = {batch["input_ids"].shape[1] for batch in warmup}
        lengths = {batch["input_ids"].shape[1]: batch for batch in reversed(timed)}
        warmup = warmup + [batch for length, batch in sorted(lengths.items()) if length not in warmed]
    start = time.perf_counter()
    for batch in warmup:
        float(trainer.step(task, batch))
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for batch in timed:
        float(trainer.step(task, batch))
    seconds = time.perf_counter() - start
    return {"steps": len(timed), "seconds": seconds, "compile_seconds": compile_seconds,
            "lengths_compiled": len({b["input_ids"].shape[1] for b in warmup}),
            "mean_length": float(np.mean([b["input_ids"].shape[1] for b in timed])),
            "matmul_dtype": matmul_dtype_of(model),
            "eigen_weight_gradients": bool(getattr(trainer, "eigen_weight_gradients", False))}


def worker_hf_train(args):
    """Updates/s of transformers' Trainer with dynamic padding (DataCollatorWithPadding), batch 32."""
    import torch
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainerCallback, TrainingArguments)
    from transformers.utils import logging

    logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    lines = (pathlib.Path(args.shared) / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    rows = [line.split("\t") for line in lines[1:] if line.strip()]
    tokenizer = AutoTokenizer.from_pretrained(args.hf)
    encoded = tokenizer([row[header.index("sentence")] for row in rows], truncation=True, max_length=128)
    label = header.index("label")
    dataset = [{"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "labels": int(row[label])}
               for ids, types, mask, row in zip(encoded["input_ids"], encoded["token_type_ids"],
                                                encoded["attention_mask"], rows)]
    model = AutoModelForSequenceClassification.from_pretrained(args.hf, num_labels=2)
    times, lengths = [], []

    class Clock(TrainerCallback):
        def on_step_end(self, *unused, **kwargs):
            times.append(time.perf_counter())

    collator = DataCollatorWithPadding(tokenizer)

    def collate(features):
        batch = collator(features)
        lengths.append(batch["input_ids"].shape[1])
        return batch

    training = TrainingArguments(
        output_dir=str(pathlib.Path(args.work) / "hf_trainer"), per_device_train_batch_size=32,
        max_steps=args.warmup_steps + args.steps, learning_rate=3e-4, use_cpu=True, report_to=[],
        save_strategy="no", logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=args.seed,
        train_sampling_strategy="group_by_length" if args.group_by_length else "random",
        bf16=getattr(args, "bf16", False))  # bf16: the forward under torch.autocast(bfloat16), as --bf16 does
    Trainer(model=model, args=training, train_dataset=dataset, data_collator=collate, callbacks=[Clock()]).train()
    timed = times[args.warmup_steps - 1:]  # from the end of the last warm-up update
    return {"steps": len(timed) - 1, "seconds": timed[-1] - timed[0],
            "mean_length": float(sum(lengths[args.warmup_steps:]) / max(1, len(lengths[args.warmup_steps:])))}


WORKERS = {"ours-predict": worker_ours_predict, "hf-predict": worker_hf_predict,
           "ours-train": worker_ours_train, "hf-train": worker_hf_train}


def spawn(name, args, **extra):
    """Runs one worker in a fresh process (its own thread pools); returns its RESULT JSON."""
    values = {"threads": args.threads, "shared": args.shared, "work": args.work, "folder": args.folder,
              "finetuned": args.finetuned, "hf": args.hf, "onnx": args.onnx, "steps": args.train_steps,
              "warmup_steps": args.warmup_steps, **extra}
    command = [sys.executable, "-m", "bench.predict_vs_hf", "--worker", name, "--worker-args", json.dumps(values)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND=extra.get("backend", "tensorflow"),
               OMP_NUM_THREADS=str(args.threads),
               PYTHONPATH=str(REPO))
    return run_worker(command, env, f"{name} {extra}")


# ------------------------------------------------------------------------------------------------ the run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=pathlib.Path, default=REPO / "runs" / "bench_predict")
    parser.add_argument("--batch-size", type=int, default=64, help="ours: inference.predict's --batch-size")
    parser.add_argument("--hf-batch-sizes", default="1,8,32,64,128")
    parser.add_argument("--train-steps", type=int, default=30, help="timed fine-tuning updates per measurement")
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--finetune-steps", type=int, default=10, help="steps of the fine-tuning that prepares ours")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--skip", default="", help="comma-separated: predict, train")
    parser.add_argument("--predict-bf16", action="store_true",
                        help="also ours with --matmul-dtype bfloat16 and Hugging Face's pipeline with the model in "
                             "bfloat16 at each --hf-batch-sizes (labels against each one's float32 printed)")
    parser.add_argument("--onnx-int8", action="store_true",
                        help="also ONNX Runtime on an int8 dynamically quantised copy of the export (its accuracy "
                             "change printed)")
    parser.add_argument("--onnx-compare", metavar="FOLDER",
                        help="also ONNX Runtime on another ONNX export folder of the same model (an older "
                             "exporter's, say), timed in the same alternation")
    parser.add_argument("--train-settings", default="bucketed,random,hf,hf-grouped",
                        help=f"comma-separated fine-tuning settings to measure, of: {', '.join(TRAIN_SETTINGS)}")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--worker-args", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        values = argparse.Namespace(**json.loads(args.worker_args))
        print_result(WORKERS[args.worker](values))
        return None

    from bench.build_speed import shared_data
    from training.cpu_features import read_cpu_features

    shared = shared_data().resolve()
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    from importlib.metadata import version

    print(f"CPU: {read_cpu_features().describe()}; {os.cpu_count()} cores; threads {args.threads}")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; tensorflow "
          f"{version('tensorflow')}, torch {version('torch')}, transformers {version('transformers')}, "
          f"onnxruntime {version('onnxruntime')}", flush=True)
    started = time.time()
    folder, finetuned, hf, onnx = prepare(work, shared, args.finetune_steps)
    paths = (shared, work, folder, finetuned, hf, onnx)
    args.shared, args.work, args.folder, args.finetuned, args.hf, args.onnx = (str(path) for path in paths)
    args.onnx_int8_dir = str(quantised_copy(onnx, work / "onnx_int8")) if args.onnx_int8 else None
    print(f"prepared in {time.time() - started:.0f} s: {finetuned} and its Hugging Face export {hf} "
          "(random initial weights, a few fine-tuning steps: a speed benchmark)", flush=True)
    skip = set(filter(None, args.skip.split(",")))
    table = {}
    if "predict" not in skip:
        table["predict"] = predictions(args)
    if "train" not in skip:
        table["train"] = updates(args)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; {time.time() - started:.0f} s "
          "in all", flush=True)
    return table


def our_runs(args):
    """{row name: (label, the worker's extra arguments)} of our predictions: TensorFlow, ONNX Runtime
    (float32), with --predict-bf16 TensorFlow with bfloat16 matmul operands, with --onnx-int8 ONNX Runtime on
    the quantised copy."""
    runs = {"ours": (f"ours, python -m inference.predict --batch-size {args.batch_size} (TensorFlow)", {}),
            "onnx": ("ONNX Runtime, the same command on the --format onnx export (float32)",
                     {"model_dir": args.onnx})}
    if args.predict_bf16:
        runs["ours-bf16"] = ("ours, the same command with --matmul-dtype bfloat16 (TensorFlow)",
                             {"matmul_dtype": "bfloat16"})
    if args.onnx_int8_dir:
        runs["onnx-int8"] = ("ONNX Runtime, int8 dynamic quantisation of the export", {"model_dir": args.onnx_int8_dir})
    if args.onnx_compare:
        runs["onnx-compare"] = (f"ONNX Runtime, the same command on {args.onnx_compare}",
                                {"model_dir": str(pathlib.Path(args.onnx_compare).resolve())})
    return runs


def dev_accuracy(shared, labels):
    lines = (pathlib.Path(shared) / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    column = lines[0].split("\t").index("label")
    gold = [line.split("\t")[column] for line in lines[1:] if line.strip()]
    return sum(a == b for a, b in zip(gold, labels)) / len(gold)


def predictions(args):
    sizes = [int(size) for size in args.hf_batch_sizes.split(",")]
    runs = our_runs(args)
    hf_runs = {size: ("float32", size) for size in sizes}  # key: (dtype, batch size)
    if args.predict_bf16:
        hf_runs |= {f"{size}-bf16": ("bfloat16", size) for size in sizes}
    rates = {key: [] for key in (*runs, *hf_runs)}
    labels = {}
    for repeat in range(args.repeats):
        for key, (_, extra) in runs.items():
            result = spawn("ours-predict", args, batch_size=args.batch_size, **extra)
            rates[key].append(result["rows"] / result["seconds"])
            labels[key] = result["labels"]
        for key, (dtype, size) in hf_runs.items():
            result = spawn("hf-predict", args, batch_size=size, dtype=dtype)
            rates[key].append(result["rows"] / result["seconds"])
            labels[key] = result["labels"]
        print(f"  predictions, repeat {repeat + 1}: " + ", ".join(f"{key} {rates[key][-1]:.1f}" for key in runs)
              + " rows/s; Hugging Face " + ", ".join(f"batch {key} {rates[key][-1]:.1f}" for key in hf_runs),
              flush=True)
    medians = {key: statistics.median(values) for key, values in rates.items()}
    print(f"\nPredictions on the {872} SST-2 dev sentences (rows/s, median of {args.repeats}):")
    for key, (label, _) in runs.items():
        print(f"  {label}: {medians[key]:.1f} ({', '.join(f'{r:.1f}' for r in rates[key])})")
    best_of = {}
    for dtype in dict.fromkeys(dtype for dtype, _ in hf_runs.values()):
        keys = [key for key, (each, _) in hf_runs.items() if each == dtype]
        best_of[dtype] = max(keys, key=lambda key: medians[key])
        for key in keys:
            what = "" if dtype == "float32" else ", the model in bfloat16"
            print(f"  Hugging Face pipeline, batch_size {hf_runs[key][1]}{what}: {medians[key]:.1f} "
                  f"({', '.join(f'{r:.1f}' for r in rates[key])})" + ("  <- best" if key == best_of[dtype] else ""))
    best = best_of["float32"]
    for key in runs:
        print(f"  {key} / Hugging Face's best: {medians[key] / medians[best]:.2f}x")
    print(f"  onnx / ours (TensorFlow): {medians['onnx'] / medians['ours']:.2f}x")
    same = sum(a == b for a, b in zip(labels["ours"], labels["onnx"]))
    print(f"  labels: ONNX Runtime float32 equals TensorFlow on {same} of {len(labels['ours'])} sentences")
    if args.predict_bf16:
        hf_bf16 = best_of["bfloat16"]
        print(f"  ours-bf16 / Hugging Face's best in bfloat16: {medians['ours-bf16'] / medians[hf_bf16]:.2f}x; "
              f"ours-bf16 / ours: {medians['ours-bf16'] / medians['ours']:.2f}x; Hugging Face's best bfloat16 / "
              f"float32: {medians[hf_bf16] / medians[best]:.2f}x")
        for name, (ours, theirs) in {"ours": ("ours", "ours-bf16"), "Hugging Face's": (best, hf_bf16)}.items():
            same = sum(a == b for a, b in zip(labels[ours], labels[theirs]))
            print(f"  labels: {name} bfloat16 equals its float32 on {same} of {len(labels[ours])} sentences")
    if "onnx-compare" in runs:
        same = sum(a == b for a, b in zip(labels["onnx"], labels["onnx-compare"]))
        print(f"  onnx / onnx-compare: {medians['onnx'] / medians['onnx-compare']:.2f}x; labels equal on {same}")
    if "onnx-int8" in runs:
        accuracy = {key: dev_accuracy(args.shared, labels[key]) for key in ("onnx", "onnx-int8")}
        agree = sum(a == b for a, b in zip(labels["onnx"], labels["onnx-int8"]))
        print(f"  int8: SST-2 dev accuracy {accuracy['onnx-int8']:.4f} against float32's {accuracy['onnx']:.4f} "
              f"(change {accuracy['onnx-int8'] - accuracy['onnx']:+.4f}); labels agree on {agree} of "
              f"{len(labels['onnx'])}; {medians['onnx-int8'] / medians['onnx']:.2f}x float32's speed")
    sys.stdout.flush()
    result = {"rates": {str(k): v for k, v in rates.items()}, "best_hf_batch": best,
              "ratio": medians["ours"] / medians[best], "onnx_ratio": medians["onnx"] / medians[best]}
    if args.predict_bf16:
        result["bf16_ratio"] = medians["ours-bf16"] / medians[best_of["bfloat16"]]
    return result


# key: (label, worker, its extra arguments)
TRAIN_SETTINGS = {
    "bucketed": ("ours, bucketed (pools of 50)", "ours-train", {"pool_batches": 50}),
    "random": ("ours, random batches padded to their longest", "ours-train", {"pool_batches": 1}),
    "random-every-position": ("ours, random batches padded to their longest, skip_padding off (every position, as "
                              "before 2026-11-30's default)", "ours-train", {"pool_batches": 1, "skip_padding": False}),
    "fixed": ("ours, the original's fixed batches (length_bucketing off: every batch padded to 128)", "ours-train",
              {"pool_batches": 1, "length_bucketing": False}),
    "fixed-every-position": ("ours, the original's fixed batches, skip_padding off (every position)", "ours-train",
                             {"pool_batches": 1, "length_bucketing": False, "skip_padding": False}),
    "random-inline": ("ours, random batches, the optimizer update inline (compiled_update off: the step before)",
                      "ours-train", {"pool_batches": 1, "compiled_update": False}),
    "jax-random": ("ours under KERAS_BACKEND=jax, random batches padded to their longest rounded up to a multiple "
                   "of 16", "ours-train", {"pool_batches": 1, "backend": "jax", "pad_to_multiple": 16}),
    "jax-bucketed": ("ours under KERAS_BACKEND=jax, bucketed (pools of 50), lengths rounded up to a multiple of 16",
                     "ours-train", {"pool_batches": 50, "backend": "jax", "pad_to_multiple": 16}),
    "random-bf16": ("ours, random batches, mixed_bfloat16 (bfloat16 compute, float32 weights)", "ours-train",
                    {"pool_batches": 1, "dtype": "mixed_bfloat16"}),
    "random-bf16-matmuls": ("ours, random batches, float32 with bfloat16 matmul operands (matmul_dtype bfloat16)",
                            "ours-train", {"pool_batches": 1, "matmul_dtype": "bfloat16"}),
    "jax-random-bf16": ("ours under KERAS_BACKEND=jax, random batches (lengths to a multiple of 16), mixed_bfloat16",
                        "ours-train", {"pool_batches": 1, "backend": "jax", "pad_to_multiple": 16,
                                       "dtype": "mixed_bfloat16"}),
    "hf-bf16": ("Hugging Face Trainer, DataCollatorWithPadding, bf16=True", "hf-train",
                {"group_by_length": False, "bf16": True}),
    "random-no-onednn": ("ours, random batches, oneDNN not turned on (TF_ENABLE_ONEDNN_OPTS=0)", "ours-train",
                         {"pool_batches": 1, "onednn": False}),
    "random-eigen-gradients": ("ours, random batches, the wide weight gradients on Eigen's kernels "
                               "(ELECTRA_MATMUL_GRADIENTS=eigen)", "ours-train",
                               {"pool_batches": 1, "matmul_gradients": "eigen"}),
    "random-autodiff": ("ours, random batches, LayerNorm's and GELU's gradients as autodiff builds them "
                        "(ELECTRA_ELEMENTWISE_GRADIENTS=autodiff)", "ours-train",
                        {"pool_batches": 1, "elementwise_gradients": "autodiff"}),
    "hf": ("Hugging Face Trainer, DataCollatorWithPadding", "hf-train", {"group_by_length": False}),
    "hf-grouped": ("Hugging Face Trainer, DataCollatorWithPadding + train_sampling_strategy group_by_length",
                   "hf-train", {"group_by_length": True}),
}
# (numerator, denominator, what the ratio compares), printed when both were measured
TRAIN_RATIOS = (("bucketed", "hf", "ours bucketed / Hugging Face dynamic padding"),
                ("random", "hf", "ours random batches / Hugging Face dynamic padding (the same padding)"),
                ("random-every-position", "hf", "ours random batches, every position / Hugging Face dynamic padding"),
                ("random", "random-every-position", "ours random batches: the real tokens' rows (skip_padding, the "
                                                    "default) / every position"),
                ("fixed", "fixed-every-position", "ours fixed batches (padded to 128): the real tokens' rows / every "
                                                  "position"),
                ("random-inline", "hf", "ours random batches, update inline / Hugging Face dynamic padding"),
                ("random", "random-inline", "ours random batches: compiled update / update inline"),
                ("jax-random", "hf", "ours under JAX, random batches (lengths to a multiple of 16) / Hugging Face "
                                     "dynamic padding"),
                ("jax-random", "random", "ours random batches: JAX / TensorFlow"),
                ("jax-bucketed", "hf-grouped", "ours under JAX bucketed / Hugging Face group_by_length"),
                ("random-bf16", "hf-bf16", "ours random batches, bf16 / Hugging Face dynamic padding, bf16"),
                ("random-bf16", "random", "ours random batches: bf16 / float32"),
                ("random-bf16-matmuls", "hf-bf16", "ours random batches, bf16 matmul operands / Hugging Face bf16"),
                ("random-bf16-matmuls", "hf", "ours random batches, bf16 matmul operands / Hugging Face float32"),
                ("random-bf16-matmuls", "random", "ours random batches: bf16 matmul operands / float32"),
                ("hf-bf16", "hf", "Hugging Face: bf16 / float32"),
                ("jax-random-bf16", "hf-bf16", "ours under JAX, bf16 / Hugging Face bf16"),
                ("random-no-onednn", "hf", "ours random batches, oneDNN off / Hugging Face dynamic padding"),
                ("random", "random-no-onednn", "ours random batches: oneDNN on / off"),
                ("random-eigen-gradients", "hf", "ours random batches, weight gradients on Eigen / Hugging Face "
                                                 "dynamic padding"),
                ("random-eigen-gradients", "random", "ours random batches: wide weight gradients on Eigen / on "
                                                     "oneDNN (the default)"),
                ("random", "random-autodiff", "ours random batches: LayerNorm's and GELU's gradients by hand (the "
                                              "default) / autodiff's"),
                ("bucketed", "hf-grouped", "ours bucketed / Hugging Face group_by_length (both length-grouped)"))


def updates(args):
    keys = args.train_settings.split(",")
    unknown = sorted(set(keys) - set(TRAIN_SETTINGS))
    if unknown:
        sys.exit(f"--train-settings: unknown {', '.join(unknown)}; choose from {', '.join(TRAIN_SETTINGS)}")
    rates, lengths, compiles = {key: [] for key in keys}, {key: [] for key in keys}, {key: [] for key in keys}
    matmul_dtypes, routed = {}, {}  # ours: the worker model's matmul_dtype; its wide weight gradients on Eigen
    for repeat in range(args.repeats):
        for key in keys:
            _, worker, extra = TRAIN_SETTINGS[key]
            result = spawn(worker, args, seed=repeat, **extra)
            rates[key].append(result["steps"] / result["seconds"])
            lengths[key].append(result["mean_length"])
            if "matmul_dtype" in result:
                matmul_dtypes[key] = result["matmul_dtype"]
                routed[key] = result.get("eigen_weight_gradients", False)
            if extra.get("backend") == "jax":
                compiles[key].append((result["lengths_compiled"], result["compile_seconds"]))
        print(f"  fine-tuning, repeat {repeat + 1}: " + "; ".join(f"{key} {rates[key][-1]:.2f}" for key in keys),
              flush=True)
    medians = {key: statistics.median(values) for key, values in rates.items()}
    print(f"\nFine-tuning on SST-2's training set, batch 32 (updates/s, median of {args.repeats}; mean padded length):")
    for key in keys:
        print(f"  {TRAIN_SETTINGS[key][0]}: {medians[key]:.2f} ({', '.join(f'{r:.2f}' for r in rates[key])}); "
              f"length {statistics.mean(lengths[key]):.1f}"
              + (f"; before the timed updates, {max(n for n, _ in compiles[key])} lengths compiled in "
                 f"{statistics.median(s for _, s in compiles[key]):.1f} s (median, untimed)" if compiles[key] else ""))
    if routed:
        print("  wide weight gradients on Eigen's kernels (common/matmul_gradients.py): "
              + ", ".join(f"{key} {'yes' if on else 'no'}" for key, on in routed.items()))
    for numerator, denominator, label in TRAIN_RATIOS:
        if numerator in medians and denominator in medians:
            print(f"  {label}: {medians[numerator] / medians[denominator]:.2f}x")
    sys.stdout.flush()
    return {"rates": rates, "lengths": lengths, "matmul_dtypes": matmul_dtypes}


if __name__ == "__main__":
    main()
