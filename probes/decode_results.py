"""What the decoders return (`DecodingResult`, `Headline`, `Baseline`, `LayerDecoding`, `TermDecodingResult`,
`BitRegressionResult`, `Controls`) and the table cells `NA` / `UNDEFINED`. The code lives in
`probes.decoding.results`; this module re-exports it so `from probes.decode_results import ...` keeps working.
"""

from probes.decoding.results import (
    HEADLINE,
    NA,
    UNDEFINED,
    Baseline,
    BitRegressionResult,
    Controls,
    DecodingResult,
    Headline,
    LayerDecoding,
    TermDecodingResult,
)

__all__ = [
    "HEADLINE",
    "NA",
    "UNDEFINED",
    "Baseline",
    "BitRegressionResult",
    "Controls",
    "DecodingResult",
    "Headline",
    "LayerDecoding",
    "TermDecodingResult",
]
