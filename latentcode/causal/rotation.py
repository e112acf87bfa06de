"""The orthogonal change of basis that distributed alignment search learns (`latentcode.causal.alignment`), with its
save and load (safetensors + JSON).

`Rotation` is an n x n orthogonal matrix trained through `torch.nn.utils.parametrizations.orthogonal`;
`random_rotation` draws a Haar-random one (the control beside a trained rotation).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["Rotation", "random_rotation"]


class Rotation(torch.nn.Module):
    """An orthogonal n x n matrix Q (`matrix`), trained through `torch.nn.utils.parametrizations.orthogonal`.

    A code c (a row vector over heads) has rotated coordinates c @ Q; its first k coordinates are the subspace that
    `Interchange` swaps, spanned by Q's first k columns.

    Args:
        n: the code dimension (the model's n_heads).
        init: 'random' (a Haar-random rotation from `seed`) or 'identity'.
        seed: seed of the random rotation.
    """

    def __init__(self, n: int, init: str = "random", seed: int = 0) -> None:
        super().__init__()
        if init not in ("random", "identity"):
            raise ValueError(f"Rotation(init={init!r}) is not one of random, identity")
        self.n = int(n)
        self.linear = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(self.n, self.n, bias=False))
        with torch.no_grad():
            self.linear.weight = torch.eye(self.n) if init == "identity" else random_rotation(self.n, seed)

    @property
    def matrix(self) -> Tensor:
        """Q: float [n, n], orthogonal; columns are the rotated basis."""
        return self.linear.weight

    def subspace(self, k: int) -> Tensor:
        """The first k columns of Q: an orthonormal basis [n, k] of the swapped subspace."""
        return self.matrix[:, :k]

    def save(self, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> list[Path]:
        """Write `<path>.safetensors` (the matrix) and `<path>.json` (n and `metadata`); returns both paths."""
        from safetensors.torch import save_file

        from latentcode.rundir.directory import atomic_write_json

        base = Path(path)
        base.parent.mkdir(parents=True, exist_ok=True)
        tensors, meta = base.with_suffix(".safetensors"), base.with_suffix(".json")
        save_file({"rotation": self.matrix.detach().cpu().contiguous()}, str(tensors))
        atomic_write_json(meta, {"kind": "latentcode.rotation", "n": self.n, **dict(metadata or {})})
        return [tensors, meta]

    @classmethod
    def load(cls, path: str | os.PathLike) -> tuple[Rotation, dict[str, Any]]:
        """A rotation saved by `save` (`path` with or without its suffix) and its metadata."""
        from safetensors.torch import load_file

        base = Path(path)
        base = base.with_suffix("") if base.suffix in (".safetensors", ".json") else base
        meta = json.loads(base.with_suffix(".json").read_text())
        matrix = load_file(str(base.with_suffix(".safetensors")))["rotation"]
        rotation = cls(int(meta["n"]), init="identity")
        with torch.no_grad():
            rotation.linear.weight = matrix.float()
        return rotation, meta


def random_rotation(n: int, seed: int = 0) -> Tensor:
    """A Haar-random orthogonal [n, n] matrix (QR of a seeded Gaussian, signs fixed)."""
    gaussian = torch.randn(n, n, generator=torch.Generator().manual_seed(seed))
    q, r = torch.linalg.qr(gaussian)
    return q * torch.sign(torch.diagonal(r))[None, :]
