"""tf1_name_map gives exactly the original's TF1 checkpoint names, with TF1 shapes
(docs/reproduction.md#checkpoint-names)."""
import pytest

from model.names import encoder_name_map, tf1_name_map
from tests.model_fixtures import VOCAB_SIZE, tiny_config, tiny_pretrainer

LAYER_SUFFIXES = [
    f"attention/self/{p}/{w}" for p in ("query", "key", "value") for w in ("kernel", "bias")
] + ["attention/output/dense/kernel", "attention/output/dense/bias", "attention/output/LayerNorm/gamma",
     "attention/output/LayerNorm/beta", "intermediate/dense/kernel", "intermediate/dense/bias",
     "output/dense/kernel", "output/dense/bias", "output/LayerNorm/gamma", "output/LayerNorm/beta"]
EMBEDDINGS = ["word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm/gamma",
              "LayerNorm/beta"]


def tower(scope, layers, project):
    names = {f"{scope}/encoder/layer_{i}/{suffix}" for i in range(layers) for suffix in LAYER_SUFFIXES}
    if project:
        names |= {f"{scope}/embeddings_project/kernel", f"{scope}/embeddings_project/bias"}
    return names


def expected_electra(generator_project=False, generator_embeddings=False):
    """Tiny sizes: E = 16, H = 32, Hg = 16, so only the discriminator has embeddings_project."""
    names = {f"electra/embeddings/{e}" for e in EMBEDDINGS}
    names |= tower("electra", 2, project=True) | tower("generator", 2, project=generator_project)
    if generator_embeddings:
        names |= {f"generator/embeddings/{e}" for e in EMBEDDINGS}
    names |= {"generator_predictions/dense/kernel", "generator_predictions/dense/bias",
              "generator_predictions/LayerNorm/gamma", "generator_predictions/LayerNorm/beta",
              "generator_predictions/output_bias", "discriminator_predictions/dense/kernel",
              "discriminator_predictions/dense/bias", "discriminator_predictions/dense_1/kernel",
              "discriminator_predictions/dense_1/bias"}
    return names


def test_electra_names_shapes_and_keras_paths():
    model = tiny_pretrainer()
    names = tf1_name_map(model)
    assert set(names) == expected_electra()
    assert len({id(v) for v in names.values()}) == len(model.weights) == len(names)
    E, H, Hg, V = 16, 32, 16, VOCAB_SIZE
    shapes = {
        "electra/embeddings/word_embeddings": (V, E), "electra/embeddings/position_embeddings": (32, E),
        "electra/embeddings/token_type_embeddings": (2, E), "electra/embeddings/LayerNorm/gamma": (E,),
        "electra/embeddings_project/kernel": (E, H), "generator/encoder/layer_0/attention/self/key/kernel": (Hg, Hg),
        "electra/encoder/layer_1/intermediate/dense/kernel": (H, 64),
        "generator/encoder/layer_0/output/dense/kernel": (64, Hg),
        "discriminator_predictions/dense/kernel": (H, H), "discriminator_predictions/dense_1/kernel": (H, 1),
        "generator_predictions/dense/kernel": (Hg, E), "generator_predictions/output_bias": (V,),
    }
    for name, shape in shapes.items():
        assert tuple(names[name].shape) == shape, name
    # the Keras variable paths are the TF1 names too, so checkpoints and debugging read the same
    assert all(variable.path == name for name, variable in names.items())


def test_untied_generator_embeddings_names():
    names = tf1_name_map(tiny_pretrainer(untied_generator_embeddings=True))
    assert set(names) == expected_electra(generator_project=False, generator_embeddings=True)


def test_mlm_only_names_are_electra_plus_generator_predictions():
    names = tf1_name_map(tiny_pretrainer(electra_objective=False))
    expected = {f"electra/embeddings/{e}" for e in EMBEDDINGS} | tower("electra", 2, project=True)
    expected |= {n for n in expected_electra() if n.startswith("generator_predictions/")}
    assert set(names) == expected


CLOZE_HEAD = {"cloze_predictions/dense/kernel", "cloze_predictions/dense/bias", "cloze_predictions/LayerNorm/gamma",
              "cloze_predictions/LayerNorm/beta", "cloze_predictions/output_bias"}


@pytest.mark.parametrize("untied_embeddings", [False, True])
def test_electric_names_are_the_two_towers_and_cloze_predictions(untied_embeddings):
    """The original's scopes: generator_ltr/, generator_rtl/ (the shared electra/embeddings, or each tower's
    own), cloze_predictions/ on the two towers' concatenated outputs [2·Hg → E]; no generator/ and no
    generator_predictions/."""
    model = tiny_pretrainer(electric_objective=True, untied_generator_embeddings=untied_embeddings)
    names = tf1_name_map(model)
    expected = {n for n in expected_electra() if n.split("/")[0] in ("electra", "discriminator_predictions")}
    expected |= tower("generator_ltr", 2, project=False) | tower("generator_rtl", 2, project=False) | CLOZE_HEAD
    if untied_embeddings:
        expected |= {f"generator_{d}/embeddings/{e}" for d in ("ltr", "rtl") for e in EMBEDDINGS}
    assert set(names) == expected
    assert len({id(v) for v in names.values()}) == len(model.weights) == len(names)
    assert all(variable.path == name for name, variable in names.items())
    assert tuple(names["cloze_predictions/dense/kernel"].shape) == (2 * 16, 16)
    assert tuple(names["cloze_predictions/output_bias"].shape) == (VOCAB_SIZE,)


def test_gdes_adds_only_the_residual_table():
    names = tf1_name_map(tiny_pretrainer(gdes_embeddings=True))
    assert set(names) == expected_electra() | {"electra/embeddings/word_embeddings_delta"}


def test_standalone_encoder_names():
    model = tiny_pretrainer()
    names = encoder_name_map(model.discriminator)
    assert set(names) == {f"electra/embeddings/{e}" for e in EMBEDDINGS} | tower("electra", 2, True)


@pytest.mark.parametrize("size", ["electra_small", "electra_base"])
def test_real_sizes_name_counts(size):
    config = tiny_config(model_size=size, model_hparam_overrides={
        "hidden_size": {"electra_small": 256, "electra_base": 768}[size],
        "num_heads": {"electra_small": 4, "electra_base": 12}[size],
        "intermediate_size": {"electra_small": 1024, "electra_base": 3072}[size],
        "embedding_size": {"electra_small": 128, "electra_base": 768}[size],
        "num_layers": 1, "max_position_embeddings": 512})
    from pretrain.builder import build_pretrainer
    names = tf1_name_map(build_pretrainer(config))
    has_project = size == "electra_small"
    assert ("electra/embeddings_project/kernel" in names) == has_project
    assert "generator/embeddings_project/kernel" in names  # generator width differs from E in both
