"""What SRAVEN is made of, apart from the task class (`sraven.py`): its parameters (`SRavenConfig`), its eight
rules (`RULE_NAMES`) and their arithmetic: the coefficients that generate rules 0-6, distinct triples for
distribute_three, the grids a batch's rules give (`rule_grids`), the constant tables the task keeps per device
(`rule_table`), the answer a rule gives a grid (`rule_answer`) and the ambiguity check (`rule_fits`,
`ambiguous`). Plain torch on whatever device the tensors are on; no task state and no model code here.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from math import comb
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Int
from torch import Tensor

from latentcode.tasks.sampling import lookup, randint

RULE_NAMES: tuple[str, ...] = (
    "constant",
    "progression+1",
    "progression+2",
    "progression-1",
    "progression-2",
    "addition",
    "subtraction",
    "distribute_three",
)
"""The eight rules, in the reference code's order (index = rule id in labels and compositions)."""

_MAX_FEATURES = 8


@dataclass(kw_only=True, frozen=True)
class SRavenConfig:
    """Parameters of SRAVEN. Defaults follow the reference `configs/raven.py`."""

    n_features: int = 4
    """Features per panel; each follows one rule. The task's composition is the multiset of their rules."""
    n_values: int = 8
    """Values a feature takes (0..n_values-1); rule arithmetic is mod n_values."""
    frac_ood: float = 0.25
    """Fraction of the rule multisets held out as the `ood` split."""
    permute_features: bool = True
    """Shuffle the feature slots per column (the same in all rows), so rules must be matched across panels."""
    seed: int = 0
    """Seed of the held-out choice of rule multisets (batches take their own seed)."""

    def __post_init__(self) -> None:
        if not 1 <= self.n_features <= _MAX_FEATURES:
            raise ValueError(f"n_features={self.n_features} must lie in [1, {_MAX_FEATURES}]")
        if self.n_values < 3:
            raise ValueError(
                f"n_values={self.n_values} is too small: distribute_three needs 3 distinct values; use n_values >= 3"
            )
        if self.seed < 0:
            raise ValueError(f"seed={self.seed} must be a non-negative integer")
        if not 0.0 <= self.frac_ood < 1.0:
            raise ValueError(f"frac_ood={self.frac_ood} must lie in [0, 1)")
        n_combos = comb(len(RULE_NAMES) + self.n_features - 1, self.n_features)
        n_ood = int(n_combos * self.frac_ood)
        if not 1 <= n_ood < n_combos:
            raise ValueError(
                f"frac_ood={self.frac_ood} holds out {n_ood} of the {n_combos} rule multisets, which leaves the "
                f"{'ood' if n_ood == 0 else 'train'} split empty; pick frac_ood so that int(frac_ood * {n_combos}) "
                f"lies in [1, {n_combos - 1}]"
            )


DISTRIBUTE_THREE = 7
# Rules 0-6 as one formula per column c: value[row, c] = (A[rule, c] * s_row + B[rule, c] * b_row + D[rule, c])
# mod n_values, with s_row, b_row uniform. Distribute-three (row 7, all zero here) is drawn separately.
COEF_A = [[1, 1, 1]] * 5 + [[1, 0, 1], [1, 0, 1], [0, 0, 0]]
COEF_B = [[0, 0, 0]] * 5 + [[0, 1, 1], [0, 1, -1], [0, 0, 0]]
COEF_D = [[0, 0, 0], [0, 1, 2], [0, 2, 4], [0, -1, -2], [0, -2, -4]] + [[0, 0, 0]] * 3
MAX_AMBIGUITY_FEATURES = 6
_CHUNK_ELEMENTS = 2**24


def rule_answer(
    grid: Int[Tensor, "batch 3 3"], rule: Int[Tensor, " batch"], n_values: int
) -> tuple[Int[Tensor, " batch"], Bool[Tensor, " batch"]]:
    """The value `rule` gives the last panel of one feature's 3x3 grid, and whether it is defined.

    A rule's answer is defined when the last row's first two values fit it: constant needs them equal, a
    progression needs them one step apart, addition and subtraction always fit, and distribute_three needs the
    first two rows to spread one triple of distinct values and the last row's two values to be two of them (the
    answer is the third). The answer is 0 where undefined.
    """
    first, second = grid[:, 2, 0], grid[:, 2, 1]
    steps = torch.tensor([0, 1, 2, -1, -2], device=grid.device)  # constant, progression+1, +2, -1, -2
    step = steps[rule.clamp(max=4)]
    progression = rule <= 4
    answer = torch.where(progression, (second + step) % n_values, torch.zeros_like(second))
    defined = progression & ((first + step) % n_values == second)
    answer = torch.where(rule == 5, (first + second) % n_values, answer)
    answer = torch.where(rule == 6, (first - second) % n_values, answer)
    defined = defined | (rule == 5) | (rule == 6)
    rows = grid[:, :2].sort(dim=-1).values
    triple = rows[:, 0]
    spread = (triple[:, 0] < triple[:, 1]) & (triple[:, 1] < triple[:, 2]) & (rows[:, 0] == rows[:, 1]).all(-1)
    has_first, has_second = (triple == first[:, None]).any(-1), (triple == second[:, None]).any(-1)
    three = (rule == DISTRIBUTE_THREE) & spread & has_first & has_second & (first != second)
    third = triple.sum(-1) - first - second
    answer = torch.where(three, third, answer)
    defined = defined | three
    return torch.where(defined, answer, torch.zeros_like(answer)), defined


def distinct_triples(
    n: int, n_features: int, n_values: int, generator: torch.Generator, device: str | torch.device
) -> Int[Tensor, "batch feature 3"]:
    """Uniform ordered triples of distinct values in [0, n_values): draw, then skip the values already taken."""
    first = randint(n_values, (n, n_features), generator, device)
    second = randint(n_values - 1, (n, n_features), generator, device)
    second = second + (second >= first)
    third = randint(n_values - 2, (n, n_features), generator, device)
    low, high = torch.minimum(first, second), torch.maximum(first, second)
    third = third + (third >= low)
    third = third + (third >= high)
    return torch.stack([first, second, third], dim=-1)


def rule_grids(
    rules: Int[Tensor, "batch feature"],
    n_values: int,
    tables: tuple[Tensor, Tensor],
    generator: torch.Generator,
    device: str | torch.device,
) -> Int[Tensor, "batch row column feature"]:
    """Every feature's 3x3 grid of values under its rule, unpermuted: rules 0-6 by one formula from per-row draws
    s and b, distribute_three from a distinct triple per feature spread over the rows in a random order each.

    Draws from `generator` in a fixed order (s and b, the row orders, the triples): every batch of a saved task
    depends on it.

    Args:
        rules: rule index per feature (into `RULE_NAMES`).
        n_values: values a feature takes.
        tables: `rule_table("coef")` and `rule_table("perm3")` as long tensors on `device`.
        generator: the batch's generator, on `device`.
        device: where the grids are generated.
    """
    n, n_features = rules.shape
    coef, perm3 = tables
    s, b = randint(n_values, (2, n, n_features, 3), generator, device).unsqueeze(-1)
    coef_a, coef_b, coef_d = lookup(coef, rules).unflatten(-1, (3, 1, 3)).unbind(2)
    values = (coef_a * s + coef_b * b + coef_d) % n_values
    row_perm = lookup(perm3, randint(6, (n, n_features, 3), generator, device))
    three = distinct_triples(n, n_features, n_values, generator, device)
    spread = three.gather(-1, row_perm.flatten(-2)).view(n, n_features, 3, 3)
    values = torch.where(rules[:, :, None, None] == DISTRIBUTE_THREE, spread, values)
    return values.permute(0, 2, 3, 1)  # [batch, row, column, feature]


def rule_fits(context: Tensor, n_values: int) -> tuple[Tensor, Tensor]:
    """For context values [..., 8] (rows of 3, 3 and 2): whether each of the 5 rule families of the reference's
    ambiguity check fits, and its answer for the 9th value; both [..., 5]."""
    rows = context[..., :6].unflatten(-1, (2, 3))  # the two complete rows
    last = context[..., 6:8]
    constant = (rows == rows[..., :1]).all(-1).all(-1) & (last[..., 0] == last[..., 1])

    steps = (context[..., 1:] - context[..., :-1]) % n_values
    steps = steps[..., [0, 1, 3, 4, 6]]  # within-row steps only
    step = steps[..., 0]
    allowed = (step == 1) | (step == 2) | (step == n_values - 1) | (step == n_values - 2)
    progression = (steps == step.unsqueeze(-1)).all(-1) & allowed

    addition = ((rows[..., 0] + rows[..., 1]) % n_values == rows[..., 2]).all(-1)
    subtraction = ((rows[..., 0] - rows[..., 1]) % n_values == rows[..., 2]).all(-1)

    ordered = rows.sort(dim=-1).values
    symbols = ordered[..., 0, :]
    matches = last.unsqueeze(-1) == symbols.unsqueeze(-2)  # [..., last-row value, symbol]
    distribute = (ordered[..., 0, :] == ordered[..., 1, :]).all(-1) & matches.any(-1).all(-1)
    unused = symbols.gather(-1, matches.sum(-2).argmin(-1, keepdim=True)).squeeze(-1)

    applies = torch.stack([constant, progression, addition, subtraction, distribute], dim=-1)
    answers = torch.stack(
        [
            last[..., 0],
            (last[..., 1] + step) % n_values,
            (last[..., 0] + last[..., 1]) % n_values,
            (last[..., 0] - last[..., 1]) % n_values,
            unused,
        ],
        dim=-1,
    )
    return applies, answers


def slot_triples(n_features: int) -> np.ndarray:
    """Slot triple (j0, j1, j2) -> the flat positions of its 9 values, row-major, slot j_c in column c."""
    slots = np.indices((n_features,) * 3).reshape(3, -1).T
    cells = np.arange(9)
    return cells * n_features + slots[:, cells % 3]


def hypotheses(n_features: int) -> np.ndarray:
    """[hypothesis, feature] indices into `slot_triples`: a permutation of the slots in each of the first two
    columns, the last column's fixed to the identity."""
    perms = np.array(list(permutations(range(n_features))))
    first, second = (a.reshape(-1, n_features) for a in np.broadcast_arrays(perms[:, None], perms[None]))
    return (first * n_features + second) * n_features + np.arange(n_features)


def rule_table(what: str, n_features: int) -> Any:
    """One of SRAVEN's constant tables, as integers: 'coef' (`COEF_A`, `COEF_B`, `COEF_D` side by side: [rule,
    (a, b, d) x column]), 'perm3' (the 6 orders of 3 rows), 'perms' (the n_features! slot orders), 'triples'
    (`slot_triples`) or 'hypotheses' (`hypotheses`).

    Raises:
        KeyError: another name.
    """
    if what == "coef":
        return np.concatenate([COEF_A, COEF_B, COEF_D], axis=1)
    if what == "perm3":
        return list(permutations(range(3)))
    if what == "perms":
        return list(permutations(range(n_features)))
    if what == "triples":
        return slot_triples(n_features)
    if what == "hypotheses":
        return hypotheses(n_features)
    raise KeyError(what)


def ambiguous(flat: Tensor, n_values: int, triples: Tensor, hypotheses: Tensor) -> Bool[Tensor, " batch"]:
    """The reference `check_is_ambiguous`, vectorized, on panel values `flat` [batch, 9 * n_features].

    A hypothesis picks, for every feature, one slot in each column (a permutation per column); the instance is
    ambiguous if under some hypothesis **every** feature's 8 context values fit some rule family (constant,
    progression with step 1, 2, -1 or -2, sum, difference, distribute_three) whose answer differs from the true
    value in that slot of panel 9. Relabelling the features maps hypotheses onto each other, so fixing the last
    column's permutation to the identity checks (n_features!)^2 hypotheses instead of (n_features!)^3 with the
    same result. The batch is processed in chunks so memory stays bounded.

    Args:
        flat: the 9 panels' values, panel-major (panel 9 last).
        n_values: values a feature takes.
        triples: `slot_triples(n_features)` as a long tensor on `flat`'s device.
        hypotheses: `hypotheses(n_features)` likewise.
    """
    sequences = flat.index_select(1, triples.flatten()).unflatten(1, triples.shape)
    applies, answers = rule_fits(sequences[..., :8], n_values)
    triple_ok = (applies & (answers != sequences[..., 8:])).any(dim=-1)  # [batch, slot triple]
    chunk = max(1, _CHUNK_ELEMENTS // hypotheses.numel())
    return torch.cat(
        [
            part.index_select(1, hypotheses.flatten()).unflatten(1, hypotheses.shape).all(-1).any(-1)
            for part in triple_ok.split(chunk)
        ]
    )
