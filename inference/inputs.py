"""The text the commands read: the rows to predict as inference.predict uses them (an input read twice:
checked whole before the model is loaded, then predicted; windows of rows) and the plain lines of a --file
for the inspector and the scorer. Parsing a row is inference/rows.py's job; nothing here imports TensorFlow.
"""
import os
import pathlib
import shutil
import sys
import tempfile

from common.errors import InputError
from inference import rows as rows_lib


class Input:
    """The input as a file that can be read twice: once to check every row, once to predict.

    stdin is copied to a temporary file first; `close()` removes the copy.

    Args:
        path: a CSV, TSV, JSON lines or text file (gzipped or not); None or "-": stdin.
        fmt: one of `inference.rows.FORMATS`; None: by the file's suffix, else guessed from its first line.
        fields: the text column(s) to read, or None for the defaults of `role`.
        role: what a row gives the model (`inference.sources.ModelSource.role`).

    Example:

    ```python
    source_input = Input("new.csv", role="pair")
    try:
        total, malformed = check_rows(source_input, skip_malformed=False)
    finally:
        source_input.close()
    ```
    """

    def __init__(self, path, fmt=None, fields=None, role="single"):
        self._temp = None
        if path is None or str(path) == "-":
            handle, name = tempfile.mkstemp(prefix="electra_predict_stdin_")
            with os.fdopen(handle, "wb") as copy:
                shutil.copyfileobj(sys.stdin.buffer, copy)
            self.path = self._temp = pathlib.Path(name)
            self.where = "stdin"
        else:
            self.path, self.where = pathlib.Path(path), str(path)
            if not self.path.is_file():
                raise InputError(f"{path}: no such file; pass a CSV, TSV, JSON lines or text file (or - for stdin)")
        self.fields, self.role = fields, role
        first = ""
        try:
            with rows_lib.open_text(self.path) as handle:
                first = next((line for line in handle if line.strip()), "")
        except (OSError, EOFError) as error:
            raise InputError(f"{self.where}: unreadable ({error}); pass a readable file") from None
        self.format = fmt or rows_lib.input_format(None if self._temp else self.path, first, fields, role)

    def rows(self):
        """Every `inference.rows.Row` and `inference.rows.Malformed` item of the input, in order."""
        try:
            with rows_lib.open_text(self.path) as handle:
                yield from rows_lib.read_rows(handle, self.format, self.fields, self.role, self.where)
        except (OSError, EOFError) as error:  # a damaged .gz
            raise InputError(f"{self.where}: unreadable ({error}); pass a readable file") from None

    def close(self):
        """Removes stdin's temporary copy, if any."""
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)


def check_rows(source_input, skip_malformed):
    """The number of rows to predict and the malformed ones, read before any model is loaded.

    Returns (count, {line: reason}); InputError at the first malformed row unless skipping, or when no
    row is left.

    Args:
        source_input: an `Input`.
        skip_malformed: count malformed rows instead of stopping at the first.
    """
    count, malformed = 0, {}
    for item in source_input.rows():
        if isinstance(item, rows_lib.Malformed):
            if not skip_malformed:
                raise InputError(f"{source_input.where} line {item.line}: {item.reason}; fix the row or pass "
                                 "--skip-malformed to skip such rows")
            malformed[item.line] = item.reason
        else:
            count += 1
    if not count:
        raise InputError(f"{source_input.where}: no row to predict" + (" (every row is malformed)" if malformed else
                                                                        "; give at least one row of text"))
    return count, malformed


def windows(items, size):
    """Consecutive lists of at most `size` rows (malformed items dropped: `check_rows` counted them).

    Args:
        items: `Input.rows()`.
        size: the most rows in a window.
    """
    window = []
    for item in items:
        if isinstance(item, rows_lib.Row):
            window.append(item)
            if len(window) == size:
                yield window
                window = []
    if window:
        yield window


def read_lines(file):
    """The lines of a `--file`; InputError for a missing or non-UTF-8 file.

    Args:
        file: a `pathlib.Path` of a UTF-8 text file; None or "-": stdin.
    """
    if file is None or str(file) == "-":
        return sys.stdin.read().splitlines()
    if not file.is_file():
        raise InputError(f"--file {file}: no such file; pass a text file with one text per line")
    try:
        return file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise InputError(f"--file {file}: not UTF-8 text ({error.reason} at byte {error.start}); "
                         "save it as UTF-8") from None
