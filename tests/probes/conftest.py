"""Synthetic `LatentCodes` with planted (or no) structure, for the probes tests.

`make_sraven` and `make_fuzzy` are factory fixtures: call them with the structure a test needs. Compositions
and splits follow the tasks' shapes (spec §2, §8.1): held-out SRAVEN rule combinations are `ood`; fuzzy-logic
held-out pairs of known terms are `ood` and pairs of never-trained terms are `novel_terms`.
"""

from __future__ import annotations

import itertools

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

from probes import LatentCodes

matplotlib.use("Agg")

RULE_NAMES = [
    "constant",
    "progression+1",
    "progression+2",
    "progression-1",
    "progression-2",
    "addition",
    "subtraction",
    "distribute_three",
]


def sraven_codes(
    n: int = 1200,
    *,
    structure: str = "rule",
    planted_layers: tuple[int, ...] | None = None,
    tie: tuple[int, int] | None = None,
    label_from: str = "random_feature",
    noise: float = 0.3,
    n_layers: int = 3,
    n_heads: int = 4,
    n_query: int = 1,
    n_key: int = 2,
    score_norm: str = "softmax",
    seed: int = 0,
) -> LatentCodes:
    """SRAVEN-shaped codes.

    structure: "rule" (each planted layer: a centre per rule of the analysed feature + noise), "tuple" (a sum of
    one embedding per (feature slot, rule), so codes track the whole rule tuple) or "random" (noise only).
    planted_layers: layers carrying the structure (default: all but the first). tie: two rules sharing a centre.
    label_from: "random_feature" (label = rule of a random slot: uniform classes) or "last" (the paper's
    skewed rule of the last sorted slot).
    """
    rng = np.random.default_rng(seed)
    combos = np.array(list(itertools.combinations_with_replacement(range(8), 4)))
    order = rng.permutation(len(combos))
    ood_combos, train_combos = combos[order[:82]], combos[order[82:]]
    split = rng.choice(["train", "test", "ood"], size=n, p=[0.5, 0.25, 0.25])
    rules = np.where(
        (split == "ood")[:, None],
        ood_combos[rng.integers(len(ood_combos), size=n)],
        train_combos[rng.integers(len(train_combos), size=n)],
    )
    slot = np.full(n, 3) if label_from == "last" else rng.integers(4, size=n)
    rule = rules[np.arange(n), slot]
    shape = (n_heads, n_query, n_key)
    codes = noise * rng.normal(size=(n, n_layers, *shape))
    planted = range(1, n_layers) if planted_layers is None else planted_layers
    for layer in planted:
        if structure == "rule":
            centres = rng.normal(size=(8, *shape))
            if tie is not None:
                centres[tie[1]] = centres[tie[0]]
            codes[:, layer] += centres[rule]
        elif structure == "tuple":
            embeddings = rng.normal(size=(4, 8, *shape))
            codes[:, layer] += sum(embeddings[f, rules[:, f]] for f in range(4))
    target = rng.integers(8, size=n)
    correct = rng.random(n) < 0.8
    prediction = np.where(correct, target, (target + 1) % 8)
    composition = np.unique(np.sort(rules, axis=1), axis=0, return_inverse=True)[1].ravel()
    labels = {"rule": rule, "rules": rules, "target": target, "prediction": prediction, "correct": correct,
              "feature": slot, "composition": composition, "instance": np.arange(n)}  # what extraction writes
    return LatentCodes(
        codes=codes.astype(np.float32),
        labels=labels,
        split=split,
        meta={
            "task": "sraven",
            "variant": "synthetic",
            "positions": "paper",
            "layers": list(range(n_layers)),
            "checkpoint": None,
            "label": "rule",
            "n_classes": 8,
            "class_names": RULE_NAMES,
            "score_norm": score_norm,
        },
    )


def fuzzy_codes(
    n: int = 1200,
    *,
    structure: str = "terms",
    n_variables: int = 4,
    n_terms: int = 2,
    n_layers: int = 2,
    n_heads: int = 8,
    noise: float = 0.1,
    with_composition: bool = True,
    seed: int = 0,
) -> LatentCodes:
    """Fuzzy-logic-shaped codes (query attending to itself: query = key = 1).

    structure: "terms" (sum of one embedding per term of the composition), "bits" (linear in the K·L latent
    bits), "composition" (a random vector per composition: memorizable, not generalizable) or "random".
    with_composition: write the `composition` label, as extraction does (False: codes of another producer).
    """
    rng = np.random.default_rng(seed)
    n_classes = 2**n_variables
    known = n_classes - n_classes // 4
    bits_table = np.array(list(itertools.product([0, 1], repeat=n_variables)))
    known_pairs = np.array(list(itertools.combinations(range(known), n_terms)))
    novel_pairs = np.array(list(itertools.combinations(range(known, n_classes), n_terms)))
    order = rng.permutation(len(known_pairs))
    ood_pairs, train_pairs = known_pairs[order[: len(order) // 2]], known_pairs[order[len(order) // 2 :]]
    split = rng.choice(["train", "test", "ood", "novel_terms"], size=n, p=[0.5, 0.2, 0.2, 0.1])
    pools = {"train": train_pairs, "test": train_pairs, "ood": ood_pairs, "novel_terms": novel_pairs}
    terms = np.stack([pools[s][rng.integers(len(pools[s]))] for s in split])
    term_bits = bits_table[terms]
    features = n_layers * n_heads
    if structure == "terms":
        clean = rng.normal(size=(n_classes, features))[terms].sum(axis=1)
    elif structure == "bits":
        clean = term_bits.reshape(n, -1) @ rng.normal(size=(n_terms * n_variables, features))
    elif structure == "composition":
        _, composition = np.unique(terms, axis=0, return_inverse=True)
        clean = rng.normal(size=(composition.max() + 1, features))[composition.ravel()]
    else:
        clean = np.zeros((n, features))
    codes = (clean + noise * rng.normal(size=(n, features))).reshape(n, n_layers, n_heads, 1, 1)
    target = rng.random(n)
    labels = {"terms": terms, "term_bits": term_bits, "target": target, "prediction": target + 0.05,
              "instance": np.arange(n)}
    if with_composition:
        labels["composition"] = np.unique(terms, axis=0, return_inverse=True)[1].ravel()
    names = ["∧".join(f"{'' if b else '¬'}x{j + 1}" for j, b in enumerate(row)) for row in bits_table]
    return LatentCodes(
        codes=codes.astype(np.float32),
        labels=labels,
        split=split,
        meta={
            "task": "fuzzy_logic",
            "variant": "synthetic",
            "positions": "paper",
            "layers": list(range(n_layers)),
            "checkpoint": None,
            "label": "terms",
            "n_classes": n_classes,
            "class_names": names,
            "score_norm": "rms_head",
        },
    )


@pytest.fixture(scope="session")
def make_sraven():
    """Factory: `make_sraven(n=..., structure=..., ...)` -> SRAVEN-shaped `LatentCodes` (see `sraven_codes`)."""
    return sraven_codes


@pytest.fixture(scope="session")
def make_fuzzy():
    """Factory: `make_fuzzy(n=..., structure=..., ...)` -> fuzzy-logic `LatentCodes` (see `fuzzy_codes`)."""
    return fuzzy_codes


@pytest.fixture
def sraven() -> LatentCodes:
    """Planted SRAVEN codes: layer 0 noise, layers 1-2 rule clusters; 1,200 rows."""
    return sraven_codes()


@pytest.fixture
def fuzzy() -> LatentCodes:
    """Planted fuzzy-logic codes: each code is the sum of its terms' embeddings; 1,200 rows."""
    return fuzzy_codes()


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")
