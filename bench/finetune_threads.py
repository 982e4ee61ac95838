"""Fine-tuning speed on CPU with TensorFlow's default inter-op pool versus one inter-op thread.

    ELECTRA_SHARED_DATA=../shared/data python -m bench.finetune_threads [--tasks sst,rte] [--steps 60]
        [--repeats 2] [--hparams '{"model_size": "electra_small"}']

Pretraining sets one inter-op thread on CPU hosts (training/strategy.limit_cpu_inter_op_threads: with the
intra-op pool on every core, a second inter-op thread oversubscribes them). This measures the same choice
for fine-tuning: each setting runs in its own process (TensorFlow fixes its thread pools at start-up),
the two alternated --repeats times, each timing --steps length-bucketed updates of the same examples after
one untimed warm-up update. Prints examples/s of each and the ratio.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


SETTINGS = ("default", "one")


def measure_here(task_name, steps, model_hparams, inter_op):
    """Examples/s of `steps` updates in this process (inter_op: "default" or "one")."""
    import keras

    from bench.build_speed import shared_data
    from bench.finetune_bucketing import measure
    from configs.finetuning_config import FinetuningConfig
    from configs.pretraining_config import PretrainingConfig
    from data.tokenization import load_tokenizer
    from finetune.loop import build_optimizer
    from finetune.tf_trainer import TFTrainer as Trainer
    from finetune.model import FinetuningModel, make_head
    from finetune.pretrained import build_encoder
    from finetune.registry import get_task
    from training.strategy import limit_cpu_inter_op_threads

    if inter_op == "one":
        limit_cpu_inter_op_threads()
    data = shared_data()
    tokenizer = load_tokenizer(vocab_file=data / "vocab" / "bert-base-uncased-vocab.txt")
    model_config = PretrainingConfig.create(model_hparams).model_config()
    task = get_task(task_name)
    config = FinetuningConfig.create({"length_bucketing": True}, "small", [task_name])  # not the default
    features = task.featurize(task.read(data / "glue", "train"), tokenizer, config, training=True)
    keras.utils.set_random_seed(0)
    encoder = build_encoder(model_config)
    model = FinetuningModel(encoder, {task_name: make_head(task, encoder.hidden_size, config)})
    trainer = Trainer(model, [task], build_optimizer(config, 1000, encoder.num_layers), config)
    seconds, _ = measure(trainer, task, features, config, steps, seed=0)
    return steps * config.train_batch_size / seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="sst,rte")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--hparams", default='{"model_size": "electra_small"}',
                        help="PretrainingConfig values giving the encoder's shape")
    parser.add_argument("--child", nargs=2, metavar=("TASK", "SETTING"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    hparams = json.loads(args.hparams)
    if args.child:
        print("RATE", measure_here(args.child[0], args.steps, hparams, args.child[1]))
        return
    print(f"os.cpu_count {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; encoder {hparams}; "
          f"{args.steps} timed updates × {args.repeats} repeats per setting, alternated", flush=True)
    for task in args.tasks.split(","):
        rates = {setting: [] for setting in SETTINGS}
        for _ in range(args.repeats):
            for setting in SETTINGS:
                output = subprocess.run(
                    [sys.executable, "-m", "bench.finetune_threads", "--child", task, setting, "--steps", str(args.steps),
                     "--hparams", args.hparams], capture_output=True, text=True, check=True, cwd=REPO).stdout
                rates[setting].append(float(output.split("RATE")[-1]))
        for setting in SETTINGS:
            print(f"{task:<5} inter-op {setting:<8} examples/s " + ", ".join(f"{r:.1f}" for r in rates[setting]))
        ratio = sum(rates["one"]) / sum(rates["default"])
        print(f"{task:<5} one inter-op thread / default: {ratio:.2f}x", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
