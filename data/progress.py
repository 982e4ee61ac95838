"""Throttled progress lines with rate and ETA, for any long job that knows its total work."""
import sys
import time
from typing import Callable, Optional, TextIO


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"


class ProgressLine:
    """Prints `label: done/total (pct) | rate | extra | ETA` at most every `interval` seconds.

    On a terminal the line is redrawn in place; elsewhere (logs, CI) each update is a new line, less often.
    """

    def __init__(self, label: str, total: float, describe: Callable[[float, float], str],
                 stream: Optional[TextIO] = None, interval: Optional[float] = None):
        self._label, self._total, self._describe = label, max(total, 1e-9), describe
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._interval = interval if interval is not None else (1.0 if self._tty else 10.0)
        self._start = time.monotonic()
        self._last_print = 0.0

    def update(self, done: float, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_print < self._interval:
            return
        self._last_print = now
        elapsed = max(now - self._start, 1e-9)
        fraction = min(done / self._total, 1.0)
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else float("nan")
        eta_text = format_duration(eta) if fraction > 0 else "?"
        parts = [f"{self._label}: {self._describe(done, elapsed)} ({100 * fraction:.0f}%)"]
        if extra:
            parts.append(extra)
        parts.append(f"ETA {eta_text}")
        line = " | ".join(parts)
        if self._tty:
            self._stream.write("\r" + line + "\x1b[K")
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def finish(self, done: float, extra: str = "") -> float:
        """Prints the final line and returns the elapsed seconds."""
        self.update(done, extra, force=True)
        if self._tty:
            self._stream.write("\n")
        return time.monotonic() - self._start
