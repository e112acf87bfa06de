"""Controls for decoding numbers: the input-only control and (SRAVEN) the control task of Hewitt & Liang (2019).
The code lives in `probes.decoding.controls`; this module re-exports it so `from probes.controls import ...` keeps
working. Prefer `from probes import ...`.
"""

from probes.decoding.controls import (
    CONTROL_LABEL,
    control_labels,
    input_features,
    input_only_r2,
    input_only_term_f1,
    input_types,
    run_controls,
)
from probes.decoding.headline import Controls

__all__ = [
    "CONTROL_LABEL",
    "Controls",
    "control_labels",
    "input_features",
    "input_only_r2",
    "input_only_term_f1",
    "input_types",
    "run_controls",
]
