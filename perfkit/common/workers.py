"""Forked worker processes that end with the command that forked them.

A terminal's Ctrl-C reaches the whole process group. A worker is forked with it blocked and keeps it so:
the parent, which gets it as KeyboardInterrupt, stops its workers itself (each would otherwise print a
traceback of its own, also one forked a moment before the Ctrl-C). On Linux a worker is also killed when
its parent dies: a SIGTERM or SIGKILL of the command (a CI timeout) must not leave workers reading on,
their results unread, holding hundreds of MB.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.pool
import os
import signal
import sys
from typing import Iterator

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def usable_cores() -> int:
    """The cores this process may run on (all the machine's where the platform cannot say: macOS)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """Around forking workers (``multiprocessing.Process.start``): Ctrl-C blocked in this thread, so the
    workers start with it blocked; one that came meanwhile is delivered here after."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def pool(processes: int) -> multiprocessing.pool.Pool:
    """A pool of ``processes`` forked workers bound to this process."""
    with forking():
        return multiprocessing.get_context("fork").Pool(processes, bound_to_parent, (os.getpid(),))


def bound_to_parent(parent: int) -> None:
    """Call first in a worker forked (``forking``) by process ``parent``: it dies with ``parent``."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # no prctl in this C library: the parent's Ctrl-C still stops it
            pass
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)
