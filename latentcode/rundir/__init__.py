"""A run on disk: the run directory's files and manifest (`directory.py`), its weights and snapshots
(`weights.py`), its config, metrics and the `Run` it loads as (`checkpoint.py`), and the shipped checkpoints
by name (`pretrained.py`).

Modules: `directory.py`, `checkpoint.py`, `pretrained.py`, `weights.py`. Nothing is imported here: import from
a module, or the public names from `latentcode`.
"""
