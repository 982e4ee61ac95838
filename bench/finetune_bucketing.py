"""Fine-tuning speed with length-bucketed batches versus fixed padding to max_seq_length, on CPU.

    ELECTRA_SHARED_DATA=../shared/data python -m bench.finetune_bucketing [--tasks sst,mrpc,rte]
        [--model-size electra_small] [--model-hparams JSON] [--steps 20] [--repeats 2]

For each task, the same model (randomly initialised: speed does not depend on the weights), the same
recipe (batch 32, max length 128) and the same examples are trained side by side: `--steps` updates with
each batching, alternated `--repeats` times, after one warm-up update each (tf.function tracing is not
timed). Prints the mean padded length, the examples/s of each and the ratio; nothing is assumed.
"""
import argparse
import json
import os
import time


import dataclasses

import numpy as np

from bench.build_speed import shared_data



def measure(trainer, task, features, config, steps, seed):
    """Seconds for `steps` updates (after one untimed warm-up update) and the mean padded length."""
    from finetune.loop import task_batches

    rng = np.random.default_rng(seed)
    batches = []
    while len(batches) < steps + 1:
        batches += list(task_batches(task, features, config, rng, training=True))
    batches = batches[:steps + 1]
    trainer.step(task, batches[0]).numpy()
    start = time.perf_counter()
    for batch in batches[1:]:
        trainer.step(task, batch).numpy()
    seconds = time.perf_counter() - start
    return seconds, float(np.mean([b["input_ids"].shape[1] for b in batches[1:]]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="sst,mrpc,rte")
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--model-hparams", default="{}",
                        help="model_hparam_overrides as JSON, e.g. a micro model for a smoke run")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    import keras
    import tensorflow as tf

    from configs.finetuning_config import FinetuningConfig
    from configs.pretraining_config import PretrainingConfig
    from data.tokenization import load_tokenizer
    from finetune.loop import build_optimizer
    from finetune.tf_trainer import TFTrainer as Trainer
    from finetune.model import FinetuningModel, make_head
    from finetune.pretrained import build_encoder
    from finetune.registry import get_task

    data = shared_data()
    tokenizer = load_tokenizer(vocab_file=data / "vocab" / "bert-base-uncased-vocab.txt")
    model_config = PretrainingConfig.create({"model_size": args.model_size,
                                             "model_hparam_overrides": json.loads(args.model_hparams)}).model_config()
    print(f"CPU threads: intra {tf.config.threading.get_intra_op_parallelism_threads()}, os.cpu_count "
          f"{os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; model {args.model_size} "
          f"(hidden {model_config.hidden_size}, {model_config.num_layers} layers); {args.steps} timed updates "
          f"× {args.repeats} repeats per setting", flush=True)
    print(f"{'task':<6} {'padding':<10} {'mean length':>11} {'examples/s':>11}")
    for name in args.tasks.split(","):
        task = get_task(name)
        base = FinetuningConfig.create({}, "small", [name])
        train = task.read(data / "glue", "train")
        features = task.featurize(train, tokenizer, base, training=True)
        rates = {True: [], False: []}
        for repeat in range(args.repeats):
            for bucketing in (True, False):
                config = dataclasses.replace(base, length_bucketing=bucketing)
                keras.utils.set_random_seed(repeat)
                encoder = build_encoder(model_config)
                model = FinetuningModel(encoder, {name: make_head(task, encoder.hidden_size, config)})
                trainer = Trainer(model, [task], build_optimizer(config, 1000, encoder.num_layers), config)
                seconds, length = measure(trainer, task, features, config, args.steps, seed=repeat)
                rates[bucketing].append((args.steps * config.train_batch_size / seconds, length))
        for bucketing, label in ((True, "bucketed"), (False, "fixed 128")):
            speed = np.mean([r for r, _ in rates[bucketing]])
            length = np.mean([l for _, l in rates[bucketing]])
            print(f"{name:<6} {label:<10} {length:>11.1f} {speed:>11.1f}")
        ratio = np.mean([r for r, _ in rates[True]]) / np.mean([r for r, _ in rates[False]])
        print(f"{name:<6} speed-up of bucketing: {ratio:.2f}x", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
