"""Counts JAX's compiles in this process through jax.monitoring, to prove that work reuses its programs.

JAX (0.10-0.11) records "/jax/core/compile/backend_compile_duration" once per program it compiles for a
backend, a read from the persistent compilation cache included (that is still a new program in this
process), and "/jax/core/compile/jaxpr_trace_duration" once per function it traces. A call that finds
its program in jit's in-memory cache records neither. Eager operations are small programs too: they
count as well, so a count of zero over some work means that work compiled nothing at all.
"""
import os
import re
import threading

import jax

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"

_lock = threading.Lock()
_totals = {"compiles": 0, "compile_seconds": 0.0, "traces": 0, "compiled": [], "durations": []}
_registered = False


def _listen(event, duration, **kwargs):
    with _lock:
        if event == BACKEND_COMPILE_EVENT:
            _totals["compiles"] += 1
            _totals["compile_seconds"] += duration
            _totals["compiled"].append(str(kwargs.get("fun_name", "?")))
            _totals["durations"].append(duration)
        elif event == TRACE_EVENT:
            _totals["traces"] += 1


def start_counting():
    """Registers the listener (once per process; jax.monitoring has no way to remove one)."""
    global _registered
    with _lock:
        if not _registered:
            jax.monitoring.register_event_duration_secs_listener(_listen)
            _registered = True


class CompileCount:
    """Compiles, their seconds and traces since this was made (`with CompileCount() as count: ...`, then
    count.compiles, count.compile_seconds, count.traces, count.names: the compiled functions' names,
    count.seconds_by_name: where the compile seconds went)."""

    def __init__(self):
        start_counting()
        with _lock:
            self._start = dict(_totals, compiled=len(_totals["compiled"]))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def compiles(self):
        return _totals["compiles"] - self._start["compiles"]

    @property
    def compile_seconds(self):
        return _totals["compile_seconds"] - self._start["compile_seconds"]

    @property
    def traces(self):
        return _totals["traces"] - self._start["traces"]

    @property
    def names(self):
        return list(_totals["compiled"][self._start["compiled"]:])

    @property
    def seconds_by_name(self):
        """{compiled function's name: its compiles' seconds}, the slowest first."""
        totals = {}
        with _lock:
            start = self._start["compiled"]
            for name, seconds in zip(_totals["compiled"][start:], _totals["durations"][start:]):
                totals[name] = totals.get(name, 0.0) + seconds
        return dict(sorted(totals.items(), key=lambda item: -item[1]))


def use_compile_cache(folder):
    """JAX's persistent compilation cache in `folder` (unless JAX_COMPILATION_CACHE_DIR names another), for
    every program, however quick to compile (unless JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS says otherwise).

    Why every program: building a model compiles each weight initializer's shape as its own small program
    (42 at electra_small), each under JAX's default 1 s threshold, which together took 6.3 of the 7.8 s of a
    build on the CPU; read back from the cache, the next process of the run (a later piece, a fine-tuning job)
    builds it in 1.6 s (bench.jax_startup). The same programs, so the same results.
    """
    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(folder))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


def lowered_structure(lowered_text):
    """Counts in a lowered (StableHLO) program's text: matmuls, sorts / top_k, reductions; what a setting
    changes in the program, checked without running it."""
    return {"dot_general": len(re.findall(r"stablehlo\.dot_general", lowered_text)),
            "sort_or_top_k": len(re.findall(r"stablehlo\.sort|top_k|TopK", lowered_text)),
            "reduce": len(re.findall(r"stablehlo\.reduce[ (]", lowered_text))}
