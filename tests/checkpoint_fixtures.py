"""What the checkpoint tests share: a micro model folder with moved weights and its weights by TF1 name,
the one-line exit-2 check of a command line, and the SST-2 batch and tolerances of the parity tests.
(The 60-token vocabulary of the micro folders is conftest.py's `tokenizer` fixture.)"""
import pathlib

import numpy as np
import pytest

from tests.model_fixtures import tiny_config

TOLERANCE = 1e-4
NUM_SENTENCES = 6
SEQ_LENGTH = 48


def model_folder(root, tokenizer, seed=0, **overrides):
    from pretrain.loaded_folder import load_model_folder
    from storage.model_folder import write_model_folder
    from pretrain.builder import build_pretrainer

    config = tiny_config(model_name="original", data_dir=str(root), **overrides)
    pretrainer = build_pretrainer(config)
    rng = np.random.default_rng(seed)
    for variable in pretrainer.weights:
        value = variable.numpy()
        variable.assign((value + 0.1 * rng.standard_normal(value.shape)).astype(np.float32))
    folder = write_model_folder(root / "models" / "original", config, pretrainer, tokenizer.vocab_file, step=5)
    return load_model_folder(folder)


def weights(pretrainer):
    from model.names import tf1_name_map

    return {name: variable.numpy() for name, variable in tf1_name_map(pretrainer).items()}


def assert_one_line_exit_2(main, args, capsys, *expected):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "\n" not in error, error
    for text in expected:
        assert text in error, error
    return error


def sst2_batch(shared_data, tokenizer):
    """Pairs of consecutive SST-2 dev sentences as [CLS] a [SEP] b [SEP] (segment 1 used), padded."""
    lines = (shared_data / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    sentences = [line.split("\t")[0] for line in lines[:2 * NUM_SENTENCES]]
    ids = tokenizer.encode_batch(sentences)
    special = tokenizer.special_ids
    batch = {key: np.zeros((NUM_SENTENCES, SEQ_LENGTH), np.int32)
             for key in ("input_ids", "input_mask", "segment_ids")}
    for row in range(NUM_SENTENCES):
        a, b = list(ids[2 * row][:20]), list(ids[2 * row + 1][:20 - row])  # rows of different lengths
        tokens = [special.cls] + a + [special.sep] + b + [special.sep]
        batch["input_ids"][row, :len(tokens)] = tokens
        batch["input_mask"][row, :len(tokens)] = 1
        batch["segment_ids"][row, len(a) + 2:len(tokens)] = 1
    return sentences, batch


def randomise(pretrainer, seed):
    """Moves every weight off its initial value (biases 0 and LayerNorm gammas 1 would hide a mix-up)."""
    rng = np.random.default_rng(seed)
    for variable in pretrainer.weights:
        value = variable.numpy()
        variable.assign((value + 0.05 * rng.standard_normal(value.shape)).astype(np.float32))


def max_diff(ours, theirs, mask):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    selected = mask.astype(bool)
    return float(np.max(np.abs(ours[selected] - theirs[selected])))


def micro_model_folder(data_dir, vocab_file, step, name="tiny", num_layers=2, seed=0):
    """<data_dir>/models/<name>/: a micro pretrained model (`num_layers` layers, the given vocabulary: BERT's in
    the real-data tier) written as run_pretraining.py writes one (storage.model_folder), at checkpoint `step`.
    One layer traces and compiles in about half the time, for tests whose claims hold for any depth. Its weights
    are drawn from `seed`, not from whatever state the tests before it left Python's random in."""
    import keras

    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from storage.model_folder import write_model_folder
    from tests.helpers import MICRO_MODEL

    overrides = {**MICRO_MODEL, "num_layers": num_layers}
    config = PretrainingConfig.create({"model_size": "electra_tiny", "model_hparam_overrides": overrides,
                                       "model_name": name})
    folder = pathlib.Path(data_dir) / "models" / name
    keras.utils.set_random_seed(seed)
    return write_model_folder(folder, config, build_pretrainer(config), vocab_file, step=step)
