"""Analyses of a run that every report runs, registered by name: the place for a new analysis that needs the run
itself (its model, config or metrics), not only its codes.

An analysis is a function `fn(run, codes)` of an `OpenRun` (`latentcode.open_run`) and the codes the report reads
at its reading (`LatentCodes`), returning a result with `table()` (plain text) and `to_dict()` (JSON-able). Once
registered with `register_analysis("name", title="...")`, `report_runs` (and `latentcode report`, and the demo's
report) calls it on every run: the page gets a section of that title with each run's `table()`, and summary.json
each run's `to_dict()` under `analyses`. A `ValueError` from it skips that run's entry with a note, as the explorer
does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ANALYSES", "RegisteredAnalysis", "register_analysis", "run_analyses", "unregister_analysis"]


@dataclass(frozen=True)
class RegisteredAnalysis:
    """One registered analysis.

    Attributes:
        name: its registry key.
        title: the report section it fills (unique among registered analyses).
        fn: `fn(run, codes) -> result`, the result having `table()` and `to_dict()`.
    """

    name: str
    title: str
    fn: Callable[[Any, Any], Any]


ANALYSES: dict[str, RegisteredAnalysis] = {}
"""Registered analyses by name, in registration order (the order of their report sections)."""


def register_analysis(name: str, *, title: str | None = None) -> Callable[[Callable], Callable]:
    """Register `fn(run, codes)` as an analysis every report runs (a decorator; returns `fn` unchanged).

    Args:
        name: the registry key (`unregister_analysis(name)` removes it).
        title: the report section's title (default: `name`).

    Raises:
        ValueError: `name` or `title` already registered, or an empty name.

    `tests/project/test_new_analysis.py` registers one (`code_norms`: the mean code norm per layer on held-out instances)
    and finds it in the report.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name={name!r}: give the analysis a non-empty name")
    title = title or name
    if name in ANALYSES:
        raise ValueError(f"analysis {name!r} is already registered; unregister_analysis({name!r}) first")
    taken = {entry.title: entry.name for entry in ANALYSES.values()}
    if title in taken:
        raise ValueError(f"title {title!r} is already the section of analysis {taken[title]!r}; choose another")

    def decorate(fn: Callable) -> Callable:
        if not callable(fn):
            raise ValueError(f"register_analysis({name!r}) decorates a function fn(run, codes), not {fn!r}")
        ANALYSES[name] = RegisteredAnalysis(name, title, fn)
        return fn

    return decorate


def unregister_analysis(name: str) -> None:
    """Remove a registered analysis.

    Raises:
        ValueError: `name` is not registered.
    """
    if name not in ANALYSES:
        raise ValueError(f"{name!r} is not registered; registered analyses: {', '.join(ANALYSES) or 'none'}")
    del ANALYSES[name]


def run_analyses(run: Any, codes: Any) -> tuple[dict[str, Any], list[str]]:
    """Every registered analysis on one run: (section title -> result, one note per analysis skipped).

    Args:
        run: an `OpenRun`.
        codes: the codes the report reads for this run (None: every analysis is skipped).

    Raises:
        TypeError: an analysis returned something without `table()` and `to_dict()`.
    """
    results: dict[str, Any] = {}
    notes: list[str] = []
    for entry in ANALYSES.values():
        if codes is None:
            notes.append(f"no {entry.title}: the run has no codes")
            continue
        try:
            result = entry.fn(run, codes)
        except ValueError as err:
            notes.append(f"no {entry.title}: {err}")
            continue
        if not (callable(getattr(result, "table", None)) and callable(getattr(result, "to_dict", None))):
            raise TypeError(f"analysis {entry.name!r} returned {type(result).__name__}, which lacks table() and "
                            "to_dict(); return a result object with both (a frozen dataclass, as probes' results)")
        results[entry.title] = result
    return results, notes
