"""How a trace command's process allocates: big numpy temporaries reuse freed memory instead of fresh
pages from the kernel.

A breakdown of millions of events makes hundreds of arrays of tens of MB, each freed soon after. glibc
serves blocks that big from fresh mappings and returns them when freed, so every new array faults its
pages in afresh, and numpy's transparent-huge-page advice on them makes those faults zero and compact
2 MB at a time: system time more than linear in the events. Kept in the heap (no separate mapping for
big blocks, no trimming) freed blocks are reused: less system time (benchmarks/trace_breakdown.py
--untuned times the command without this). For the command line's process (and the workers it starts)
only: a library must not change how its caller's process allocates.
"""

from __future__ import annotations

import ctypes

import numpy as np

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc malloc.h
_KEEP_FREED = 2**31 - 1  # bytes of free heap top kept (mallopt takes an int)


def reuse_freed_memory() -> None:
    """Big blocks from the heap and kept there once freed, and no huge-page advice on numpy arrays;
    nothing where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no mallopt (macOS): its allocator as it is
        return
    if mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED):
        # numpy's one switch for it (also the NUMPY_MADVISE_HUGEPAGE variable, read only at import)
        core = np._core if hasattr(np, "_core") else np.core  # numpy 2 / 1.26
        core.multiarray._set_madvise_hugepage(False)
