"""The model: one attention module covering every variant, its relative position bias, the transformer around
it, the hypernetwork view of attention, and the model's hook names.

Modules: `attention.py`, `position.py`, `transformer.py`, `hypernetwork.py`, `hooks.py`. Nothing is imported
here: import from a module, or the public names from `latentcode`.
"""
