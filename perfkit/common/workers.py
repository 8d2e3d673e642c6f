"""Forked worker processes that end with the command that forked them.

A terminal's Ctrl-C reaches the whole process group. A worker is forked with it blocked and keeps it so:
the parent, which gets it as KeyboardInterrupt, stops its workers itself (each would otherwise print a
traceback of its own, also one forked a moment before the Ctrl-C). On Linux a worker is also killed when
its parent dies: a SIGTERM or SIGKILL of the command (a CI timeout) must not leave workers reading on,
their results unread, holding hundreds of MB; and a worker that dies mid-task (the kernel's out-of-memory
killer) ends the command with one line, not a wait for its lost result.

A big result (arrays of tens of MB) comes back through a memfd the parent reads (``Handover``), not through
the pool's pipe, whose copies cost 0.3-0.6 s per 64 MB on this 2-core VM (4 x 64 MB: 1.5-2.8 s through a
pool's pipe, 0.17-0.37 s handed over).
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import contextlib
import ctypes
import mmap
import multiprocessing
import os
import pickle
import signal
import sys
from typing import Iterator

from perfkit.errors import BadInput

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_HANDED: list[int] = []  # a worker's memfds of results handed over: open until it exits, for its parent to read


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


class WorkerDied(BadInput):
    """A forked worker ended before its task did: killed (out of memory, a signal) or crashed."""

    def __init__(self, worker: str = "a worker process"):
        super().__init__(f"{worker} ended before its task was done (killed? out of memory?)")


@contextlib.contextmanager
def _as_worker_died() -> Iterator[None]:
    try:
        yield
    except concurrent.futures.process.BrokenProcessPool:
        raise WorkerDied() from None


class Pool:
    """``processes`` workers forked by this thread at the first ``submit`` (concurrent.futures' process pool,
    which forks them all at once where it forks: before any thread of its own runs), bound to this process.
    A worker that dies mid-task breaks the pool: its tasks and every other raise ``WorkerDied`` (one line),
    the other workers are stopped. (multiprocessing's own pool replaces a dead worker and waits for its lost
    task forever, and its teardown can wait on a queue lock the dead one held.) Leaving the ``with`` block
    by an exception (Ctrl-C, a BadInput) kills the workers rather than waiting for their tasks."""

    def __init__(self, processes: int):
        self._executor = concurrent.futures.ProcessPoolExecutor(
            processes, multiprocessing.get_context("fork"), initializer=bound_to_parent, initargs=(os.getpid(),))

    def submit(self, func, *args) -> concurrent.futures.Future:
        with forking(), _as_worker_died():  # (the first submit forks the workers; a broken pool refuses)
            return self._executor.submit(func, *args)

    def result(self, pending: concurrent.futures.Future):
        """``pending``'s result, or ``WorkerDied`` where a worker died before it was ready."""
        with _as_worker_died():
            return pending.result()

    def map(self, func, iterable) -> list:
        """``[func(x) for x in iterable]``, a task each."""
        return [self.result(pending) for pending in [self.submit(func, x) for x in iterable]]

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is not None:
            for worker in list(self._executor._processes.values()):  # (what Python 3.14's kill_workers does)
                worker.kill()
        self._executor.shutdown(wait=True, cancel_futures=True)


def bound_to_parent(parent: int) -> None:
    """Call first in a worker forked (``forking``) by process ``parent``: it dies with ``parent``."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # no prctl in this C library: the parent's Ctrl-C still stops it
            pass
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)


class Handover:
    """An object a worker returns, its buffers (numpy arrays' data) in a memfd of the worker's that the
    parent reads in one go instead of copies through the pool's pipe; the pickle of the rest (frames'
    structure, texts) goes through the pipe. ``take`` it in the parent while the worker still runs (before
    the pool ends). Where the platform has no memfd or /proc (macOS), the object itself goes through the
    pipe."""

    def __init__(self, obj: object):
        self.obj, self.head, self.sizes, self.where = obj, b"", [], None
        if not hasattr(os, "memfd_create") or not os.path.isdir(f"/proc/{os.getpid()}/fd"):
            return
        buffers: list[pickle.PickleBuffer] = []
        self.head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        raws = [b.raw() for b in buffers]
        self.sizes = [r.nbytes for r in raws]
        fd = os.memfd_create("perfkit-result", os.MFD_CLOEXEC)
        size = max(sum(self.sizes), 1)
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as shared:
            at = 0
            for raw in raws:
                shared[at:at + raw.nbytes] = raw
                at += raw.nbytes
        _HANDED.append(fd)
        self.obj, self.where = None, (os.getpid(), fd)

    def take(self) -> object:
        if self.where is None:
            return self.obj
        pid, fd = self.where
        data = bytearray(sum(self.sizes))  # read in one go (a mapping would hold a descriptor per result)
        with open(f"/proc/{pid}/fd/{fd}", "rb", buffering=0) as file:
            if file.readinto(data) != len(data):
                raise OSError(f"a worker's result is shorter than its {len(data)} bytes")
        view, at, buffers = memoryview(data), 0, []
        for size in self.sizes:
            buffers.append(view[at:at + size])
            at += size
        return pickle.loads(self.head, buffers=buffers)
