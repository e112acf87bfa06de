"""What the decoders return (`DecodingResult`, `Headline`, `Baseline`, `LayerDecoding`, `TermDecodingResult`,
`BitRegressionResult`, `Controls`) and the table cells `NA` / `UNDEFINED`. The code lives in
`probes.decoding.results` and `probes.decoding.headline`; this module re-exports it so `from probes.decode_results import ...` keeps working.
"""

from probes.decoding.headline import HEADLINE, Baseline, Controls, Headline
from probes.decoding.results import (
    NA,
    UNDEFINED,
    BitRegressionResult,
    DecodingResult,
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
