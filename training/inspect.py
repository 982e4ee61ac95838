"""Moved to inference.inspect (using a trained model is its own package, beside training/).

`python -m training.inspect` and imports from here keep working for commands and scripts written before
the move (bench/, studies/); new code and docs use inference.inspect.
"""
import sys

from inference.inspect import *  # noqa: F401,F403
from inference.inspect import main

if __name__ == "__main__":
    main()
    sys.exit(0)
