"""The one error type for bad user input.

Run scripts catch it, print its single line and exit with code 2, so a user sees which file is wrong
and how to fix it instead of a traceback.
"""
import functools
import os
import re
import sys

EXIT_BAD_INPUT = 2


class InputError(Exception):
    """Bad input from the user: the message is one line naming the file and the fix."""


def exit_on_input_error(main):
    """Wraps a CLI entry point: InputError becomes one line on stderr and exit code 2."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except InputError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper


def environment_choice(name, choices, hint, environ=None):
    """The lower-cased value of the environment variable `name`, `choices[0]` when unset or empty; InputError (the
    scripts' one line and exit code 2) naming the choices and `hint` for any other value."""
    environ = os.environ if environ is None else environ
    choice = environ.get(name, choices[0]).strip().lower() or choices[0]
    if choice not in choices:
        raise InputError(f"{name}={environ[name]!r} in the environment: use one of {', '.join(choices)} ({hint})")
    return choice


def short_reason(error: BaseException) -> str:
    """An exception's first line without TensorFlow's op decorations ({{function_node …}}, [Op:…]), to
    quote as the reason inside an InputError's one line."""
    lines = str(error).strip().splitlines()
    text = re.sub(r"\{\{[^}]*\}\}|\s*\[Op:.*$", "", lines[0] if lines else "").strip()
    return text or type(error).__name__
