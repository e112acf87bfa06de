"""The interchange intervention of distributed alignment search (`latentcode.causal.alignment`): the `Interchange`
edit and `interchange`, the same swap on one hook's activations (differentiable in the rotation, which is how the
search trains it).

A site's code is the vector of attention scores across heads at one (query, key) pair. The edit rotates the base
instance's code, puts the source instance's first k rotated coordinates in place of the base's and rotates back;
with the identity rotation and k = n_heads it is a `Transplant`. Training and scoring the rotation is `alignment.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from latentcode.causal.edits import Edit, EditFn, _check_paired
from latentcode.causal.rotation import Rotation
from latentcode.tasks.base import Batch

__all__ = ["Interchange", "interchange"]


@dataclass(frozen=True, eq=False)
class Interchange(Edit):
    """Interchange intervention: at each (query, key) pair of the site, the first k coordinates of the rotated
    code come from the donor (source) instance, the rest from the base; instance i reads donor instance i.

    With the identity rotation this is a `Transplant` of the first k heads' codes (all of them when k = n_heads).
    The site must span every head at its pairs (the code is the vector across heads).

    Attributes:
        donor: the source batch (same shapes as the base).
        rotation: a `Rotation`, or a float [n_heads, n_heads] orthogonal matrix.
        k: how many rotated coordinates are swapped (1..n_heads).
    """

    donor: Batch
    rotation: Rotation | Tensor
    k: int
    kind: ClassVar[str] = "interchange"

    def source(self, batch: Batch) -> Batch:
        return _check_paired(self.donor, batch, ("source", "base", "base instance i reads source instance i's code"))

    def bind(self, batch: Batch, cached: Mapping[str, Tensor]) -> EditFn:
        return lambda act, mask, name: interchange(act, cached[name], mask, self.rotation, self.k)


def interchange(base: Tensor, source: Tensor, mask: Tensor, rotation: Rotation | Tensor, k: int) -> Tensor:
    """`Interchange` on one hook's activations [batch, head_index, query_pos, key_pos] (differentiable in the
    rotation)."""
    pairs = mask.any(dim=0)
    if not bool(mask[:, pairs].all()):
        raise ValueError("an interchange site must span every head at its (query, key) pairs; leave Site.heads=None")
    matrix = rotation.matrix if isinstance(rotation, Rotation) else rotation
    matrix = matrix.to(base.dtype).to(base.device)
    if not 1 <= k <= matrix.shape[0]:
        raise ValueError(f"k={k} must be in 1..{matrix.shape[0]} (the code dimension, n_heads)")
    codes = base.permute(0, 2, 3, 1)  # [batch, query_pos, key_pos, head]
    rotated_base = codes[:, pairs] @ matrix  # [batch, pair, head]
    rotated_source = source.permute(0, 2, 3, 1)[:, pairs].to(base.dtype) @ matrix
    mixed = torch.cat([rotated_source[..., :k], rotated_base[..., k:]], dim=-1) @ matrix.T
    out = codes.clone()
    out[:, pairs] = mixed
    return out.permute(0, 3, 1, 2)
