"""Independent reference checkers for the generated tasks, written from spec/paper.md §2 in plain Python and numpy.

They share no code with `latentcode.tasks`: rules are re-derived from their definitions, one instance at a time
where that is clearer than fast. Each `check_*` raises AssertionError naming the first offending instance.
"""

from __future__ import annotations

from collections import Counter
from itertools import permutations, product

import numpy as np

SRAVEN_STEPS = {1: 1, 2: 2, 3: -1, 4: -2}  # rule index -> progression step


def product_terms(n_variables: int) -> list[tuple[int, ...]]:
    """The 2^L terms in itertools.product order (bit 1 = the plain variable, 0 = negated)."""
    return list(product([0, 1], repeat=n_variables))


def dnf_value(inputs: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """max over terms of min over literals, for inputs [..., L] and bits [K, L] -> [...]."""
    values = []
    for term in bits:
        literals = np.where(term == 1, inputs, np.float32(1.0) - inputs)
        values.append(literals.min(axis=-1))
    return np.max(values, axis=0)


def check_fuzzy_batch(x: np.ndarray, y: np.ndarray, terms: np.ndarray, term_bits: np.ndarray, n_variables: int):
    """Every context y and every target equals the DNF of the instance's labelled terms; the query y is zeroed."""
    table = np.array(product_terms(n_variables))
    n, seq_len, width = x.shape
    assert width == n_variables + 1, f"token width {width} != L + 1 = {n_variables + 1}"
    assert (np.diff(terms, axis=1) > 0).all(), "terms must be distinct and sorted within each instance"
    np.testing.assert_array_equal(term_bits, table[terms], err_msg="term_bits do not match the terms' bits")
    assert ((x[..., :n_variables] >= 0) & (x[..., :n_variables] < 1)).all(), "inputs outside [0, 1)"
    assert (x[:, -1, -1] == 0).all(), "the query token's y slot must be 0"
    for i in range(n):
        expected = dnf_value(x[i, :, :n_variables], term_bits[i])
        np.testing.assert_array_equal(x[i, :-1, -1], expected[:-1], err_msg=f"instance {i}: context y != DNF")
        assert y[i] == expected[-1], f"instance {i}: target {y[i]} != DNF {expected[-1]}"


def sraven_rule_holds(rule: int, grid: list[list[int]], n_values: int) -> bool:
    """Whether a 3x3 grid (rows of one feature's values) follows SRAVEN rule `rule` (spec §2.2)."""
    if rule == 0:
        return all(row[0] == row[1] == row[2] for row in grid)
    if rule in SRAVEN_STEPS:
        step = SRAVEN_STEPS[rule]
        return all(row[c] == (row[0] + step * c) % n_values for row in grid for c in range(3))
    if rule == 5:
        return all(row[2] == (row[0] + row[1]) % n_values for row in grid)
    if rule == 6:
        return all(row[2] == (row[0] - row[1]) % n_values for row in grid)
    if rule == 7:
        symbols = set(grid[0])
        return len(symbols) == 3 and all(set(row) == symbols and len(row) == 3 for row in grid)
    raise AssertionError(f"unknown rule {rule}")


def decode_sraven(x: np.ndarray, y: np.ndarray, n_features: int, n_values: int) -> np.ndarray:
    """Panels [n, 3, 3, F] from the one-hot tokens (first 8 panels) and the targets (panel 9)."""
    n = x.shape[0]
    assert x.shape == (n, 9 * n_features, n_values), f"x has shape {x.shape}"
    context, queries = x[:, : 8 * n_features], x[:, 8 * n_features :]
    assert np.isin(context, (0.0, 1.0)).all() and (context.sum(-1) == 1).all(), "context tokens must be one-hot"
    assert (queries == 0).all(), "query tokens must be all zero"
    assert y.shape == (n, n_features) and ((y >= 0) & (y < n_values)).all(), "targets out of range"
    values = np.concatenate([context.argmax(-1), y], axis=1)
    return values.reshape(n, 3, 3, n_features)


def check_sraven_batch(
    x: np.ndarray,
    y: np.ndarray,
    rules: np.ndarray,
    perm: np.ndarray,
    panels: np.ndarray,
    n_values: int,
    compositions: np.ndarray,
) -> None:
    """Decoded tokens match the `panels` label; un-permuting each column with `perm` gives slots that follow
    their `rules` (sorted multisets from `compositions`)."""
    n, n_features = rules.shape
    np.testing.assert_array_equal(decode_sraven(x, y, n_features, n_values), panels, err_msg="x/y != panels")
    allowed = {tuple(row) for row in compositions.tolist()}
    for i in range(n):
        assert tuple(rules[i]) in allowed, f"instance {i}: rules {rules[i]} not a composition of its split"
        assert list(rules[i]) == sorted(rules[i]), f"instance {i}: rules not sorted"
        unpermuted = [[[None] * n_features for _ in range(3)] for _ in range(3)]
        for c in range(3):
            assert sorted(perm[i, c]) == list(range(n_features)), f"instance {i}: perm[{c}] not a permutation"
            for r in range(3):
                for j in range(n_features):
                    unpermuted[r][c][perm[i, c, j]] = int(panels[i, r, c, j])
        for f in range(n_features):
            grid = [[unpermuted[r][c][f] for c in range(3)] for r in range(3)]
            assert sraven_rule_holds(int(rules[i, f]), grid, n_values), (
                f"instance {i}, feature {f}: grid {grid} breaks rule {rules[i, f]}"
            )


def _fitting_answers(seq: list[int], n_values: int) -> list[int]:
    """Answers of the reference ambiguity check's rule families that fit the 8 context values (rows 3, 3, 2)."""
    rows, last = [seq[0:3], seq[3:6]], seq[6:8]
    answers = []
    if all(row[0] == row[1] == row[2] for row in rows) and last[0] == last[1]:
        answers.append(last[0])
    steps = [(seq[i + 1] - seq[i]) % n_values for i in (0, 1, 3, 4, 6)]
    if len(set(steps)) == 1 and steps[0] in {1, 2, (-1) % n_values, (-2) % n_values}:
        answers.append((last[1] + steps[0]) % n_values)
    if all((row[0] + row[1]) % n_values == row[2] for row in rows):
        answers.append((last[0] + last[1]) % n_values)
    if all((row[0] - row[1]) % n_values == row[2] for row in rows):
        answers.append((last[0] - last[1]) % n_values)
    symbols = sorted(rows[0])
    if sorted(rows[1]) == symbols and all(v in symbols for v in last):
        counts = [Counter(last)[s] for s in symbols]
        answers.append(symbols[counts.index(min(counts))])
    return answers


def sraven_ambiguous(panels: np.ndarray, n_values: int) -> bool:
    """The reference `check_is_ambiguous` for one instance (panels [3, 3, F] as presented), brute force over all
    (F!)^3 per-column slot permutations: ambiguous if under some hypothesis every feature has a fitting rule
    family whose answer differs from the true value."""
    n_features = panels.shape[-1]
    differs = np.zeros((n_features,) * 3, dtype=bool)  # [slot in column 0, column 1, column 2]
    for slots in product(range(n_features), repeat=3):
        seq = [int(panels[r, c, slots[c]]) for r in range(3) for c in range(3)]
        differs[slots] = any(a != seq[8] for a in _fitting_answers(seq[:8], n_values))
    perms = np.array(list(permutations(range(n_features))))
    hyps = np.array(list(product(range(len(perms)), repeat=3)))  # every (pi_0, pi_1, pi_2)
    per_feature = differs[perms[hyps[:, 0]], perms[hyps[:, 1]], perms[hyps[:, 2]]]  # [hypothesis, feature]
    return bool(per_feature.all(axis=1).any())
