"""What fuzzy logic is made of, apart from the task class (`fuzzy_logic.py`): its parameters
(`FuzzyLogicConfig`), its 2^L terms (`term_bits`, `term_names`) and the Zadeh disjunctive normal form that gives a
function's value (`fuzzy_dnf`). Plain numpy and torch on whatever device the tensors are on; no task state and no
model code here.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = ["FuzzyLogicConfig", "fuzzy_dnf", "term_bits", "term_names"]

_MAX_COMPOSITIONS = 1_000_000


@dataclass(kw_only=True, frozen=True)
class FuzzyLogicConfig:
    """Parameters of the fuzzy-logic task. Defaults follow the reference `logic_4var_2term` config."""

    n_variables: int = 4
    """L: variables per input; each term uses every variable, plain or negated, so there are 2^L terms."""
    n_terms: int = 2
    """K: distinct terms OR-ed together in one task (its disjunctive normal form)."""
    seq_len: int = 16
    """Examples per sequence, the query (last token) included."""
    frac_ood: float = 0.5
    """Fraction of the combinations of known terms held out as the `ood` split (the paper's OOD)."""
    frac_unseen_terms: float = 0.25
    """Fraction of the 2^L terms (the last ones in itertools.product order) never trained on; `novel_terms`
    combines only these."""
    seed: int = 0
    """Seed of the held-out choice of compositions (batches take their own seed)."""

    def __post_init__(self) -> None:
        if not 1 <= self.n_variables <= 20:
            raise ValueError(f"n_variables={self.n_variables} must lie in [1, 20]")
        if self.n_terms < 1:
            raise ValueError(f"n_terms={self.n_terms} must be a positive integer")
        if self.seq_len < 2:
            raise ValueError(f"seq_len={self.seq_len} must be >= 2 (at least one example before the query)")
        if self.seed < 0:
            raise ValueError(f"seed={self.seed} must be a non-negative integer")
        for name in ("frac_ood", "frac_unseen_terms"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name}={getattr(self, name)} must lie in [0, 1)")
        n_all, n_known = 2**self.n_variables, self.n_known_terms
        if self.n_terms > n_known:
            raise ValueError(
                f"n_terms={self.n_terms} exceeds the {n_known} known terms (2^{self.n_variables} minus "
                f"int({self.frac_unseen_terms} * {n_all}) unseen); lower n_terms or frac_unseen_terms, or raise "
                "n_variables"
            )
        n_unseen = n_all - n_known
        if n_unseen < self.n_terms:
            raise ValueError(
                f"frac_unseen_terms={self.frac_unseen_terms} leaves {n_unseen} unseen terms, fewer than "
                f"n_terms={self.n_terms}, so the novel_terms split would be empty; raise frac_unseen_terms to at "
                f"least {self.n_terms}/{n_all}"
            )
        n_combos = comb(n_known, self.n_terms)
        if max(n_combos, comb(n_unseen, self.n_terms)) > _MAX_COMPOSITIONS:
            raise ValueError(
                f"n_variables={self.n_variables}, n_terms={self.n_terms} give {n_combos} compositions, more than "
                f"the {_MAX_COMPOSITIONS} supported; lower n_variables or n_terms"
            )
        n_ood = int(n_combos * self.frac_ood)
        if not 1 <= n_ood < n_combos:
            raise ValueError(
                f"frac_ood={self.frac_ood} holds out {n_ood} of the {n_combos} combinations of known terms, which "
                f"leaves the {'ood' if n_ood == 0 else 'train'} split empty; pick frac_ood so that "
                f"int(frac_ood * {n_combos}) lies in [1, {n_combos - 1}]"
            )

    @property
    def n_known_terms(self) -> int:
        """Terms used by `train`, `test` and `ood`: the first 2^L - int(frac_unseen_terms * 2^L)."""
        n_all = 2**self.n_variables
        return n_all - int(n_all * self.frac_unseen_terms)


def term_bits(n_variables: int) -> Int[np.ndarray, "term variable"]:
    """All 2^L terms as bit vectors, in `itertools.product([0, 1], repeat=L)` order (1 = plain, 0 = negated).

    >>> term_bits(2).tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    """
    index = np.arange(2**n_variables)[:, None]
    return (index >> np.arange(n_variables - 1, -1, -1)[None, :]) & 1


def fuzzy_dnf(
    inputs: Float[Tensor, "batch pos variable"], bits: Int[Tensor, "batch term variable"]
) -> Float[Tensor, "batch pos"]:
    """Zadeh disjunctive normal form of each instance's terms at each of its inputs: max over terms of min over
    literals (x_j where the term's bit j is 1, else 1 - x_j).

    >>> fuzzy_dnf(torch.tensor([[[0.2, 0.9]]]), torch.tensor([[[1, 1], [0, 1]]])).tolist()
    [[0.800000011920929]]
    """
    sign = bits.unsqueeze(1).to(inputs.dtype)  # [batch, 1, term, variable]
    # (1 - b) + x * (2b - 1) is x or 1 - x exactly, in one fused kernel (faster than torch.where here)
    literals = torch.addcmul(1.0 - sign, inputs.unsqueeze(2), 2.0 * sign - 1.0)
    return literals.amin(dim=-1).amax(dim=-1)


def term_names(n_variables: int) -> list[str]:
    """A readable name per term, in `term_bits` order ("~" marks a negated variable).

    >>> term_names(2)
    ['~x1&~x2', '~x1&x2', 'x1&~x2', 'x1&x2']
    """
    return ["&".join(("" if b else "~") + f"x{j + 1}" for j, b in enumerate(row)) for row in term_bits(n_variables)]
