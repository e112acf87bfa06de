"""Controls for decoding numbers: what the same probe scores without the codes, or on labels the codes cannot hold.

Which controls apply, the codes' metadata says (`LatentCodes.control`, written by extraction from the task's
declaration):
- Input-only control: the same probe on raw input tokens instead of codes (`LatentCodes.inputs`): the tokens at
  the query and key positions the codes were read from (`control["inputs"] == "positions"`, SRAVEN), or every raw
  token ("all_tokens", fuzzy logic: the query token alone carries no term information).
- Control task (Hewitt & Liang, 2019), where the key tokens are discrete (`control["control_task"]`, SRAVEN): each
  input type (the value tuple at the key positions) gets a random but fixed label drawn with the real label's class
  frequencies; selectivity = accuracy on the real label minus accuracy on the control label. Continuous inputs
  (fuzzy logic: every input type is new) leave the input-only control to stand in for it.
Probes are the plain decoders (`fit_rules`, `fit_terms`, `fit.py`; `fit_bits`, `ridge.py`) on stand-in features, so
this module sits between them and `decode.py`, which adds these controls to the codes' decoding; nothing here
imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from probes.codes import LatentCodes
from probes.decoding.fit import fit_rules, fit_terms
from probes.decoding.headline import Controls
from probes.decoding.ridge import fit_bits
from probes.degenerate import CONSTANT_RTOL
from probes.labels import class_labels

__all__ = [
    "Controls",
    "control_labels",
    "input_features",
    "input_only_r2",
    "input_only_term_f1",
    "input_types",
    "run_controls",
]

CONTROL_LABEL = "control_task"
"""Name of the control-task label added to the codes the control probes read."""


def _require_inputs(codes: LatentCodes) -> np.ndarray:
    if codes.inputs is None:
        raise ValueError(
            "these codes carry no raw inputs (LatentCodes.inputs is None: written before inputs were stored, or "
            "made by codes_from_patterns); re-extract them with `latentcode extract RUN` to run the controls"
        )
    return codes.inputs


def _row_views(codes: LatentCodes, what: str) -> tuple[list[list[int]], np.ndarray]:
    views = codes.meta.get(what)
    if not views:
        raise ValueError(f"meta[{what!r}] is missing; the controls need the positions the codes were read from")
    views = [list(v) for v in (views if isinstance(views[0], list) else [views])]
    view = codes.labels.get("view", np.zeros(len(codes), dtype=np.int64)).astype(np.int64)
    if view.max(initial=0) >= len(views):
        raise ValueError(f"label 'view' holds {int(view.max())} but meta[{what!r}] lists {len(views)} view(s)")
    return views, view


def _tokens_at(codes: LatentCodes, what: tuple[str, ...]) -> np.ndarray:
    """Each row's raw tokens at its view's positions (meta entries `what`), flattened: [n_samples, features]."""
    inputs = _require_inputs(codes)
    parts = []
    for name in what:
        views, view = _row_views(codes, name)
        index = np.array(views, dtype=np.int64)[view]  # [n_samples, positions]
        parts.append(np.take_along_axis(inputs, index[:, :, None], axis=1).reshape(len(codes), -1))
    return np.concatenate(parts, axis=1)


def input_features(codes: LatentCodes) -> np.ndarray:
    """The raw inputs the input-only control reads, float32 [n_samples, features].

    With `control["inputs"] == "positions"` (SRAVEN) the tokens at the row's query and key positions
    (`meta["query"]`, `meta["key"]`); else (fuzzy logic, codes that say nothing) every token of the instance,
    flattened.

    Raises:
        ValueError: the codes carry no inputs.
    """
    if codes.control["inputs"] == "positions":
        return _tokens_at(codes, ("query", "key"))
    inputs = _require_inputs(codes)
    return inputs.reshape(len(codes), -1)


def input_types(codes: LatentCodes) -> tuple[np.ndarray, np.ndarray]:
    """Input types (SRAVEN): each row's raw tokens at its key positions, and an id per distinct tuple.

    Returns:
        (types [n_samples, key * d_in] float32, ids int64 [n_samples], equal ids for equal tuples).
    """
    types = _tokens_at(codes, ("key",))
    _, ids = np.unique(types, axis=0, return_inverse=True)
    return types, ids.ravel().astype(np.int64)


def control_labels(codes: LatentCodes, label: str | None = None, random_state: int = 0) -> np.ndarray:
    """Hewitt & Liang's control task (codes whose `control["control_task"]` is set: SRAVEN): a random but fixed
    class per input type.

    Each distinct value tuple at the key positions draws its class from the real label's class frequencies
    (over these rows), with a generator seeded by `random_state` and the tuple itself, so a type keeps its class
    across calls, row orders and subsets with the same frequencies.

    Args:
        codes: codes with `inputs` and discrete key tokens (SRAVEN).
        label: the real label (default: the codes' default label, `rule`).
        random_state: seed of the assignment.

    Returns:
        int64 [n_samples], the control label of each row.

    Raises:
        ValueError: codes whose inputs are not discrete, without inputs, or a label that is not one class per row.
    """
    if not codes.control["control_task"]:
        raise ValueError(
            f"the control task is defined for codes with discrete input types (meta['control']['control_task'], as "
            f"SRAVEN's); these (task {codes.task!r}) have none, e.g. continuous inputs as fuzzy logic's, so use the "
            "input-only control there"
        )
    name, y, classes, _ = class_labels(codes, label)
    if y.ndim != 1:
        raise ValueError(f"label={name!r} has shape {y.shape}; the control task needs one class per row")
    freq = np.array([np.mean(y == c) for c in classes])
    types, ids = input_types(codes)
    first = np.unique(ids, return_index=True)[1]
    words = np.ascontiguousarray(types[first]).view(np.uint32)
    draws = np.array(
        [np.random.Generator(np.random.PCG64(np.random.SeedSequence([random_state, *row.tolist()]))).random()
         for row in words]
    )
    per_type = np.asarray(classes)[np.minimum(np.searchsorted(np.cumsum(freq), draws, side="right"), len(classes) - 1)]
    return per_type[ids]


def _stand_in(codes: LatentCodes, features: np.ndarray, labels: dict[str, np.ndarray]) -> LatentCodes:
    meta = {**codes.meta, "layers": [0]}
    return LatentCodes(features[:, None, None, None, :], labels, codes.split, meta)


def run_controls(
    codes: LatentCodes,
    label: str | None = None,
    layers: Any = "each+all",
    *,
    C: float = 1.0,
    max_iter: int = 1000,
    random_state: int | None = 0,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
) -> Controls:
    """Fit the controls beside a decoding: the input-only probe and, where it applies (SRAVEN), the control task.

    Args:
        codes: codes with `inputs`, a train split and evaluation splits (as `decode_rules` needs).
        label: the label decoded (default: the codes' default label).
        layers: the decoding's layer choice (the control-task probes use the same groups).
        C, max_iter, random_state, progress: as in `decode_rules` (the control task's assignment uses
            `random_state` too, 0 when None).
        rtol: as in `decode_rules`: the control-task probes read the same features as the codes' probes (the
            all-layers probe leaves constant layers out).

    Returns:
        `Controls`.

    Raises:
        ValueError: codes without inputs, or anything `decode_rules` rejects.
    """
    probe = {"C": C, "max_iter": max_iter, "random_state": random_state, "progress": progress}
    name = label or codes.label
    features = input_features(codes)
    inputs_only = fit_rules(_stand_in(codes, features, codes.labels), label=name, layers="all", **probe)
    splits = inputs_only.splits
    per_class = inputs_only.extras.get(inputs_only.label)  # a set label's per-class probes
    if codes.control["inputs"] == "positions":
        query, key = (codes.meta.get(k) for k in ("query", "key"))
        described = f"raw tokens at the codes' query {query} and key {key} positions"
        note = "input-only: the same probe on the raw tokens the codes come from"
    else:
        described = "every raw input token of the instance (all (x, y) examples)"
        note = "input-only: the same probe on every raw input token"
    control_task, layer_names, n_types = None, [], None
    if codes.control["control_task"]:
        control = control_labels(codes, name, 0 if random_state is None else random_state)
        relabelled = LatentCodes(codes.codes, {**codes.labels, CONTROL_LABEL: control}, codes.split, codes.meta)
        task = fit_rules(relabelled, label=CONTROL_LABEL, layers=layers, rtol=rtol, **probe)
        control_task = {s: task.accuracy(s) for s in splits}
        layer_names = task.layer_names
        n_types = int(input_types(codes)[1].max()) + 1
        note += (
            "; selectivity (Hewitt & Liang 2019): accuracy minus accuracy on a control task giving each of "
            f"{n_types} key-value tuples a fixed random label with the real label's frequencies"
        )
    else:
        note += "; no control task: the inputs are continuous, so the input-only control stands in for selectivity"
    return Controls(
        label=inputs_only.label,
        input_features=described,
        input_only={s: float(inputs_only.accuracy(s)[0]) for s in splits},
        layers=layer_names,
        control_task=control_task,
        n_input_types=n_types,
        note=note,
        input_only_f1=None if per_class is None else {s: float(per_class.mean_f1(s)[0]) for s in splits},
    )


def input_only_term_f1(
    codes: LatentCodes,
    label: str = "terms",
    *,
    C: float = 1.0,
    max_iter: int = 1000,
    random_state: int | None = 0,
    progress: bool | None = None,
) -> dict[str, float]:
    """The input-only control of `decode_terms`: the same per-class probes on the raw tokens, mean F1 per split.

    Raises:
        ValueError: codes without inputs, or anything `decode_terms` rejects.
    """
    stand_in = _stand_in(codes, input_features(codes), codes.labels)
    result = fit_terms(stand_in, label, "all", C=C, max_iter=max_iter, random_state=random_state, progress=progress)
    return {s: float(result.mean_f1(s)[0]) for s in result.f1}


def input_only_r2(
    codes: LatentCodes,
    label: str = "term_bits",
    *,
    alpha: float = 1.0,
    n_folds: int = 5,
    groups: str | None = None,
    splits: str | Sequence[str] | None = None,
) -> dict[str, float]:
    """The input-only control of `ridge_bits`: the same ridge on the raw tokens, mean R² over bits per split.

    Raises:
        ValueError: codes without inputs, or anything `ridge_bits` rejects.
    """
    stand_in = _stand_in(codes, input_features(codes), codes.labels)
    result = fit_bits(stand_in, label, "all", alpha=alpha, n_folds=n_folds, groups=groups, splits=splits)
    return {s: float(result.mean(s)[0]) for s in result.r2}
