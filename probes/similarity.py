"""Similarity structure of latent codes: mean code per rule, cosine similarity between rules, topographic score.

`rule_similarity` is the paper's Fig. 5E (cosine similarity between the average code of each rule).
`topographic_similarity` asks whether instances with similar rule assignments have similar codes (Spearman
correlation of pairwise distances, on a seeded sample of pairs, with an optional permutation test). Both mark
constant codes (`probes.degenerate`): the ranks of rounding noise are not a topographic score. No plotting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.stats import rankdata

from probes.codes import LatentCodes
from probes.codes_io import jsonable
from probes.decoding.fit import LayerChoice, _single_threaded
from probes.degenerate import (
    CONSTANT_RTOL,
    CodeSpread,
    LayerSpread,
    is_constant,
    relative_spread,
    warn_constant,
)
from probes.labels import class_labels


@dataclass(frozen=True)
class ClassMeans:
    """Mean code of each class.

    Attributes:
        label: the label grouped by (for sets such as `terms`: rows containing the class).
        class_names: names of the classes.
        counts: rows per class [class].
        means: mean code [class, layer, head, query, key] (NaN for classes without rows).
        score_norm: `meta["score_norm"]` of the codes (softmax codes are probabilities, others are not).
        layer_names: model layer of each entry of the layer axis.
    """

    label: str
    class_names: list[str]
    counts: np.ndarray
    means: np.ndarray
    score_norm: str | None = None
    layer_names: list[int] = field(default_factory=list)


@_single_threaded
def class_means(
    codes: LatentCodes, label: str | None = None, split: str | list[str] | None = None
) -> ClassMeans:
    """Mean code of each class of `label` (default `codes.label`), optionally within some split(s).

    Example:
        >>> import numpy as np
        >>> lc = LatentCodes(np.arange(4.0).reshape(4, 1, 1, 1, 1), {"rule": np.array([0, 0, 1, 1])},
        ...                  np.array(["test"] * 4), {"task": "sraven", "n_classes": 3})
        >>> m = class_means(lc)
        >>> m.counts.tolist(), m.means.ravel().tolist()[:2]
        ([2, 2, 0], [0.5, 2.5])
    """
    rows = codes.select(split=split) if split is not None else codes
    name, y, classes, names = class_labels(rows, label)
    if y.ndim == 2:
        member = np.zeros((rows.n_samples, len(classes)), dtype=bool)
        np.put_along_axis(member, y, True, axis=1)
    else:
        member = y[:, None] == classes[None, :]
    counts = member.sum(axis=0)
    flat = rows.codes.reshape(rows.n_samples, -1).astype(np.float64)
    with np.errstate(all="ignore"):
        means = (member.T.astype(np.float64) @ flat) / counts[:, None]
    means = means.reshape(len(classes), *rows.codes.shape[1:])
    return ClassMeans(name, list(names), counts, means, rows.score_norm, rows.layer_names)


@dataclass(frozen=True)
class RuleSimilarity:
    """Cosine similarity between the mean codes of every pair of classes (paper Fig. 5E).

    Attributes:
        label: the label grouped by.
        class_names: names of the classes (rows and columns of `similarity`).
        similarity: cosine similarity [class, class]; NaN for classes without rows.
        counts: rows per class.
        layer: layer group the mean codes span ("all", or a model layer).
        centered: whether the grand mean code was subtracted before the cosine.
        constant: the codes were constant (`probes.degenerate`): every class has the same mean code, so the
            uncentered cosines are 1 and the centered ones (rounding noise) are NaN.
    """

    label: str
    class_names: list[str]
    similarity: np.ndarray
    counts: np.ndarray
    layer: str
    centered: bool
    constant: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return jsonable(asdict(self))

    def most_similar(self, k: int = 3) -> list[tuple[str, str, float]]:
        """The `k` most similar pairs of distinct classes, most similar first."""
        upper = np.triu(np.ones_like(self.similarity, dtype=bool), 1) & np.isfinite(self.similarity)
        pairs = sorted(zip(*np.nonzero(upper), strict=True), key=lambda ij: -self.similarity[ij])
        return [
            (self.class_names[i], self.class_names[j], float(self.similarity[i, j])) for i, j in pairs[:k]
        ]


@_single_threaded
def rule_similarity(
    codes: LatentCodes,
    label: str | None = None,
    layer: str | int = "all",
    *,
    split: str | list[str] | None = None,
    center: bool = True,
    rtol: float = CONSTANT_RTOL,
) -> RuleSimilarity:
    """Cosine similarity between the mean codes of each class (rule) of `label`.

    Args:
        codes: latent codes.
        label: label to group by (default `codes.label`; for fuzzy-logic `terms`, rows containing each term).
        layer: "all" (default), "last", or a model layer number.
        split: restrict to these split(s) (default: every row).
        center: subtract the mean code over all rows first (default; the centred cosine). Softmax codes are
            positive, so raw cosines (`center=False`, the default up to 0.2) are all high and a heatmap of them
            is uniformly dark; centring shows how each rule departs from the average code.
        rtol: codes varying by at most this fraction of their RMS are constant (`probes.degenerate`).

    Returns:
        A `RuleSimilarity`.
    """
    layer, positions = codes.layer_group(layer)
    means = class_means(codes, label, split)
    flat = means.means[:, positions].reshape(len(means.class_names), -1)
    rows = codes.select(split=split) if split is not None else codes
    constant = is_constant(rows._flat_axis(positions), rtol)
    if center:
        flat = flat - rows._flat_axis(positions).astype(np.float64).mean(axis=0)
    norms = np.linalg.norm(flat, axis=1, keepdims=True)
    with np.errstate(all="ignore"):
        unit = flat / norms
    similarity = np.clip(unit @ unit.T, -1.0, 1.0)
    if constant and center:  # what is left after centering is rounding noise
        similarity = np.full_like(similarity, np.nan)
    return RuleSimilarity(means.label, means.class_names, similarity, means.counts, layer, center, constant)


@dataclass(frozen=True)
class TopographicResult:
    """Spearman correlation between code distances and rule-assignment distances over pairs of rows.

    Attributes:
        label: the label defining rule assignments (`rules` or `terms`).
        distance: "hamming" (positions that differ) or "symmetric_difference" (size of the set difference).
        metric: code distance ("euclidean" or "cosine").
        layers: layer group names.
        rho: Spearman correlation per layer group (NaN if a distance is constant over the pairs).
        p_value: per layer group, one-sided permutation p-value (assignments shuffled across rows), or None.
        n_pairs: pairs of distinct rows used.
        n_permutations: permutations behind the p-values.
        constant_layers: layer groups whose codes were constant (`probes.degenerate`); their rho is NaN.
    """

    label: str
    distance: str
    metric: str
    layers: list[str]
    rho: np.ndarray
    p_value: np.ndarray | None
    n_pairs: int
    n_permutations: int
    constant_layers: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return jsonable(asdict(self))


def _pairs(n: int, n_pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if n * (n - 1) // 2 <= n_pairs:
        return np.triu_indices(n, 1)
    i = rng.integers(n, size=n_pairs)
    j = rng.integers(n - 1, size=n_pairs)
    return i, j + (j >= i)


def _spearman(ranked_x: np.ndarray, y: np.ndarray) -> float:
    ranked_y = rankdata(y)
    if ranked_x.std() == 0 or ranked_y.std() == 0:
        return float("nan")
    return float(np.corrcoef(ranked_x, ranked_y)[0, 1])


@_single_threaded
def topographic_similarity(
    codes: LatentCodes,
    label: str | None = None,
    layers: LayerChoice = "each+all",
    *,
    distance: Literal["hamming", "symmetric_difference"] | None = None,
    metric: Literal["euclidean", "cosine"] = "euclidean",
    split: str | list[str] | None = None,
    n_pairs: int = 20000,
    n_permutations: int = 0,
    random_state: int = 0,
    rtol: float = CONSTANT_RTOL,
) -> TopographicResult:
    """Topographic similarity: do rows with similar rule assignments have similar codes?

    Args:
        codes: latent codes.
        label: the label of rule assignments (default: the codes' `composition_label`: `rules` for SRAVEN, `terms`
            for fuzzy logic).
        layers: as in `probes.decode_rules`.
        distance: assignment distance (default: the size of the symmetric difference for a set label, kind
            "class_set" as fuzzy-logic `terms`; else Hamming, as between SRAVEN `rules` tuples).
        metric: code distance.
        split: restrict to these split(s) (default: every row).
        n_pairs: pairs of distinct rows sampled (all pairs when there are fewer).
        n_permutations: if > 0, shuffle assignments across rows this many times for a one-sided p-value
            (1 + #{rho_perm >= rho}) / (1 + n_permutations).
        random_state: seed for the pair sample and the permutations.
        rtol: a layer group whose codes vary by at most this fraction of their RMS is constant
            (`probes.degenerate.CONSTANT_RTOL`): its rho stays NaN and a `ConstantCodesWarning` says so.

    Returns:
        A `TopographicResult`.

    Raises:
        ValueError: an unknown label (or none given for codes without a composition label), distance or metric,
            or fewer than 3 rows.
    """
    if metric not in ("euclidean", "cosine"):
        raise ValueError(f"metric={metric!r}; choose 'euclidean' or 'cosine'")
    rows = codes.select(split=split) if split is not None else codes
    if rows.n_samples < 3:
        raise ValueError(f"split={split!r} selects {rows.n_samples} rows; topographic similarity needs at least 3")
    label = label or codes.composition_label
    if label is None:
        raise ValueError(
            "these codes name no composition label (meta['composition_label']); pass label= one of "
            f"{sorted(codes.labels)}"
        )
    values = rows.label_values(label).reshape(rows.n_samples, -1)
    distance = distance or ("symmetric_difference" if codes.label_kinds.get(label) == "class_set" else "hamming")
    if distance == "symmetric_difference":
        if values.dtype.kind not in "iu":
            raise ValueError(
                f"label={label!r} must hold integer class ids for symmetric_difference"
            )
        member = np.zeros((rows.n_samples, int(values.max()) + 1), dtype=np.int8)
        np.put_along_axis(member, values.astype(np.int64), 1, axis=1)
        values = member
    elif distance != "hamming":
        raise ValueError(f"distance={distance!r}; choose 'hamming' or 'symmetric_difference'")
    rng = np.random.default_rng(random_state)
    i, j = _pairs(rows.n_samples, n_pairs, rng)
    rule_distance = (values[i] != values[j]).sum(axis=1)
    permutations = [rng.permutation(rows.n_samples) for _ in range(n_permutations)]
    groups = rows.layer_groups(layers)
    rho = np.full(len(groups), np.nan)
    p_value = np.full(len(groups), np.nan) if n_permutations else None
    spreads = []
    for g, (name, positions) in enumerate(groups):
        X = rows._flat_axis(positions).astype(np.float64)
        spreads.append(LayerSpread(name, *relative_spread(X), constant=is_constant(X, rtol)))
        if spreads[-1].constant:
            continue
        if metric == "cosine":
            X = X / np.where(
                np.linalg.norm(X, axis=1, keepdims=True) > 0, np.linalg.norm(X, axis=1, keepdims=True), 1
            )
        ranked = rankdata(np.linalg.norm(X[i] - X[j], axis=1))
        rho[g] = _spearman(ranked, rule_distance)
        if n_permutations and np.isfinite(rho[g]):
            null = [_spearman(ranked, (values[p[i]] != values[p[j]]).sum(axis=1)) for p in permutations]
            p_value[g] = (1 + np.sum(np.asarray(null) >= rho[g])) / (1 + n_permutations)
    spread = CodeSpread(spreads, rtol, rows.n_samples)
    warn_constant(spread, "topographic similarity", stacklevel=3)  # past the decorator
    return TopographicResult(
        label=label,
        distance=distance,
        metric=metric,
        layers=[name for name, _ in groups],
        rho=rho,
        p_value=p_value,
        n_pairs=int(i.size),
        n_permutations=n_permutations,
        constant_layers=spread.constant_layers,
    )


def input_similarity(
    codes: LatentCodes, label: str | None = None, *, split: str | list[str] | None = None, center: bool = True
) -> RuleSimilarity:
    """Fig. 5E's cosines with the raw inputs in place of the codes: the input-only control of `rule_similarity`.

    Each row's "code" is the one-hot of its input type, the tuple of raw tokens at its key positions
    (`probes.decoding.controls.input_types`: for SRAVEN the pair of values of the last feature in panels 7 and 8).
    Classes whose key values share a joint distribution get the same mean here without any model: on SRAVEN,
    addition and difference are both uniform over the 64 pairs. A pair of rules that is as similar in the codes
    as in this control shares its inputs, not necessarily a code.

    Args:
        codes: latent codes with their inputs and discrete key tokens (SRAVEN's).
        label: class label to group by (default `codes.label`, `rule`); one class per row.
        split: restrict to these split(s) (default: every row).
        center: subtract the mean one-hot over the rows first (as `rule_similarity(center=True)`).

    Returns:
        A `RuleSimilarity` whose `layer` is "input-only".

    Raises:
        ValueError: codes without inputs, or a label that is a set of classes per row.

    Example:
        >>> import numpy as np
        >>> from probes.codes import LatentCodes
        >>> inputs = np.array([[0, 1], [1, 0], [0, 1], [1, 0]], dtype=np.float32)[:, :, None]
        >>> lc = LatentCodes(np.zeros((4, 1, 1, 1, 2)), {"rule": np.array([0, 0, 1, 1])}, np.array(["test"] * 4),
        ...                  {"task": "sraven", "n_classes": 2, "key": [0, 1]}, inputs=inputs)
        >>> round(float(input_similarity(lc, center=False).similarity[0, 1]), 6)  # both rules see both inputs alike
        1.0
    """
    from probes.decoding.controls import input_types

    rows = codes.select(split=split) if split is not None else codes
    name, y, classes, names = class_labels(rows, label)
    if y.ndim != 1:
        raise ValueError(f"label={name!r} has shape {y.shape}; input_similarity needs one class per row (e.g. rule)")
    _, ids = input_types(rows)
    onehot = np.eye(int(ids.max()) + 1)[ids]
    counts = np.array([int(np.sum(y == c)) for c in classes])
    means = np.stack([onehot[y == c].mean(axis=0) if n else np.full(onehot.shape[1], np.nan)
                      for c, n in zip(classes, counts, strict=True)])
    flat = means - onehot.mean(axis=0) if center else means
    with np.errstate(all="ignore"):
        unit = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    similarity = np.clip(unit @ unit.T, -1.0, 1.0)
    return RuleSimilarity(name, list(names), similarity, counts, "input-only", center)
