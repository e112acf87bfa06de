"""The `latentcode` command, a thin shell over the library: `app.py` builds the parser and holds `main`;
`training.py` (train, eval, info, sweep), `analysis.py`, `results.py`, `interventions.py` and `causal.py` add their
subcommands; `util.py` holds the parser helpers they share. No library module imports this package.

Modules: `app.py`, `util.py`, `training.py`, `analysis.py`, `results.py`, `interventions.py`, `causal.py`.
`main` and `build_parser` are re-exported here, on first use (the console script is
`latentcode = latentcode.cli:main`), so that importing one subcommand module loads no other.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> Any:
    """`main` and `build_parser`, imported from `app.py` on first use."""
    if name in __all__:
        return getattr(importlib.import_module("latentcode.cli.app"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
