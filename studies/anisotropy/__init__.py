"""How alike are an encoder's output vectors? A diagnostic for pretrained checkpoints.

    python -m studies.anisotropy --data-dir runs/electra_data --models wiki_pretrained,wiki_random_init

For each model folder under <data-dir>/models/, runs its discriminator over the first --sentences dev
sentences of a GLUE task and prints the mean cosine similarity of two different [CLS] vectors and of two
random token vectors of the last layer. A healthy encoder's tokens point in many directions; values
near 1 mean its outputs are nearly the same vector whatever the input (docs/results.md), a poor start
for a classifier.
"""
import argparse
import pathlib


import numpy as np

from configs.finetuning_config import FinetuningConfig
from data import paths
from finetune.batches import iterate_batches
from finetune.pretrained import build_encoder, read_model_folder, restore_by_path
from finetune.registry import get_task


INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


def mean_pairwise_cosine(vectors):
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = unit @ unit.T
    return float(similarity[np.triu_indices(len(unit), 1)].mean())


def output_vectors(model_dir, task_name, finetuning_data, sentences):
    """([CLS] vectors, every real token's vector) of the last layer on the task's first dev sentences."""
    pretrained = read_model_folder(model_dir)
    encoder = build_encoder(pretrained.model_config)
    restore_by_path(encoder, pretrained.checkpoint)
    task = get_task(task_name)
    examples = task.read(finetuning_data, "dev")[:sentences]
    features = task.featurize(examples, pretrained.tokenizer(), FinetuningConfig.create({}, "small", [task_name]))
    cls_vectors, token_vectors = [], []
    for batch in iterate_batches(features["sequences"], {}, 64, 128):
        output = np.asarray(encoder({key: batch[key] for key in INPUT_KEYS}))
        cls_vectors.append(output[:, 0])
        token_vectors.append(output[batch["input_mask"] == 1])
    return np.concatenate(cls_vectors), np.concatenate(token_vectors)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.anisotropy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=pathlib.Path, default=None)
    parser.add_argument("--models", required=True, help="model folder names, separated by commas")
    parser.add_argument("--task", default="sst")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--token-sample", type=int, default=2000)
    args = parser.parse_args(argv)
    data_dir = args.data_dir or paths.default_data_dir()
    for name in args.models.split(","):
        cls_vectors, tokens = output_vectors(paths.models_dir(data_dir) / name, args.task,
                                             data_dir / "finetuning_data", args.sentences)
        sample = tokens[np.random.default_rng(0).choice(len(tokens), min(args.token_sample, len(tokens)),
                                                        replace=False)]
        print(f"{name}: mean cosine of two [CLS] vectors {mean_pairwise_cosine(cls_vectors):.3f}, "
              f"of two token vectors {mean_pairwise_cosine(sample):.3f} ({len(cls_vectors)} {args.task} dev "
              f"sentences, {len(sample)} tokens)")


if __name__ == "__main__":
    main()
