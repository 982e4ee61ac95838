"""How many kernels the compiled JAX pretraining step launches, per speed setting, counted in XLA's optimized HLO.

    KERAS_BACKEND=jax JAX_PLATFORMS=cpu python -m bench.step_hlo_cpu [--model-size electra_small] \\
        [--batch-size 8] [--seq-length 128] [--variants cpu,gpu,...]

A GPU launches roughly one kernel per top-level instruction of the step's entry computation (a fusion, a dot, a
copy, a collective), so the count is a proxy for launch overhead that a CPU can compute. It is only a proxy: this
is XLA's CPU compiler, whose fusion rules are not the GPU's, so a setting that lowers the count here may not on a
GPU and the other way round; the GPU rows of bench.gpu_speed decide. Each variant is one platform's defaults
(training_jax.speed_settings.resolve) with at most one setting changed, compiled for the CPU in this process; the
table prints the entry computation's instructions (parameters and tuple plumbing left out), its fusions, its
matmuls, and the instructions that produce a [batch, predictions, vocabulary] tensor.
"""
import argparse
import json
import os
import re
import shlex
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
from common.quiet import lean_keras_import  # noqa: E402
lean_keras_import()  # Keras without scikit-learn and matplotlib, as the commands import it

VARIANTS = {  # name: (platform, the settings changed from its defaults)
    "cpu": ("cpu", {}),
    "cpu + flat_update": ("cpu", {"flat_update": True}),
    "cpu + rbg": ("cpu", {"prng": "rbg"}),
    "cpu + fused_attention": ("cpu", {"fused_attention": True}),
    "gpu": ("gpu", {}),
    "gpu - flat_update": ("gpu", {"flat_update": False}),
}
PLUMBING = ("parameter", "get-tuple-element", "tuple", "bitcast", "constant")


def compiled_step_text(config, settings):
    """The optimized HLO of one update of the config's pretrainer under `settings`, compiled for this CPU."""
    import numpy as np

    from bench.pretrain_step_gpu import synthetic_batch
    from pretrain.builder import build_for_training
    from training_jax import speed_settings
    from training_jax.pretrain import make_functions

    model, optimizer = build_for_training(speed_settings.with_precision(config, settings))
    speed_settings.apply_to_step(settings, model, optimizer)
    train, _, zero_stats = make_functions(model, optimizer)
    examples = synthetic_batch(np.random.default_rng(0), config.train_batch_size * 2, config.max_seq_length,
                               config.vocab_size)
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    indices = np.arange(config.train_batch_size, dtype="int32")[None]
    schedule = np.array([1000.0, 100.0], "float32")
    return train.lower(state, zero_stats(state, examples, config.train_batch_size), examples, indices,
                       schedule).compile().as_text()


def count_entry(text, vocab_size):
    """{instructions, fusions, dots, vocabulary_tensors} of the entry computation of an optimized HLO text."""
    entry = text[text.index("ENTRY"):].split("\n}\n")[0]
    kinds = []
    vocabulary = 0
    for line in entry.splitlines()[1:]:
        match = re.search(r"=\s*(\S+)\s+([\w-]+)\(", line)
        if not match or match.group(2) in PLUMBING:
            continue
        kinds.append(match.group(2))
        vocabulary += bool(re.search(rf"\[\d+,\d+,{vocab_size}\]|\[\d+,{vocab_size}\]", match.group(1)))
    return {"instructions": len(kinds), "fusions": kinds.count("fusion"),
            "dots": kinds.count("dot") + kinds.count("custom-call"), "vocabulary_tensors": vocabulary}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--model-hparams", default=None, help="JSON of ModelConfig fields over the size's")
    parser.add_argument("--vocab-size", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from {list(VARIANTS)}")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}")
    sys.modules.setdefault("tensorflow", None)  # the JAX path runs without it
    import jax

    from configs.pretraining_config import PretrainingConfig
    from training_jax import speed_settings

    hparams = {"model_size": args.model_size, "train_batch_size": args.batch_size, "max_seq_length": args.seq_length}
    if args.model_hparams:
        hparams["model_hparam_overrides"] = json.loads(args.model_hparams)
    if args.vocab_size:
        hparams["vocab_size"] = args.vocab_size
    config = PretrainingConfig.create(hparams)
    print("command: KERAS_BACKEND=jax JAX_PLATFORMS=cpu python -m bench.step_hlo_cpu "
          + shlex.join(argv if argv is not None else sys.argv[1:]))
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; {args.model_size}, batch {args.batch_size} x "
          f"{args.seq_length}, vocabulary {config.vocab_size}; XLA's CPU compiler (a proxy, see the docstring)")
    print("| variant | entry instructions | fusions | dots | [.., vocab] tensors | compile s |")
    print("|---|---|---|---|---|---|")
    rows = []
    for name in names:
        platform, changed = VARIANTS[name]
        settings = speed_settings.resolve(platform, **changed)
        start = time.perf_counter()
        counts = count_entry(compiled_step_text(config, settings), config.vocab_size)
        rows.append({"variant": name, **counts, "compile_s": time.perf_counter() - start})
        print(f"| {name} | {counts['instructions']} | {counts['fusions']} | {counts['dots']} | "
              f"{counts['vocabulary_tensors']} | {rows[-1]['compile_s']:.1f} |", flush=True)
    return rows


if __name__ == "__main__":
    main()
