"""Interventions and experiments: the runner (a `Site` and an `Edit`, `patching.py`), the paper's
interventions on the codes, the transfer and ablation experiments built on them, and the causal analyses of the
codes (alignment search and erasure).

Modules: `patching.py`, `interventions.py`, `experiment_result.py`, `transfer.py`, `experiments.py`, `alignment.py`
(distributed alignment search; the rotation's training and score live in `alignment_fit.py`, its `Interchange` edit in
`interchange.py`, its `Rotation` in `rotation.py` and its counterfactuals in `counterfactuals.py`, all but the edit
re-exported by `alignment.py`) and `erasure.py` (LEACE).
Nothing is imported here: import from a module, or the public names from `latentcode`.
"""
