"""Linear decoders of ground truth from latent codes: fit on the train split, score on test/OOD, per layer.

`decode_rules` is the paper's probe (Fig. 5F, Fig. 2B) with its floors beside it (uniform chance, majority
class, best constant, spec §8.5) and the input-only control (`controls.py`). `decode_terms` (per-term logistic F1,
floor: always answering "present") and `ridge_bits` (the reference code's ridge R² per latent bit, with folds
grouped by composition; floor: the train mean) are the extras for codes with set and bit labels (fuzzy logic),
found through the codes' `label_kinds` metadata and kept in `DecodingResult.extras` under the label's name. Each is a plain decoder of `fit.py` plus
its controls; the probes are scikit-learn pipelines (`make_probe`) and nothing imports torch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from probes.codes import LatentCodes
from probes.decoding.controls import input_only_r2, input_only_term_f1, run_controls
from probes.decoding.extras import BitRegressionResult, TermDecodingResult
from probes.decoding.fit import (
    LayerChoice,
    _counting_convergence,
    _single_threaded,
    fit_rules,
    fit_terms,
)
from probes.decoding.results import DecodingResult
from probes.decoding.ridge import fit_bits
from probes.degenerate import CONSTANT_RTOL

__all__ = ["decode_rules", "decode_terms", "ridge_bits"]

logger = logging.getLogger(__name__)


@_single_threaded
@_counting_convergence
def decode_rules(
    codes: LatentCodes,
    label: str | None = None,
    layers: LayerChoice = "each+all",
    *,
    splits: str | Sequence[str] | None = None,
    C: float = 1.0,
    max_iter: int = 1000,
    random_state: int | None = 0,
    extras: bool = True,
    controls: bool = True,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
    merge: Sequence[Sequence[Any]] | None = None,
) -> DecodingResult:
    """Decode a ground-truth label from codes: fit on the train split, score on every evaluation split.

    A 1-D label (SRAVEN `rule`) gets one multinomial probe per layer group. A 2-D label of class sets
    (fuzzy-logic `terms` [n, K]) gets one binary probe per class; a row counts as correct when the predicted
    set equals the true set. Floors (chance, majority, best constant; always-present F1 for sets) are computed on
    the same rows, and `headlines()` sets every score beside its floors and the input-only control. The result
    records the codes' reading (`LatentCodes.reading`) and their constant layers (`constant_layers`,
    `probes.degenerate`), which the all-layers probe leaves out; it does not warn about them
    (`probes.degenerate.check_constant_codes` does).

    Args:
        codes: latent codes with a `train` split and at least one evaluation split.
        label: label to decode (default `codes.label`: "rule" for SRAVEN, "terms" for fuzzy logic).
        layers: "each+all" (default), "each", "all", "last", a model layer number or a list of them.
        splits: splits to score (default: every split present other than train).
        C: inverse regularization strength of the logistic probes.
        max_iter: solver iterations.
        random_state: probe seed.
        extras: also run `decode_terms` on the codes' first set label and `ridge_bits` on their first bits label,
            where their metadata has them (`LatentCodes.labels_of_kind`: fuzzy logic's `terms` and `term_bits`),
            kept in `DecodingResult.extras` under each label's name. A set label decoded here gets its per-class
            probes either way.
        controls: when the codes carry `inputs`, also fit the controls (`probes.decoding.controls.run_controls`).
        progress: show a progress bar (None: only on a terminal).
        rtol: a layer whose codes vary by at most this fraction of their RMS is constant
            (`probes.degenerate.CONSTANT_RTOL`).
        merge: a partition of the label's classes into groups that count as one class, e.g. classes the task
            says share a code (`[["addition", "subtraction"]]` for SRAVEN rules; names or values, classes not
            named stay on their own). The result then also reports the accuracy with each group merged, beside
            the merged label's floors (`DecodingResult.merged`); the probes are not refitted.

    Returns:
        A `DecodingResult`; `table()` prints it (with the last layer's top confusions), `to_dict()` serializes it
        (with every probe's confusion matrix).

    Raises:
        ValueError: no train rows or no evaluation rows, a missing or continuous label, or a single class in
            the train split.
    """
    probe_params = {"C": C, "max_iter": max_iter, "random_state": random_state}
    result = fit_rules(codes, label, layers, splits=splits, progress=progress, rtol=rtol, merge=merge,
                       **probe_params)
    splits = result.splits
    found = dict(result.extras)
    set_labels, bit_labels = codes.labels_of_kind("class_set"), codes.labels_of_kind("bits")
    if extras:
        if set_labels and not any(isinstance(e, TermDecodingResult) for e in found.values()):
            found[set_labels[0]] = decode_terms(codes, set_labels[0], layers, splits=splits, progress=progress,
                                                controls=controls, rtol=rtol, **probe_params)
        if bit_labels:
            found[bit_labels[0]] = ridge_bits(codes, bit_labels[0], layers=layers, splits=splits, controls=controls)
    control_result = (
        run_controls(codes, result.label, layers, progress=progress, rtol=rtol, **probe_params)
        if controls and codes.inputs is not None
        else None
    )
    if controls and codes.inputs is None:
        logger.info(
            "no controls: these codes carry no raw inputs (LatentCodes.inputs); re-extract them with "
            "`latentcode extract RUN` to get the input-only control beside the decoding"
        )
    own = found.get(result.label)
    if isinstance(own, TermDecodingResult) and own.input_only_f1 is None and control_result is not None:
        found[result.label] = replace(own, input_only_f1=control_result.input_only_f1)
    return replace(result, extras=found, controls=control_result)


@_single_threaded
def decode_terms(
    codes: LatentCodes,
    label: str = "terms",
    layers: LayerChoice = "each+all",
    *,
    splits: str | Sequence[str] | None = None,
    C: float = 1.0,
    max_iter: int = 1000,
    random_state: int | None = 0,
    controls: bool = True,
    progress: bool | None = None,
    rtol: float = CONSTANT_RTOL,
) -> TermDecodingResult:
    """Fuzzy logic (paper Fig. 2B): one logistic probe per layer and term, "is term t in the composition?".

    Probes are fitted on train rows and scored (F1) on each evaluation split, beside the floor of answering
    "present" for every term (`always_present_f1`). Terms that never vary in the train rows (never used in
    training: `novel_terms`) get no probe and are listed in `skipped`. The all-layers probes leave constant layers
    out (`constant_layers`), as `decode_rules` does.

    Args:
        codes: fuzzy-logic codes with a `terms` [n, K] label.
        label: the set label (default "terms").
        layers, splits, C, max_iter, random_state, controls, progress, rtol: as in `decode_rules` (the control is
            the input-only one: the same per-class probes on the raw tokens, `input_only_f1`).

    Returns:
        A `TermDecodingResult`.

    Raises:
        ValueError: codes of another task, a label that is not a set of classes, or missing splits.
    """
    probe_params = {"C": C, "max_iter": max_iter, "random_state": random_state}
    terms = fit_terms(codes, label, layers, splits=splits, progress=progress, rtol=rtol, **probe_params)
    if controls and codes.inputs is not None:
        only = input_only_term_f1(codes, terms.label, progress=progress, **probe_params)
        terms = replace(terms, input_only_f1={s: only[s] for s in terms.f1 if s in only})
    return terms


@_single_threaded
def ridge_bits(
    codes: LatentCodes,
    label: str = "term_bits",
    layers: LayerChoice = "each+all",
    *,
    alpha: float = 1.0,
    n_folds: int = 5,
    groups: str | None = None,
    splits: str | Sequence[str] | None = None,
    controls: bool = True,
) -> BitRegressionResult:
    """Fuzzy logic, the reference code's metric: ridge regression from codes to each latent bit, as R².

    Differences from the reference's `r2_attn_latent` (half/half split of one loader, 10 CG steps): here the
    ridge is solved exactly, the training rows are scored out-of-fold with `GroupKFold` over compositions
    (rows of one composition never sit on both sides), and a ridge fitted on all train rows is scored on
    each evaluation split (held-out compositions).

    Args:
        codes: fuzzy-logic codes with a `term_bits` [n, K, L] label.
        label: the bit label (default "term_bits"); every trailing axis is flattened into bits.
        layers: as in `decode_rules`.
        alpha: ridge strength (reference: 1.0).
        n_folds: GroupKFold folds (fewer when there are fewer compositions).
        groups: label naming each row's composition (default: `composition`, else derived from `terms`).
        splits: as in `decode_rules`.
        controls: when the codes carry `inputs`, also fit the same ridge on the raw input tokens
            (`input_only_r2`). The floor, predicting the train rows' mean (`train_mean_r2`), is always computed.

    Returns:
        A `BitRegressionResult`.

    Raises:
        ValueError: codes of another task, no composition labels, or fewer than 2 training compositions.
    """
    result = fit_bits(codes, label, layers, alpha=alpha, n_folds=n_folds, groups=groups, splits=splits)
    if controls and codes.inputs is not None:
        only = input_only_r2(codes, label, alpha=alpha, n_folds=n_folds, groups=groups, splits=list(result.r2))
        result = replace(result, input_only_r2=only)
    return result
