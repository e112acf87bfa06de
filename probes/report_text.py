"""The report's sentences that depend on the results: the warning about constant codes (`constant_title`, said
once for every run, and `constant_layers`, one run's constant layers), the caption of the decoding section
(`decoding_caption`) and the caveat under a decoding whose OOD split has the easier floor (`ood_caveat`). Plain
strings; where they go on the page is `probes.report`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.decoding.headline import HEADLINE
from probes.decoding.results import DecodingResult
from probes.tables import NA, UNDEFINED, format_score

__all__ = ["constant_layers", "constant_title", "decoding_caption", "ood_caveat"]


def constant_title(spreads: Mapping[str, Any]) -> str:
    """The constant-codes explanation, said once for every run (`CodeSpread.message` says it per run)."""
    first = next(iter(spreads.values()))
    return (f"Constant codes: across the instances probed ({first.n_samples} for {next(iter(spreads))}), these "
            f"layers' codes vary by at most {first.rtol:g} of their size (spread / RMS in brackets), the level of "
            "rounding noise. Their figures and scores show no structure: embeddings (UMAP, PCA) and k-means skip "
            "them, and a standardized probe of them reads noise. A dead layer, or inputs that fix what the layer "
            "sees, gives such codes.")


def constant_layers(spread: Any) -> str:
    """`constant codes in layers 0 (0.0e+00), all (0.0e+00)`: one run's constant layers, with spread / RMS."""
    rows = [row for row in spread.layers if row.constant]
    noun = "layer" if len(rows) == 1 else "layers"
    return f"constant codes in {noun} " + ", ".join(f"{row.layer} ({row.relative:.1e})" for row in rows)


def decoding_caption(with_terms: bool) -> str:
    """The caption of the decoding section; the always-present floor only where a run has per-term probes."""
    floors = "chance = uniform guess; majority = rate of the train-majority class"
    if with_terms:
        floors += "; always-present = the F1 of answering 'present' for every term (per-term probes)"
    return (
        "Linear probes (standardize + logistic regression) fit on train-split codes, scored on held-out splits, "
        f"each beside the floors a decoder that ignores the codes reaches on the same rows: {floors}. Input-only "
        f"= the same probe on the raw input tokens; {HEADLINE} = the score minus the best of those. Compare each "
        f"split with its own floors: they differ between splits. Each table names the reading its codes were "
        f"taken at. {NA} = not computed, {UNDEFINED} = undefined."
    )


def ood_caveat(result: DecodingResult) -> str:
    """A plain sentence when held-out (OOD) decoding from the last layer beats test decoding while OOD rows also have a
    larger majority class: part of the gap is the easier floor, not better codes. "" otherwise (or without both
    splits, or without a single layer)."""
    single = [i for i, name in enumerate(result.layer_names) if name != "all"]
    if not {"test", "ood"} <= set(result.splits) or not single:
        return ""
    score = {split: float(result.accuracy(split)[single[-1]]) for split in ("test", "ood")}
    majority = {split: float(result.baselines[split].majority) for split in ("test", "ood")}
    if not (score["ood"] > score["test"] and majority["ood"] > majority["test"]):
        return ""
    return (f"OOD decoding beats test decoding ({format_score(score['ood'])} against {format_score(score['test'])} "
            f"from layer {result.layer_names[single[-1]]}) partly because the majority class is larger on OOD rows "
            f"({format_score(majority['ood'])} against {format_score(majority['test'])}): read each score against "
            f"its own split's floors ({HEADLINE}), not against the other split.")
