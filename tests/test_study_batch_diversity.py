"""studies/batch_diversity: the similarity of a batch's examples, on rare tokens only."""
import numpy as np
import pytest

from studies.batch_diversity import batch_similarity


def test_rare_token_similarity_and_near_share():
    batch = np.array([[101, 3000, 3001, 3002, 102],    # shares {3000, 3001} with the next row: 2/4
                      [101, 3000, 3001, 3003, 102],
                      [101, 1000, 1001, 4000, 102]])   # frequent ids ignored: {4000} alone
    mean, near = batch_similarity(batch, rare_above=2000, close=0.4)
    assert mean == pytest.approx((0.5 + 0 + 0) * 2 / 6)
    assert near == pytest.approx(2 / 3)
    _, near = batch_similarity(batch, rare_above=2000, close=0.5)  # strictly above
    assert near == 0.0
