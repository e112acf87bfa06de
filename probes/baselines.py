"""Strong baselines for decoding (Kantamneni et al., ICML 2025, "Are sparse autoencoders useful?"): beside the linear
decoder, the same codes read by PCA-k + linear, k-nearest-neighbour and small-MLP probes, and the linear probe on the
codes of the untrained model (same architecture and seed, initial weights; extracted by
`latentcode.codes.untrained`). Every score sits beside its floors: the majority class and the input-only probe.
scikit-learn pipelines only; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from probes._targets import eval_splits, fit_proba, majority_floor, predict, read_target, score, set_sizes
from probes.codes import LatentCodes
from probes.codes_io import jsonable
from probes.decoding.controls import input_features
from probes.decoding.fit import LayerChoice, make_probe
from probes.tables import align_columns, format_score

__all__ = ["UNTRAINED", "BaselineResult", "BaselineRow", "baseline_probes", "baseline_estimators"]

UNTRAINED = "untrained linear"
"""Name of the linear probe on the untrained model's codes in `BaselineResult`."""


def baseline_estimators(n_features: int, *, pca_k: int = 4, n_neighbors: int = 10, hidden: int = 64,
                        random_state: int = 0) -> dict[str, ClassifierMixin]:
    """The probes compared, unfitted, by name: "linear" (the decoders' `make_probe`), f"pca{k}" (standardize, the
    first k principal components, logistic regression), "knn" (standardize, k nearest neighbours) and "mlp"
    (standardize, one hidden layer of `hidden` ReLU units, early stopping on a tenth of the fitting rows).

    `pca_k` is capped at `n_features`.
    """
    k = min(pca_k, n_features)
    return {
        "linear": make_probe(random_state=random_state),
        f"pca{k}": make_pipeline(StandardScaler(), PCA(n_components=k, random_state=random_state),
                                 LogisticRegression(max_iter=1000, random_state=random_state)),
        "knn": make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=n_neighbors)),
        "mlp": make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(hidden,), early_stopping=True,
                                                             max_iter=300, random_state=random_state)),
    }


@dataclass(frozen=True)
class BaselineRow:
    """One layer on one evaluation split.

    Attributes:
        layer: the layer group ("0", ..., "all").
        split: the evaluation split.
        n_samples: evaluation rows.
        majority: accuracy of the train split's most frequent class (the floor).
        input_only: the linear probe on the raw inputs (the input-only control).
        scores: probe name -> accuracy on the codes (`baseline_estimators`' names, and `UNTRAINED` when the
            untrained model's codes were given).
        input_scores: probe name -> the same probe on the raw inputs (each probe's own input-only control; a
            nonlinear probe can read more from the inputs than the linear one can).
    """

    layer: str
    split: str
    n_samples: int
    majority: float
    input_only: float
    scores: dict[str, float]
    input_scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class BaselineResult:
    """What `baseline_probes` returns.

    Attributes:
        task, label, reading: as on the codes.
        probes: the probe names, in table order.
        rows: one `BaselineRow` per layer and split, layer-major.
        params: the probes' settings.
    """

    task: str | None
    label: str
    reading: str | None
    probes: list[str]
    rows: list[BaselineRow]
    params: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def row(self, layer: str, split: str) -> BaselineRow:
        for r in self.rows:
            if r.layer == str(layer) and r.split == split:
                return r
        raise KeyError(f"no row for layer {layer!r} on split {split!r}; have {[(r.layer, r.split) for r in self.rows]}")

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "probes.baselines", **asdict(self)})

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat dict per row (for CSV): layer, split, n_samples, majority, input_only, each probe on the codes,
        then each probe on the inputs (`<probe> inputs`)."""
        return [{k: v for k, v in asdict(r).items() if k not in ("scores", "input_scores")} | r.scores
                | {f"{p} inputs": v for p, v in r.input_scores.items()} for r in self.rows]

    def table(self) -> str:
        header = ["layer", "split", "majority", *(f"{p} (inputs)" if p != UNTRAINED else p for p in self.probes)]
        body = [[r.layer, r.split, format_score(r.majority),
                 *(format_score(r.scores.get(p)) + ("" if p not in r.input_scores
                                                    else f" ({format_score(r.input_scores[p])})")
                   for p in self.probes)] for r in self.rows]
        title = (f"Baseline probes of {self.label!r} (task {self.task}): accuracy on held-out rows, each probe on the "
                 "codes (and on the raw inputs)")
        return "\n".join([title, *align_columns([header, *body]), *self.notes])


def _check_untrained(codes: LatentCodes, untrained: LatentCodes) -> None:
    if untrained.codes.shape[1:] != codes.codes.shape[1:] or not np.array_equal(untrained.split, codes.split):
        raise ValueError(
            f"untrained codes {list(untrained.codes.shape)} do not match the codes {list(codes.codes.shape)} row for "
            "row (same splits, sizes and layers); extract them with the same arguments "
            "(latentcode.codes.untrained.untrained_codes)")


def baseline_probes(
    codes: LatentCodes,
    label: str | None = None,
    layers: LayerChoice = "each",
    *,
    untrained: LatentCodes | None = None,
    splits: str | Sequence[str] | None = None,
    estimators: dict[str, ClassifierMixin] | None = None,
    pca_k: int = 4,
    random_state: int = 0,
    progress: bool | None = None,
) -> BaselineResult:
    """Decode `label` from each layer's codes with the linear probe and the baselines, fitted on the train split and
    scored on each evaluation split, beside the majority floor and the input-only control.

    Args:
        codes: codes with `inputs` and a train split.
        label: a class or set label (default: the codes' default label).
        layers: as in `decode_rules` (default: each layer on its own).
        untrained: the untrained model's codes of the same instances (`latentcode.codes.untrained`), read by the
            linear probe (None: left out).
        splits: evaluation splits (default: every split but train).
        estimators: name -> unfitted classifier, replacing `baseline_estimators(...)`.
        pca_k, random_state: passed to `baseline_estimators`.
        progress: show a progress bar (None: only on a terminal).

    Raises:
        ValueError: a missing label, an unknown layer or split, codes without inputs, or untrained codes that do not
            match the codes row for row, each before any fitting.
    """
    target = read_target(codes, label)
    chosen = eval_splits(codes, splits)
    groups = codes.layer_groups(layers)
    if untrained is not None:
        _check_untrained(codes, untrained)
    X_in = input_features(codes).astype(np.float64)
    train = codes.split == "train"
    masks = {s: codes.split == s for s in chosen}

    def accuracy(estimator: ClassifierMixin, X: np.ndarray) -> dict[str, float]:
        with np.errstate(invalid="ignore", divide="ignore"):  # PCA of constant codes: 0/0 variance ratios, once a fit
            proba = fit_proba(estimator, X[train], target.y[train], X, target.n_classes)
        right = score(predict(proba, target.kind, set_sizes(target)), target.y)
        return {s: float(right[m].mean()) for s, m in masks.items()}

    rows, names = [], []
    with threadpool_limits(limits=1):
        on_inputs = {p: accuracy(est, X_in) for p, est in
                     (estimators or baseline_estimators(X_in.shape[1], pca_k=pca_k, random_state=random_state)).items()}
        input_only = accuracy(make_probe(random_state=random_state), X_in)
        for name, positions in tqdm(groups, desc="baseline probes", disable=None if progress is None
                                    else not progress, leave=False):
            X = codes._flat_axis(positions).astype(np.float64)
            probes = estimators or baseline_estimators(X.shape[1], pca_k=pca_k, random_state=random_state)
            scores = {p: accuracy(est, X) for p, est in probes.items()}
            inputs_of = dict(zip(probes, on_inputs.values(), strict=True))  # pca-k: k capped per feature count
            if untrained is not None:
                scores[UNTRAINED] = accuracy(make_probe(random_state=random_state),
                                             untrained._flat_axis(positions).astype(np.float64))
            names = names or list(scores)
            for s in chosen:
                rows.append(BaselineRow(name, s, int(masks[s].sum()), majority_floor(target, train, masks[s]),
                                        input_only[s], {p: v[s] for p, v in scores.items()},
                                        {p: v[s] for p, v in inputs_of.items()}))
    notes = ("accuracy: fitted on the train split, scored on each evaluation split; the floors are the majority class "
             "and, in brackets, the same probe on the raw inputs (input-only)",)
    if target.kind == "set":
        notes += ("set label: one binary probe per class; a row scores the fraction of its classes among its k most "
                  "probable (k = the set's size)",)
    return BaselineResult(
        task=codes.task, label=target.name, reading=codes.reading, probes=names, rows=rows,
        params={"layers": layers if isinstance(layers, str) else list(np.atleast_1d(layers)), "pca_k": pca_k,
                "random_state": random_state, "n_train": int(train.sum())},
        notes=notes,
    )
