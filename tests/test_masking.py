"""Dynamic masking as the original (docs/reproduction.md#masking): count rule, candidates, 85/15, scatter."""
import keras
import numpy as np
import pytest

from pretrain import masking
from pretrain.sequence_ops import scatter_update
from tests.model_fixtures import CLS, MASK, SEP, VOCAB_SIZE

SPECIALS = (CLS, SEP, MASK)


def make_batch(lengths, seq_length, seed=0, extra_masks=0):
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(lengths), seq_length), "int32")
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(MASK + 1, VOCAB_SIZE, length)
        ids[row, 0], ids[row, length - 1] = CLS, SEP
        if extra_masks and length > 4:  # a [MASK] already in the text is never a candidate
            ids[row, 1:1 + extra_masks] = MASK
        mask[row, :length] = 1
    return ids, mask


def run_masking(ids, mask, mask_prob, n, seed=1, dedup=False):
    out = masking.mask_inputs(ids, mask, mask_prob=mask_prob, max_predictions=n, mask_token_id=MASK,
                              special_token_ids=SPECIALS, seed=keras.random.SeedGenerator(seed), dedup=dedup)
    return {key: np.asarray(value) for key, value in out.items()}


def expected_count(length, mask_prob, n):
    rounded = int(np.round(np.float32(length) * np.float32(mask_prob)))  # tf.round: half to even
    return max(1, min(n, rounded))


@pytest.mark.parametrize("mask_prob", [0.15, 0.25])
def test_count_rule_is_exact(mask_prob):
    seq_length = 64
    n = masking.max_predictions_per_seq(mask_prob, seq_length)
    lengths = list(range(3, seq_length + 1))
    ids, mask = make_batch(lengths, seq_length)
    out = run_masking(ids, mask, mask_prob, n)
    counts = out["masked_lm_weights"].sum(-1).astype(int)
    assert counts.tolist() == [expected_count(length, mask_prob, n) for length in lengths]
    # weights are a prefix of the N slots
    assert (np.diff(out["masked_lm_weights"], axis=-1) <= 0).all()


def test_round_half_to_even():
    # 10 · 0.25 = 2.5 → 2, 14 · 0.25 = 3.5 → 4, 18 · 0.25 = 4.5 → 4, 6 · 0.25 = 1.5 → 2
    ids, mask = make_batch([10, 14, 18, 6], 32)
    out = run_masking(ids, mask, 0.25, 8)
    assert out["masked_lm_weights"].sum(-1).tolist() == [2, 4, 4, 2]


def test_max_predictions_rule():
    assert masking.max_predictions_per_seq(0.15, 128) == 19
    assert masking.max_predictions_per_seq(0.15, 512) == 79
    assert masking.max_predictions_per_seq(0.25, 512) == 130


def test_positions_are_candidates_and_unused_slots_point_at_zero():
    lengths = np.random.default_rng(3).integers(6, 129, 400)
    ids, mask = make_batch(lengths, 128, extra_masks=2)
    out = run_masking(ids, mask, 0.15, 19)
    positions, weights = out["masked_lm_positions"], out["masked_lm_weights"]
    chosen_ids = np.take_along_axis(ids, positions, axis=1)
    chosen_real = np.take_along_axis(mask, positions, axis=1)
    used = weights > 0
    assert chosen_real[used].all()  # never padding
    assert not np.isin(chosen_ids[used], SPECIALS).any()  # never [CLS], [SEP], [MASK]
    assert (positions[~used] == 0).all() and (out["masked_lm_ids"][~used] == 0).all()
    assert (out["masked_lm_ids"][used] == chosen_ids[used]).all()


def test_positions_are_drawn_with_replacement_and_uniformly():
    lengths = [128] * 2000
    ids, mask = make_batch(lengths, 128)
    out = run_masking(ids, mask, 0.15, 19)
    positions = out["masked_lm_positions"]
    rows_with_duplicates = np.mean([len(set(row)) < len(row) for row in positions])
    # 19 draws over 126 candidates: P(some duplicate) = 1 - Π(1 - i/126) ≈ 0.75
    assert 0.65 < rows_with_duplicates < 0.85
    counts = np.bincount(positions.ravel(), minlength=128)[1:127]
    expected = positions.size / 126
    # loose bounds: TensorFlow's CPU categorical is overdispersed (~1.3x Poisson), as in the original
    assert counts.min() > 0.65 * expected and counts.max() < 1.35 * expected
    assert counts.sum() == positions.size


def test_dedup_option_draws_without_replacement():
    lengths = [128] * 50 + [6] * 10  # short rows: 4 candidates, count 1
    ids, mask = make_batch(lengths, 128)
    out = run_masking(ids, mask, 0.15, 19, dedup=True)
    for row, weights in zip(out["masked_lm_positions"], out["masked_lm_weights"]):
        used = row[weights > 0]
        assert len(set(used.tolist())) == len(used)
    ids, mask = make_batch([5], 32)  # 3 candidates, count wants max(1, round(5·0.5)) = 2 → fine; 0.9 → 4 > 3
    out = run_masking(ids, mask, 0.9, 8, dedup=True)
    assert out["masked_lm_weights"].sum() == 3


def test_85_percent_mask_15_percent_unchanged_no_random_tokens():
    lengths = [128] * 800
    ids, mask = make_batch(lengths, 128)
    out = run_masking(ids, mask, 0.15, 19)
    masked_ids = out["input_ids"]
    positions, weights = out["masked_lm_positions"], out["masked_lm_weights"]
    became_mask, single = [], 0
    for row in range(len(lengths)):
        used = positions[row][weights[row] > 0]
        unique, counts = np.unique(used, return_counts=True)
        once = unique[counts == 1]  # a position drawn twice is masked if either draw says so
        became_mask.extend(masked_ids[row, once] == MASK)
        single += len(once)
        changed = np.nonzero(masked_ids[row] != ids[row])[0]
        assert set(changed) <= set(used.tolist())  # nothing outside the chosen positions changes
        assert (masked_ids[row, changed] == MASK).all()  # and nothing but [MASK] is written
    rate = np.mean(became_mask)
    sigma = np.sqrt(0.85 * 0.15 / single)
    assert abs(rate - 0.85) < 4 * sigma, (rate, single)


def test_sequences_without_candidates_predict_nothing():
    ids = np.array([[CLS, SEP, 0, 0], [CLS, 9, SEP, 0]], "int32")
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 0]], "int32")
    out = run_masking(ids, mask, 0.5, 2)
    # 3 real tokens · 0.5 = 1.5 → 2 slots, both on the only candidate
    assert out["masked_lm_weights"].sum(-1).tolist() == [0, 2]
    assert out["masked_lm_positions"].tolist() == [[0, 0], [1, 1]]


def test_masking_is_deterministic_given_the_seed():
    ids, mask = make_batch([40] * 8, 64)
    a, b, c = run_masking(ids, mask, 0.15, 10, seed=5), run_masking(ids, mask, 0.15, 10, seed=5), \
        run_masking(ids, mask, 0.15, 10, seed=6)
    assert (a["masked_lm_positions"] == b["masked_lm_positions"]).all()
    assert (a["masked_lm_positions"] != c["masked_lm_positions"]).any()


def test_scatter_update_matches_the_original_semantics():
    sequence = np.array([[10, 11, 12, 13, 14]], "int32")
    positions = np.array([[0, 2, 2, 4, 4]], "int32")
    updates = np.array([[99, 20, 30, 7, 7]], "int32")
    updated, written = (np.asarray(t) for t in scatter_update(sequence, updates, positions))
    # position 0 is never written; duplicates get the integer mean of their updates
    assert updated.tolist() == [[10, 11, 25, 13, 7]]
    assert written.tolist() == [[0, 0, 1, 0, 1]]
