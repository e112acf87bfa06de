"""Two-dimensional views of latent codes: UMAP (umap-learn, seeded) and PCA (scikit-learn).

An `Embedding` keeps the coordinates together with the rows they came from and those rows' labels, so
figures can colour by any label. UMAP is imported lazily (it is slow to import and JIT-compiles on first use).
Seeded UMAP is repeatable on one machine only, never across machines (lmcinnes/umap#153). Constant codes
(`probes.degenerate`) are not embedded: a layout of rounding noise would look like structure. No plotting.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
from sklearn.decomposition import PCA
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import StandardScaler

from probes.codes import LatentCodes
from probes.codes_io import jsonable
from probes.decoding.fit import _single_threaded
from probes.degenerate import (
    CONSTANT_RTOL,
    CodeSpread,
    LayerSpread,
    is_constant,
    relative_spread,
    warn_constant,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Embedding:
    """2-D coordinates of (a subsample of) the codes.

    Attributes:
        coords: float [m, 2].
        rows: int [m], the rows of the source `LatentCodes` each point shows.
        method: "umap" or "pca".
        layer: the layer group embedded (model layer "3", or "all").
        labels: every label of the source codes, restricted to `rows`.
        split: split of each point [m].
        class_names: display names of the default label's classes.
        label: the default label name of the source codes.
        params: parameters of the embedding (n_neighbors, min_dist, random_state, explained variance, ...).
        reducer: the fitted `PCA` or `umap.UMAP` (in memory only; `transform` uses it, `to_dict` leaves it out).
        scaler: the fitted `StandardScaler` when `standardize=True`, else None.
        constant: the codes were constant (`probes.degenerate`): nothing was fitted and `coords` are zeros;
            `params["relative_spread"]` says how flat they were.
    """

    coords: np.ndarray
    rows: np.ndarray
    method: Literal["umap", "pca"]
    layer: str
    labels: dict[str, np.ndarray]
    split: np.ndarray
    class_names: list[str] = field(default_factory=list)
    label: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    reducer: Any = field(default=None, repr=False, compare=False)
    scaler: Any = field(default=None, repr=False, compare=False)
    constant: bool = False

    def transform(self, codes: LatentCodes) -> np.ndarray:
        """Place other codes (another split, checkpoint or model with this layout) into this picture.

        PCA projects exactly; UMAP embeds new rows against the fitted rows (umap's `transform`: neighbours among
        the fitted rows, then a short optimisation), so fitted rows land near, not on, their coordinates.

        Returns:
            float32 [codes.n_samples, 2].

        Raises:
            ValueError: the embedding holds no fitted reducer (constant codes, or rebuilt from JSON) or the
                codes have another layout.
        """
        if self.constant:
            relative = self.params.get("relative_spread", 0.0)
            raise ValueError(
                f"layer {self.layer} codes were constant (spread / RMS {relative:.1e}); nothing was "
                "fitted to place other codes into"
            )
        if self.reducer is None:
            raise ValueError("this Embedding holds no fitted reducer (made from JSON?); re-run embed_codes")
        _, positions = codes.layer_group(self.layer)
        X = codes._flat_axis(positions).astype(np.float64)
        expected = self.reducer.n_features_in_ if self.method == "pca" else self.reducer._raw_data.shape[1]
        if X.shape[1] != expected:
            raise ValueError(
                f"codes give {X.shape[1]} features at layer {self.layer}, the embedding was fitted on {expected}; "
                "transform codes with the same heads and positions"
            )
        if self.scaler is not None:
            X = self.scaler.transform(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            projected = np.asarray(self.reducer.transform(X), dtype=np.float32)
        coords = np.zeros((X.shape[0], 2), np.float32)
        coords[:, : projected.shape[1]] = projected
        return coords

    @property
    def n_samples(self) -> int:
        """Number of points."""
        return int(self.coords.shape[0])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (coordinates included; the fitted reducer and scaler left out)."""
        data = asdict(replace(self, reducer=None, scaler=None))
        return jsonable({k: v for k, v in data.items() if k not in ("reducer", "scaler")})


def subsample(n_samples: int, max_points: int | None, random_state: int = 0) -> np.ndarray:
    """Sorted row indices: all `n_samples` rows, or a seeded uniform subsample of `max_points` of them.

    Example:
        >>> subsample(5, None).tolist(), subsample(1000, 10).size
        ([0, 1, 2, 3, 4], 10)
    """
    if max_points is None or n_samples <= max_points:
        return np.arange(n_samples)
    if max_points < 1:
        raise ValueError(f"max_points={max_points} must be >= 1 (or None for every row)")
    return np.sort(np.random.default_rng(random_state).choice(n_samples, size=max_points, replace=False))


SPECTRAL_MIN_ROWS = 100
"""Below this many rows UMAP starts from PCA: spectral initialisation is unreliable on tiny graphs."""


def _umap(
    X: np.ndarray, n_neighbors: int, min_dist: float, n_epochs: int | None, init: str, seed: int | None
) -> tuple[np.ndarray, Any, str]:
    """UMAP coordinates, the fitted reducer and the initialisation used: a failed spectral initialisation (umap
    would fall back to a random layout) is redone from PCA, umap's documented alternative, with a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImportWarning)
        import umap
    n_neighbors = min(n_neighbors, X.shape[0] - 1)
    # Exact neighbours from scikit-learn: umap's own small-data path calls its metric once per pair from
    # Python (minutes for a few thousand rows) and its large-data path pays a long NNDescent JIT.
    distances, indices = NearestNeighbors(n_neighbors=n_neighbors).fit(X).kneighbors(X)

    def fit(start: str) -> tuple[np.ndarray, Any]:
        reducer = umap.UMAP(
            n_neighbors=n_neighbors,
            min_dist=min_dist,
            n_components=2,
            n_epochs=n_epochs,
            random_state=seed,
            n_jobs=1 if seed is not None else -1,
            precomputed_knn=(indices, distances, None),
            init=start,
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*knn_search_index.*")
            warnings.filterwarnings("ignore", message=".*n_jobs value.*")
            warnings.filterwarnings("error", message="Spectral initialisation failed")
            return np.asarray(reducer.fit_transform(X), dtype=np.float32), reducer

    if init == "spectral" and X.shape[0] <= SPECTRAL_MIN_ROWS:
        logger.info("UMAP of %d rows starts from PCA: spectral initialisation is unreliable below %d rows",
                    X.shape[0], SPECTRAL_MIN_ROWS)
        init = "pca"
    try:
        coords, reducer = fit(init)
    except Exception as error:  # any failure of the spectral layout (eigensolver, too small a graph, ...)
        if init != "spectral":
            raise
        reason = " ".join(str(error).split()) or type(error).__name__
        message = f"UMAP's spectral initialisation failed ({reason[:200]}); using PCA initialisation instead"
        logger.warning(message)
        warnings.warn(message, UserWarning, stacklevel=3)
        init = "pca"
        coords, reducer = fit(init)
    # umap keeps no search index for precomputed neighbours; its small-data path (exact distances to the fitted
    # rows, which it keeps) transforms new rows instead
    reducer._small_data = True
    if hasattr(reducer, "_knn_search_index"):
        del reducer._knn_search_index
    return coords, reducer, init


@_single_threaded
def embed_codes(
    codes: LatentCodes,
    method: Literal["umap", "pca"] = "umap",
    layer: str | int = "last",
    *,
    split: str | list[str] | None = None,
    max_points: int | None = 3000,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
    n_epochs: int | None = None,
    init: Literal["spectral", "pca", "random"] = "spectral",
    standardize: bool = False,
    random_state: int | None = 0,
    rtol: float = CONSTANT_RTOL,
) -> Embedding:
    """Embed codes of one layer group in 2-D.

    Args:
        codes: latent codes.
        method: "umap" (non-linear, neighbourhood-preserving) or "pca" (linear, exact).
        layer: "last" (default; the paper's Fig. 5B uses the final layer), "all", or a model layer number.
        split: restrict to these split(s) (default: every row).
        max_points: embed at most this many rows, a seeded uniform subsample (None: every row). UMAP on 3,000
            rows takes seconds; on 20,000 about a minute on 2 cores.
        n_neighbors: UMAP neighbourhood size (clipped to rows − 1).
        min_dist: UMAP minimum distance between embedded points.
        n_epochs: UMAP optimisation epochs (None: umap's default, 500 below 10,000 rows, else 200; the
            optimisation dominates the run time).
        init: UMAP initial layout. "spectral" (umap's default) keeps global structure best but is slow when the
            neighbour graph falls apart into many components (codes of a few dozen compositions); "pca" is fast.
            Spectral falls back to PCA (with a warning) when it fails, and is skipped below `SPECTRAL_MIN_ROWS`
            rows; `params["init"]` records the initialisation used.
        standardize: z-score each feature first (off: codes are compared on their own scale).
        random_state: seed for the subsample and for UMAP (a seed makes UMAP single-threaded; None lets it
            use every core, unrepeatably).
        rtol: codes whose spread across the embedded rows is at most this fraction of their RMS are constant
            (`probes.degenerate.CONSTANT_RTOL`): they are not embedded, a `ConstantCodesWarning` says so, and
            the `Embedding` has `constant=True` and zero coordinates.

    Returns:
        An `Embedding`.

    Raises:
        ValueError: an unknown method or init, or fewer than 3 rows.
    """
    if method not in ("umap", "pca"):
        raise ValueError(f"method={method!r}; choose 'umap' or 'pca'")
    if init not in ("spectral", "pca", "random"):
        raise ValueError(f"init={init!r}; choose 'spectral', 'pca' or 'random'")
    rows = (
        np.flatnonzero(np.isin(codes.split, [split] if isinstance(split, str) else split)) if split else None
    )
    if rows is None:
        rows = np.arange(codes.n_samples)
    if rows.size < 3:
        raise ValueError(f"split={split!r} selects {rows.size} rows; an embedding needs at least 3")
    rows = rows[subsample(rows.size, max_points, 0 if random_state is None else random_state)]
    layer_name, positions = codes.layer_group(layer)
    X = codes._flat_axis(positions)[rows].astype(np.float64)
    params: dict[str, Any] = {
        "max_points": max_points,
        "standardize": standardize,
        "random_state": random_state,
    }
    flat = LayerSpread(layer_name, *relative_spread(X), constant=is_constant(X, rtol))
    spread = CodeSpread([flat], rtol, rows.size)
    common = dict(rows=rows, method=method, layer=layer_name, labels={k: v[rows] for k, v in codes.labels.items()},
                  split=codes.split[rows], class_names=codes.class_names(), label=codes.label)
    if spread.constant_layers:
        # stacklevel 3: past the single-thread wrapper, at the caller of embed_codes
        warn_constant(spread, f"{method} of layer {layer_name}", stacklevel=3)
        params.update(relative_spread=spread.layers[0].relative, rtol=rtol, skipped="constant codes")
        return Embedding(coords=np.zeros((rows.size, 2), np.float32), **common, params=params, constant=True)
    scaler = StandardScaler().fit(X) if standardize else None
    if scaler is not None:
        X = scaler.transform(X)
    if method == "pca":
        pca = PCA(n_components=min(2, X.shape[1]), random_state=random_state)
        coords = np.zeros((X.shape[0], 2), np.float32)
        coords[:, : pca.n_components] = pca.fit_transform(X)
        params["explained_variance_ratio"] = pca.explained_variance_ratio_.tolist()
        reducer: Any = pca
    else:
        coords, reducer, used = _umap(X, n_neighbors, min_dist, n_epochs, init, random_state)
        params.update(
            n_neighbors=min(n_neighbors, rows.size - 1), min_dist=min_dist, n_epochs=n_epochs, init=used
        )
    logger.debug("%s of %d rows, layer %s", method, rows.size, layer_name)  # callers say which run: one line each
    return Embedding(coords=coords, **common, params=params, reducer=reducer, scaler=scaler)
