"""Reading latent codes out of a model: where and on what inputs (the task's declarations, `readings.py`) and
the extraction itself (`extract.py`), which hands `probes` a `LatentCodes`.

Modules: `readings.py`, `extract.py`. Nothing is imported here: import from a module, or the public names from
`latentcode`.
"""
