"""The fitting core of decoding: the probe (`make_probe`), the layer groups it reads, and the plain decoders,
without the extras and without controls (`fit_rules`, `fit_terms`; `fit_bits` is in `ridge.py`).

`controls.py` fits these same decoders on stand-in features (raw tokens, control-task labels) and `decode.py` adds
the extras and the controls to them, so both build on this module and neither imports the other's caller. The
all-layers group leaves out constant layers (`probes.degenerate`): standardizing would scale their rounding noise
up to unit variance. Probes are plain scikit-learn pipelines; nothing is re-implemented and nothing imports torch.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix, f1_score, multilabel_confusion_matrix
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from probes.codes import LatentCodes
from probes.decoding.estimators import RuleDecoder
from probes.decoding.extras import TermDecodingResult
from probes.decoding.floors import (
    always_present_f1,
    merge_partition,
    merged_score,
    multiclass_floors,
    set_floors,
)
from probes.decoding.results import DecodingResult, LayerDecoding
from probes.degenerate import CONSTANT_RTOL, code_spread
from probes.labels import class_labels
from probes.layers import LayerChoice

__all__ = ["LayerChoice", "fit_rules", "fit_terms", "make_probe", "probe_groups"]

logger = logging.getLogger(__name__)



def _single_threaded(fn: Callable) -> Callable:
    """Run `fn` with one BLAS and one OpenMP thread. Probes are many small solves (tens to hundreds of features)
    where extra threads only add synchronisation, and on a busy machine spinning threads made decoding and
    k-means 10-20x slower (bench/bench_probes.py: k-means on 20k codes 10.7 s with 2 threads, 0.5 s with 1)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits=1):
            return fn(*args, **kwargs)

    return wrapper


_counting = contextvars.ContextVar("counting_convergence_warnings", default=False)


def _counting_convergence(fn: Callable) -> Callable:
    """Run `fn`, turning the ConvergenceWarnings its probes raise into one note on the result it returns
    (`notes`), instead of one warning per probe; other warnings pass through. Nested calls count for the outermost.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _counting.get():
            return fn(*args, **kwargs)
        token = _counting.set(True)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                result = fn(*args, **kwargs)
        finally:
            _counting.reset(token)
        n_unconverged = 0
        for warning in caught:
            if issubclass(warning.category, ConvergenceWarning):
                n_unconverged += 1
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        if n_unconverged and hasattr(result, "notes"):
            max_iter = kwargs.get("max_iter", 1000)
            note = (f"{n_unconverged} logistic probe fit(s) stopped at max_iter={max_iter} before converging "
                    "(sklearn ConvergenceWarning); raise max_iter to let them finish")
            result = replace(result, notes=(*result.notes, note))
        return result

    return wrapper


def make_probe(C: float = 1.0, max_iter: int = 1000, random_state: int | None = 0) -> Pipeline:
    """The linear probe every decoder here uses: standardize, then (multinomial) logistic regression.

    Scaling sits inside the pipeline so it is fitted on training rows only.

    Args:
        C: inverse L2 regularization strength of `LogisticRegression`.
        max_iter: solver iterations (the default converges on standardized codes).
        random_state: seed passed to `LogisticRegression`.

    Returns:
        An unfitted `Pipeline(StandardScaler(), LogisticRegression(...))`.

    Example:
        >>> import numpy as np
        >>> X, y = np.array([[0.0], [0.1], [1.0], [1.1]]), np.array([0, 0, 1, 1])
        >>> make_probe().fit(X, y).predict([[0.05], [1.05]]).tolist()
        [0, 1]
    """
    return make_pipeline(
        StandardScaler(), LogisticRegression(C=C, max_iter=max_iter, random_state=random_state)
    )


def _train_rows(codes: LatentCodes) -> np.ndarray:
    train = codes.split == "train"
    if not train.any():
        raise ValueError(
            f"codes has no rows in split 'train' (splits present: {list(codes.splits)}); decoders fit on "
            "train-split codes: extract codes for the train split too"
        )
    return train


def _resolve_splits(codes: LatentCodes, splits: str | Sequence[str] | None) -> list[str]:
    if splits is None:
        chosen = [s for s in codes.splits if s != "train"]
        if not chosen:
            raise ValueError(
                f"codes has no evaluation rows (splits present: {list(codes.splits)}); decoders score on "
                "test/ood/novel_terms rows: extract codes for those splits"
            )
        return chosen
    chosen = [splits] if isinstance(splits, str) else list(splits)
    if "train" in chosen:
        raise ValueError(
            f"splits={splits!r} includes 'train', the split probes are fitted on (its in-sample "
            "score is reported as train_accuracy); pass test/ood/novel_terms"
        )
    for split in chosen:
        if not (codes.split == split).any():
            raise ValueError(
                f"splits={splits!r}: split {split!r} has no rows (splits present: {list(codes.splits)})"
            )
    return chosen


def _require_kind(codes: LatentCodes, label: str, kind: str, who: str) -> None:
    """Refuse a label whose kind, as the codes' metadata records it (`LatentCodes.label_kinds`), is not `kind`;
    codes whose producer recorded no kinds are not checked."""
    kinds = codes.label_kinds
    if kinds and kinds.get(label) != kind:
        fitting = codes.labels_of_kind(kind)
        hint = f"pass label= one of {fitting}" if fitting else f"these codes have no {kind} label: use decode_rules"
        raise ValueError(
            f"{who} decodes a {kind} label; label={label!r} of these codes (task {codes.task!r}) is "
            f"{kinds.get(label) or 'not one of their labels'}; {hint}"
        )


def _progress(items: list, desc: str, progress: bool | None):
    return tqdm(items, desc=desc, disable=None if progress is None else not progress, leave=False)


def _set_indicator(name: str, y: np.ndarray, n_classes: int) -> np.ndarray:
    indicator = np.zeros((y.shape[0], n_classes), dtype=np.int64)
    np.put_along_axis(indicator, y, 1, axis=1)
    if (indicator.sum(axis=1) != y.shape[1]).any():
        raise ValueError(
            f"label={name!r} repeats a class within a row; set decoding needs distinct classes per row "
            "(fuzzy-logic terms); decode a 1-D label such as 'rule' instead"
        )
    return indicator


def probe_groups(
    codes: LatentCodes, layers: LayerChoice = "each+all", *, rtol: float = CONSTANT_RTOL
) -> tuple[list[tuple[str, list[int]]], list[str]]:
    """The layer groups a probe reads (`LatentCodes.layer_groups`), and which of them are constant.

    A layer is constant when its codes vary across rows by at most `rtol` of their RMS (`probes.degenerate`). The
    all-layers group leaves constant layers out (unless every layer is constant): a standardized probe would scale
    their rounding noise up to unit variance, as loud as the live layers' signal.

    Args:
        codes: latent codes.
        layers: as in `decode_rules`.
        rtol: the constant-codes tolerance (`probes.degenerate.CONSTANT_RTOL`).

    Returns:
        ((name, positions on the layer axis) per group, the names of the constant groups).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = np.stack([np.full((50, 2), 0.7), rng.normal(size=(50, 2))], axis=1)[:, :, :, None, None]
        >>> probe_groups(LatentCodes(X, {}, np.array(["train", "test"] * 25)))
        ([('0', [0]), ('1', [1]), ('all', [1])], ['0'])
    """
    groups = codes.layer_groups(layers)
    dead = [row.constant for row in code_spread(codes, "each", rtol=rtol).layers]
    out, constant = [], []
    for name, positions in groups:
        live = [p for p in positions if not dead[p]]
        if name == "all" and live:
            positions = live
        if not live:
            constant.append(name)
        out.append((name, positions))
    return out, constant


def _decode_sets(codes, name, y, names, groups, constant, train, masks, probe_params, progress):
    """One binary probe per class and layer group; returns LayerDecoding rows and the per-class result."""
    n_classes = len(names)
    indicator = _set_indicator(name, y, n_classes)
    skipped, evaluated = {}, []
    for c in range(n_classes):
        present = indicator[train, c]
        if present.min() == present.max():
            skipped[c] = "absent from train" if present.max() == 0 else "present in every train row"
        else:
            evaluated.append(c)
    if not evaluated:
        raise ValueError(f"label={name!r}: no class varies across the train rows, so no probe can be fitted")
    if skipped:  # listed in the result (TermDecodingResult.skipped) and the table, so not logged above debug
        logger.debug("label %r: no probe for %d classes (%s)", name, len(skipped), skipped)
    f1 = {s: np.full((len(groups), n_classes), np.nan) for s in masks}
    support = {s: indicator[m].sum(axis=0) for s, m in masks.items()}
    rows = []
    for g, (layer, positions) in enumerate(_progress(groups, f"probes {name}", progress)):
        X = codes._flat_axis(positions)
        predicted = np.repeat(indicator[train][:1], codes.n_samples, axis=0)
        for c in evaluated:
            probe = make_probe(**probe_params).fit(X[train], indicator[train, c])
            predicted[:, c] = probe.predict(X)
        accuracy, macro, confusion = {}, {}, {}
        for split, mask in masks.items():
            for c in evaluated:
                f1[split][g, c] = f1_score(indicator[mask, c], predicted[mask, c], zero_division=np.nan)
            accuracy[split] = float((predicted[mask] == indicator[mask]).all(axis=1).mean())
            with np.errstate(all="ignore"):
                row = f1[split][g]
                macro[split] = float(np.nanmean(row)) if np.isfinite(row).any() else float("nan")
            confusion[split] = multilabel_confusion_matrix(indicator[mask], predicted[mask])
        train_accuracy = float((predicted[train] == indicator[train]).all(axis=1).mean())
        rows.append(LayerDecoding(layer, train_accuracy, accuracy, macro, confusion))
    terms = TermDecodingResult(
        label=name,
        class_names=list(names),
        layers=[layer for layer, _ in groups],
        evaluated=evaluated,
        skipped=skipped,
        f1=f1,
        support=support,
        always_present_f1={s: always_present_f1(indicator, m, evaluated) for s, m in masks.items()},
        reading=codes.reading,
        constant_layers=list(constant),
    )
    return rows, terms


def fit_rules(
    codes: LatentCodes,
    label: str | None = None,
    layers: LayerChoice = "each+all",
    *,
    splits: str | Sequence[str] | None = None,
    C: float = 1.0,
    max_iter: int = 1000,
    random_state: int | None = 0,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
    merge: Sequence[Sequence[Any]] | None = None,
) -> DecodingResult:
    """`decode_rules` without the per-label extras and without controls: the codes' probes and their floors.

    Args and Raises: as in `probes.decode_rules`.

    Returns:
        A `DecodingResult` without `controls`; for a set label, `extras` holds its per-class probes.
    """
    train = _train_rows(codes)
    splits = _resolve_splits(codes, splits)
    masks = {s: codes.split == s for s in splits}
    name, y, classes, names = class_labels(codes, label)
    if merge is not None:
        if y.ndim == 2:
            raise ValueError(f"merge= merges classes of a label with one class per row; {name!r} holds sets of "
                             "classes (decode a 1-D label, or leave merge out)")
        merge_partition(name, merge, classes, names)  # checked before any probe is fitted
    groups, constant = probe_groups(codes, layers, rtol=rtol)
    probe_params = {"C": C, "max_iter": max_iter, "random_state": random_state}
    params = {"layers": layers if isinstance(layers, str) else list(np.atleast_1d(layers)), **probe_params}
    if merge is not None:
        params["merge"] = [list(group) for group in merge]
    terms = None
    if y.ndim == 2:
        rows, terms = _decode_sets(codes, name, y, names, groups, constant, train, masks, probe_params, progress)
        majority, baselines = set_floors(y, train, masks, len(names))
        majority_name = "+".join(names[int(c)] for c in majority)
        kind = "sets"
    else:
        if np.unique(y[train]).size < 2:
            raise ValueError(
                f"label={name!r} has a single class ({y[train][0]!r}) in the train split; a decoder needs at "
                "least two classes: extract more training rows or decode another label"
            )
        majority, baselines = multiclass_floors(y, train, masks, len(classes))
        majority_name = names[int(np.flatnonzero(classes == majority)[0])]
        rows = []
        for layer, positions in _progress(groups, f"decoding {name}", progress):
            X = codes._flat_axis(positions)
            probe = RuleDecoder(**probe_params).fit(X[train], y[train])
            accuracy, macro, confusion = {}, {}, {}
            for split, mask in masks.items():
                predicted = probe.predict(X[mask])
                accuracy[split] = float(np.mean(predicted == y[mask]))
                macro[split] = float(f1_score(y[mask], predicted, average="macro", zero_division=0))
                confusion[split] = confusion_matrix(y[mask], predicted, labels=classes)
            train_accuracy = float(probe.score(X[train], y[train]))
            rows.append(LayerDecoding(layer, train_accuracy, accuracy, macro, confusion))
        kind = "multiclass"
    merged = None if merge is None else merged_score(name, merge, y, classes, names, train, masks, rows)
    return DecodingResult(
        task=codes.task,
        label=name,
        kind=kind,
        class_names=list(names),
        n_train=int(train.sum()),
        majority_class=majority_name,
        baselines=baselines,
        layers=rows,
        extras={} if terms is None else {name: terms},
        params=params,
        reading=codes.reading,
        constant_layers=constant,
        merged=merged,
    )


def fit_terms(
    codes: LatentCodes,
    label: str = "terms",
    layers: LayerChoice = "each+all",
    *,
    splits: str | Sequence[str] | None = None,
    C: float = 1.0,
    max_iter: int = 1000,
    random_state: int | None = 0,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
) -> TermDecodingResult:
    """`decode_terms` without the input-only control.

    Args and Raises: as in `probes.decode_terms`.
    """
    _require_kind(codes, label, "class_set", "decode_terms")
    train = _train_rows(codes)
    splits = _resolve_splits(codes, splits)
    masks = {s: codes.split == s for s in splits}
    name, y, _, names = class_labels(codes, label)
    if y.ndim != 2:
        raise ValueError(
            f"label={name!r} has shape {y.shape}; decode_terms needs a set label [n, K] ('terms')"
        )
    probe_params = {"C": C, "max_iter": max_iter, "random_state": random_state}
    groups, constant = probe_groups(codes, layers, rtol=rtol)
    _, terms = _decode_sets(codes, name, y, names, groups, constant, train, masks, probe_params, progress)
    return terms
