"""latentcode's own deprecation helper: a renamed keyword or attribute keeps working for one release, with a
`DeprecationWarning` that points at the caller's line and names the new spelling.

`probes` has its own (`probes.deprecation`); neither package reaches into the other for this.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["renamed_kwargs", "warn_renamed"]

F = TypeVar("F", bound=Callable[..., Any])

_CHECKERS = ("jaxtyping", "beartype", "typeguard")
"""Runtime type checkers that wrap functions (the test suite runs latentcode under jaxtyping): their frames sit
between a deprecated function and its caller and are skipped when the warning names the caller's line."""


def _stacklevel(warner: str, base: int) -> int:
    """`warnings.warn`'s stacklevel, counted from the frame of `warner` (the function of this module calling it),
    that reaches `base` frames up without counting type checkers' frames."""
    frame = sys._getframe(0)
    while frame.f_code.co_name != warner or frame.f_globals.get("__name__") != __name__:
        frame = frame.f_back
    level, steps = 1, base - 1
    while steps and frame.f_back is not None:
        frame, level = frame.f_back, level + 1
        if frame.f_globals.get("__name__", "").split(".")[0] not in _CHECKERS:
            steps -= 1
    return level


def renamed_kwargs(**renames: str) -> Callable[[F], F]:
    """Decorate a function so it accepts old keyword names (`old="new"`), each with a `DeprecationWarning`.

    Passing both the old and the new name is a `TypeError`.

    Example:
        >>> import warnings
        >>> @renamed_kwargs(out_dir="run_dir")
        ... def f(*, run_dir=None):
        ...     return run_dir
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     f(out_dir="runs/a"), str(caught[0].message)
        ('runs/a', 'f(out_dir=...) is deprecated; use run_dir= (same meaning)')
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{fn.__name__}() got both {old}= (deprecated) and {new}=; pass only {new}=")
                warnings.warn(f"{fn.__name__}({old}=...) is deprecated; use {new}= (same meaning)",
                              DeprecationWarning, stacklevel=_stacklevel("wrapper", 2))
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def warn_renamed(old: str, new: str) -> None:
    """Warn that attribute or method `old` is now `new`; call it from the deprecated property (the warning points
    at the property's user)."""
    warnings.warn(f"{old} is deprecated; use {new} (same meaning)", DeprecationWarning, stacklevel=_stacklevel("warn_renamed", 3))
