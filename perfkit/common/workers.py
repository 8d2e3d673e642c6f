"""Forked worker processes that end with the command that forked them.

A terminal's Ctrl-C reaches the whole process group: a worker ignores it, and the parent, which gets it
as KeyboardInterrupt, stops its workers itself (each would otherwise print a traceback of its own). On
Linux a worker is also killed when its parent dies: a SIGTERM or SIGKILL of the command (a CI timeout)
must not leave workers reading on, their results unread, holding hundreds of MB.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def bound_to_parent(parent: int) -> None:
    """Call first in a worker forked by process ``parent`` (a Pool's ``initializer``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # no prctl in this C library: the parent's Ctrl-C still stops it
            pass
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)
