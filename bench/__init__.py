"""Speed benchmarks (step, build, fine-tuning batches and threads, predictions and fine-tuning against Hugging
Face, FLOPs, profiles): scripts that measure and print, run from the repository root as `python -m
bench.<name>` (which puts the repository's packages on the path). Research questions live in studies/, which
may import bench; bench imports nothing of them."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before any script here imports TensorFlow

from training.cpu_features import turn_on_onednn  # noqa: E402

turn_on_onednn(quiet=True)  # measure what run_pretraining.py and run_finetuning.py run; the scripts print it
