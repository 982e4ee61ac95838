"""Pins every packing rule of the original builder (docs/reproduction.md#packing)."""
import random

import numpy as np
import pytest

from data.examples import ExampleBuilder

CLS, SEP, PAD = 101, 102, 0


class ScriptedRandom:
    """Returns scripted values so each random decision of the packer can be forced and counted."""

    def __init__(self, values, randints=()):
        self.values, self.randints = list(values), list(randints)
        self.random_calls, self.randint_calls = 0, []

    def random(self):
        self.random_calls += 1
        return self.values.pop(0)

    def randint(self, low, high):
        self.randint_calls.append((low, high))
        return self.randints.pop(0)


def sentence(start, length):
    return list(range(10_000 + start, 10_000 + start + length))  # clear of the special ids


def unpack(example):
    """Returns (A, B) token lists read back from the features, checking the layout on the way."""
    ids, mask, seg = example.input_ids, example.input_mask, example.segment_ids
    length = int(mask.sum())
    assert mask[:length].all() and not mask[length:].any(), "mask is a prefix of ones"
    assert (ids[length:] == PAD).all() and not seg[length:].any(), "padding is id 0, segment 0"
    assert ids[0] == CLS and ids[length - 1] == SEP
    first_sep = int(np.flatnonzero(ids == SEP)[0])
    assert not seg[:first_sep + 1].any(), "[CLS] A [SEP] are segment 0"
    a = ids[1:first_sep].tolist()
    b = ids[first_sep + 1:length - 1].tolist() if first_sep != length - 1 else []
    if b:
        assert seg[first_sep + 1:length].all(), "B and its [SEP] are segment 1"
    return a, b


def test_segment_assignment_rules_and_coin_order():
    # target 32 -> A target (32 - 3) // 2 = 14.
    # random() calls in order: single-segment draw 0.5 (no); s2: 5 + 12 >= 14, B empty, A(5) < 14 -> coin
    # 0.7 (>= 0.5: goes to B); s3: A=5, 5 + 3 < 14 -> joins A without a coin; s4: 8+20 >= 14, B not empty
    # -> B without a coin; then the short-target draw 0.9 (no).
    rng = ScriptedRandom([0.5, 0.7, 0.9])
    builder = ExampleBuilder(64, CLS, SEP, PAD, rng)
    builder._target_length = 32
    s1, s2, s3, s4 = sentence(100, 5), sentence(200, 12), sentence(300, 3), sentence(400, 20)
    for s in (s1, s2, s3):
        assert builder.add_line(s) is None
    example = builder.add_line(s4)
    a, b = unpack(example)
    assert a == s1 + s3
    assert b == s2 + s4
    assert rng.random_calls == 3 and not rng.values


def test_coin_below_half_puts_sentence_in_first_segment():
    # s2 overflows A's target 14 while B is empty: coin 0.2 < 0.5 -> A; s3: A=17 >= 14 -> B, no coin.
    rng = ScriptedRandom([0.5, 0.2, 0.9])
    builder = ExampleBuilder(64, CLS, SEP, PAD, rng)
    builder._target_length = 32
    s1, s2, s3 = sentence(100, 5), sentence(200, 12), sentence(300, 20)
    builder.add_line(s1)
    builder.add_line(s2)
    a, b = unpack(builder.add_line(s3))
    assert a == s1 + s2 and b == s3
    assert rng.random_calls == 3


def test_single_segment_with_probability_point_one():
    rng = ScriptedRandom([0.05, 0.9])  # 0.05 < 0.1: the first segment's target is unlimited
    builder = ExampleBuilder(64, CLS, SEP, PAD, rng)
    lines = [sentence(100 * i, 10) for i in range(1, 8)]
    example = None
    for line in lines:
        example = builder.add_line(line) or example
    a, b = unpack(example)
    assert b == [] and a == sum(lines, [])[:62]
    assert example.truncated_tokens == 70 - 62


def test_truncation_of_both_segments():
    # target 40 -> A aims at 18: s1 (25) joins the empty A, s2 goes to B without a coin (A >= 18).
    # A fits in max - 2 = 30; B is cut to max - 25 - 3 = 4 tokens.
    rng = ScriptedRandom([0.5, 0.9])
    builder = ExampleBuilder(32, CLS, SEP, PAD, rng)
    builder._target_length = 40
    s1, s2 = sentence(100, 25), sentence(500, 10)
    assert builder.add_line(s1) is None and builder.add_line(s2) is None
    example = builder.end_document()
    a, b = unpack(example)
    assert a == s1 and b == s2[:4]
    assert example.truncated_tokens == 6
    assert int(example.input_mask.sum()) == 32


def test_first_segment_cut_to_max_minus_two():
    rng = ScriptedRandom([0.5, 0.9])
    builder = ExampleBuilder(32, CLS, SEP, PAD, rng)
    a, b = unpack(builder.add_line(sentence(100, 40)))  # 40 >= 32 flushes at once
    assert a == sentence(100, 30) and b == []


def test_short_target_with_probability_point_zero_five():
    rng = ScriptedRandom([0.5, 0.01, 0.5, 0.9], randints=[9])
    builder = ExampleBuilder(64, CLS, SEP, PAD, rng)
    assert builder.add_line(sentence(100, 64)) is not None
    assert rng.randint_calls == [(5, 64)]
    # the next example is cut at target 9: a 9-token line flushes it at once
    assert builder.add_line(sentence(200, 8)) is None
    assert builder.add_line(sentence(300, 1)) is not None


def test_document_end_flushes_short_buffer_and_ignores_empty():
    rng = ScriptedRandom([0.5, 0.9])
    builder = ExampleBuilder(64, CLS, SEP, PAD, rng)
    assert builder.end_document() is None and rng.random_calls == 0
    assert builder.add_line([]) is None  # a line with no tokens changes nothing
    assert builder.end_document() is None
    builder.add_line(sentence(100, 3))
    example = builder.end_document()
    a, b = unpack(example)
    assert a == sentence(100, 3) and b == []
    assert example.input_ids.shape == (64,) and example.input_ids.dtype == np.int64


def test_statistics_with_a_real_generator():
    """Over many long documents: about 10% single-segment examples, about 5% short targets."""
    rng = random.Random(0)
    builder = ExampleBuilder(128, CLS, SEP, PAD, rng)
    examples = []
    for doc in range(3000):
        for line in range(12):
            example = builder.add_line(sentence(1000, 20))
            if example:
                examples.append(example)
        example = builder.end_document()
        if example:
            examples.append(example)
    full = [e for e in examples if e.input_mask.sum() >= 120]
    single = sum(1 for e in full if not e.segment_ids.any())
    # single-segment examples come from the 10% draw only when sentences are equal and many
    assert 0.08 < single / len(full) < 0.12
    assert all(e.input_mask.sum() <= 128 for e in examples)


@pytest.mark.parametrize("max_length", [3, 4, 5])
def test_tiny_max_length_still_holds_cls_token_sep(max_length):
    builder = ExampleBuilder(max_length, CLS, SEP, PAD, random.Random(1))
    example = builder.add_line(sentence(100, 10))
    a, b = unpack(example)
    assert a == sentence(100, max_length - 2) and b == []
    assert int(example.input_mask.sum()) == max_length
