"""Keep freed memory in the process: glibc returns large blocks (> 128 KiB by default) to the kernel on every free,
so each new [batch, head, query, key] tensor of a training step costs thousands of page faults. Raising glibc's
mmap and trim thresholds makes those blocks reusable from the heap: a SRAVEN HYLA attention layer's forward and
backward drop from 118 ms to 71 ms on one thread (docs/benchmarks.md). The numbers computed do not change.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024
"""glibc's largest allowed mmap threshold on 64-bit systems: blocks up to 32 MiB come from the heap."""
TRIM_THRESHOLD = 1 << 30
"""Free memory at the top of the heap that glibc keeps instead of returning it to the kernel (1 GiB)."""
_done = False


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once; later calls do nothing).

    Returns:
        True when the thresholds are set (Linux with glibc), False elsewhere (other platforms and C libraries keep
        their own allocator; nothing changes).
    """
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not _done:
        logger.debug("glibc refused the mallopt thresholds; the allocator keeps its defaults")
    return _done
