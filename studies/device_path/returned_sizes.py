"""What python -m studies.device_path.run --also-mlm brings back at a model size: the files and MiB write_back writes for
both pretrainers' float16 checkpoints (built under JAX on the CPU, their initial weights: the sizes are the
same for any weights), against the run's limits of 8 files, 16 MiB each, 64 MiB in all.

    python -m studies.device_path.returned_sizes --work /tmp/returned --vocab-file ../shared/data/vocab/bert-base-uncased-vocab.txt \\
        [--model-size electra_small] [--one-model]
"""
import argparse
import os
import pathlib
import shutil


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=pathlib.Path, required=True, help="scratch folder (emptied first)")
    parser.add_argument("--vocab-file", type=pathlib.Path, required=True)
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--one-model", action="store_true", help="without the MLM baseline")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    from training_jax.pretrain import without_tensorflow

    without_tensorflow()  # as on the GPU machine
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from studies.device_path.run import MLM, MOST_BYTES, MOST_FILES, write_back
    from training_jax.weights import save_checkpoint

    shutil.rmtree(args.work, ignore_errors=True)
    models = [("electra", True)] + ([] if args.one_model else [(MLM, False)])
    trained = {}
    for model, objective in models:
        config = PretrainingConfig.create({"model_size": args.model_size, "model_name": model,
                                           "electra_objective": objective})
        folder = args.work / "pretraining" / model
        prefix = save_checkpoint(folder, 1000, build_pretrainer(config), "float16", config, args.vocab_file)
        (folder / "metrics.jsonl").write_text('{"split": "train", "step": 1000}\n')
        trained[model] = (None, 1000, pathlib.Path(prefix))
    record = {"model": "electra", "total_steps": 1000, **({} if args.one_model else {MLM: {"steps": 1079}})}
    files = write_back(args.work / "OUT", args.work, record, trained, {})
    for path in files:
        print(f"{path.relative_to(args.work / 'OUT')}\t{path.stat().st_size / 2 ** 20:.2f} MiB")
    total = sum(path.stat().st_size for path in files)
    print(f"{len(files)} files (limit {MOST_FILES}), {total / 2 ** 20:.1f} MiB (limit {MOST_BYTES / 2 ** 20:.0f}), "
          f"largest {max(p.stat().st_size for p in files) / 2 ** 20:.2f} MiB (limit 16)")


if __name__ == "__main__":
    main()
