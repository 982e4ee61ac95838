"""What a task reader does with a row it cannot parse.

By default such a row stops the run (InputError: the file, the line and the fix, exit code 2), so a
damaged download is not trained on silently. With `skip_bad_rows` (FinetuningConfig, or
run_finetuning.py --skip-bad-rows) the row is skipped, as the original did (it logged each row it could
not turn into an example and went on), and each file's skipped rows are reported once, in one line:

    skipped 3 malformed rows of .../RTE/train.tsv: lines 12, 40, 77

Rows are what a file holds one of per record: a GLUE TSV line, an MRQA JSON line (one context and its
questions), a CoNLL sentence (skipped whole when one of its token lines is malformed; the line reported
is that token line). File-level faults (a missing or empty file, a missing header, bytes that are not
UTF-8, no example left) stop the run either way. SQuAD's files are one JSON document each, not rows:
a malformed entry there always stops.
"""
import pathlib
from typing import Dict, List, Tuple

from common.errors import InputError

MAX_LINES_SHOWN = 20


class BadRows:
    """Passed to Task.read as `bad_rows`; None there means BadRows(skip=False)."""

    def __init__(self, skip: bool = False):
        self.skip = skip
        self.skipped: Dict[str, Tuple[str, List[int]]] = {}  # path → (unit, line numbers)
        self._reported = set()

    def reject(self, path, line: int, message: str, unit: str = "rows"):
        """A row that cannot be parsed: raises InputError(message) unless skipping, else records it."""
        if not self.skip:
            raise InputError(message)
        self.skipped.setdefault(str(path), (unit, []))[1].append(int(line))

    def count(self, path) -> int:
        return len(self.skipped.get(str(path), ("", []))[1])

    def report(self, say=print):
        """One line per file with skipped rows not reported yet."""
        for path, (unit, lines) in self.skipped.items():
            if path in self._reported:
                continue
            self._reported.add(path)
            shown = ", ".join(str(line) for line in lines[:MAX_LINES_SHOWN])
            more = f" and {len(lines) - MAX_LINES_SHOWN} more" if len(lines) > MAX_LINES_SHOWN else ""
            plural = len(lines) > 1
            say(f"skipped {len(lines)} malformed {unit if plural else unit.rstrip('s')} of {pathlib.Path(path)}: "
                f"line{'s' if plural else ''} {shown}{more}")


def policy(bad_rows) -> BadRows:
    """The reader's policy: `bad_rows` itself, or stopping at the first bad row when None."""
    return bad_rows if bad_rows is not None else BadRows(skip=False)
