"""Symbolic Raven (SRAVEN, spec §2.2): `SRavenConfig`, the registered task `SRaven`, and its ambiguity check.

A 3x3 grid of panels, each a tuple of `n_features` integers mod `n_values`; every feature follows one of eight
rules along the rows, and with `permute_features` each column shuffles the feature slots (the same way in every
row). The model sees the first 8 panels as one-hot tokens and predicts panel 9. Splits are explicit lists of
rule multisets drawn from the task seed (spec §8.1). Generation is vectorized torch on the requested device;
no model code lives here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import combinations_with_replacement, permutations
from math import comb
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor

from latentcode.tasks.base import (
    Batch,
    CodeReading,
    CompositionalTask,
    InputChoice,
    check_split,
    register_task,
)
from latentcode.tasks.fuzzy_logic import (
    _check_disjoint,
    _generator,
    _lookup,
    _make_config,
    _read_dict,
    _validate_rows,
)

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

_DISTRIBUTE_THREE = 7
# Rules 0-6 as one formula per column c: value[row, c] = (A[rule, c] * s_row + B[rule, c] * b_row + D[rule, c])
# mod n_values, with s_row, b_row uniform. Distribute-three (row 7, all zero here) is drawn separately.
_COEF_A = [[1, 1, 1]] * 5 + [[1, 0, 1], [1, 0, 1], [0, 0, 0]]
_COEF_B = [[0, 0, 0]] * 5 + [[0, 1, 1], [0, 1, -1], [0, 0, 0]]
_COEF_D = [[0, 0, 0], [0, 1, 2], [0, 2, 4], [0, -1, -2], [0, -2, -4]] + [[0, 0, 0]] * 3
_MAX_FEATURES = 8
_MAX_AMBIGUITY_FEATURES = 6
_CHUNK_ELEMENTS = 2**24


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


@register_task("sraven")
class SRaven(CompositionalTask):
    """SRAVEN with splits `train`, `test` and `ood` (spec §8.1).

    Batch layout (K = n_features, V = n_values): `x` float [batch, 9K, V], token K*p + k the one-hot value of
    (presented) slot k of panel p for p = 0..7, then K all-zero query tokens; `y` long [batch, K], panel 9 in
    presented slot order. Labels: `rules` long [batch, K] (the rule of each feature in unpermuted slot order:
    the sorted multiset), `perm` long [batch, 3, K] (in column c, presented slot j holds unpermuted feature
    perm[c, j]), `panels` long [batch, 3, 3, K] (row, column, presented slot), and with
    `with_ambiguity=True` also `ambiguous` bool [batch].

    >>> task = SRaven(seed=0)
    >>> batch = task.sample(4, seed=0)
    >>> tuple(batch.x.shape), tuple(batch.y.shape), len(task.compositions("ood"))
    ((4, 36, 8), (4, 4), 82)
    >>> values = torch.cat([batch.x.argmax(-1)[:, :32], batch.y], dim=1)  # the answer at the query tokens
    >>> task.metrics(torch.nn.functional.one_hot(values, 8).float(), batch)["acc"]
    1.0
    """

    name: ClassVar[str] = "sraven"
    splits: ClassVar[tuple[str, ...]] = ("train", "test", "ood")
    metric_name: ClassVar[str] = "acc"
    code_reading: ClassVar[CodeReading] = CodeReading(
        inputs=(
            InputChoice("unpermuted", {"unpermuted": True},
                        "feature permutation off, slot f follows rules[f] in every panel (the reference's "
                        "*_unpermuted loaders its latent dumps read; spec §4.1)"),
            InputChoice("permuted", {"unpermuted": False},
                        "as in training (columns permuted when permute_features); each row is labelled with the "
                        "rule of the feature its query slot predicts"),
        ),
        labels=("rule", "feature", "target", "prediction", "correct", "composition", "instance"),
    )
    """Codes are read by default on unpermuted instances at the reference's dump positions (spec §4.1)."""

    def __init__(self, **params: Any) -> None:
        """Build the task and draw its held-out rule multisets from `seed`.

        Args:
            **params: fields of `SRavenConfig` (n_features, n_values, frac_ood, permute_features, seed).

        Raises:
            ValueError: an unknown parameter, or parameters that are impossible or leave a split empty.
        """
        config = _make_config(SRavenConfig, params)
        self._setup(config, _draw_compositions(config))

    def _setup(self, config: SRavenConfig, comps: dict[str, np.ndarray]) -> None:
        self.config = config
        self.d_in = config.n_values
        self.d_out = config.n_values
        self.seq_len = 9 * config.n_features
        self.n_readout = config.n_features  # the query tokens of panel 9
        self._comps = {**comps, "test": comps["train"]}
        self._device_cache: dict[tuple[str, str], Tensor] = {}

    def sample(
        self,
        n: int,
        split: str = "train",
        *,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        unpermuted: bool = False,
        with_ambiguity: bool = False,
    ) -> Batch:
        """Draw `n` instances of the split's rule multisets, generated on `device`.

        Args:
            n: number of instances.
            split: one of `SRaven.splits`.
            seed: batch seed; the same (task, split, seed, n) gives the same batch on one device. None draws
                one from torch's global RNG.
            device: where the batch is generated.
            unpermuted: switch the feature permutation off (as the reference's `*_unpermuted` loaders), so
                slot f follows rule `rules[f]` in every panel.
            with_ambiguity: also label each instance with `ambiguous` (see `SRaven.ambiguous`); this is far
                slower than generating the batch (docs/benchmarks.md).

        Returns:
            The `Batch` described in the class docstring.

        Raises:
            ValueError: `n` <= 0, an unknown split, or a negative seed.
        """
        if n <= 0:
            raise ValueError(f"n={n} must be a positive integer")
        check_split(split, self.splits)
        n_features, n_values = self.config.n_features, self.config.n_values
        generator = _generator(self.config.seed, split, seed, device)
        rules = _lookup(self._on(split, device), _randint(len(self._comps[split]), (n,), generator, device))

        # rules 0-6 by one formula from per-row draws s and b; distribute_three from a distinct triple per feature
        s, b = _randint(n_values, (2, n, n_features, 3), generator, device).unsqueeze(-1)
        coef_a, coef_b, coef_d = _lookup(self._on("coef", device), rules).unflatten(-1, (3, 1, 3)).unbind(2)
        values = (coef_a * s + coef_b * b + coef_d) % n_values
        row_perm = _lookup(self._on("perm3", device), _randint(6, (n, n_features, 3), generator, device))
        three = _distinct_triples(n, n_features, n_values, generator, device)
        spread = three.gather(-1, row_perm.flatten(-2)).view(n, n_features, 3, 3)
        values = torch.where(rules[:, :, None, None] == _DISTRIBUTE_THREE, spread, values)
        unpermuted_panels = values.permute(0, 2, 3, 1)  # [batch, row, column, feature]

        if self.config.permute_features and not unpermuted:
            table = self._on("perms", device)
            perm = _lookup(table, _randint(len(table), (n, 3), generator, device))
        else:
            perm = torch.arange(n_features, device=device).expand(n, 3, n_features)
        panels = unpermuted_panels.gather(-1, perm.unsqueeze(1).expand(n, 3, 3, n_features))

        flat = panels.reshape(n, 9 * n_features)
        tokens = flat.clone()
        tokens[:, 8 * n_features :] = n_values  # the all-zero row of the one-hot table
        x = self._one_hot(device).index_select(0, tokens.flatten()).view(torch.float32)
        x = x.view(n, self.seq_len, n_values)
        labels = {"rules": rules, "perm": perm.contiguous(), "panels": panels}
        batch = Batch(x=x, y=flat[:, 8 * n_features :], labels=labels, split=split)
        if with_ambiguity:
            labels["ambiguous"] = self.ambiguous(batch)
        return batch

    def loss(self, outputs: Float[Tensor, "batch pos d_out"], batch: Batch) -> Float[Tensor, ""]:
        """Mean cross-entropy of the n_features query positions against panel 9."""
        logits = self._query_logits(outputs)
        return F.cross_entropy(logits.flatten(0, 1), batch.y.flatten())

    def metrics(self, outputs: Float[Tensor, "batch pos d_out"], batch: Batch) -> dict[str, float]:
        """`loss`, `acc` (instances with every feature right) and `acc_per_feature` (mean over features)."""
        correct = self.predict(outputs) == batch.y
        return {
            "loss": self.loss(outputs, batch).item(),
            "acc": correct.all(dim=-1).float().mean().item(),
            "acc_per_feature": correct.float().mean().item(),
        }

    def predict(self, outputs: Float[Tensor, "batch pos d_out"]) -> Int[Tensor, "batch feature"]:
        """Argmax value at each of the n_features query positions: panel 9 in presented slot order."""
        return self._query_logits(outputs).argmax(dim=-1)

    def rule_answer(
        self, grid: Int[Tensor, "batch 3 3"], rule: Int[Tensor, " batch"]
    ) -> tuple[Int[Tensor, " batch"], Bool[Tensor, " batch"]]:
        """The value `rule` gives the last panel of one feature's 3x3 grid, where that is defined.

        What the rule-transfer experiment needs: the answer a donor's rule gives on a recipient's panels. A
        rule's answer is defined when the last row's first two values fit it: constant needs them equal, a
        progression needs them one step apart, addition and subtraction always fit, and distribute_three needs
        the first two rows to spread one triple of distinct values and the last row's two values to be two of
        them (the answer is the third). The last entry of `grid` is ignored.

        Args:
            grid: values [batch, row, column] of one feature (unpermuted, or one slot followed across columns).
            rule: rule index [batch] (into `RULE_NAMES`).

        Returns:
            (answer long [batch], defined bool [batch]); the answer is 0 where undefined.

        >>> task = SRaven()
        >>> batch = task.sample(64, seed=0, unpermuted=True)
        >>> answer, defined = task.rule_answer(batch.labels["panels"][..., 2], batch.labels["rules"][:, 2])
        >>> bool(defined.all()), bool((answer == batch.y[:, 2]).all())
        (True, True)
        """
        n_values = self.config.n_values
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
        three = (rule == _DISTRIBUTE_THREE) & spread & has_first & has_second & (first != second)
        third = triple.sum(-1) - first - second
        answer = torch.where(three, third, answer)
        defined = defined | three
        return torch.where(defined, answer, torch.zeros_like(answer)), defined

    def ambiguous(self, batch: Batch) -> Bool[Tensor, " batch"]:
        """Whether another assignment of rules fits the context and answers differently (spec §2.2, §8.6).

        A faithful, vectorized port of the reference `check_is_ambiguous`: a hypothesis picks, for every
        feature, one slot in each column (a permutation per column); the instance is ambiguous if under some
        hypothesis **every** feature's 8 context values fit some rule family (constant, progression with step
        1, 2, -1 or -2, sum, difference, distribute_three) whose answer differs from the true value in that
        slot of panel 9. Relabelling the features maps hypotheses onto each other, so fixing the last column's
        permutation to the identity checks (n_features!)^2 hypotheses instead of (n_features!)^3 with the same
        result. Panels are decoded from `batch.x` and `batch.y`; the batch is processed in chunks so memory
        stays bounded.

        Args:
            batch: a batch of this task (any split, permuted or not).

        Returns:
            Bool [batch]: True where the instance is ambiguous.

        Raises:
            ValueError: n_features > 6 (the hypothesis count grows as (n_features!)^2).
        """
        n_features = self.config.n_features
        if n_features > _MAX_AMBIGUITY_FEATURES:
            raise ValueError(
                f"ambiguity check needs n_features <= {_MAX_AMBIGUITY_FEATURES}; this task has {n_features}"
            )
        device = batch.x.device
        flat = torch.cat([batch.x[:, : 8 * n_features].argmax(dim=-1), batch.y], dim=1)
        triples = self._on("triples", device)  # slot triple -> the flat positions of its 9 values
        sequences = flat.index_select(1, triples.flatten()).unflatten(1, triples.shape)
        applies, answers = _rule_fits(sequences[..., :8], self.config.n_values)
        triple_ok = (applies & (answers != sequences[..., 8:])).any(dim=-1)  # [batch, slot triple]
        hypotheses = self._on("hypotheses", device)  # [hypothesis, feature] indices into the slot triples
        chunk = max(1, _CHUNK_ELEMENTS // hypotheses.numel())
        return torch.cat(
            [
                part.index_select(1, hypotheses.flatten()).unflatten(1, hypotheses.shape).all(-1).any(-1)
                for part in triple_ok.split(chunk)
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: name, params and the explicit composition lists of `train` and `ood`."""
        return {
            "name": self.name,
            "params": dataclasses.asdict(self.config),
            "compositions": {s: self._comps[s].tolist() for s in ("train", "ood")},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SRaven:
        """Rebuild the task with exactly the stored composition lists (they are validated, not recomputed).

        Raises:
            ValueError: another task's name, unknown params, or lists of the wrong shape, out of range,
                unsorted, repeated, or overlapping between splits.
        """
        config, stored = _read_dict(cls.name, SRavenConfig, data, ("train", "ood"))
        comps = {
            split: _validate_rows(split, stored[split], config.n_features, 0, len(RULE_NAMES), strict=False)
            for split in ("train", "ood")
        }
        _check_disjoint(comps["train"], comps["ood"])
        task = cls.__new__(cls)
        task._setup(config, comps)
        return task

    def _query_logits(self, outputs: Tensor) -> Tensor:
        if outputs.shape[-1] != self.d_out:
            raise ValueError(f"outputs have d_out={outputs.shape[-1]}; this SRAVEN task needs d_out={self.d_out}")
        return outputs[:, -self.config.n_features :].float()

    def _one_hot(self, device: str | torch.device) -> Tensor:
        """One-hot rows of each value plus an all-zero row, as int64 pairs of float32 when n_values is even.

        Why pairs: looking up half as many elements keeps the lookup of a batch of 128 under torch's
        parallel-for threshold; a parallel kernel stalled for milliseconds per batch on a busy 2-core CPU.
        """
        key = ("one_hot", str(torch.device(device)))
        if key not in self._device_cache:
            eye = torch.eye(self.config.n_values + 1, self.config.n_values, device=device)
            self._device_cache[key] = eye.view(torch.int64) if self.config.n_values % 2 == 0 else eye
        return self._device_cache[key]

    def _on(self, what: str, device: str | torch.device) -> Tensor:
        """A constant table as a long tensor on `device`, built once per device."""
        key = (what, str(torch.device(device)))
        if key not in self._device_cache:
            self._device_cache[key] = torch.as_tensor(self._table(what), dtype=torch.long, device=device)
        return self._device_cache[key]

    def _table(self, what: str) -> Any:
        n_features = self.config.n_features
        if what in self._comps:
            return self._comps[what]
        if what == "coef":
            return np.concatenate([_COEF_A, _COEF_B, _COEF_D], axis=1)  # [rule, (a, b, d) x column]
        if what == "perm3":
            return list(permutations(range(3)))
        if what == "perms":
            return list(permutations(range(n_features)))
        if what == "triples":
            # slot triple (j0, j1, j2) -> flat positions of its 9 values, row-major, slot j_c in column c
            slots = np.indices((n_features,) * 3).reshape(3, -1).T
            cells = np.arange(9)
            return cells * n_features + slots[:, cells % 3]
        if what == "hypotheses":
            perms = np.array(list(permutations(range(n_features))))
            first, second = (a.reshape(-1, n_features) for a in np.broadcast_arrays(perms[:, None], perms[None]))
            return (first * n_features + second) * n_features + np.arange(n_features)
        raise KeyError(what)


def _draw_compositions(config: SRavenConfig) -> dict[str, np.ndarray]:
    combos = np.array(
        list(combinations_with_replacement(range(len(RULE_NAMES)), config.n_features)), dtype=np.int64
    )
    order = np.random.default_rng(config.seed).permutation(len(combos))
    n_ood = int(len(combos) * config.frac_ood)
    return {"train": combos[np.sort(order[n_ood:])], "ood": combos[np.sort(order[:n_ood])]}


def _randint(high: int, shape: tuple[int, ...], generator: torch.Generator, device: str | torch.device) -> Tensor:
    return torch.randint(high, shape, generator=generator, device=device)


def _distinct_triples(
    n: int, n_features: int, n_values: int, generator: torch.Generator, device: str | torch.device
) -> Int[Tensor, "batch feature 3"]:
    """Uniform ordered triples of distinct values in [0, n_values): draw, then skip the values already taken."""
    first = _randint(n_values, (n, n_features), generator, device)
    second = _randint(n_values - 1, (n, n_features), generator, device)
    second = second + (second >= first)
    third = _randint(n_values - 2, (n, n_features), generator, device)
    low, high = torch.minimum(first, second), torch.maximum(first, second)
    third = third + (third >= low)
    third = third + (third >= high)
    return torch.stack([first, second, third], dim=-1)


def _rule_fits(context: Tensor, n_values: int) -> tuple[Tensor, Tensor]:
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
