"""Research questions, one folder each with a README.md (the question, the commands, the answer with its
date, the figures and the files behind them), run from the repository's root as `python -m studies.<name>`.

Studies call the product's commands and modules and may use bench/ (the FLOP count); nothing in the
product or in bench/ imports them.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before any study imports TensorFlow

from training.cpu_features import turn_on_onednn  # noqa: E402

turn_on_onednn(quiet=True)  # run what run_pretraining.py and run_finetuning.py run on this CPU
