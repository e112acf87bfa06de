"""Linear decoders of ground truth from latent codes (`decode_rules`, `decode_terms`, `ridge_bits`, `make_probe`)
and what they return. The code lives in `probes.decoding` (`decode.py`, `fit.py`, `results.py`); this module
re-exports it so `from probes.decode import ...` keeps working. Prefer `from probes import ...`.
"""

from probes.decoding.decode import decode_rules, decode_terms, ridge_bits
from probes.decoding.fit import LayerChoice, make_probe, probe_groups
from probes.decoding.headline import Baseline, Headline
from probes.decoding.results import (
    BitRegressionResult,
    DecodingResult,
    LayerDecoding,
    TermDecodingResult,
)

__all__ = [
    "Baseline",
    "BitRegressionResult",
    "DecodingResult",
    "Headline",
    "LayerChoice",
    "LayerDecoding",
    "TermDecodingResult",
    "decode_rules",
    "decode_terms",
    "make_probe",
    "probe_groups",
    "ridge_bits",
]
