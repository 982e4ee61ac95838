"""run_pretraining.py's own arguments, one definition for both backends (training_jax.from_dataset adds its own)."""
import pathlib

from data import paths


def add_pretraining_arguments(parser):
    parser.add_argument("--model-name", required=True,
                        help="folder under <data-dir>/models/; a model size name (electra_tiny, electra_small, "
                             "electra_small_plus, electra_base, electra_large) also picks that size")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    parser.add_argument("--hparams", default="",
                        help="JSON object (inline or a .json file) of PretrainingConfig overrides")
    parser.add_argument("--init-checkpoint", default=None,
                        help="start from these weights (a model folder or checkpoint prefix) with a fresh "
                             "optimizer; ignored when the model folder already has checkpoints (resume)")
    parser.add_argument("--tpu", default=None, help="TPU name or address (\"local\" for a TPU VM)")
