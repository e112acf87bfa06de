"""The field check both configs share: a dict read back as a config names only its fields."""

from __future__ import annotations

import dataclasses
from typing import Any


def check_fields(cls: type, data: dict[str, Any], what: str) -> None:
    """Raise a ValueError naming every key of `data` that is not a field of the dataclass `cls` (called `what`
    in the message), with the valid fields.

    >>> from latentcode.config import TrainConfig
    >>> check_fields(TrainConfig, {"steps": 10, "stpes": 10}, "TrainConfig")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown TrainConfig field(s) ['stpes']; valid fields: adam_betas, ...
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {what} field(s) {unknown}; valid fields: {', '.join(sorted(known))}")
