"""probes' deprecation helper: keyword renames and attribute renames kept for one release, each warning once per
call. latentcode has its own (`latentcode.deprecation`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["renamed_kwargs", "warn_renamed"]

F = TypeVar("F", bound=Callable[..., Any])


def renamed_kwargs(**renames: str) -> Callable[[F], F]:
    """Accept old keyword names (`old="new"`) with a `DeprecationWarning` pointing at the caller.

    Example:
        >>> import warnings
        >>> @renamed_kwargs(eval_splits="splits")
        ... def f(*, splits=None):
        ...     return splits
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     f(eval_splits=["ood"]), caught[0].category.__name__
        (['ood'], 'DeprecationWarning')
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {old}= (deprecated) and {new}=; pass only {new}=")
                    warnings.warn(
                        f"{fn.__name__}({old}=...) is deprecated; use {new}= (same meaning)",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def warn_renamed(old: str, new: str) -> None:
    """Warn that attribute/method `old` is now `new` (call from the deprecated property; points at its user)."""
    warnings.warn(f"{old} is deprecated; use {new} (same meaning)", DeprecationWarning, stacklevel=3)
