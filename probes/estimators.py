"""Probes as scikit-learn estimators: `RuleDecoder` (standardize + logistic regression), fit once, apply anywhere.

`RuleDecoder` follows the estimator contract (get/set_params, clone, Pipelines, cross_val_score) and saves as a
`.npz` + `.json` pair (coefficients and scaler statistics; never a pickle). `code_space_directions` maps a fitted
probe's weights from its standardized space back to code space, for steering. No torch here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

__all__ = ["code_space_directions"]


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
