"""Writing and reading a model's checkpoint: TensorFlow's tf.train.Checkpoint (storage.model_folder.write_weights,
restore_weights) against the NumPy writer and reader the JAX run uses (storage.checkpoint_bundle), side by side in
one process on the same weights, float32 and float16.

    python -m bench.checkpoint_write_cpu --model-size electra_base --work /tmp/bundle_speed [--repeats 3]

Each figure is the best of --repeats (files rewritten each time, page cache warm). The bytes are the same (the
float32 files are TensorFlow's byte for byte: tests/test_checkpoint_bundle.py); what differs is the time.
"""
import argparse
import pathlib
import shutil
import time


def best_seconds(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-size", default="electra_base")
    parser.add_argument("--work", type=pathlib.Path, required=True, help="scratch folder (emptied first)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from common.quiet import quiet_tensorflow

    quiet_tensorflow()
    import numpy as np

    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from storage import checkpoint_bundle, model_folder

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    model = build_pretrainer(PretrainingConfig.create({"model_size": args.model_size}))
    values = {variable.path: variable.numpy() for variable in model.weights}
    half = {path: value.astype(np.float16) for path, value in values.items()}
    megabytes = sum(value.nbytes for value in values.values()) / 1e6
    rows = [("write", "TensorFlow write_weights, float32",
             best_seconds(lambda: model_folder.write_weights(model, args.work / "tf" / "ckpt"), args.repeats)),
            ("write", "checkpoint_bundle, float32",
             best_seconds(lambda: checkpoint_bundle.write_model_weights(args.work / "np" / "ckpt", values),
                          args.repeats)),
            ("write", "checkpoint_bundle, float16",
             best_seconds(lambda: checkpoint_bundle.write_model_weights(args.work / "half" / "ckpt", half),
                          args.repeats)),
            ("read", "TensorFlow restore_weights, float32",
             best_seconds(lambda: model_folder.restore_weights(model, str(args.work / "tf" / "ckpt")), args.repeats)),
            ("read", "checkpoint_bundle read_model_weights, float32",
             best_seconds(lambda: checkpoint_bundle.read_model_weights(args.work / "np" / "ckpt"), args.repeats)),
            ("read", "restore_weights of float16 (read, widen, assign)",
             best_seconds(lambda: model_folder.restore_weights(model, str(args.work / "half" / "ckpt")),
                          args.repeats))]
    print(f"{args.model_size}: {len(values)} weights, {megabytes:.0f} MB in float32; best of {args.repeats}")
    baseline = {kind: seconds for kind, name, seconds in rows if name.startswith("TensorFlow")}
    for kind, name, seconds in rows:
        print(f"{kind:5s} {name:50s} {seconds:7.2f} s  {seconds / baseline[kind]:5.2f}x TensorFlow's time")


if __name__ == "__main__":
    main()
