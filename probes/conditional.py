"""Conditional probing (Hewitt, Ethayarajh, Liang & Manning 2021, "Conditional probing: measuring usable information
beyond a baseline"): what the codes add to the raw inputs. Per layer, one probe reads [inputs, codes], one reads the
inputs alone (the input-only control's features, `probes.decoding.controls.input_features`); the result is both
scores and their difference, in accuracy and in V-information (bits of cross-entropy saved per row), each with a
paired bootstrap interval over the evaluation rows. Probes are scikit-learn classifiers; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from probes._targets import eval_splits, fit_proba, majority_floor, predict, read_target, score, set_sizes
from probes.codes import LatentCodes
from probes.codes_io import jsonable
from probes.decoding.controls import input_features
from probes.decoding.fit import LayerChoice, make_probe
from probes.tables import align_columns, format_score

__all__ = ["ConditionalResult", "ConditionalRow", "conditional_probe", "cross_entropy_bits"]

PROB_FLOOR = 1e-12
"""Probabilities are clipped below at this value before taking logs, so one confident miss costs ~40 bits, not ∞."""


@dataclass(frozen=True)
class ConditionalRow:
    """One layer on one evaluation split.

    Attributes:
        layer: the probe's layer group ("0", ..., "all").
        split: the evaluation split.
        n_samples: evaluation rows.
        joint: accuracy of the probe on [inputs, codes] (a set label: the mean fraction of a row's classes among
            its k most probable, k the set's size).
        inputs_only: accuracy of the probe on the inputs alone.
        difference: joint − inputs_only (Hewitt et al.'s conditional score, in accuracy).
        difference_interval: (low, high), the bootstrap percentile interval of `difference`.
        bits_joint, bits_inputs: mean cross-entropy (bits per row) of each probe's predicted distribution.
        information: bits_inputs − bits_joint, the conditional V-information I_V(codes → label | inputs).
        information_interval: (low, high), its bootstrap percentile interval.
        majority: accuracy of always answering the train split's most frequent class (the floor).
    """

    layer: str
    split: str
    n_samples: int
    joint: float
    inputs_only: float
    difference: float
    difference_interval: tuple[float, float]
    bits_joint: float
    bits_inputs: float
    information: float
    information_interval: tuple[float, float]
    majority: float


@dataclass(frozen=True)
class ConditionalResult:
    """What `conditional_probe` returns: one `ConditionalRow` per layer and evaluation split.

    Attributes:
        task, label, reading: as on the codes.
        input_features: what the inputs-only probe read, in words.
        rows: the rows, layer-major.
        params: the probe and the resampling (`n_resamples`, `confidence`, `random_state`, ...).
        notes: anything a reader needs beside the numbers.
    """

    task: str | None
    label: str
    reading: str | None
    input_features: str
    rows: list[ConditionalRow]
    params: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def row(self, layer: str, split: str) -> ConditionalRow:
        """The row of `layer` on `split` (KeyError naming the rows there are)."""
        for r in self.rows:
            if r.layer == str(layer) and r.split == split:
                return r
        raise KeyError(f"no row for layer {layer!r} on split {split!r}; have {[(r.layer, r.split) for r in self.rows]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: everything, intervals as [low, high]."""
        return jsonable({"kind": "probes.conditional", **asdict(self)})

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat dict per row (for CSV)."""
        out = []
        for r in self.rows:
            d = asdict(r)
            d["difference_low"], d["difference_high"] = d.pop("difference_interval")
            d["information_low"], d["information_high"] = d.pop("information_interval")
            out.append(d)
        return out

    def table(self) -> str:
        """Plain-text table: per layer and split, both accuracies, the difference with its interval, the bits."""
        level = int(round(100 * self.params.get("confidence", 0.95)))
        header = ["layer", "split", "majority", "inputs only", "inputs+codes", f"difference [{level}% CI]",
                  "I_V bits/row [CI]"]
        body = [[r.layer, r.split, format_score(r.majority), format_score(r.inputs_only), format_score(r.joint),
                 f"{r.difference:+.3f} [{r.difference_interval[0]:+.3f}, {r.difference_interval[1]:+.3f}]",
                 f"{r.information:+.3f} [{r.information_interval[0]:+.3f}, {r.information_interval[1]:+.3f}]"]
                for r in self.rows]
        title = (f"Conditional probing of {self.label!r} (task {self.task}): what the codes add to "
                 f"{self.input_features}")
        return "\n".join([title, *align_columns([header, *body]), *self.notes])


def cross_entropy_bits(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-row cost in bits of `y` under `proba` (`probes._targets.fit_proba`'s output), probabilities clipped at
    `PROB_FLOOR`: −log2 p(class) for a class label, the sum over classes of the binary costs for a set label."""
    if y.ndim == 2:
        p = np.where(y == 1, proba, 1.0 - proba)
        return -np.log2(np.clip(p, PROB_FLOOR, 1.0)).sum(axis=1)
    return -np.log2(np.clip(proba[np.arange(len(y)), y], PROB_FLOOR, 1.0))


def _interval(values: np.ndarray, index: np.ndarray, confidence: float) -> tuple[float, float]:
    means = values[index].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def conditional_probe(
    codes: LatentCodes,
    label: str | None = None,
    layers: LayerChoice = "each",
    *,
    splits: str | Sequence[str] | None = None,
    estimator: ClassifierMixin | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    random_state: int = 0,
    progress: bool | None = None,
) -> ConditionalResult:
    """Score a probe on [inputs, codes] and on the inputs alone, per layer; their difference is what the codes add.

    Both probes fit on the train split and score on each evaluation split. The interval is a paired bootstrap over
    the evaluation rows (both probes scored on the same resampled rows); it covers the evaluation sample, not the
    refitting of the probes.

    Args:
        codes: codes with `inputs` and a train split.
        label: a class label or a set label (default: the codes' default label, `rule` or `terms`).
        layers: as in `decode_rules` (default: each layer on its own).
        splits: evaluation splits (default: every split but train).
        estimator: an unfitted scikit-learn classifier (default: `make_probe()`, the decoders' linear probe).
        n_resamples: bootstrap resamples of the evaluation rows.
        confidence: coverage of the percentile interval.
        random_state: seed of the bootstrap.
        progress: show a progress bar (None: only on a terminal).

    Returns:
        `ConditionalResult`.

    Raises:
        ValueError: codes without inputs or a train split, a missing label, an unknown layer or split, or
            n_resamples < 1 / confidence outside (0, 1), each before any fitting.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> y = rng.integers(0, 2, 400)
        >>> codes = LatentCodes(y[:, None, None, None, None] + 0.1 * rng.normal(size=(400, 1, 1, 1, 1)), {"rule": y},
        ...     np.array(["train", "test"] * 200), {"label": "rule"}, inputs=rng.normal(size=(400, 3, 2)))
        >>> row = conditional_probe(codes, n_resamples=100).row("0", "test")
        >>> row.joint > 0.95, row.inputs_only < 0.7, row.difference_interval[0] > 0.25
        (True, True, True)
    """
    if not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples={n_resamples!r} must be a positive integer (e.g. 1000)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r} must lie strictly between 0 and 1 (e.g. 0.95)")
    target = read_target(codes, label)
    chosen = eval_splits(codes, splits)
    groups = codes.layer_groups(layers)
    X_in = input_features(codes).astype(np.float64)
    estimator = make_probe() if estimator is None else estimator
    train = codes.split == "train"
    masks = {s: codes.split == s for s in chosen}
    rng = np.random.default_rng(random_state)
    resample = {s: rng.integers(0, int(m.sum()), size=(n_resamples, int(m.sum()))) for s, m in masks.items()}

    def evaluate(X: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        proba = fit_proba(estimator, X[train], target.y[train], X, target.n_classes)
        right = score(predict(proba, target.kind, set_sizes(target)), target.y)
        bits = cross_entropy_bits(proba, target.y)
        return {s: (right[m], bits[m]) for s, m in masks.items()}

    with threadpool_limits(limits=1):
        base = evaluate(X_in)
        rows = []
        for name, positions in tqdm(groups, desc="conditional probes", disable=None if progress is None
                                    else not progress, leave=False):
            joint = evaluate(np.hstack([X_in, codes._flat_axis(positions).astype(np.float64)]))
            for s in chosen:
                (right_j, bits_j), (right_i, bits_i) = joint[s], base[s]
                gain, saved = right_j - right_i, bits_i - bits_j
                rows.append(ConditionalRow(
                    layer=name, split=s, n_samples=int(masks[s].sum()),
                    joint=float(right_j.mean()), inputs_only=float(right_i.mean()), difference=float(gain.mean()),
                    difference_interval=_interval(gain, resample[s], confidence),
                    bits_joint=float(bits_j.mean()), bits_inputs=float(bits_i.mean()),
                    information=float(saved.mean()), information_interval=_interval(saved, resample[s], confidence),
                    majority=majority_floor(target, train, masks[s]),
                ))
    notes = ("difference = accuracy on [inputs, codes] − accuracy on inputs alone; I_V = cross-entropy of the "
             "inputs-only probe − of the joint probe (bits per row); intervals: paired bootstrap over evaluation "
             "rows, probes fitted once",)
    if target.kind == "set":
        notes += ("set label: one binary probe per class; a row scores the fraction of its classes among its k most "
                  "probable (k = the set's size)",)
    described = ("raw tokens at the codes' query and key positions" if codes.control["inputs"] == "positions"
                 else "every raw input token")
    return ConditionalResult(
        task=codes.task, label=target.name, reading=codes.reading, input_features=described, rows=rows,
        params={"layers": layers if isinstance(layers, str) else list(np.atleast_1d(layers)),
                "estimator": repr(estimator), "n_resamples": n_resamples, "confidence": confidence,
                "random_state": random_state, "n_train": int(train.sum())},
        notes=notes,
    )

