"""Forked worker processes over tasks, each task's result returned to the caller: the one way perfkit
runs work in parallel (the formatting, parsing and numpy passes are Python's: threads would share one
core).

``Pool(processes)`` forks its workers at the first ``submit`` (``map`` submits every task and returns the
results in order). A fork starts a worker in milliseconds with this process's imports and memory: the
``shared`` object a pool is given (the columns a task formats a slice of) is each worker's own copy of it
from the fork, never pickled. A result's numpy arrays come back through a memfd of the worker's that the
parent reads in one go, the rest of it (a frame's structure, texts) through the pool's pipe: the pipe's
copies are the slow way for tens of MB (benchmarks/trace_breakdown.py --command collectives measures the
workers' results).

A terminal's Ctrl-C reaches the whole process group. A worker is forked with it blocked and keeps it so:
the parent, which gets it as KeyboardInterrupt, stops its workers itself (each would otherwise print a
traceback of its own, also one forked a moment before the Ctrl-C). On Linux a worker is also killed when
its parent dies: a SIGTERM or SIGKILL of the command (a CI timeout) must not leave workers reading on,
their results unread, holding hundreds of MB; and a worker that dies mid-task (the kernel's out-of-memory
killer) ends the command with one line (``WorkerDied``), not a wait for its lost result.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
from typing import Callable, Iterable, Iterator

from perfkit.errors import BadInput

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_HANDED: list[int] = []  # a worker's memfds of results handed back: open until it exits, for its parent to read
_SHARED: list = [None]  # in a worker: the shared object of the pool that forked it (set around the fork)


def usable_cores() -> int:
    """The cores this process may run on (all the machine's where the platform cannot say: macOS)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def may_start_workers() -> bool:
    """Whether this process may fork workers: not once JAX is imported (its threads make a fork unsafe,
    and it says so); the trace and hlo commands never import it."""
    return "jax" not in sys.modules


class WorkerDied(BadInput):
    """A forked worker ended before its task did: killed (out of memory, a signal) or crashed."""

    def __init__(self, worker: str = "a worker process"):
        super().__init__(f"{worker} ended before its task was done (killed? out of memory?)")


class Pool:
    """``processes`` workers forked by this thread at the first ``submit`` (concurrent.futures' process pool,
    which forks them all at once where it forks: before any thread of its own runs), bound to this process;
    a task's function gets ``shared`` first where the pool has one. A worker that dies mid-task breaks the
    pool: its tasks and every other raise ``WorkerDied`` (one line), the other workers are stopped.
    (multiprocessing's own pool replaces a dead worker and waits for its lost task forever, and its teardown
    can wait on a queue lock the dead one held.) Leaving the ``with`` block by an exception (Ctrl-C, a
    BadInput) kills the workers rather than waiting for their tasks."""

    def __init__(self, processes: int, shared: object = None, name: str = "a worker process"):
        self._executor = concurrent.futures.ProcessPoolExecutor(
            processes, multiprocessing.get_context("fork"), initializer=_bound_to_parent, initargs=(os.getpid(),))
        self.processes, self.name = processes, name  # (name: what WorkerDied calls a worker)
        self._shared, self._workers = shared, None

    def submit(self, func: Callable, *args) -> concurrent.futures.Future:
        """``func(*args)`` (``func(shared, *args)``) in a worker; its result through ``result``."""
        if self._workers is not None:
            with self._as_worker_died():  # a broken pool refuses
                return self._executor.submit(_run, func, args)
        before = set(multiprocessing.active_children())
        _SHARED[0] = self._shared
        # Ctrl-C blocked in this thread while the first submit forks the workers, so they start with it blocked;
        # one that came meanwhile is delivered here after.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            with self._as_worker_died():
                return self._executor.submit(_run, func, args)
        finally:  # (the workers known before a Ctrl-C held meanwhile arrives: leaving kills them)
            _SHARED[0] = None
            self._workers = [p for p in multiprocessing.active_children() if p not in before]
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def result(self, pending: concurrent.futures.Future):
        """``pending``'s result, or ``WorkerDied`` where a worker died before it was ready."""
        with self._as_worker_died():
            return pending.result().take()

    def map(self, func: Callable, tasks: Iterable) -> list:
        """``[func(task) for task in tasks]`` (``func(shared, task)``), a task each."""
        return [self.result(pending) for pending in [self.submit(func, task) for task in tasks]]

    @contextlib.contextmanager
    def _as_worker_died(self) -> Iterator[None]:
        try:
            yield
        except concurrent.futures.process.BrokenProcessPool:
            raise WorkerDied(self.name) from None

    def close(self, kill: bool = False) -> None:
        """Wait for the workers to finish their tasks and end; or (``kill``) end them now."""
        if kill:
            for worker in self._workers or ():
                worker.kill()
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close(kill=kind is not None)


def _bound_to_parent(parent: int) -> None:
    """First in a worker forked by process ``parent``: it dies with ``parent``."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # no prctl in this C library: the parent's Ctrl-C still stops it
            pass
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)


def _run(func: Callable, args: tuple) -> "_Handed":
    """A task, in a worker."""
    return _Handed(func(*args) if _SHARED[0] is None else func(_SHARED[0], *args))


class _Handed:
    """A task's result as it leaves its worker: its buffers (numpy arrays' data) in a memfd of the worker's
    that the parent reads in one go (``take``, while the worker still runs), the pickle of the rest
    through the pool's pipe. Without buffers, or where the platform has no memfd or /proc (macOS), the
    result itself goes through the pipe."""

    def __init__(self, obj: object):
        self.obj, self.head, self.sizes, self.where = obj, b"", [], None
        if not hasattr(os, "memfd_create") or not os.path.isdir(f"/proc/{os.getpid()}/fd"):
            return
        buffers: list[pickle.PickleBuffer] = []
        head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        if not buffers:
            return
        raws = [b.raw() for b in buffers]
        self.head, self.sizes = head, [r.nbytes for r in raws]
        fd = os.memfd_create("perfkit-result", os.MFD_CLOEXEC)
        with open(fd, "wb", buffering=0, closefd=False) as file:
            for raw in raws:
                file.write(raw)
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
