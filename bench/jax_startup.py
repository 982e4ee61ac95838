"""How long a JAX process takes to build a pretrainer: without a persistent compilation cache, with an empty
one, and with the one the previous process filled; side by side in one run, each in a fresh process.

    KERAS_BACKEND=jax python -m bench.jax_startup [--model-size electra_small] [--hparams JSON] [--work DIR]

Why: under JAX each weight initializer's shape compiles as its own small program when a model is built;
training_jax's processes (the pieces of a run, the fine-tuning jobs) keep them in the cache that
training_jax.compiles.use_compile_cache turns on for programs of any compile time. Prints the device, the
build's seconds, its compiles (a read from the cache counts as one) and their seconds, per setting.
"""
import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

from bench.worker_process import print_result, run_worker

SETTINGS = ("no cache", "empty cache", "warm cache")


def build(model_size, hparams, cache):
    """{seconds, compiles, compile_seconds, weights, device} of building the pretrainer in this process."""
    sys.modules.setdefault("tensorflow", None)  # as on a machine without it
    import jax

    from training_jax.compiles import CompileCount, use_compile_cache

    if cache:
        use_compile_cache(cache)
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer

    config = PretrainingConfig.create({"model_size": model_size, "model_name": "startup",
                                       "model_hparam_overrides": hparams})
    count, start = CompileCount(), time.perf_counter()
    model = build_pretrainer(config)
    jax.block_until_ready([variable.value for variable in model.weights])
    device = jax.devices()[0]
    return {"seconds": time.perf_counter() - start, "compiles": count.compiles,
            "compile_seconds": count.compile_seconds, "weights": len(model.weights),
            "device": f"{device.platform} {device.device_kind}"}


def spawn(args, cache):
    command = [sys.executable, "-m", "bench.jax_startup", "--worker", "--model-size", args.model_size, "--hparams",
               args.hparams] + (["--cache", str(cache)] if cache else [])
    env = dict(os.environ, KERAS_BACKEND="jax")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return run_worker(command, env, "cached" if cache else "no cache")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--hparams", default="{}", help="model_hparam_overrides as JSON, e.g. a smaller model")
    parser.add_argument("--work", type=pathlib.Path, default=None, help="where the cache goes (default: a temp dir)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = build(args.model_size, json.loads(args.hparams), args.cache)
        print_result(result)
        return result
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="jax_startup_"))
    cache = work / "jax_cache"
    shutil.rmtree(cache, ignore_errors=True)
    results = dict(zip(SETTINGS, (spawn(args, None), spawn(args, cache), spawn(args, cache))))
    entries = sum(1 for path in cache.rglob("*") if path.is_file()) if cache.is_dir() else 0
    print(f"{args.model_size} {args.hparams}: building the pretrainer, {results[SETTINGS[0]]['weights']} weights, "
          f"on {results[SETTINGS[0]]['device']}")
    for name, result in results.items():
        print(f"  {name:11s}: {result['seconds']:6.2f} s; {result['compiles']} compiles, "
              f"{result['compile_seconds']:.2f} s of them")
    base = results[SETTINGS[0]]["seconds"]
    print(f"  warm cache / no cache: {results[SETTINGS[2]]['seconds'] / base:.2f}x the time; {entries} files cached")
    results["cached_files"] = entries
    return results


if __name__ == "__main__":
    main()
