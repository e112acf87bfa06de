"""How long this process has run, so a `--time-limit` counts the time spent importing (for the command line and the
sweep's worker processes alike; neither imports the other)."""

from __future__ import annotations

import os
from pathlib import Path


def process_age() -> float:
    """Seconds since this process started (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))  # field 22: start time in ticks
    except (OSError, ValueError, IndexError):
        return 0.0


def time_left(time_limit: float | None) -> float | None:
    """What is left of a `--time-limit` counted from the start of this process (None: no limit).

    Raises:
        ValueError: a negative or NaN limit.
    """
    if time_limit is None:
        return None
    if not time_limit >= 0:
        raise ValueError(f"--time-limit={time_limit} must be a number of seconds >= 0")
    return max(0.0, time_limit - process_age())
