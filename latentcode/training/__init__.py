"""Training: configs from names and overrides, the loop and its step, evaluation and the value-network live
fraction, what a run records, resuming, ensembles of runs trained as one program, data parallelism, sweeps and
the lanes of a shared queue. The loop knows nothing about attention nor about the disk layout (it writes through
`rundir/`).

Modules: `build.py`, `train.py`, `evaluate.py`, `diagnostics.py`, `record.py`, `ensemble.py`,
`distributed.py`, `sweep.py`, `lanes.py`, `_allocator.py`, `dropout_replay.py`, `optim.py`, `resume.py`,
`sweep_grid.py`, `train_state.py`, `train_step.py`. Nothing is imported here: import from a module, or the public
names from `latentcode`.
"""
