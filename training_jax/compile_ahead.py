"""Fine-tuning's training programs compiled before training starts, several at once (issue 42).

Why: a GPU window fine-tunes GLUE's five tasks for two models in about 90 s, and each (head kind, bucket length)
is a training program of its own (up to 6 at GLUE's lengths). Compiled on first use they compile one after
another, the device idle meanwhile. XLA's compile releases Python's GIL (a thread counting beside a 17 s
compile kept counting, at half its lone rate on this 2-core host), so here the programs are traced and lowered
one after another in this thread (tracing holds the GIL, and a trainer's schedule is patched while it traces),
then compiled in threads at once: on a host with a core per program the phase takes about its slowest
program's compile, not their sum. On by default on an accelerator (training_jax.finetune_settings): the first
H200 window's fine-tuning compiled one program after another for most of each task's time (STS-B: ~90 of
101 s) on a 16-core host; at once there is not yet measured. Off on the CPU (--compile-ahead turns it on): on
a 2-core CPU each compile took about twice as long beside another, so the phase was no shorter
(docs/benchmarks.md).

jit's own cache does not know a program compiled ahead, so an AheadProgram keeps the compiled executables by
their arguments' shapes and calls the one that matches; any other arguments take the jitted path (and what jit
has compiled is not compiled again ahead). Both compute
the same program, so results never depend on it (tests/test_jax_finetune_buckets.py).
"""
import concurrent.futures
import os
import time

import jax


class AheadProgram:
    """A jitted function and the executables compiled ahead for some argument shapes."""

    def __init__(self, jitted):
        self.jitted = jitted
        self.compiled = {}
        self.called = set()  # signatures jit has compiled (its cache holds them): not compiled again ahead

    def __call__(self, *args):
        key = signature(args)
        compiled = self.compiled.get(key)
        if compiled is not None:
            return compiled(*args)
        self.called.add(key)
        return self.jitted(*args)

    def has(self, args):
        key = signature(args)
        return key in self.compiled or key in self.called


def signature(args):
    """The arguments' tree and each leaf's shape and dtype (arrays and jax.ShapeDtypeStruct alike)."""
    leaves, tree = jax.tree.flatten(args)
    return tree, tuple((tuple(leaf.shape), str(leaf.dtype)) for leaf in leaves)


def compile_ahead(calls, workers=None):
    """Compiles each (AheadProgram, argument shapes) of `calls` not compiled yet, lowered here one after
    another, compiled in up to `workers` threads (default: one per program, at most os.cpu_count()).
    Returns {"programs", "threads", "lower_seconds", "compile_seconds" (the phase's wall time),
    "compile_seconds_summed" (each program's own compile time, added up)}."""
    todo, seen = [], set()
    for program, args in calls:
        key = (id(program), signature(args))
        if key not in seen and not program.has(args):
            seen.add(key)
            todo.append((program, args))
    start = time.perf_counter()
    lowered = [program.jitted.lower(*args) for program, args in todo]
    lower_seconds = time.perf_counter() - start
    threads = max(1, min(len(todo), workers or os.cpu_count() or 1))

    def compile_one(lowered_program):
        began = time.perf_counter()
        return lowered_program.compile(), time.perf_counter() - began

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(compile_one, lowered))
    for (program, args), (compiled, _) in zip(todo, results):
        program.compiled[signature(args)] = compiled
    return {"programs": len(todo), "threads": threads, "lower_seconds": lower_seconds,
            "compile_seconds": time.perf_counter() - start,
            "compile_seconds_summed": sum(seconds for _, seconds in results)}
