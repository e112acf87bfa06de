"""Clustering of latent codes against ground truth: k-means per layer, scored by AMI, ARI and silhouette.

Unsupervised counterpart of `probes.decoding`: do codes fall into groups that match the rules without being
told the rules? Set labels (fuzzy-logic `terms`) are compared as whole compositions. Constant layers
(`probes.degenerate`) are not clustered: k-means on rounding noise scores nothing. No plotting here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, silhouette_score

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
class LayerClustering:
    """Scores for one layer group.

    Attributes:
        layer: model layer ("3") or "all".
        ami: adjusted mutual information between k-means clusters and the labels (0 = chance, 1 = identical).
        ari: adjusted Rand index between k-means clusters and the labels.
        silhouette: silhouette of the ground-truth labels in code space (do rules form separated groups?).
        silhouette_kmeans: silhouette of the k-means clusters themselves.
        inertia: k-means inertia.
        kmeans: the fitted `KMeans` (in memory only; `ClusteringResult.predict` uses it, `to_dict` leaves it out).
        constant: the layer's codes were constant (`probes.degenerate`): k-means was skipped, every score
            is NaN.
    """

    layer: str
    ami: float
    ari: float
    silhouette: float
    silhouette_kmeans: float
    inertia: float
    kmeans: Any = field(default=None, repr=False, compare=False)
    constant: bool = False


@dataclass(frozen=True)
class ClusteringResult:
    """k-means clustering of codes per layer group, compared with a label.

    Attributes:
        label: the label compared with ("rule"; for sets such as "terms", the whole composition).
        k: clusters per k-means fit.
        n_samples: rows clustered.
        splits: splits of the rows clustered.
        layers: one `LayerClustering` per layer group.
        params: n_init, random_state, silhouette_sample.
    """

    label: str
    k: int
    n_samples: int
    splits: list[str]
    layers: list[LayerClustering]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def layer_names(self) -> list[str]:
        """Layer group names, in order."""
        return [row.layer for row in self.layers]

    @property
    def constant_layers(self) -> list[str]:
        """Layer groups whose codes were constant (not clustered)."""
        return [row.layer for row in self.layers if row.constant]

    def scores(self, metric: str) -> np.ndarray:
        """One score ("ami", "ari", "silhouette", ...) per layer group."""
        if metric not in {"ami", "ari", "silhouette", "silhouette_kmeans", "inertia"}:
            raise ValueError(f"metric={metric!r}; choose ami, ari, silhouette, silhouette_kmeans or inertia")
        return np.array([getattr(row, metric) for row in self.layers])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (the fitted k-means models left out)."""
        data = asdict(replace(self, layers=[replace(row, kmeans=None) for row in self.layers]))
        for row in data["layers"]:
            row.pop("kmeans")
        return jsonable(data)

    def predict(self, codes: LatentCodes, layer: str | int | None = None) -> np.ndarray:
        """Assign other codes (another split, checkpoint or model with this layout) to the fitted clusters.

        Args:
            codes: codes with the same heads and positions.
            layer: the layer group ("3", 3 or "all"; default: the first one clustered).

        Returns:
            int [codes.n_samples], the nearest fitted k-means centre of each row.

        Raises:
            ValueError: a layer group that was not clustered, or no fitted model (rebuilt from JSON).
        """
        name = self.layers[0].layer if layer is None else str(layer)
        if name not in self.layer_names:
            raise ValueError(f"layer={layer!r} was not clustered; clustered layer groups: {self.layer_names}")
        row = self.layers[self.layer_names.index(name)]
        if row.constant:
            raise ValueError(f"layer {name} codes were constant; k-means was skipped, there are no clusters")
        if row.kmeans is None:
            raise ValueError("this ClusteringResult holds no fitted k-means (made from JSON?); re-run cluster_codes")
        _, positions = codes.layer_group(name)
        return row.kmeans.predict(codes._flat_axis(positions))

    def table(self) -> str:
        """Plain-text table of AMI, ARI and silhouettes per layer group."""
        lines = [f"k-means (k={self.k}) on {self.n_samples} rows ({', '.join(self.splits)}) vs {self.label!r}"]
        lines.append(f"{'layer':<8}{'AMI':>8}{'ARI':>8}{'silhouette':>12}{'sil. k-means':>14}")
        for r in self.layers:
            if r.constant:
                lines.append(f"{r.layer:<8}  constant codes: k-means skipped")
                continue
            lines.append(
                f"{r.layer:<8}{r.ami:>8.3f}{r.ari:>8.3f}{r.silhouette:>12.3f}{r.silhouette_kmeans:>14.3f}"
            )
        return "\n".join(lines)


def class_vector(codes: LatentCodes, label: str | None = None) -> tuple[str, np.ndarray, list[str]]:
    """A label as one class id per row, with display names; sets ([n, K] `terms`) become composition ids.

    Returns:
        (label name, int ids [n], names of the ids).
    """
    name, y, classes, names = class_labels(codes, label)
    if y.ndim == 2:
        sets, ids = np.unique(np.sort(y, axis=1), axis=0, return_inverse=True)
        term_names = names
        return name, ids.ravel(), ["+".join(term_names[int(c)] for c in row) for row in sets]
    ids = np.searchsorted(classes, y)
    return name, ids, names


def _silhouette(X: np.ndarray, labels: np.ndarray, sample: int, seed: int) -> float:
    if not 2 <= np.unique(labels).size <= X.shape[0] - 1:
        return float("nan")
    return float(silhouette_score(X, labels, sample_size=min(sample, X.shape[0]), random_state=seed))


@_single_threaded
def cluster_codes(
    codes: LatentCodes,
    label: str | None = None,
    layers: LayerChoice = "each+all",
    *,
    k: int | None = None,
    split: str | list[str] | None = None,
    n_init: int = 4,
    random_state: int = 0,
    silhouette_sample: int = 2000,
    rtol: float = CONSTANT_RTOL,
) -> ClusteringResult:
    """Cluster codes with k-means per layer group and compare the clusters with a label.

    Args:
        codes: latent codes.
        label: label to compare with (default `codes.label`). Set labels count each composition as a class.
        layers: "each+all" (default), "each", "all", "last", model layer numbers.
        k: clusters (default: `meta["n_classes"]` for the default 1-D label, i.e. the number of rules; else
            the number of distinct label values present).
        split: restrict to these split(s) (default: every row).
        n_init: k-means restarts.
        random_state: seed for k-means and the silhouette subsample.
        silhouette_sample: rows the silhouettes are estimated on (silhouette costs O(n²)).
        rtol: a layer group whose codes vary by at most this fraction of their RMS is constant
            (`probes.degenerate.CONSTANT_RTOL`): it is not clustered (NaN scores, `constant=True`) and a
            `ConstantCodesWarning` says so.

    Returns:
        A `ClusteringResult`.

    Raises:
        ValueError: no rows, k < 2, or k larger than the number of rows.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> y = np.repeat([0, 1, 2], 20)
        >>> X = (np.eye(3)[y] * 10 + rng.normal(size=(60, 3)))[:, None, :, None, None]
        >>> lc = LatentCodes(X, {"rule": y}, np.array(["train"] * 60), {"task": "sraven"})
        >>> round(cluster_codes(lc, layers="all").layers[0].ami, 2)
        1.0
    """
    rows = codes.select(split=split) if split is not None else codes
    if rows.n_samples == 0:
        raise ValueError(f"split={split!r} selects no rows (splits present: {list(codes.splits)})")
    name, ids, _ = class_vector(rows, label)
    if k is None:
        n_meta = codes.meta.get("n_classes")
        k = int(n_meta) if name == codes.label and n_meta and codes.label_values(name).ndim == 1 else None
        k = k or int(np.unique(ids).size)
    if not 2 <= k <= rows.n_samples:
        raise ValueError(f"k={k} must be between 2 and the number of rows ({rows.n_samples})")
    results, spreads = [], []
    for layer, positions in rows.layer_groups(layers):
        X = rows._flat_axis(positions)
        spreads.append(LayerSpread(layer, *relative_spread(X), constant=is_constant(X, rtol)))
        if spreads[-1].constant:
            results.append(LayerClustering(layer, *[float("nan")] * 5, constant=True))
            continue
        kmeans = KMeans(n_clusters=k, n_init=n_init, random_state=random_state).fit(X)
        results.append(
            LayerClustering(
                layer=layer,
                ami=float(adjusted_mutual_info_score(ids, kmeans.labels_)),
                ari=float(adjusted_rand_score(ids, kmeans.labels_)),
                silhouette=_silhouette(X, ids, silhouette_sample, random_state),
                silhouette_kmeans=_silhouette(X, kmeans.labels_, silhouette_sample, random_state),
                inertia=float(kmeans.inertia_),
                kmeans=kmeans,
            )
        )
    warn_constant(CodeSpread(spreads, rtol, rows.n_samples), "k-means", stacklevel=3)  # past the wrapper
    return ClusteringResult(
        label=name,
        k=k,
        n_samples=rows.n_samples,
        splits=list(rows.splits),
        layers=results,
        params={"n_init": n_init, "random_state": random_state, "silhouette_sample": silhouette_sample,
                "rtol": rtol},
    )
