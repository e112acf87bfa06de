"""T5 relative position bucketing and the per-layer bias table."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from latentcode.model.position import RelativePositionBias, relative_position_bucket

# Unidirectional (the reference): n = max(query - key, 0); exact below max_exact = num_buckets // 2, else
# max_exact + int(log(n / max_exact) / log(max_distance / max_exact) * (num_buckets - max_exact)), capped.
# SRAVEN (36, 36): max_exact 18; n = 21 -> 18 + int(log(21/18) / log 2 * 18) = 18 + int(4.003) = 22 (bucket 21 is
# never used); n = 30 -> 18 + int(13.27) = 31; n = 31 -> 18 + int(14.12) = 32; n = 32 -> 18 + int(14.94) = 32.
SRAVEN_DISTANCES = [0, 17, 18, 19, 20, 21, 30, 31, 32, 35]
SRAVEN_BUCKETS = [0, 17, 18, 19, 20, 22, 31, 32, 32, 35]
# (8 buckets, max distance 32): max_exact 4; n = 7 -> 4 + int(log(7/4) / log 8 * 4) = 4 + int(1.08) = 5;
# n = 16 -> 4 + int(2.67) = 6; n = 31 -> 4 + int(3.94) = 7; n = 100 -> min(4 + int(6.19), 7) = 7.
FAR_DISTANCES = [0, 3, 4, 7, 8, 16, 31, 100]
FAR_BUCKETS = [0, 3, 4, 5, 5, 6, 7, 7]
# Bidirectional (8, 32): 4 buckets per direction, max_exact 2, keys after the query offset by 4.
# key - query = -3 -> 2 + int(log(3/2) / log 16 * 2) = 2; -20 -> 2 + int(1.66) = 3; -100 -> min(2 + int(2.82), 3).
BIDI_RELATIVE = [0, -1, 1, -3, 3, -20, 20, -100, 100]
BIDI_BUCKETS = [0, 1, 5, 2, 6, 3, 7, 3, 7]


@pytest.mark.parametrize(
    ("relative", "expected", "bidirectional", "num_buckets", "max_distance"),
    [
        pytest.param([-n for n in SRAVEN_DISTANCES], SRAVEN_BUCKETS, False, 36, 36, id="sraven-36"),
        pytest.param([-n for n in FAR_DISTANCES], FAR_BUCKETS, False, 8, 32, id="unidirectional-8-32"),
        pytest.param(BIDI_RELATIVE, BIDI_BUCKETS, True, 8, 32, id="bidirectional-8-32"),
        pytest.param([-n for n in range(16)], list(range(16)), False, 16, 16, id="fuzzy-16-all-exact"),
    ],
)
def test_bucket_matches_hand_computed_values(relative, expected, bidirectional, num_buckets, max_distance):
    buckets = relative_position_bucket(
        np.array(relative), bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert buckets.tolist() == expected


def test_unidirectional_puts_every_later_key_in_bucket_zero():
    later_keys = np.arange(0, 50)  # key - query >= 0
    buckets = relative_position_bucket(later_keys, bidirectional=False, num_buckets=36, max_distance=36)
    assert (buckets == 0).all()


def test_bias_shape_lookup_and_gradient():
    torch.manual_seed(0)
    bias = RelativePositionBias(n_heads=3, num_buckets=8, max_distance=32)
    values = bias(5, 5)
    assert values.shape == (3, 5, 5)
    buckets = relative_position_bucket(
        np.arange(5)[None, :] - np.arange(5)[:, None], bidirectional=False, num_buckets=8, max_distance=32
    )
    torch.testing.assert_close(values, bias.weight[:, torch.as_tensor(buckets)])
    values.sum().backward()
    # every (query, key) pair adds one to the gradient of its bucket
    counts = torch.bincount(torch.as_tensor(buckets).flatten(), minlength=8).to(values.dtype)
    torch.testing.assert_close(bias.weight.grad, counts.expand(3, -1))


def test_bucket_index_is_cached_per_length():
    bias = RelativePositionBias(n_heads=2, num_buckets=4, max_distance=8)
    first = bias.buckets(6, 6, bias.weight.device)
    assert bias.buckets(6, 6, bias.weight.device) is first
    assert bias.buckets(3, 3, bias.weight.device).shape == (3, 3)


def test_init_is_normal_with_variance_one_over_buckets():
    torch.manual_seed(0)
    bias = RelativePositionBias(n_heads=64, num_buckets=100, max_distance=100)
    assert bias.weight.std().item() == pytest.approx(1 / math.sqrt(100), rel=0.05)


def test_queries_are_aligned_to_the_last_key_positions():
    bias = RelativePositionBias(n_heads=2, num_buckets=8, max_distance=32)
    full = bias(10, 10)
    torch.testing.assert_close(bias(3, 10), full[:, -3:])
