"""Where things live by default, so the three commands find each other's output without flags.

The data directory is $ELECTRA_DATA_DIR when set, else ./electra_data under the current directory.
"""
import os
import pathlib

DATA_DIR_ENV = "ELECTRA_DATA_DIR"
DEFAULT_DATA_DIR = "electra_data"


def default_data_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def pretrain_tfrecords_dir(data_dir) -> pathlib.Path:
    return pathlib.Path(data_dir) / "pretrain_tfrecords"


def default_corpus_dir(data_dir) -> pathlib.Path:
    return pathlib.Path(data_dir) / "default_corpus"


def models_dir(data_dir) -> pathlib.Path:
    return pathlib.Path(data_dir) / "models"
