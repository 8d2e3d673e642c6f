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

import contextlib
import ctypes
import mmap
import multiprocessing
import multiprocessing.pool
import os
import pickle
import signal
import sys
from typing import Iterator

from perfkit.errors import BadInput

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_HANDED: list[int] = []  # a worker's memfds of results handed over: open until it exits, for its parent to read
_WATCH_S = 0.1  # how often a pool's caller looks whether a worker died while it waits


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


class Pool(multiprocessing.pool.Pool):
    """multiprocessing's pool, whose ``map`` and ``result`` (of an ``apply_async``) raise ``WorkerDied`` when
    a worker dies mid-task, where multiprocessing's would replace the worker, lose its task and wait for
    it forever."""

    def map(self, func, iterable, chunksize=None):
        return self.result(self.map_async(func, iterable, chunksize))

    def result(self, pending: multiprocessing.pool.AsyncResult):
        """``pending.get()``, or ``WorkerDied`` once one of the workers dies before it is ready."""
        workers = list(self._pool)  # none of them ends before the pool does, but by dying
        while not pending.ready():
            pending.wait(_WATCH_S)
            died = next((w.exitcode for w in workers if w.exitcode is not None), None)
            if died is not None and not pending.ready():
                self._end_after_a_death()
                how = f"killed by signal {-died}" if died < 0 else f"exited with status {died}"
                raise WorkerDied(f"a worker process was {how} before its task was done"
                                 + (" (out of memory?)" if died == -signal.SIGKILL else ""))
        return pending.get()

    def _end_after_a_death(self) -> None:
        """Every worker killed and no new one started, so that ``terminate`` ends: it takes the task queue's
        read lock and the result queue's write lock, which a worker that died waiting for a task or sending
        a result holds forever (and which are plain semaphores: this process may free them)."""
        self._worker_handler._state = multiprocessing.pool.TERMINATE  # no replacements for the dead
        for worker in self._pool:
            worker.kill()
        for worker in self._pool:
            worker.join()
        for lock in (self._inqueue._rlock, self._outqueue._wlock):
            if lock is None:  # (no write lock where the platform's pipes need none)
                continue
            lock.acquire(block=False)  # free or held by a dead worker: taken here either way, then freed
            lock.release()


def pool(processes: int) -> Pool:
    """A pool of ``processes`` forked workers bound to this process."""
    with forking():
        return Pool(processes, bound_to_parent, (os.getpid(),), context=multiprocessing.get_context("fork"))


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
