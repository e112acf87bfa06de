"""MDL probing (Voita & Titov 2020, "Information-theoretic probing with minimum description length"): the online
codelength of the labels given the codes, per layer, beside the uniform codelength and the online codelength given
the raw inputs (the input-only control's features) and the online codelength of a probe that reads nothing (it
learns the class frequencies only: the floor). Compression = uniform / online; the higher, the more easily the label
is read, and a reading helps only where it beats the prior-only compression.

The online code sends the first block of rows with the uniform code, then each later block with a probe fitted on
every row before it (`PORTIONS`, Voita & Titov's block ends). Numpy and scikit-learn only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from probes._targets import Target, fit_proba, read_target
from probes.codes import LatentCodes
from probes.codes_io import jsonable
from probes.conditional import cross_entropy_bits
from probes.decoding.controls import input_features
from probes.decoding.fit import LayerChoice, make_probe
from probes.tables import align_columns

__all__ = ["PORTIONS", "MDLResult", "MDLRow", "block_ends", "mdl_probe", "online_codelength", "uniform_codelength"]

PORTIONS: tuple[float, ...] = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)
"""Voita & Titov's block ends as fractions of the data: 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25, 50, 100 %."""

SMOOTHING = 1e-3
"""Weight of the uniform code mixed into each block's probe, so a class unseen in the earlier blocks costs at most
log2(n_classes / SMOOTHING) bits instead of an infinite codelength."""


def block_ends(n_samples: int, portions: Sequence[float] = PORTIONS) -> list[int]:
    """Row counts at which the online code's blocks end: round(portion × n_samples) for each portion.

    Raises:
        ValueError: portions not increasing up to 1, or too few rows for every block to hold at least one row
            (the message says how many rows the portions need).

    >>> block_ends(2048)
    [2, 4, 8, 16, 33, 66, 128, 256, 512, 1024, 2048]
    """
    portions = [float(p) for p in portions]
    if not portions or any(b <= a for a, b in zip(portions, portions[1:], strict=False)) \
            or portions[0] <= 0 or portions[-1] != 1.0:
        raise ValueError(f"portions={portions} must increase strictly from above 0 to exactly 1.0 "
                         "(Voita & Titov's: probes.mdl.PORTIONS)")
    ends = [int(round(p * n_samples)) for p in portions]
    if ends[0] < 1 or any(b <= a for a, b in zip(ends, ends[1:], strict=False)):
        need = max(int(np.ceil(0.5 / portions[0])),
                   *(int(np.ceil(1.0 / (b - a))) for a, b in zip(portions, portions[1:], strict=False)))
        raise ValueError(f"{n_samples} rows are too few for the MDL blocks (portions {portions}): every block needs "
                         f"at least one row, so at least ~{need} rows; extract more codes (--n-samples) or pass "
                         "coarser portions")
    return ends


def uniform_codelength(target: Target, rows: int | np.ndarray) -> float:
    """Bits to send the labels of `rows` rows with the uniform code: log2(n_classes) per row for a class label,
    1 bit per class and row for a set label (each class's presence sent on its own)."""
    n = rows if isinstance(rows, int | np.integer) else len(rows)
    return float(n * (target.n_classes if target.kind == "set" else np.log2(target.n_classes)))


def online_codelength(X: np.ndarray, target: Target, order: np.ndarray, ends: Sequence[int],
                      estimator: ClassifierMixin, smoothing: float = SMOOTHING) -> tuple[float, list[float]]:
    """The online codelength of `target` given features X, rows taken in `order`.

    The first `ends[0]` rows cost the uniform code; the rows of block i (ends[i-1]..ends[i]) cost −log2 of the
    probability a probe fitted on the first ends[i-1] rows gives their label, mixed with the uniform code at weight
    `smoothing` ((1 − s)·p + s/n_classes; per class for a set label).

    Returns:
        (total bits, bits of each block, the first being the uniform one).
    """
    y = target.y[order]
    X = X[order]
    blocks = [uniform_codelength(target, int(ends[0]))]
    uniform = 0.5 if target.kind == "set" else 1.0 / target.n_classes
    for start, stop in zip(ends, ends[1:], strict=False):
        proba = fit_proba(estimator, X[:start], y[:start], X[start:stop], target.n_classes)
        proba = (1 - smoothing) * proba + smoothing * uniform
        blocks.append(float(cross_entropy_bits(proba, y[start:stop]).sum()))
    return float(sum(blocks)), blocks


@dataclass(frozen=True)
class MDLRow:
    """One layer's codelengths (bits), over `n_samples` train rows.

    Attributes:
        layer: the probe's layer group ("0", ..., "all").
        uniform: bits with the uniform code (no features).
        online: the online codelength given the codes.
        inputs_only: the online codelength given the raw inputs (same for every layer).
        compression: uniform / online.
        inputs_compression: uniform / inputs_only.
        prior_only: the online codelength of the same probe reading no features (a constant), which learns only
            the class frequencies: the floor a reading must beat (same for every layer).
        prior_compression: uniform / prior_only.
        blocks: bits of each block of the codes' online code.
    """

    layer: str
    n_samples: int
    uniform: float
    online: float
    inputs_only: float
    compression: float
    inputs_compression: float
    prior_only: float
    prior_compression: float
    blocks: list[float]


@dataclass(frozen=True)
class MDLResult:
    """What `mdl_probe` returns: one `MDLRow` per layer group.

    Attributes:
        task, label, reading: as on the codes.
        portions, ends: the block ends as fractions and as row counts.
        rows: the rows.
        params: the probe, the rows used, the seed of their order, the smoothing.
    """

    task: str | None
    label: str
    reading: str | None
    portions: list[float]
    ends: list[int]
    rows: list[MDLRow]
    params: dict[str, Any] = field(default_factory=dict)

    def row(self, layer: str) -> MDLRow:
        for r in self.rows:
            if r.layer == str(layer):
                return r
        raise KeyError(f"no row for layer {layer!r}; have {[r.layer for r in self.rows]}")

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "probes.mdl", **asdict(self)})

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat dict per layer (for CSV; the blocks left out)."""
        return [{k: v for k, v in asdict(r).items() if k != "blocks"} for r in self.rows]

    def table(self) -> str:
        header = ["layer", "rows", "uniform bits", "online bits (codes)", "(inputs)", "(prior only)", "compression",
                  "(inputs)", "(prior only)"]
        body = [[r.layer, str(r.n_samples), f"{r.uniform:.0f}", f"{r.online:.0f}", f"{r.inputs_only:.0f}",
                 f"{r.prior_only:.0f}", f"{r.compression:.2f}", f"{r.inputs_compression:.2f}",
                 f"{r.prior_compression:.2f}"] for r in self.rows]
        title = (f"MDL probing of {self.label!r} (task {self.task}; Voita & Titov's online code, blocks ending at "
                 f"{self.ends[0]}..{self.ends[-1]} rows)")
        return "\n".join([title, *align_columns([header, *body])])


def mdl_probe(
    codes: LatentCodes,
    label: str | None = None,
    layers: LayerChoice = "each",
    *,
    split: str = "train",
    portions: Sequence[float] = PORTIONS,
    estimator: ClassifierMixin | None = None,
    smoothing: float = SMOOTHING,
    random_state: int = 0,
    progress: bool | None = None,
) -> MDLResult:
    """Online codelength of a label given each layer's codes, beside the uniform and the input-only codelengths.

    Args:
        codes: codes with `inputs` (for the input-only codelength).
        label: a class label or a set label (default: the codes' default label).
        layers: as in `decode_rules` (default: each layer on its own).
        split: the rows transmitted (default: train, as Voita & Titov code their training set).
        portions: block ends as fractions of the rows (default: `PORTIONS`).
        estimator: an unfitted scikit-learn classifier (default: `make_probe()`).
        smoothing: weight of the uniform code mixed into each probe (see `SMOOTHING`), in [0, 1).
        random_state: seed of the order the rows are sent in.
        progress: show a progress bar (None: only on a terminal).

    Raises:
        ValueError: a missing label, an unknown layer, a split without rows, too few rows for the blocks, or codes
            without inputs, each before any fitting.
    """
    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing={smoothing!r} must lie in [0, 1) (default {SMOOTHING})")
    target = read_target(codes, label)
    groups = codes.layer_groups(layers)
    rows = np.flatnonzero(codes.split == split)
    if not rows.size:
        raise ValueError(f"split={split!r} has no rows (splits present: {list(codes.splits)})")
    ends = block_ends(rows.size, portions)
    X_in = input_features(codes)[rows].astype(np.float64)
    sub = Target(target.name, target.kind, target.y[rows], target.class_names)
    order = np.random.default_rng(random_state).permutation(rows.size)
    estimator = make_probe() if estimator is None else estimator
    uniform = uniform_codelength(sub, rows.size)
    out = []
    with threadpool_limits(limits=1):
        inputs_only, _ = online_codelength(X_in, sub, order, ends, estimator, smoothing)
        prior_only, _ = online_codelength(np.zeros((rows.size, 1)), sub, order, ends, estimator, smoothing)
        for name, positions in tqdm(groups, desc="MDL probes", disable=None if progress is None else not progress,
                                    leave=False):
            X = codes._flat_axis(positions)[rows].astype(np.float64)
            online, blocks = online_codelength(X, sub, order, ends, estimator, smoothing)
            out.append(MDLRow(name, int(rows.size), uniform, online, inputs_only, uniform / online,
                              uniform / inputs_only, prior_only, uniform / prior_only, blocks))
    return MDLResult(
        task=codes.task, label=target.name, reading=codes.reading, portions=[float(p) for p in portions],
        ends=ends, rows=out,
        params={"split": split, "estimator": repr(estimator), "smoothing": smoothing, "random_state": random_state,
                "label_kind": target.kind, "n_classes": target.n_classes},
    )
