"""What the decoders return: `DecodingResult` and its parts (`LayerDecoding`, `MergedScore`, `Confusion`), frozen
dataclasses with `to_dict()` and `table()`. The floors, controls and headline they carry (`Baseline`, `Controls`,
`Headline`) are `headline.py`'s; the per-label results a decoding may hold beside its own (`DecodingResult.extras`:
per-class F1 of a set label, ridge R² of a bits label) are `extras.py`'s. No fitting here (that is `fit.py`, `controls.py` and
`decode.py` beside it); import them from `probes`.

Every score is shown beside its trivial floors (what a decoder that ignores the input scores on the same rows) and
the input-only control, and the headline is the score minus the best of those (`Headline`). Cells read `n/a` where
a number does not apply or was not computed, and `–` where it was computed but is undefined (NaN).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

from probes.codes_io import jsonable
from probes.decoding.extras import LabelResult
from probes.decoding.headline import (
    HEADLINE,
    Baseline,
    Controls,
    Headline,
    constant_line,
    headline_grid,
    reading_line,
)
from probes.tables import NA, UNDEFINED
from probes.tables import format_score as _fmt


class Confusion(NamedTuple):
    """One cell of a confusion matrix off its diagonal: rows of class `true` predicted as `predicted`.

    For sets of classes (`kind="sets"`) the cells are per class: "t present" predicted "t absent" (a missed
    class) or the reverse (a spurious one).

    Attributes:
        true: the true class (its name).
        predicted: the predicted class.
        count: rows.
        share: `count` over all errors of the probe on the split (for sets: over every per-class error).
    """

    true: str
    predicted: str
    count: int
    share: float

    def __str__(self) -> str:
        return f"{self.true} → {self.predicted} {self.count} ({self.share:.0%} of errors)"


@dataclass(frozen=True)
class MergedScore:
    """The probes' accuracy once classes that share a code are merged into one (their mutual confusions count as
    right), beside the merged label's own floors. The probes are not refitted: the merge reads their confusion
    matrices, so the score is the plain one plus the errors within a group.

    Attributes:
        groups: the merged groups, by class name (classes not named stay classes of their own).
        n_classes: classes after the merge.
        majority_class: the train split's most frequent class after the merge (a group joined with "+").
        accuracy: split -> accuracy with the groups merged, per probe (in `DecodingResult.layer_names` order).
        baselines: split -> the merged label's floors (`Baseline`; chance is uniform over the merged classes).
    """

    groups: list[list[str]]
    n_classes: int
    majority_class: str
    accuracy: dict[str, np.ndarray]
    baselines: dict[str, Baseline]

    @property
    def name(self) -> str:
        """The groups in words: "addition+subtraction" (groups joined with ", ")."""
        return ", ".join("+".join(group) for group in self.groups)


@dataclass(frozen=True)
class LayerDecoding:
    """Scores of one probe (one layer, or all layers together).

    Attributes:
        layer: model layer ("3") or "all".
        train_accuracy: in-sample accuracy on the training rows.
        accuracy: split -> accuracy (for sets: the predicted set equals the true set).
        macro_f1: split -> macro-averaged F1 (for sets: mean per-class binary F1 over decodable classes).
        confusion: split -> confusion matrix [true class, predicted class] (for sets: per class [class, 2, 2]
            as `sklearn.metrics.multilabel_confusion_matrix`).
    """

    layer: str
    train_accuracy: float
    accuracy: dict[str, float]
    macro_f1: dict[str, float]
    confusion: dict[str, np.ndarray]


@dataclass(frozen=True)
class DecodingResult:
    """Linear decoding of a label from codes, per layer, with baselines on every evaluation split.

    Attributes:
        task: `meta["task"]` of the codes.
        label: the label decoded.
        kind: "multiclass" (one class per row) or "sets" (a set of classes per row, one probe per class).
        class_names: names of the classes.
        n_train: training rows the probes were fitted on.
        majority_class: the training split's most frequent class (for sets: classes joined with "+").
        baselines: split -> `Baseline` (chance, majority, best constant) on that split.
        layers: one `LayerDecoding` per probe (each layer, then "all").
        extras: label -> what the per-label decoders found for it, where the codes' label kinds ask for them
            (`decode_rules(extras=True)`): for a set label, one binary probe per class scored by F1
            (`TermDecodingResult`, `decode_terms`); for a bits label, ridge R² per bit (`BitRegressionResult`,
            `ridge_bits`). Fuzzy logic: `{"terms": ..., "term_bits": ...}`; {} for SRAVEN's rules.
        controls: the input-only control and (SRAVEN) the control task, `probes.Controls`; None when
            the codes carry no `inputs` or `controls=False`.
        reading: where and on what inputs the codes were read (`LatentCodes.reading`), or None.
        constant_layers: probes ("0", ..., "all") whose codes were constant (spread / RMS at most
            `probes.degenerate.CONSTANT_RTOL`): their scores read rounding noise. The all-layers probe leaves
            constant layers' features out, so standardizing does not scale their noise up to unit variance
            (unless every layer is constant).
        notes: what the table's footnote says besides the classes without a probe (e.g. probes that stopped
            before converging).
        merged: the accuracy with classes that share a code merged (`decode_rules(merge=...)`), or None.

    Every probe keeps its confusion matrix on every evaluation split (`LayerDecoding.confusion`, in `to_dict()`
    too); `top_confusions` reads the largest cells off its diagonal, and `table()` shows them for the last layer.
    """

    task: str | None
    label: str
    kind: Literal["multiclass", "sets"]
    class_names: list[str]
    n_train: int
    majority_class: str
    baselines: dict[str, Baseline]
    layers: list[LayerDecoding]
    extras: dict[str, LabelResult] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    controls: Controls | None = None
    reading: str | None = None
    notes: tuple[str, ...] = ()
    constant_layers: list[str] = field(default_factory=list)
    merged: MergedScore | None = None

    @property
    def splits(self) -> list[str]:
        """The evaluation splits, in order."""
        return list(self.baselines)

    @property
    def layer_names(self) -> list[str]:
        """Probe names ("0", "1", ..., "all")."""
        return [row.layer for row in self.layers]

    def accuracy(self, split: str) -> np.ndarray:
        """Accuracy on `split` for every probe, in `layer_names` order ("train" gives in-sample accuracy)."""
        if split == "train":
            return np.array([row.train_accuracy for row in self.layers])
        if split not in self.baselines:
            raise ValueError(f"split={split!r} was not evaluated; evaluated splits: {self.splits}")
        return np.array([row.accuracy[split] for row in self.layers])

    def macro_f1(self, split: str) -> np.ndarray:
        """Macro-F1 on `split` for every probe."""
        if split not in self.baselines:
            raise ValueError(f"split={split!r} was not evaluated; evaluated splits: {self.splits}")
        return np.array([row.macro_f1[split] for row in self.layers])

    @property
    def last_layer(self) -> str:
        """The probe of the last single layer ("3"; "all" when every probe reads all layers): the one the table's
        top confusions describe."""
        single = [name for name in self.layer_names if name != "all"]
        return single[-1] if single else self.layer_names[-1]

    def confusion(self, split: str, layer: str | int | None = None) -> np.ndarray:
        """The confusion matrix of one probe on `split`: [true class, predicted class] in `class_names` order (for
        sets: [class, 2, 2] as `sklearn.metrics.multilabel_confusion_matrix`).

        Args:
            split: an evaluated split.
            layer: the probe ("3", 3 or "all"; default `last_layer`).
        """
        if split not in self.baselines:
            raise ValueError(f"split={split!r} was not evaluated; evaluated splits: {self.splits}")
        name = self.last_layer if layer is None else str(layer)
        if name not in self.layer_names:
            raise ValueError(f"layer={layer!r} has no probe here; probes: {self.layer_names}")
        return np.asarray(self.layers[self.layer_names.index(name)].confusion[split])

    def top_confusions(
        self, n: int = 5, split: str | None = None, layer: str | int | None = None
    ) -> list[Confusion]:
        """The `n` largest errors of one probe: true -> predicted, rows, share of the probe's errors.

        Args:
            n: how many (fewer when fewer cells hold errors).
            split: an evaluated split (default: "ood" when evaluated, else the first).
            layer: the probe (default `last_layer`).

        Returns:
            `Confusion` tuples, the largest first (ties in class order).
        """
        split = split or ("ood" if "ood" in self.baselines else self.splits[0])
        matrix = self.confusion(split, layer)
        if self.kind == "sets":
            cells = []
            for c, name in enumerate(self.class_names[: matrix.shape[0]]):
                cells += [(f"{name} present", f"{name} absent", int(matrix[c, 1, 0])),
                          (f"{name} absent", f"{name} present", int(matrix[c, 0, 1]))]
        else:
            names = self.class_names
            cells = [(names[i], names[j], int(matrix[i, j]))
                     for i in range(matrix.shape[0]) for j in range(matrix.shape[1]) if i != j]
        total = sum(count for _, _, count in cells)
        ranked = sorted((cell for cell in cells if cell[2] > 0), key=lambda cell: -cell[2])
        return [Confusion(true, predicted, count, count / total) for true, predicted, count in ranked[:n]]

    def merged_accuracy(self, split: str) -> np.ndarray:
        """Accuracy on `split` with the classes that share a code merged (`merged`), per probe."""
        if self.merged is None:
            raise ValueError("no classes were merged; pass decode_rules(..., merge=[[class, class], ...])")
        if split not in self.merged.accuracy:
            raise ValueError(f"split={split!r} was not evaluated; evaluated splits: {self.splits}")
        return np.asarray(self.merged.accuracy[split], dtype=np.float64)

    def headlines(self) -> dict[str, dict[str, Headline]]:
        """Every score beside its floors and the input-only control: metric -> split -> `Headline`.

        Metrics: `accuracy` (the label's accuracy, or exact-set accuracy for sets, against chance and majority),
        `merged_accuracy` when classes were merged (against the merged label's chance and majority; no input-only
        control), and one per result in `extras`, under its `metric`: `term_f1` (per-class F1 of a set label,
        against always-present) and `bit_r2` (ridge R² of a bits label, against the train mean).
        """
        metric = "set accuracy" if self.kind == "sets" else "accuracy"
        control = self.controls.input_only if self.controls is not None else {}
        out = {
            "accuracy": {
                s: Headline(metric, s, self.layer_names, self.accuracy(s),
                            {"chance": self.baselines[s].chance, "majority": self.baselines[s].majority},
                            control.get(s))
                for s in self.splits
            }
        }
        if self.merged is not None:
            out["merged_accuracy"] = {
                s: Headline(f"accuracy, {self.merged.name} merged", s, self.layer_names, self.merged_accuracy(s),
                            {"chance": self.merged.baselines[s].chance, "majority": self.merged.baselines[s].majority})
                for s in self.splits
            }
        for extra in self.extras.values():
            out.setdefault(extra.metric, extra.headlines())
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (arrays as lists, NaN -> null), with `headline`: metric -> split -> `Headline.to_dict()`."""
        headline = {m: {s: h.to_dict() for s, h in by_split.items()} for m, by_split in self.headlines().items()}
        top = {s: {layer: [c._asdict() for c in self.top_confusions(5, s, layer)] for layer in self.layer_names}
               for s in self.splits}
        return jsonable({**asdict(self), "headline": headline, "top_confusions": top})

    def table(self) -> str:
        """Plain-text table: per probe, train and evaluation scores beside chance, majority and the input-only
        control on the same rows, and the headline `codes − best` (the score minus the best of those)."""
        what = "set accuracy (exact)" if self.kind == "sets" else "accuracy"
        lines = [
            f"decoding {self.label!r} ({len(self.class_names)} classes, {self.kind}): {what}; probes fit on "
            f"{self.n_train} train rows; majority = rate of the train-majority class {self.majority_class!r}",
            reading_line(self.reading),
            headline_grid(self.headlines()["accuracy"], ("chance", "majority"), ("chance", "majority"),
                           first=("train", [_fmt(row.train_accuracy) for row in self.layers]),
                           selectivity=self._selectivity()),
            f"{HEADLINE} = score minus the best of the floors and the input-only control on the same rows; "
            f"{NA} = not computed, {UNDEFINED} = undefined",
        ]
        if self.controls is not None:
            lines.append(f"controls: {self.controls.note}")
        else:
            lines.append(f"controls: {NA} (these codes carry no raw inputs; re-extract them to fit the input-only "
                         "control)")
        if self.constant_layers:
            lines.append(constant_line(self.constant_layers))
        lines += self._confusion_lines()
        if self.merged is not None:
            merged = self.merged
            lines += [
                "",
                f"with {merged.name} merged into one class ({merged.n_classes} classes; probes not refitted, their "
                f"confusions within a group count as right): accuracy; majority = rate of {merged.majority_class!r}",
                headline_grid(self.headlines()["merged_accuracy"], ("chance", "majority"), ("chance", "majority")),
            ]
        for extra in self.extras.values():
            lines += ["", extra.table()]
        if self.notes:
            lines += ["", "notes: " + "; ".join(self.notes)]
        return "\n".join(lines)

    def _confusion_lines(self, n: int = 3) -> list[str]:
        """One line per split: the last layer's largest confusions (`top_confusions`)."""
        lines = []
        for split in self.splits:
            top = self.top_confusions(n, split)
            shown = "; ".join(str(c) for c in top) if top else "none (no errors)"
            lines.append(f"top confusions, layer {self.last_layer}, {split}: {shown}")
        return lines

    def _selectivity(self) -> dict[str, np.ndarray] | None:
        controls = self.controls
        if controls is None or controls.control_task is None or controls.layers != self.layer_names:
            return None
        return {s: controls.selectivity(s, self.accuracy(s)) for s in self.splits if s in controls.control_task}
