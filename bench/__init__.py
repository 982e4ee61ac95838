"""Benchmarks and studies: scripts that measure and print, run from the repository root as
`python -m bench.<name>` (which puts the repository's packages on the path)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before any script here imports TensorFlow
