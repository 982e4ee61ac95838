"""Ours in float32 against matmul_dtype "bfloat16" (model/matmul.py): fine-tuning updates alternated in one process,
so that both settings share whatever else the machine runs.

    ELECTRA_SHARED_DATA=../shared/data python -m bench.matmul_dtype_step [--updates 40] [--threads 2]
        [--model-dir runs/bench_predict/data/models/electra_small_random]

Two fine-tuning models (run_finetuning.py's model, optimizer and TFTrainer step, batch 32, SST-2's training set in
random batches each padded to its longest, as bench.predict_vs_hf's "random" setting) built from the same seed, one
in float32 and one with matmul_dtype bfloat16; 3 untimed updates each (traces), then --updates batches, each
given to both in turn (the order alternating), every update timed alone. Prints the load average before and after,
each setting's fastest and median update, their ratios and the median of the ratios of the same batch's two updates,
and the first losses of both. The fastest update is the figure least moved by other work on the machine;
bench.predict_vs_hf (separate processes, against Hugging Face) is the measurement for a quiet machine.
The model folder: bench.predict_vs_hf's randomly initialised electra_small (made by its first run).
"""
import argparse
import dataclasses
import os
import pathlib
import statistics
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = ("float32", "bfloat16")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=40, help="timed batches (each updates both models)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", type=pathlib.Path,
                        default=REPO / "runs" / "bench_predict" / "data" / "models" / "electra_small_random")
    return parser.parse_args(argv)


def load():
    return " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])


def main(argv=None):
    args = parse_args(argv)
    from training.cpu_features import turn_on_onednn

    turn_on_onednn(quiet=True)  # as run_finetuning.py does, before TensorFlow is imported
    from bench.predict_vs_hf import configure_tensorflow

    configure_tensorflow(args.threads)
    import keras
    import numpy as np

    from configs.finetuning_config import FinetuningConfig
    from finetune.loop import build_optimizer, task_batches
    from finetune.model import FinetuningModel, make_head
    from finetune.pretrained import build_encoder, read_model_folder
    from finetune.registry import get_task
    from finetune.tf_trainer import TFTrainer
    from model.matmul import set_matmul_dtype

    shared = pathlib.Path(os.environ.get("ELECTRA_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()
    print(f"load average before: {load()}", flush=True)
    pretrained = read_model_folder(args.model_dir)
    task = get_task("sst")
    config = FinetuningConfig.create({"length_bucketing": True, "bucket_pool_batches": 1}, pretrained.recipe_size,
                                     ["sst"])
    config = dataclasses.replace(config, train_batch_size=32)
    features = task.featurize(task.read(shared / "glue", "train"), pretrained.tokenizer(), config, training=True)
    trainers = {}
    for setting in SETTINGS:
        keras.utils.set_random_seed(0)
        encoder = build_encoder(pretrained.model_config)
        model = FinetuningModel(encoder, {"sst": make_head(task, encoder.hidden_size, config, encoder.dtype_policy)})
        set_matmul_dtype(model, setting)
        trainers[setting] = TFTrainer(model, [task], build_optimizer(config, 10000, encoder.num_layers), config)
    rng = np.random.default_rng(0)
    batches = []
    while len(batches) < 3 + args.updates:
        batches += list(task_batches(task, features, config, rng, training=True))
    losses = {setting: [float(trainers[setting].step(task, batch)) for batch in batches[:3]] for setting in SETTINGS}
    times = {setting: [] for setting in SETTINGS}
    timed = batches[3:3 + args.updates]
    for number, batch in enumerate(timed):
        for setting in SETTINGS if number % 2 == 0 else SETTINGS[::-1]:
            start = time.perf_counter()
            float(trainers[setting].step(task, batch))
            times[setting].append(time.perf_counter() - start)
    print(f"load average after: {load()}; {len(timed)} batches of 32, mean padded length "
          f"{np.mean([b['input_ids'].shape[1] for b in timed]):.1f}")
    for setting in SETTINGS:
        first = ", ".join(f"{value:.4f}" for value in losses[setting])
        print(f"  matmul_dtype {setting}: fastest update {min(times[setting]):.3f} s, median "
              f"{statistics.median(times[setting]):.3f} s; first losses {first}")
    paired = [a / b for a, b in zip(times["float32"], times["bfloat16"])]
    print(f"  float32 / bfloat16 operands: fastest {min(times['float32']) / min(times['bfloat16']):.2f}x, median "
          f"{statistics.median(times['float32']) / statistics.median(times['bfloat16']):.2f}x, same batch (median of "
          f"{len(paired)}) {statistics.median(paired):.2f}x", flush=True)
    return times


if __name__ == "__main__":
    main()
