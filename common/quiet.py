"""Hides TensorFlow's start-up lines, so that the first line a user reads is ours.

Importing TensorFlow prints lines before its own TF_CPP_MIN_LOG_LEVEL takes effect (absl's "All log
messages before absl::InitializeLog() is called…" notice, the oneDNN notice, the CUDA probe), and a
machine without a GPU later logs a cuInit error. Every command calls quiet_tensorflow() before TensorFlow
is imported: it sets TF_CPP_MIN_LOG_LEVEL=3 unless the user has set a TensorFlow logging variable (theirs
wins), and while `import tensorflow` runs it passes stderr through a filter that drops TensorFlow's log
lines below that level, as TensorFlow itself does after start-up. Every other line passes: Python's
warnings and tracebacks, our own output, a fatal (F) line. The filter is a small child process (this
file run as a script, standard library only), so a crash inside the import still shows its last lines.

The same hook makes the import leaner: while `import tensorflow` runs, the optional packages that TensorFlow and
Keras import only because they are installed (OPTIONAL_DURING_IMPORT: scikit-learn for Keras's scikit-learn
wrappers, matplotlib for Keras's image-gallery plot, JAX for TFLite's conversion of JAX functions) are reported
missing, and both fall back as they do without them. No command here uses those paths, and they cost 2-3 s of a
5-9 s import on 2 cores (every TensorFlow process: a command, a test's child process). Imported later, by us or
the user, they import as usual; JAX is left alone when Keras's backend is JAX or JAX is already imported.

Under KERAS_BACKEND=jax no TensorFlow is imported, and Keras itself imports scikit-learn and matplotlib:
lean_keras_import() (which quiet_tensorflow() calls) leaves them out of `import keras` the same way: about 2 of the
5 CPU s of a JAX process's `import jax, keras` (docs/benchmarks.md), in every JAX command, device call and test.
"""
import importlib.abc
import importlib.util
import os
import re
import subprocess
import sys

LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
LOG_VARIABLES = (LOG_LEVEL, "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE")
DEFAULT_LEVEL = 3  # hides INFO, WARNING and ERROR lines (the cuInit error is an ERROR line)
SEVERITIES = "IWEF"  # absl's and TensorFlow's order: level N drops the severities before index N
# absl's and TensorFlow's C++ log line: "I0000 00:00:1795669493.175722    4781 port.cc:153] message"
_LOG_LINE = re.compile(rb"^([IWEF])\d{4} [\d:.]+ +\d+ [^\]\s]+\] ")
_ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_WAIT_FOR_FILTER_S = 5.0
OPTIONAL_DURING_IMPORT = ("sklearn", "matplotlib", "jax", "jaxlib")  # top-level names (module docstring)
OPTIONAL_DURING_KERAS_IMPORT = ("sklearn", "matplotlib")  # Keras's own: its scikit-learn wrappers, its plots


def quiet_tensorflow() -> None:
    """Call before TensorFlow is imported (a command's first lines). Does nothing if TensorFlow is already
    imported; filters nothing if the user's logging variables ask for every line (the import is still lean)."""
    if not any(name in os.environ for name in LOG_VARIABLES):
        os.environ[LOG_LEVEL] = str(DEFAULT_LEVEL)
    lean_keras_import()
    if "tensorflow" in sys.modules or any(isinstance(f, _QuietImport) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _QuietImport(min_log_level()))


def lean_keras_import() -> None:
    """Call before Keras is imported: its first import goes without scikit-learn and matplotlib (module
    docstring). Does nothing if Keras is already imported."""
    if "keras" in sys.modules or any(isinstance(f, _LeanKerasImport) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _LeanKerasImport())


def skipped_during_import():
    """The top-level names reported missing while TensorFlow imports (module docstring)."""
    keep_jax = os.environ.get("KERAS_BACKEND") == "jax" or "jax" in sys.modules
    return {name for name in OPTIONAL_DURING_IMPORT
            if name not in sys.modules and not (keep_jax and name.startswith("jax"))}


class _SkipOptional(importlib.abc.MetaPathFinder):
    """Reports `names` missing, as if not installed, for as long as it is on sys.meta_path."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (left out while TensorFlow imports)", name=name)
        return None


def min_log_level() -> int:
    """TF_CPP_MIN_LOG_LEVEL as TensorFlow reads it (unset or not a number: 0, show everything)."""
    try:
        return max(0, int(os.environ.get(LOG_LEVEL, "0")))
    except ValueError:
        return 0


def filter_log_lines(lines, level: int):
    """Yields the lines (bytes) to show: TensorFlow's log lines of a severity below `level` are dropped,
    and absl's notice about early messages is shown only before a log line that is shown."""
    held = []
    for line in lines:
        match = _LOG_LINE.match(line)
        if match:
            if SEVERITIES.index(match.group(1).decode()) >= level:
                yield from held
                held = []
                yield line
        elif line.rstrip(b"\r\n") == _ABSL_NOTICE:
            held = [line]
        else:
            yield line


class _ImportHook(importlib.abc.MetaPathFinder):
    """Finds the module `name` (the real finders find it; this wraps its loader) so that its import runs inside
    run_import. A lookup without an import (find_spec to test whether it is installed) changes nothing; the
    import itself removes this finder."""

    name = None

    def __init__(self):
        self._finding = False

    def find_spec(self, name, path=None, target=None):
        if name != self.name or self._finding:
            return None
        self._finding = True  # the lookup below asks every finder again, this one included
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookedLoader(spec.loader, self)
        return spec

    def run_import(self, load) -> None:
        load()


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader, finder: _ImportHook):
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # the module sees its own loader
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        self.finder.run_import(lambda: self.loader.exec_module(module))


def _without(names, load) -> None:
    """Runs load() with `names` reported missing."""
    skip = _SkipOptional(names)
    sys.meta_path.insert(0, skip)
    try:
        load()
    finally:
        sys.meta_path.remove(skip)


class _QuietImport(_ImportHook):
    """`import tensorflow` with stderr filtered at `level` and without the optional packages."""

    name = "tensorflow"

    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def run_import(self, load) -> None:
        filter_process = _start_filter(self.level) if self.level > 0 else None
        try:
            _without(skipped_during_import(), load)
        finally:
            if filter_process is not None:
                _stop_filter(*filter_process)


class _LeanKerasImport(_ImportHook):
    """`import keras` without the optional packages of OPTIONAL_DURING_KERAS_IMPORT."""

    name = "keras"

    def run_import(self, load) -> None:
        _without({name for name in OPTIONAL_DURING_KERAS_IMPORT if name not in sys.modules}, load)


def _start_filter(level: int):
    """Points fd 2 at a filter process that writes to the real stderr; None if that cannot be done."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        return None
    try:
        process = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), str(level)],
                                   stdin=subprocess.PIPE, stdout=saved, stderr=saved)
        os.dup2(process.stdin.fileno(), 2)
    except (OSError, ValueError, subprocess.SubprocessError):
        os.close(saved)
        return None
    return process, saved


def _stop_filter(process, saved: int) -> None:
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    os.dup2(saved, 2)
    os.close(saved)
    process.stdin.close()  # the filter sees the end of its input, writes what is left and exits
    try:
        process.wait(_WAIT_FOR_FILTER_S)
    except subprocess.TimeoutExpired:  # something started during the import still holds the pipe
        pass


def _run_filter(level: int) -> None:
    for line in filter_log_lines(sys.stdin.buffer, level):
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


if __name__ == "__main__":  # the filter process: stdin is what the import wrote to stderr
    _run_filter(int(sys.argv[1]))
