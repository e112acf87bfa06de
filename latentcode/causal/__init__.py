"""Interventions and experiments: the runner (a `Site` and an `Edit`, `patching.py`), the paper's
interventions on the codes, and the transfer and ablation experiments built on them.

Modules: `patching.py`, `interventions.py`, `experiment_result.py`, `transfer.py`, `experiments.py`. Nothing
is imported here: import from a module, or the public names from `latentcode`.
"""
