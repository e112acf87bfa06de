"""The report's section "Does the model use the code?": the results of `latentcode causal align` and `erase` for
each run, as plain data (what `alignment.json` and `erasure.json` hold), shown as tables beside their controls.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from probes.report_page import Page
from probes.tables import NA, format_score

__all__ = ["ALIGNMENT_HEADER", "CAUSAL_SECTION", "ERASURE_HEADER", "alignment_table", "causal_section",
           "erasure_table"]

CAUSAL_SECTION = "Does the model use the code?"
"""Closes the page when a run comes with causal results (`RunInput.causal`)."""

ALIGNMENT_HEADER = ["layer", "k", "IIA", "95% interval", "identity rotation", "random rotation",
                    "same-rule source (floor)", "unpatched = counterfactual", "IIA, training rule sets", "n"]
ERASURE_HEADER = ["layer", "erased rank", "accuracy clean", "accuracy LEACE", "accuracy random erasure",
                  "decodability clean", "decodability LEACE", "decodability random erasure", "majority floor",
                  "LEACE − floor"]


def _cell(row: Mapping[str, Any], key: str, signed: bool = False) -> str:
    value = row.get(key)
    return format_score(float(value), signed=signed) if isinstance(value, int | float) else NA


def alignment_table(result: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The IIA table of an alignment search's plain result (what `alignment.json` holds: `rows` with `layer`, `k`,
    `iia`, `iia_low`, `iia_high`, `identity`, `random`, `same_rule`, `clean_counterfactual`, `train_iia`, `n`):
    (header, rows) as `Page.table` takes them, each IIA beside its controls."""
    rows = []
    for row in result.get("rows", []):
        interval = f"[{_cell(row, 'iia_low')}, {_cell(row, 'iia_high')}]"
        rows.append((str(row.get("layer")), [str(row.get("k")), _cell(row, "iia"), interval, _cell(row, "identity"),
                                              _cell(row, "random"), _cell(row, "same_rule"),
                                              _cell(row, "clean_counterfactual"), _cell(row, "train_iia"),
                                              str(row.get("n", NA))]))
    return ALIGNMENT_HEADER, rows


_METRIC_NAMES = {"acc": "accuracy", "r2": "R²", "loss": "loss"}


def erasure_table(result: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The erasure table of an erasure experiment's plain result (what `erasure.json` holds: `rows` with `layer`,
    `rank`, for each model metric `M` of `params["metrics"]` (default `["acc"]`, SRAVEN's accuracy; fuzzy logic
    records `["r2", "loss"]`) `M_clean`, `M_leace`, `M_random`, then `decode_clean`, `decode_leace`,
    `decode_random`, `decode_floor`): (header, rows), each model score after LEACE beside random erasure and the
    decodability after it beside the floor."""
    metrics = list((result.get("params") or {}).get("metrics") or ["acc"])
    header = ["layer", "erased rank"]
    for metric in metrics:
        shown = _METRIC_NAMES.get(metric, metric)
        header += [f"{shown} clean", f"{shown} LEACE", f"{shown} random erasure"]
    header += ERASURE_HEADER[5:]
    rows = []
    for row in result.get("rows", []):
        gap = (float(row["decode_leace"]) - float(row["decode_floor"])
               if isinstance(row.get("decode_leace"), int | float) and isinstance(row.get("decode_floor"), int | float)
               else None)
        cells = [str(row.get("rank", NA))]
        for metric in metrics:
            cells += [_cell(row, f"{metric}_clean"), _cell(row, f"{metric}_leace"), _cell(row, f"{metric}_random")]
        cells += [_cell(row, "decode_clean"), _cell(row, "decode_leace"), _cell(row, "decode_random"),
                  _cell(row, "decode_floor"), format_score(gap, signed=True)]
        rows.append((str(row.get("layer")), cells))
    return header, rows


def _settings(result: Mapping[str, Any], keys: Sequence[str]) -> str:
    params = result.get("params") or {}
    return ", ".join(f"{key} {params[key]}" for key in keys if key in params)


def causal_section(page: Page, with_causal: Mapping[str, Mapping[str, Any]]) -> None:
    """Add the section to `page`: what the experiments are, then per run its alignment and erasure tables (or how
    to make them)."""
    page.heading(CAUSAL_SECTION)
    page.note(
        "The rule can be read from the codes; does the model use it? Alignment search (`latentcode causal "
        "align`): a rotation of each layer's code, trained on the training rule sets, swaps its first k "
        "coordinates from a source instance; IIA = how often the answer on held-out rule sets becomes the "
        "counterfactual one (the source's rule applied to the base's panels), with its 95% Wilson interval, "
        "beside the identity rotation (a plain transplant of k heads' codes), a random rotation, a source with "
        "the base's own rules (the floor), how often the unpatched answer already is the counterfactual one and "
        "the IIA on the training rule sets. Erasure (`latentcode causal erase`): the rule removed from one "
        "layer's codes with LEACE; the model's held-out accuracy before and after, beside erasing a random "
        "subspace of the same rank, and the rule's decodability after erasure beside the majority floor. An "
        "erasure that leaves decodability above the floor failed, and the accuracy after it means nothing."
    )
    for name, causal in with_causal.items():
        page.add(f"<h4>{html.escape(name)}</h4>")
        if causal.get("source"):
            page.note(f"read from {causal['source']}")
        alignment, erasure = causal.get("alignment"), causal.get("erasure")
        if alignment:
            page.add(f"<p>Alignment search ({html.escape(_settings(alignment, ('n_samples', 'n_train', 'steps', 'seed')))})</p>")
            page.table(*alignment_table(alignment))
        else:
            page.note(f"{name}: no alignment search; run `latentcode causal align`.")
        if erasure:
            page.add(f"<p>LEACE erasure ({html.escape(_settings(erasure, ('n_samples', 'n_fit', 'seed')))})</p>")
            page.table(*erasure_table(erasure))
        else:
            page.note(f"{name}: no erasure; run `latentcode causal erase`.")
