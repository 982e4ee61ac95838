"""The encoder, default dropout included, learns a task that only context can solve.

Regression: under TensorFlow the embedding lookups handed Keras optimizers tf.IndexedSlices with one
row per occurrence; Adam squared them before summing the duplicates, so the token-type row (looked up
at every position) moved up to √(batch·seq) times too fast and the encoder never left the
"predict the base rate" plateau (AUC 0.5 on the topic task below; ELECTRA's discriminator stalled).
"""
import numpy as np
import tensorflow as tf
import keras

from model.embeddings import BertEmbeddings, embedding_lookup
from model.encoder import BertEncoder

LABEL_ENTROPY = 0.42  # H(0.15) in nats


def test_lookup_gradient_is_dense_and_sums_duplicates():
    table = tf.Variable(np.random.default_rng(0).normal(size=(3, 4)).astype("float32"))
    ids = tf.constant([[0, 0, 2], [0, 1, 0]])
    upstream = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 4)).astype("float32"))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(embedding_lookup(table, ids) * upstream)
    grad = tape.gradient(loss, table)
    assert isinstance(grad, tf.Tensor) and not isinstance(grad, tf.IndexedSlices)
    expected = tf.matmul(tf.one_hot(tf.reshape(ids, [-1]), 3), tf.reshape(upstream, [-1, 4]),
                         transpose_a=True)
    np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_adam_moves_a_repeated_row_by_lr():
    """One Adam step moves every looked-up entry by ≈ lr, however often its row was looked up."""
    emb = BertEmbeddings(8, 4, max_position_embeddings=16, dropout=0.0)
    emb.build()
    before = emb.token_type_embeddings.numpy().copy()
    opt = keras.optimizers.Adam(0.01)
    ids = tf.constant(np.random.default_rng(0).integers(0, 8, (8, 16)), tf.int32)
    with tf.GradientTape() as tape:
        out = emb(ids, tf.zeros_like(ids), training=True)
        loss = tf.reduce_sum(out[..., 0])
    grads = tape.gradient(loss, emb.trainable_variables)
    opt.apply_gradients(zip(grads, emb.trainable_variables))
    step = np.abs(emb.token_type_embeddings.numpy() - before)[0]
    np.testing.assert_allclose(step, 0.01, rtol=0.05)


def _topic_batch(rng, batch=32, seq=32):
    topic = rng.integers(0, 2, (batch, 1))
    ids = rng.integers(5, 53, (batch, seq)) + 48 * topic
    labels = rng.random((batch, seq)) < 0.15
    ids = np.where(labels, rng.integers(5, 53, (batch, seq)) + 48 * (1 - topic), ids)
    inputs = {"input_ids": tf.constant(ids, tf.int32), "input_mask": tf.ones((batch, seq), tf.int32),
              "segment_ids": tf.zeros((batch, seq), tf.int32)}
    return inputs, tf.constant(labels, tf.float32)


def test_encoder_with_default_dropout_learns_topic_context():
    """Each sequence draws from one of two topics; 15% of tokens, from the other topic, are labelled 1.

    A token alone says nothing (P(label) = 0.15 whatever the token): only comparing it with its
    context does. Defaults: dropout 0.1, attention dropout 0.1, embedding LayerNorm, token types.
    """
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocab_size=128, hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256,
                          embedding_size=32)
    head = keras.layers.Dense(1)
    optimizer = keras.optimizers.Adam(1e-3)
    rng = np.random.default_rng(0)

    @tf.function
    def step(inputs, labels):
        with tf.GradientTape() as tape:
            logits = head(encoder(inputs, training=True))[..., 0]
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, logits))
        variables = encoder.trainable_variables + head.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss, logits

    auc = keras.metrics.AUC()
    losses = []
    steps = 400
    for i in range(steps):
        inputs, labels = _topic_batch(rng)
        loss, logits = step(inputs, labels)
        losses.append(float(loss))
        if i >= steps - 50:
            auc.update_state(labels, tf.sigmoid(logits))
    final_loss = float(np.mean(losses[-50:]))
    assert final_loss < 0.5 * LABEL_ENTROPY, (final_loss, losses[::50])
    assert float(auc.result()) >= 0.9, float(auc.result())
