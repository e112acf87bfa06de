"""Decoding, in one room: linear probes of ground truth from latent codes, their floors and their controls.

The modules import one way, each only from those above it (and `probes.codes`, `probes.layers`, `probes.degenerate`):

- `headline`: what a score is judged against: its floors (`Baseline`), controls (`Controls`) and `Headline`.
- `extras`: the per-label results a decoding keeps beside its own (`TermDecodingResult`, `BitRegressionResult`).
- `results`: what the decoders return (`DecodingResult`, `LayerDecoding`, ...); no fitting.
- `estimators`: `RuleDecoder`, the probe as a scikit-learn estimator, and `code_space_directions`.
- `floors`: the floors and the merged-class score, computed from the labels alone (no probe fitted).
- `fit`: the probe (`make_probe`), the layer groups it reads, the plain decoders without controls; `ridge`: the
  bits decoder (`fit_bits`) on top of it.
- `controls`: the input-only control and the control task, fitted with `fit`'s decoders on stand-in features.
- `decode`: `decode_rules`, `decode_terms`, `ridge_bits`: a plain decoder plus its per-label extras and controls.

Import the names from `probes` or from here. Names load on first use, as in `probes`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("Baseline", "Controls", "Headline", "HEADLINE"), "probes.decoding.headline"),
    **dict.fromkeys(("BitRegressionResult", "LabelResult", "TermDecodingResult", "extras_from_dict"),
                    "probes.decoding.extras"),
    **dict.fromkeys(("Confusion", "DecodingResult", "LayerDecoding", "MergedScore", "NA", "UNDEFINED"),
                    "probes.decoding.results"),
    **dict.fromkeys(("RuleDecoder", "code_space_directions"), "probes.decoding.estimators"),
    **dict.fromkeys(("LayerChoice", "make_probe", "probe_groups", "fit_rules", "fit_terms"), "probes.decoding.fit"),
    "fit_bits": "probes.decoding.ridge",
    **dict.fromkeys(("control_labels", "input_features", "input_only_r2", "input_only_term_f1", "input_types",
                     "run_controls"), "probes.decoding.controls"),
    **dict.fromkeys(("decode_rules", "decode_terms", "ridge_bits"), "probes.decoding.decode"),
}
"""Public name -> the module defining it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'probes.decoding' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
