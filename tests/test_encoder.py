"""BertEncoder: shapes, padding mask, fused vs explicit attention, gelu, LayerNorm, initializers."""
import math

import keras
import numpy as np
import pytest

from model.attention import explicit_attention, padding_mask
from model.embeddings import BertEmbeddings
from model.encoder import BertEncoder
from tests.model_fixtures import VOCAB_SIZE, random_tables_alike, tiny_batch


def make_encoder(**overrides):
    args = dict(vocab_size=VOCAB_SIZE, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                embedding_size=16, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0)
    args.update(overrides)
    return BertEncoder(**args)


@pytest.fixture(scope="module")
def encoder():
    return make_encoder()


def test_shapes_and_all_layer_outputs(encoder):
    batch = tiny_batch()
    sequence = encoder(batch)
    assert tuple(sequence.shape) == (4, 16, 32) and sequence.dtype == "float32"
    layers = encoder(batch, return_all_layers=True)
    assert len(layers) == 2
    np.testing.assert_allclose(np.asarray(layers[-1]), np.asarray(sequence), rtol=1e-6)


def test_padding_is_invisible_to_real_tokens(encoder):
    batch = tiny_batch(lengths=[16, 10, 7, 5])
    other = {key: value.copy() for key, value in batch.items()}
    other["input_ids"][batch["input_mask"] == 0] = 17  # different garbage in the padding
    other["segment_ids"][batch["input_mask"] == 0] = 1
    a, b = np.asarray(encoder(batch)), np.asarray(encoder(other))
    real = batch["input_mask"] > 0
    np.testing.assert_allclose(a[real], b[real], rtol=1e-5, atol=1e-5)
    assert not np.allclose(a[~real], b[~real])


def test_fused_and_explicit_attention_agree(encoder):
    batch = tiny_batch(lengths=[16, 10, 7, 5])
    fused = np.asarray(encoder(batch, use_fused_attention=True))
    explicit = np.asarray(encoder(batch, use_fused_attention=False))
    np.testing.assert_allclose(fused, explicit, rtol=1e-5, atol=1e-5)


def test_explicit_attention_matches_numpy():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 5, 3, 4)).astype("float32") for _ in range(3))
    input_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
    got = np.asarray(explicit_attention(q, k, v, padding_mask(input_mask), 0.5))
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) * 0.5 + (1 - input_mask[:, None, None, :]) * -10000.0
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, np.einsum("bhqk,bkhd->bqhd", probs, v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", ["ltr", "rtl"])
def test_causal_attention_is_the_originals_additive_mask_even_on_rows_without_a_key(causal):
    """The original adds -10000 to every masked score (modeling.py, attention_layer): a padding query of an
    rtl tower, with no key left, then gets the softmax of its raw scores over every key, not a uniform one.
    Both paths against that formula in float64, on rows with and without keys."""
    from model.attention import SelfAttention

    layer = SelfAttention(8, 2, attention_dropout=0.0, initializer_range=0.5, causal=causal)
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(2, 6, 8)).astype("float32")  # scores of order 1: far from uniform
    input_mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], "int32")
    fused = np.asarray(layer(hidden, input_mask, use_fused=True))
    explicit = np.asarray(layer(hidden, input_mask, use_fused=False))

    def project(dense):
        return (hidden @ np.asarray(dense.kernel) + np.asarray(dense.bias)).astype("float64").reshape(2, 6, 2, 4)

    q, k, v = project(layer.query), project(layer.key), project(layer.value)
    positions = np.arange(6)
    allowed = positions[None, :] <= positions[:, None] if causal == "ltr" else positions[None, :] >= positions[:, None]
    mask = input_mask[:, None, None, :] * allowed[None, None]  # [batch, 1, query, key]
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / 2.0 + (1 - mask) * -10000.0
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    expected = np.einsum("bhqk,bkhd->bqhd", probs, v).reshape(2, 6, 8)
    np.testing.assert_allclose(fused, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(explicit, expected, rtol=1e-4, atol=1e-5)
    uniform = v[1].mean(0).reshape(8)  # what a uniform softmax over all keys would give
    keyless = [3, 4, 5] if causal == "rtl" else []
    for t in keyless:
        assert np.abs(expected[1, t] - uniform).max() > 0.1


def test_attention_dropout_is_on_only_in_training():
    encoder = make_encoder(dropout=0.0, attention_dropout=0.5)
    batch = tiny_batch()
    inference = [np.asarray(encoder(batch, training=False)) for _ in range(2)]
    training = [np.asarray(encoder(batch, training=True)) for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    assert not np.allclose(training[0], training[1])


def test_exact_gelu_and_bert_layer_norm(encoder):
    layer = encoder.transformer_layers[0]
    x = np.array([[-3.0, -1.0, -0.5, 0.0, 0.7, 2.0]], "float32")
    gelu = np.asarray(layer.intermediate_dense.activation(x))
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x[0]])
    np.testing.assert_allclose(gelu[0], exact, rtol=1e-5, atol=1e-6)
    for norm in (layer.attention_output_layer_norm, layer.output_layer_norm, encoder.embeddings.layer_norm):
        assert norm.epsilon == 1e-12 and norm.dtype_policy.name == "float32"


def test_initializers_follow_the_original(encoder):
    truncated = [encoder.embeddings.word_embeddings, encoder.transformer_layers[0].attention_self.query.kernel,
                 encoder.transformer_layers[1].intermediate_dense.kernel]
    for variable in truncated:
        values = np.asarray(variable)
        assert np.abs(values).max() <= 0.04 + 1e-6 and 0.01 < values.std() < 0.02
    # embeddings_project was left to TF1's default Glorot-uniform: limit sqrt(6 / (16 + 32)) ≈ 0.35
    project = np.asarray(encoder.embeddings_project.kernel)
    assert np.abs(project).max() > 0.1 and np.abs(project).max() <= math.sqrt(6 / 48)
    assert np.abs(np.asarray(encoder.transformer_layers[0].output_dense.bias)).max() == 0.0


def test_every_random_variable_is_its_own_draw(encoder):
    """TF1 drew each variable afresh; a Keras initializer instance shared by two variables repeats one
    draw (it fixes its seed when created), which once made token i's embedding equal position i's and
    the feed-forward's two kernels the same numbers. No two random tables may start alike."""
    encoder(tiny_batch())  # built
    count, alike = random_tables_alike(encoder.weights)
    assert count == 4 + 6 * 2 and alike == []  # word, position, token type, projection; six kernels a layer


def test_projection_only_when_embedding_size_differs():
    assert make_encoder(embedding_size=32).embeddings_project is None
    assert make_encoder(embedding_size=None).embedding_size == 32


def test_shared_embeddings_are_the_same_variables():
    shared = BertEmbeddings(VOCAB_SIZE, 16, max_position_embeddings=32, dropout=0.0)
    discriminator = make_encoder(embeddings=shared, name="electra")
    generator = make_encoder(embeddings=shared, hidden_size=16, num_heads=1, name="generator")
    batch = tiny_batch()
    discriminator(batch), generator(batch)
    assert generator.embedding_table is discriminator.embedding_table
    assert generator.embeddings.layer_norm.gamma is discriminator.embeddings.layer_norm.gamma
    ids = {id(v) for v in discriminator.weights} & {id(v) for v in generator.weights}
    assert len(ids) == 5  # word, position, token type, LayerNorm gamma and beta


def test_get_config_rebuilds_the_same_architecture(encoder):
    clone = BertEncoder(**encoder.get_config())
    clone(tiny_batch())
    assert [tuple(v.shape) for v in clone.weights] == [tuple(v.shape) for v in encoder.weights]


def test_works_under_mixed_bfloat16():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = make_encoder()
        output = np.asarray(mixed(tiny_batch()), dtype="float32")
    finally:
        keras.config.set_dtype_policy(previous)
    assert np.isfinite(output).all()
    reference = make_encoder()
    reference(tiny_batch())
    reference.set_weights(mixed.get_weights())
    np.testing.assert_allclose(output, np.asarray(reference(tiny_batch())), atol=0.1)
