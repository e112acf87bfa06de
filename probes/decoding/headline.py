"""What every decoding score is judged against: its floors (`Baseline`: what a decoder that ignores the codes scores),
its controls (`Controls`: the input-only probe and the control task) and the two side by side (`Headline`: the score
minus the best of them, titled `HEADLINE`), and the plain-text grid every decoding table draws them in
(`headline_grid`). Plain frozen dataclasses; fitting them is `fit.py`'s and `controls.py`'s. Import them from
`probes`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from probes.codes_io import jsonable
from probes.tables import align_columns
from probes.tables import format_score as _fmt

__all__ = ["HEADLINE", "Baseline", "Controls", "Headline", "constant_line", "headline_grid", "reading_line"]

HEADLINE = "codes − best"
"""Column title of the headline: the codes' score minus the best of its floors and the input-only control."""


@dataclass(frozen=True)
class Controls:
    """The controls of one decoding, per evaluation split (fitted by `probes.decoding.controls.run_controls`).

    Attributes:
        label: the label decoded.
        input_features: what the input-only probe read (e.g. "tokens at query [35] and keys [27, 31]").
        input_only: split -> accuracy of the input-only probe (same probe, raw tokens instead of codes).
        layers: probe names of the control task ("0", ..., "all"), as in `DecodingResult.layer_names`.
        control_task: split -> accuracy [layer] of the codes probes on the control-task labels (SRAVEN), or None.
        n_input_types: distinct input types the control task labelled (SRAVEN), or None.
        note: what the controls are, in one sentence, for tables and reports.
        input_only_f1: sets of classes (fuzzy-logic terms): split -> mean per-class F1 of the input-only
            per-class probes, else None.
    """

    label: str
    input_features: str
    input_only: dict[str, float]
    layers: list[str]
    control_task: dict[str, np.ndarray] | None
    n_input_types: int | None
    note: str
    input_only_f1: dict[str, float] | None = None

    def best(self, split: str, chance: float, majority: float) -> float:
        """The best control accuracy on `split`: max of chance, majority and the input-only probe."""
        return float(max(chance, majority, self.input_only[split]))

    def selectivity(self, split: str, accuracy: np.ndarray) -> np.ndarray:
        """Accuracy on the real label minus on the control task, per probe (NaN without a control task)."""
        if self.control_task is None:
            return np.full(len(accuracy), np.nan)
        return np.asarray(accuracy, dtype=np.float64) - self.control_task[split]


@dataclass(frozen=True)
class Headline:
    """One score of the codes' probes on one split, beside the floors and the control it must beat.

    Attributes:
        metric: "accuracy" (one class per row), "set accuracy" (the exact set), "term F1" (mean per-term F1)
            or "bit R²" (mean ridge R² over latent bits).
        split: the evaluation split.
        layers: probe names ("0", ..., "all").
        codes: the codes' score per probe [layer].
        floors: what a decoder that ignores its input scores on the same rows, by name: `chance` (uniform
            guessing) and `majority` (the train-majority class) for accuracies, `always_present` (answer "present"
            for every term) for term F1, `train_mean` (predict the train rows' mean) for R².
        control: the input-only control (the same probe on the raw input tokens), or None when not fitted.
    """

    metric: str
    split: str
    layers: list[str]
    codes: np.ndarray
    floors: dict[str, float]
    control: float | None = None

    def _candidates(self) -> dict[str, float]:
        found = {name: value for name, value in self.floors.items() if value is not None and math.isfinite(value)}
        if self.control is not None and math.isfinite(self.control):
            found["input-only"] = self.control
        return found

    @property
    def best(self) -> float:
        """The best of the floors and the control (NaN when none is defined)."""
        candidates = self._candidates()
        return max(candidates.values()) if candidates else float("nan")

    @property
    def best_of(self) -> str | None:
        """Which floor or control is the best ("chance", "majority", "always_present", "input-only", ...)."""
        candidates = self._candidates()
        return max(candidates, key=candidates.get) if candidates else None

    @property
    def over_best(self) -> np.ndarray:
        """The headline: the codes' score minus `best`, per probe [layer]."""
        return np.asarray(self.codes, dtype=np.float64) - self.best

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict with `best`, `best_of` and `codes_minus_best` (NaN -> null)."""
        return jsonable({**asdict(self), "best": self.best, "best_of": self.best_of,
                          "codes_minus_best": self.over_best})


@dataclass(frozen=True)
class Baseline:
    """What a decoder that ignores the codes scores on one evaluation split.

    Attributes:
        n_samples: rows in the split.
        chance: uniform guessing: 1 / n_classes (for sets of K classes: 1 / C(n_classes, K)).
        majority: the rate, on this split, of the training split's most frequent class (or set): what a
            decoder that learned only the label prior scores.
        best_constant: the rate of this split's own most frequent class: the best any constant answer can
            score here (an upper bound on constant answers, not achievable without seeing the split).
    """

    n_samples: int
    chance: float
    majority: float
    best_constant: float


def reading_line(reading: str | None) -> str:
    """The line naming where and on what inputs the codes were read (`LatentCodes.reading`)."""
    return f"reading: {reading or 'not recorded'}"


def constant_line(constant_layers: list[str]) -> str:
    """The line naming the probes whose codes were constant (`probes.degenerate`)."""
    single = [layer for layer in constant_layers if layer != "all"]
    line = f"constant codes: {', '.join(constant_layers)} (their probes read rounding noise"
    if single and "all" not in constant_layers:
        line += "; the all-layers probe leaves them out"
    return line + ")"


def headline_grid(
    headlines: dict[str, Headline],
    floors: str | tuple[str, ...],
    titles: str | tuple[str, ...],
    *,
    first: tuple[str, list[str]] | None = None,
    selectivity: dict[str, np.ndarray] | None = None,
) -> str:
    """One row per probe: [first column,] the score per split, then per split each floor, the input-only control
    and the headline (uniform chance, the same on every split, gets one column)."""
    floors = (floors,) if isinstance(floors, str) else floors
    titles = (titles,) if isinstance(titles, str) else titles
    splits = list(headlines)
    layers = next(iter(headlines.values())).layers if headlines else []
    columns: list[tuple[str, list[str]]] = []
    if first is not None:
        columns.append(first)
    columns += [(s, [_fmt(v) for v in headlines[s].codes]) for s in splits]
    for name, title in zip(floors, titles, strict=True):
        values = [headlines[s].floors.get(name) for s in splits]
        if name == "chance" and all(v is not None and v == values[0] for v in values):
            columns.append((title, [_fmt(values[0])] * len(layers)))
        else:
            columns += [(f"{title} {s}", [_fmt(v)] * len(layers)) for s, v in zip(splits, values, strict=True)]
    columns += [(f"input-only {s}", [_fmt(headlines[s].control)] * len(layers)) for s in splits]
    columns += [(f"{HEADLINE} {s}", [_fmt(v, signed=True) for v in headlines[s].over_best]) for s in splits]
    if selectivity:
        columns += [(f"selectivity {s}", [_fmt(v, signed=True) for v in values]) for s, values in selectivity.items()]
    header = ["layer", *(title for title, _ in columns)]
    rows = [[layer, *(cells[i] for _, cells in columns)] for i, layer in enumerate(layers)]
    return "\n".join(align_columns([header, *rows], right=True))
