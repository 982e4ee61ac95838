import numpy as np
import pytest

from data import tfrecords


@pytest.mark.parametrize("vocab_size, length", [(30522, 128), (250_000, 512), (5, 3)])
def test_hand_encoded_examples_parse_to_the_same_values(vocab_size, length):
    import tensorflow as tf

    rng = np.random.default_rng(vocab_size)
    serializer = tfrecords.ExampleSerializer(vocab_size)
    for used in (length, length // 2, 1):
        ids = rng.integers(0, vocab_size, length)
        ids[used:] = 0
        mask = (np.arange(length) < used).astype(np.int64)
        segments = ((np.arange(length) >= used // 2) & (mask == 1)).astype(np.int64)
        record = serializer.serialize(ids, mask, segments)
        parsed = tf.io.parse_single_example(record, tfrecords.feature_spec(length))
        np.testing.assert_array_equal(parsed["input_ids"].numpy(), ids)
        np.testing.assert_array_equal(parsed["input_mask"].numpy(), mask)
        np.testing.assert_array_equal(parsed["segment_ids"].numpy(), segments)
        # and TensorFlow's own protobuf agrees on the content
        proto = tf.train.Example.FromString(record)
        assert list(proto.features.feature["input_ids"].int64_list.value) == ids.tolist()


def test_varint_encoding_matches_protobuf():
    from google.protobuf.internal import encoder

    for value in (0, 1, 127, 128, 300, 16383, 16384, 2 ** 21, 2 ** 35):
        expected = []
        encoder._EncodeVarint(expected.append, value)
        assert tfrecords._varint(value) == b"".join(expected)


def test_fast_path_for_packed_examples_writes_the_same_bytes():
    import random

    from data.examples import ExampleBuilder

    serializer = tfrecords.ExampleSerializer(30522, max_seq_length=32)
    builder = ExampleBuilder(32, 101, 102, 0, random.Random(3))
    rng = np.random.default_rng(0)
    examples = []
    for _ in range(300):
        example = builder.add_line(rng.integers(1000, 30000, rng.integers(1, 20)).tolist())
        if example:
            examples.append(example)
    examples.append(builder.end_document())
    assert any(e.second_segment for e in examples) and any(not e.second_segment for e in examples)
    for example in examples:
        if example is None:
            continue
        assert serializer.serialize_packed(example) == serializer.serialize(
            example.input_ids, example.input_mask, example.segment_ids)
