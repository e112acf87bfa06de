"""T5-style relative position bias: one learned (heads x buckets) table per layer, added to the attention scores.

`relative_position_bucket` is T5's bucketing (exact for small distances, log-spaced beyond, unidirectional by
default as in the reference code, spec §3.1). No absolute positions and no rotary embeddings live here.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn


def relative_position_bucket(
    relative_position: Int[np.ndarray, "*shape"],
    *,
    bidirectional: bool,
    num_buckets: int,
    max_distance: int,
) -> Int[np.ndarray, "*shape"]:
    """Map relative positions (key - query) to T5 buckets.

    Unidirectional: n = max(query - key, 0), so every key at or after the query shares bucket 0. Bidirectional:
    half the buckets for keys before the query, half (offset by num_buckets // 2) for keys after it. Within
    each half, distances below half its size get their own bucket; larger ones are log-spaced up to
    `max_distance`, beyond which everything shares the last bucket. The log is taken in float32, as in T5X,
    so the buckets match the reference exactly.

    Args:
        relative_position: integer array of key position - query position.
        bidirectional: whether keys after the query get their own buckets.
        num_buckets: total buckets.
        max_distance: distance from which positions share the last bucket.

    Returns:
        Bucket indices in [0, num_buckets), same shape.

    >>> relative_position_bucket(-np.arange(8), bidirectional=False, num_buckets=4, max_distance=8).tolist()
    [0, 1, 2, 2, 3, 3, 3, 3]
    """
    bucket = np.zeros_like(relative_position, dtype=np.int64)
    n = -np.asarray(relative_position, dtype=np.int64)
    if bidirectional:
        num_buckets //= 2
        bucket += (n < 0).astype(np.int64) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    with np.errstate(
        divide="ignore"
    ):  # log(0 + eps) is finite; the n = 0 entries use the exact branch anyway
        log_ratio = np.log(n.astype(np.float32) / max_exact + np.finfo(np.float32).eps) / np.float32(
            math.log(max_distance / max_exact)
        )
    large = max_exact + (log_ratio * (num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return bucket + np.where(n < max_exact, n, large)


class RelativePositionBias(nn.Module):
    """A learned bias per (head, relative-position bucket), returned as [head_index, query_pos, key_pos].

    The table is initialised like Flax's `default_embed_init` on a (heads, buckets) array: a normal with
    variance 1 / num_buckets (that initializer's fan-in for this shape).
    """

    def __init__(
        self, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool = False
    ) -> None:
        super().__init__()
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.weight = nn.Parameter(torch.empty(n_heads, num_buckets))
        self._buckets: dict[tuple[int, int, torch.device], Tensor] = {}
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=self.num_buckets**-0.5)

    def buckets(self, query_len: int, key_len: int, device: torch.device) -> Int[Tensor, "query_pos key_pos"]:
        """Bucket index of every (query, key) pair, computed once per length and device. The queries are the
        last `query_len` of the `key_len` positions (all of them in self-attention)."""
        key = (query_len, key_len, device)
        if key not in self._buckets:
            relative = np.arange(key_len)[None, :] - np.arange(key_len - query_len, key_len)[:, None]
            buckets = relative_position_bucket(
                relative,
                bidirectional=self.bidirectional,
                num_buckets=self.num_buckets,
                max_distance=self.max_distance,
            )
            self._buckets[key] = torch.as_tensor(buckets, device=device)
        return self._buckets[key]

    def forward(self, query_len: int, key_len: int) -> Float[Tensor, "head_index query_pos key_pos"]:
        return self.weight[:, self.buckets(query_len, key_len, self.weight.device)]

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.weight.shape[0]}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}"
        )
