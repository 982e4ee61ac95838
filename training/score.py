"""Moved to inference.score (using a trained model is its own package, beside training/).

`python -m training.score` and imports from here keep working for commands and scripts written before
the move (bench/, studies/); new code and docs use inference.score.
"""
import sys

from inference.score import *  # noqa: F401,F403
from inference.score import main

if __name__ == "__main__":
    main()
    sys.exit(0)
