"""Probes as scikit-learn estimators: `RuleDecoder` (standardize + logistic regression), fit once, apply anywhere.

`RuleDecoder` follows the estimator contract (get/set_params, clone, Pipelines, cross_val_score) and saves as a
`.npz` + `.json` pair (coefficients and scaler statistics; never a pickle). `code_space_directions` maps a fitted
probe's weights from its standardized space back to code space, for steering. No torch here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted, validate_data

from probes.codes import LatentCodes
from probes.codes_io import atomic_write, npz_and_json

__all__ = ["RuleDecoder", "code_space_directions"]

_FORMAT = "latentcode.RuleDecoder"


def code_space_directions(probe: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-class directions of a fitted linear probe in raw code space: `coef / scaler.scale_`.

    Args:
        probe: a fitted `RuleDecoder`, or a fitted sklearn Pipeline whose first step is a `StandardScaler` and
            whose last step has `coef_` (`make_probe()`).

    Returns:
        (directions float64 [class, feature], classes [class]). A binary probe's single row becomes two rows,
        -w for the first class and +w for the second, so row i always points towards class i.

    Raises:
        ValueError: the probe is not fitted or is not standardize-then-linear.
    """
    if isinstance(probe, Pipeline):
        scaler, last = probe.steps[0][1], probe.steps[-1][1]
        if not isinstance(scaler, StandardScaler) or not hasattr(last, "coef_"):
            raise ValueError(
                f"probe is a Pipeline of {[name for name, _ in probe.steps]}; code_space_directions needs a fitted "
                "StandardScaler first and a fitted linear classifier (coef_) last, as make_probe()"
            )
        scale = getattr(scaler, "scale_", None)
        coef, classes = last.coef_, last.classes_
    elif hasattr(probe, "coef_") and hasattr(probe, "scale_"):
        scale, coef, classes = probe.scale_, probe.coef_, probe.classes_
    else:
        raise ValueError(
            f"{type(probe).__name__} is not a fitted probe: pass a fitted RuleDecoder or make_probe() pipeline"
        )
    scale = np.ones(coef.shape[1]) if scale is None else np.asarray(scale, dtype=np.float64)
    directions = np.asarray(coef, dtype=np.float64) / scale
    if directions.shape[0] == 1 and len(classes) == 2:
        directions = np.concatenate([-directions, directions])
    return directions, np.asarray(classes)


class RuleDecoder(ClassifierMixin, BaseEstimator):
    """A linear rule decoder: standardize, then multinomial logistic regression (`make_probe`'s settings).

    Fit it on the codes of one checkpoint and split, then predict and score codes of any other (another split,
    checkpoint or model with the same code layout). `X` is `LatentCodes` (features: `LatentCodes.flat(layers)`,
    target: the label `label`, or the codes' default label) or a plain array [n_samples, n_features] with `y`.
    scikit-learn's model selection takes `LatentCodes` as `X` too (`cross_val_score(RuleDecoder(layers="last"),
    codes, groups=codes.composition_ids(), cv=GroupKFold(3))`): it cuts them into folds by row
    (`LatentCodes.__getitem__`). Without `y` the folds are unstratified and the score is `score`'s accuracy; pass
    `y=codes.label_values()` for stratified folds or a `scoring=` string.

    Args:
        C: inverse L2 regularization strength.
        max_iter: solver iterations.
        random_state: seed of the solver.
        layers: the layers whose codes are the features when `X` is `LatentCodes`, as everywhere a layer is taken
            ("last", "all", a model layer number or a list of them; `probes.layers.resolve_layers`). None: all.
        label: the label decoded when `X` is `LatentCodes` (None: the codes' default label).

    Attributes:
        classes_: the classes [n_classes].
        coef_: rule directions in standardized space [n_classes, n_features] ([1, n_features] for two classes).
        intercept_: [n_classes] (or [1]).
        mean_, scale_: the scaler's statistics [n_features] (`scale_` = standard deviation, 1 where constant).
        n_features_in_: features seen in `fit`.
        n_iter_: solver iterations used.

    Example:
        >>> import numpy as np
        >>> X, y = np.array([[0.0, 1], [0.1, 1], [1.0, 0], [1.1, 0]]), np.array([0, 0, 1, 1])
        >>> decoder = RuleDecoder().fit(X, y)
        >>> decoder.predict([[0.05, 1], [1.05, 0]]).tolist(), decoder.code_space_directions().shape
        ([0, 1], (2, 2))
    """

    def __init__(
        self,
        C: float = 1.0,
        max_iter: int = 1000,
        random_state: int | None = 0,
        layers: str | int | list[int] | None = None,
        label: str | None = None,
    ) -> None:
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state
        self.layers = layers
        self.label = label

    def _features(self, X: Any, y: Any = None, *, reset: bool) -> tuple[np.ndarray, Any]:
        if isinstance(X, LatentCodes):
            features = X.flat(self.layers)
            if y is None:
                y = X.label_values(self.label)
                if y.ndim != 1:
                    raise ValueError(
                        f"label {self.label or X.label!r} has shape {y.shape}; RuleDecoder decodes one class per "
                        "row (for sets of classes such as fuzzy-logic terms use probes.decode_terms)"
                    )
            X = features
        if reset:
            X, y = validate_data(self, X, y, reset=True, y_numeric=False)
            return X, y
        return validate_data(self, X, reset=False), y

    def fit(self, X: Any, y: Any = None) -> RuleDecoder:
        """Fit the scaler and the classifier on `X` (LatentCodes, or an array with `y`). Returns self."""
        X, y = self._features(X, y, reset=True)
        scaler = StandardScaler().fit(X)
        model = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.random_state)
        model.fit(scaler.transform(X), y)
        self.scaler_, self.model_ = scaler, model
        self.classes_ = model.classes_
        self.coef_, self.intercept_ = model.coef_, model.intercept_
        self.mean_, self.scale_, self.n_iter_ = scaler.mean_, scaler.scale_, model.n_iter_
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Class scores [n_samples, n_classes] ([n_samples] for two classes)."""
        check_is_fitted(self)
        X, _ = self._features(X, reset=False)
        return self.model_.decision_function(self.scaler_.transform(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities [n_samples, n_classes]."""
        check_is_fitted(self)
        X, _ = self._features(X, reset=False)
        return self.model_.predict_proba(self.scaler_.transform(X))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row [n_samples]."""
        check_is_fitted(self)
        X, _ = self._features(X, reset=False)
        return self.model_.predict(self.scaler_.transform(X))

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Accuracy on `X` (LatentCodes: against its label; an array: against `y`)."""
        if isinstance(X, LatentCodes) and y is None:
            y = X.label_values(self.label)
        return super().score(X, y, sample_weight=sample_weight)

    def code_space_directions(self) -> np.ndarray:
        """Per-class directions in raw code space, `coef_ / scale_` [n_classes, n_features] (what `steer` adds)."""
        check_is_fitted(self)
        return code_space_directions(self)[0]

    def save(self, path: str | os.PathLike) -> Path:
        """Write `<path>.npz` (coefficients, intercept, classes, scaler statistics) and `<path>.json` (params).

        Returns:
            The path of the `.npz` file.
        """
        check_is_fitted(self)
        npz_path, json_path = npz_and_json(path)
        npz_path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {
            "coef": self.coef_,
            "intercept": self.intercept_,
            "classes": self.classes_,
            "mean": self.mean_,
            "scale": self.scale_,
            "var": self.scaler_.var_,
            "n_iter": self.model_.n_iter_,
        }
        if arrays["classes"].dtype == object:
            arrays["classes"] = arrays["classes"].astype(str)
        atomic_write(npz_path, lambda f: np.savez(f, **arrays))
        meta = {
            "format": _FORMAT,
            "params": self.get_params(),
            "n_features_in": int(self.n_features_in_),
            "n_samples_seen": int(np.max(self.scaler_.n_samples_seen_)),
        }
        atomic_write(json_path, lambda f: f.write((json.dumps(meta, indent=2) + "\n").encode()))
        return npz_path

    @classmethod
    def load(cls, path: str | os.PathLike) -> RuleDecoder:
        """Read a decoder written by `save` (no pickle: arrays are loaded with `allow_pickle=False`).

        Raises:
            FileNotFoundError: the `.npz` or `.json` file is missing.
            ValueError: the files are not a saved RuleDecoder.
        """
        npz_path, json_path = npz_and_json(path)
        for file in (npz_path, json_path):
            if not file.exists():
                raise FileNotFoundError(f"{file} does not exist; a saved RuleDecoder is a .npz + .json pair")
        meta = json.loads(json_path.read_text())
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{json_path} is not a saved RuleDecoder (format={meta.get('format')!r})")
        with np.load(npz_path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        decoder = cls(**meta["params"])
        n_features = int(meta["n_features_in"])
        scaler = StandardScaler()
        scaler.mean_, scaler.scale_, scaler.var_ = arrays["mean"], arrays["scale"], arrays["var"]
        scaler.n_features_in_, scaler.n_samples_seen_ = n_features, int(meta["n_samples_seen"])
        model = LogisticRegression(C=decoder.C, max_iter=decoder.max_iter, random_state=decoder.random_state)
        model.coef_, model.intercept_, model.classes_ = arrays["coef"], arrays["intercept"], arrays["classes"]
        model.n_features_in_, model.n_iter_ = n_features, arrays["n_iter"]
        decoder.scaler_, decoder.model_ = scaler, model
        decoder.classes_, decoder.coef_, decoder.intercept_ = model.classes_, model.coef_, model.intercept_
        decoder.mean_, decoder.scale_ = scaler.mean_, scaler.scale_
        decoder.n_features_in_, decoder.n_iter_ = n_features, model.n_iter_
        return decoder
