"""Model sizes and pretraining hyperparameters: the original's values, overrides, derived values, errors."""
import json

import pytest

from configs.model_config import ModelConfig, available_model_sizes, read_model_size
from configs.pretraining_config import PretrainingConfig
from configs import loading
from common.errors import InputError

# docs/reproduction.md#model-sizes: layers, hidden, heads, FFN, E, generator fraction, mask, lr, batch, seq, steps
PUBLISHED = {
    "electra_small": (12, 256, 4, 1024, 128, 0.25, 0.15, 5e-4, 128, 128, 1_000_000),
    "electra_small_plus": (12, 256, 4, 1024, 128, 1.0, 0.15, 5e-4, 128, 128, 4_000_000),
    "electra_base": (12, 768, 12, 3072, 768, 0.33333, 0.15, 2e-4, 256, 512, 766_000),
    "electra_large": (24, 1024, 16, 4096, 1024, 0.25, 0.25, 2e-4, 2048, 512, 400_000),
}


def test_every_size_is_available():
    assert set(available_model_sizes()) == set(PUBLISHED) | {"electra_tiny"}


@pytest.mark.parametrize("size", sorted(PUBLISHED))
def test_sizes_match_the_published_hyperparameters(size):
    config = PretrainingConfig.create({"model_size": size})
    model = config.model_config()
    got = (model.num_layers, model.hidden_size, model.num_heads, model.intermediate_size,
           model.embedding_size, config.generator_hidden_size, config.mask_prob, config.learning_rate,
           config.train_batch_size, config.max_seq_length, config.num_train_steps)
    assert got == PUBLISHED[size]
    assert config.num_warmup_steps == 10_000
    assert (config.gen_weight, config.disc_weight, config.temperature) == (1.0, 50.0, 1.0)
    assert (config.weight_decay_rate, config.lr_decay_power) == (0.01, 1.0)
    assert config.model_name == size


@pytest.mark.parametrize("size,n", [("electra_small", 19), ("electra_base", 79), ("electra_large", 130)])
def test_max_predictions_per_seq(size, n):
    assert PretrainingConfig.create({"model_size": size}).max_predictions_per_seq == n


@pytest.mark.parametrize("size,hidden,heads,ffn", [
    ("electra_small", 64, 1, 256), ("electra_small_plus", 256, 4, 1024), ("electra_base", 256, 4, 1024),
    ("electra_large", 256, 4, 1024)])
def test_generator_is_derived_like_the_original(size, hidden, heads, ffn):
    generator = PretrainingConfig.create({"model_size": size}).generator_model_config()
    assert (generator.hidden_size, generator.num_heads, generator.intermediate_size) == (hidden, heads, ffn)
    assert generator.embedding_size == PretrainingConfig.create({"model_size": size}).model_config().embedding_size


def test_derived_values_follow_overrides():
    config = PretrainingConfig.create({"model_size": "electra_small", "mask_prob": 0.25,
                                       "max_seq_length": 512, "generator_hidden_size": 0.5,
                                       "generator_layers": 0.5})
    assert config.max_predictions_per_seq == 130
    generator = config.generator_model_config()
    assert (generator.hidden_size, generator.num_layers, generator.num_heads) == (128, 6, 2)


def test_untied_generator_embeddings_use_the_generator_width():
    config = PretrainingConfig.create({"untied_generator_embeddings": True})
    assert config.generator_model_config().embedding_size == 64


def test_mlm_only_and_tied_generator_use_the_full_model():
    for hparams in ({"electra_objective": False}, {"untied_generator": False}):
        config = PretrainingConfig.create(hparams)
        assert config.generator_model_config() == config.model_config()


def test_model_overrides_and_vocab():
    config = PretrainingConfig.create({"vocab_size": 1000, "embedding_size": 64,
                                       "model_hparam_overrides": {"num_layers": 3, "dropout": 0.0}})
    model = config.model_config()
    assert (model.vocab_size, model.embedding_size, model.num_layers, model.dropout) == (1000, 64, 3, 0.0)


def test_hparams_from_a_json_file(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"learning_rate": 1e-3, "model_size": "electra_base"}))
    config = PretrainingConfig.create(str(path))
    assert config.learning_rate == 1e-3 and config.max_seq_length == 512


@pytest.mark.parametrize("hparams,fragment", [
    ('{"learnin_rate": 1e-3}', "learnin_rate"),
    ('{"learning_rate": 1e-3', "malformed JSON"),
    ('{"model_size": "electra_huge"}', "electra_huge"),
    ('{"model_hparam_overrides": {"hiden_size": 3}}', "hiden_size"),
    ('{"train_batch_size": "big"}', "train_batch_size"),
    ('{"mixed_precision": "float8"}', "mixed_precision"),
    ("no_such_file.json", "no_such_file.json"),
    ("[1, 2]", "JSON object"),
    ('{"extra_checkpoint_steps": [500, "1000"]}', "extra_checkpoint_steps"),
    ('{"extra_checkpoint_steps": [0]}', "at least 1"),
])
def test_bad_hparams_are_input_errors(hparams, fragment):
    with pytest.raises(InputError, match=fragment.replace("[", r"\[")):
        PretrainingConfig.create(hparams)


def test_save_and_load_round_trip(tmp_path):
    config = PretrainingConfig.create({"model_size": "electra_base", "disallow_correct": True})
    config.save(tmp_path / "config.json")
    assert PretrainingConfig.load(tmp_path / "config.json") == config
    values = json.loads((tmp_path / "config.json").read_text())
    values["surprise"] = 1
    (tmp_path / "bad.json").write_text(json.dumps(values))
    with pytest.raises(InputError, match="surprise"):
        PretrainingConfig.load(tmp_path / "bad.json")


def test_debug_mode_shrinks_the_run():
    config = PretrainingConfig.create({"debug": True})
    assert (config.train_batch_size, config.num_train_steps) == (8, 20)


def test_model_config_from_dict_rejects_unknown_and_checks_heads():
    with pytest.raises(InputError, match="colour"):
        ModelConfig.from_dict({"colour": 1})
    with pytest.raises(InputError, match="divisible"):
        ModelConfig.from_dict({"hidden_size": 100, "num_heads": 3})
    assert read_model_size("electra_tiny")["model"]["num_layers"] == 2


def test_parse_hparams_empty_and_dict():
    assert loading.parse_hparams("") == {} and loading.parse_hparams(None) == {}
    assert loading.parse_hparams({"a": 1}) == {"a": 1}
