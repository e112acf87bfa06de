"""Probes as scikit-learn estimators: `RuleDecoder` and `code_space_directions`. The code lives in
`probes.decoding.estimators`; this module re-exports it so `from probes.estimators import ...` keeps working.
"""

from probes.decoding.estimators import RuleDecoder, code_space_directions

__all__ = ["RuleDecoder", "code_space_directions"]
