"""How topically alike are the examples of one training batch, as the reader draws them?

    python -m studies.batch_diversity runs/rtd_vs_mlm/data/pretrain_tfrecords runs/shard256/pretrain_tfrecords

The original reader interleaves at most 8 shards and shuffles records in a buffer of 100, and the builder
writes examples round-robin over its shards, so a document's consecutive examples sit a few records apart
in a shard when there are few shards. The original always wrote 1,000 shards; with few (the automatic
count of a small corpus), a batch holds several examples of the same articles. This prints, per dataset,
for --batches training batches of the reader and as many batches drawn uniformly from the training shards
(what training_jax.pretrain's sampler does): the mean pairwise Jaccard similarity of the examples'
rare-token sets (ids above --rare-above: BERT's vocabulary puts frequent words below about 2,000) and the
share of examples with a batch-mate whose similarity exceeds --close. A measurement of the data order,
not of training.
"""
import argparse
import pathlib


from common.errors import exit_on_input_error



def token_sets(batch, rare_above):
    return [set(row[row > rare_above].tolist()) for row in batch]


def jaccard(a, b):
    return len(a & b) / max(1, len(a | b))


def batch_similarity(batch, rare_above, close):
    """(mean pairwise Jaccard, share of examples with a batch-mate above `close`) of one batch of ids."""
    sets = token_sets(batch, rare_above)
    pairs = [[jaccard(a, b) if i != j else 0.0 for j, b in enumerate(sets)] for i, a in enumerate(sets)]
    count = len(sets)
    mean = sum(sum(row) for row in pairs) / (count * (count - 1))
    near = sum(max(row) > close for row in pairs) / count
    return mean, near


def measure(dataset_dir, batch_size, batches, rare_above, close, seed):
    import numpy as np

    from configs.pretraining_config import PretrainingConfig
    from data import tfrecords
    from configs.resolve import split_shards

    metadata = tfrecords.load_metadata(dataset_dir)
    # The training shards exactly as run_pretraining.py picks them (held-out shards left out).
    train_files, _ = split_shards(PretrainingConfig.create({"do_eval": True}), dataset_dir, metadata)
    reader = tfrecords.pretraining_dataset(dataset_dir, batch_size, files=train_files, training=True, seed=seed,
                                           metadata=metadata)
    reader_batches = [b["input_ids"].numpy() for _, b in zip(range(batches), reader)]
    every = np.concatenate([b["input_ids"].numpy() for b in tfrecords.pretraining_dataset(
        dataset_dir, 8192, files=train_files, training=False, metadata=metadata)])
    rng = np.random.default_rng(seed)
    uniform_batches = [every[rng.choice(len(every), batch_size, replace=False)] for _ in range(batches)]
    return {name: np.mean([batch_similarity(b, rare_above, close) for b in group], axis=0)
            for name, group in (("reader", reader_batches), ("uniform", uniform_batches))}, len(train_files)


@exit_on_input_error
def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.batch_diversity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dirs", nargs="+", type=pathlib.Path, help="pretrain_tfrecords folders")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rare-above", type=int, default=2000)
    parser.add_argument("--close", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"| dataset | training shards | reader: mean Jaccard | uniform: mean Jaccard | reader: share with a "
          f"batch-mate > {args.close} | uniform: share > {args.close} | ratio of shares |")
    print("|---|---|---|---|---|---|---|")
    for dataset_dir in args.dataset_dirs:
        result, shards = measure(dataset_dir, args.batch_size, args.batches, args.rare_above, args.close, args.seed)
        (reader_mean, reader_near), (uniform_mean, uniform_near) = result["reader"], result["uniform"]
        print(f"| {dataset_dir} | {shards} | {reader_mean:.4f} | {uniform_mean:.4f} | {reader_near:.3f} | "
              f"{uniform_near:.3f} | {reader_near / max(uniform_near, 1e-9):.1f}x |")


if __name__ == "__main__":
    main()
