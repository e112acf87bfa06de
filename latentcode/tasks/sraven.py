"""Symbolic Raven (SRAVEN, spec §2.2): the registered task `SRaven`, what it declares, and its ambiguity check.

A 3x3 grid of panels, each a tuple of `n_features` integers mod `n_values`; every feature follows one of eight
rules along the rows, and with `permute_features` each column shuffles the feature slots (the same way in every
row). The model sees the first 8 panels as one-hot tokens and predicts panel 9. Splits are explicit lists of
rule multisets drawn from the task seed (spec §8.1). Generation is vectorized torch on the requested device;
no model code lives here; its parameters (`SRavenConfig`), rule arithmetic and the grids a batch's rules give
(`rule_grids`) are in `sraven_rules.py`, and how an instance is drawn (`instance_html`, `plot_instance`) in
`sraven_picture.py`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from itertools import combinations_with_replacement
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
    PositionSpec,
    TaskPresets,
    check_positions,
    check_split,
)
from latentcode.tasks.registry import register_task
from latentcode.tasks.sampling import (
    batch_generator,
    check_disjoint,
    hold_out,
    lookup,
    make_config,
    randint,
    read_task_dict,
    validate_compositions,
)
from latentcode.tasks.sraven_picture import SRavenPicture
from latentcode.tasks.sraven_rules import (
    MAX_AMBIGUITY_FEATURES,
    RULE_NAMES,
    SRavenConfig,
    ambiguous,
    rule_answer,
    rule_grids,
    rule_table,
)

__all__ = ["RULE_NAMES", "SRaven", "SRavenConfig"]


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
        label_kinds={"rule": "class", "rules": "class_tuple", "feature": "class", "target": "class",
                     "prediction": "class", "correct": "class", "composition": "group", "instance": "group",
                     "view": "class"},
        composition="rules",
        input_control="positions",  # the tokens the codes come from
        control_task=True,  # the key tokens take few discrete values
        positions=("paper", "all_features"),
    )
    """Codes are read by default on unpermuted instances at the reference's dump positions (spec §4.1)."""
    presets: ClassVar[TaskPresets] = TaskPresets(
        train={
            "tiny": dict(steps=40, batch_size=32, warmup=4, eval_every=20, eval_samples=256, log_every=10,
                         checkpoint_every=20),
            "small": dict(steps=2000, batch_size=128, warmup=200, eval_every=1000, eval_samples=4096),
            "paper": dict(steps=156_250, batch_size=128, warmup=1000, eval_every=10_000, eval_samples=51_200,
                          checkpoint_every=10_000),
        },
        model={
            "tiny": dict(d_model=32, n_heads=4, d_qk=16, d_v=16, d_mlp=64, n_layers=2, attn_dropout=0.0),
            "small": dict(d_model=64, n_heads=8, d_qk=32, d_v=32, d_mlp=128, n_layers=3, attn_dropout=0.1),
            "paper": dict(d_model=128, n_heads=16, d_qk=64, d_v=64, d_mlp=256, n_layers=4, attn_dropout=0.1),
        },
        width=True,
        # small models learn the rules within minutes without the column permutation (with it, they sit on a
        # plateau for thousands of steps); the analyses draw unpermuted instances either way
        demo_params={"permute_features": False},
    )
    transfer: ClassVar[str | None] = "rule_transfer"
    shared_codes: ClassVar[dict[str, tuple[tuple[str, ...], ...]]] = {"rule": (("addition", "subtraction"),)}
    """Classes of a label that share one latent code, by label: the paper's Fig. 5E finds addition and subtraction
    "reused by flipping the sign of the operands". Decoding reports its score with each group merged beside the
    plain one (`probes.decode_rules(merge=...)`), since a linear probe of the code cannot tell them apart."""

    def __init__(self, **params: Any) -> None:
        """Build the task and draw its held-out rule multisets from `seed`.

        Args:
            **params: fields of `SRavenConfig` (n_features, n_values, frac_ood, permute_features, seed).

        Raises:
            ValueError: an unknown parameter, or parameters that are impossible or leave a split empty.
        """
        config = make_config(SRavenConfig, params)
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
        generator = batch_generator(self.config.seed, split, seed, device)
        rules = lookup(self._on(split, device), randint(len(self._comps[split]), (n,), generator, device))

        tables = self._on("coef", device), self._on("perm3", device)
        unpermuted_panels = rule_grids(rules, n_values, tables, generator, device)  # [batch, row, column, feature]

        if self.config.permute_features and not unpermuted:
            table = self._on("perms", device)
            perm = lookup(table, randint(len(table), (n, 3), generator, device))
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
        """The value `rule` gives the last panel of one feature's 3x3 grid, where that is defined (what the
        rule-transfer experiment needs: the answer a donor's rule gives on a recipient's panels; `sraven_rules.
        rule_answer` says when an answer is defined). The last entry of `grid` is ignored.

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
        return rule_answer(grid, rule, self.config.n_values)

    def ambiguous(self, batch: Batch) -> Bool[Tensor, " batch"]:
        """Whether another assignment of rules fits the context and answers differently (spec §2.2, §8.6): a
        vectorized port of the reference `check_is_ambiguous` (`sraven_rules.ambiguous` says how).

        Args:
            batch: a batch of this task (any split, permuted or not); panels are decoded from `x` and `y`.

        Returns:
            Bool [batch]: True where the instance is ambiguous.

        Raises:
            ValueError: n_features > 6 (the hypothesis count grows as (n_features!)^2).
        """
        n_features = self.config.n_features
        if n_features > MAX_AMBIGUITY_FEATURES:
            raise ValueError(f"ambiguity check needs n_features <= {MAX_AMBIGUITY_FEATURES}; this task has {n_features}")
        device = batch.x.device
        flat = torch.cat([batch.x[:, : 8 * n_features].argmax(dim=-1), batch.y], dim=1)
        return ambiguous(flat, self.config.n_values, self._on("triples", device), self._on("hypotheses", device))

    def code_positions(self, name: str) -> PositionSpec:
        """'paper' (spec §4.1): the last query token attending to the last feature of panels 7 and 8;
        'all_features' (spec §8.4): one view per feature f, its query token attending to feature f of panels 7, 8.

        >>> spec = SRaven().code_positions("paper")
        >>> spec.query.tolist(), spec.key.tolist(), spec.feature.tolist()
        ([[35]], [[27, 31]], [3])
        """
        check_positions(name, self.code_reading.positions, self.name)
        n_features = self.config.n_features
        first_query = self.seq_len - n_features
        panels = first_query // n_features  # context panels (8)
        features = np.arange(n_features) if name == "all_features" else np.array([n_features - 1])
        query = (first_query + features)[:, None]
        key = np.stack([(panels - 2) * n_features + features, (panels - 1) * n_features + features], axis=1)
        return PositionSpec(name, query.astype(np.int64), key.astype(np.int64), features.astype(np.int64))

    def custom_positions(self, query: np.ndarray, key: np.ndarray) -> PositionSpec:
        """Explicit positions; the analysed feature is the one whose query token is asked, if a single one is,
        else the last (as 'paper')."""
        n_features = self.config.n_features
        asked = np.unique(query) - (self.seq_len - n_features)
        only = asked.size == 1 and 0 <= asked[0] < n_features
        feature = np.array([asked[0] if only else n_features - 1], dtype=np.int64)
        return PositionSpec("custom", query[None, :], key[None, :], feature)

    def code_labels(self, batch: Batch) -> dict[str, np.ndarray]:
        """The rules, the slot permutation (identity when unpermuted: it maps each presented slot to the feature
        it holds) and the targets."""
        return {name: batch.labels[name].cpu().numpy() for name in ("rules", "perm")} | {"target": batch.y.cpu().numpy()}

    def row_labels(self, labels: dict[str, np.ndarray], spec: PositionSpec) -> dict[str, np.ndarray]:
        """Per row: `rule` (of the feature the view's query slot predicts), `rules`, `feature`, `target`,
        `prediction`, `correct`, `composition`, `instance`."""
        rules = labels["rules"]
        slot = np.tile(spec.feature, len(rules))  # the presented slot each row's query predicts
        inst = np.repeat(np.arange(len(rules)), spec.n_views)
        # permuted instances: panel 9 (column 2) presents unpermuted feature perm[2, slot] in that slot
        feature = labels["perm"][inst, 2, slot] if "perm" in labels else slot
        out = {"rule": rules[inst, feature], "rules": rules[inst], "feature": feature,
               "target": labels["target"][inst, slot], "prediction": labels["prediction"][inst, slot]}
        out["correct"] = out["target"] == out["prediction"]
        return out | {"composition": labels["composition"][inst], "instance": labels["instance"][inst]}

    def class_names(self) -> list[str]:
        """`RULE_NAMES`: the classes of the default label, `rule`."""
        return list(RULE_NAMES)

    def instance_html(self, tokens: np.ndarray, labels: Mapping[str, Any]) -> str:
        """The 3x3 grid as SVG: each panel's features as coloured value cells, panel 9 with the model's answer
        (blank where unknown; a wrong cell outlined in red with the true value beside it), each feature's rule
        named below (the analysed one in bold), and a red mark when the instance's rule set is held out (ood).
        Drawn by `sraven_picture.SRavenPicture`, which says which labels it reads.

        >>> task = SRaven()
        >>> batch = task.sample(1, seed=0, unpermuted=True)
        >>> svg = task.instance_html(batch.x[0].numpy(), {"rules": batch.labels["rules"][0].numpy()})
        >>> svg.startswith("<svg") and svg.count("<rect") >= 9 * 4
        True
        """
        return self._picture(tokens, labels).svg()

    def plot_instance(self, tokens: np.ndarray, labels: Mapping[str, Any], ax: Any = None) -> Any:
        """The picture of `instance_html` on a matplotlib axes (for papers). Returns the axes."""
        return self._picture(tokens, labels).plot(ax)

    def _picture(self, tokens: np.ndarray, labels: Mapping[str, Any]) -> SRavenPicture:
        return SRavenPicture.read(tokens, labels, n_features=self.config.n_features, n_values=self.config.n_values,
                                  ood=self._comps["ood"])

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
        config, stored = read_task_dict(cls.name, SRavenConfig, data, ("train", "ood"))
        comps = {
            split: validate_compositions(split, stored[split], config.n_features, 0, len(RULE_NAMES), strict=False)
            for split in ("train", "ood")
        }
        check_disjoint(comps["train"], comps["ood"])
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
        """A split's compositions or a constant table (`sraven_rules.rule_table`) as a long tensor on `device`,
        built once per device."""
        key = (what, str(torch.device(device)))
        if key not in self._device_cache:
            table = self._comps[what] if what in self._comps else rule_table(what, self.config.n_features)
            self._device_cache[key] = torch.as_tensor(table, dtype=torch.long, device=device)
        return self._device_cache[key]


def _draw_compositions(config: SRavenConfig) -> dict[str, np.ndarray]:
    combos = np.array(
        list(combinations_with_replacement(range(len(RULE_NAMES)), config.n_features)), dtype=np.int64
    )
    return hold_out(combos, config.frac_ood, config.seed)
