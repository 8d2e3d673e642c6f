"""``perfkit.common.workers.Pool``: a task's result comes back whole from its worker (its arrays through a
memfd the parent reads, not the pool's pipe; where the platform has no memfd, through the pipe as it is);
the pool's shared object is each worker's own copy; a worker that dies mid-task ends its caller's wait
with ``WorkerDied``."""

import functools
import multiprocessing
import os
import signal
import sys
import time

import numpy as np
import pandas as pd
import pytest

from perfkit.common import workers

pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's, where other tests imported it


def _result(seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"t": rng.integers(0, 2**40, 1_000_000),
                          "kind": pd.Categorical(rng.choice(["a", "b"], 1_000_000))})
    return seed, frame, np.arange(3_000_000) * seed


def _memfds() -> list[str]:
    """The memfds of results this process holds open."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            pass
    return [link for link in found if link.startswith("/memfd:perfkit")]


def _pipe_bytes(monkeypatch) -> list[int]:
    """The sizes of the pickles the workers' results came back as through the pool's pipe."""
    sizes, handed = [], workers._Handed.take

    def take(self):
        sizes.append(len(self.head) if self.where else -1)
        return handed(self)

    monkeypatch.setattr(workers._Handed, "take", take)
    return sizes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd and /proc: Linux only")
def test_a_workers_arrays_come_back_whole_and_writable(monkeypatch):
    sizes = _pipe_bytes(monkeypatch)
    with workers.Pool(2) as pool:
        got = pool.map(_result, [1, 2, 3])
    assert len(sizes) == 3 and all(0 < s < 10_000 for s in sizes)  # 32 MB of arrays each, not in the pipe's pickle
    for seed, (s, frame, ramp) in zip([1, 2, 3], got):
        expected = _result(seed)
        assert s == seed
        pd.testing.assert_frame_equal(frame, expected[1])
        assert (ramp == expected[2]).all()
        ramp[0] = -1  # the parent's own copy, to change
    assert not _memfds()  # no descriptor of the workers' memory is left open here


def test_without_memfd_the_result_itself_goes_through_the_pipe(monkeypatch):
    sizes = _pipe_bytes(monkeypatch)
    monkeypatch.delattr(os, "memfd_create", raising=False)  # (the workers fork after: theirs is gone too)
    with workers.Pool(1) as pool:
        seed, frame, _ = pool.map(_result, [4])[0]
    assert sizes == [-1] and seed == 4 and len(frame) == 1_000_000


def _slice_sum(columns: dict, at: int) -> tuple[int, int]:
    return os.getpid(), int(columns["x"][at:at + 10].sum())


def test_the_shared_object_is_each_workers_own_copy():
    """Each task gets the pool's shared object first, as the workers' fork copied it (never pickled: a
    task's pickle holds its own arguments only)."""
    columns = {"x": np.arange(1_000)}
    with workers.Pool(2, shared=columns) as pool:
        got = pool.map(_slice_sum, range(0, 1_000, 10))
    assert [s for _, s in got] == [int(np.arange(at, at + 10).sum()) for at in range(0, 1_000, 10)]
    assert os.getpid() not in {pid for pid, _ in got}


def _dies(n: int, dying: tuple[int, ...]) -> int:
    if n in dying:
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer ends a worker
    time.sleep(0.05)
    return n


@pytest.mark.parametrize("dying", [(2,), (2, 3)], ids=["one worker", "both at once"])
def test_a_worker_killed_mid_task_ends_the_wait_with_one_line(dying):
    """multiprocessing's pool would replace a dead worker and wait for its lost task forever."""
    with workers.Pool(2) as pool:
        with pytest.raises(workers.WorkerDied, match="^a worker process ended before its task was done"):
            pool.map(functools.partial(_dies, dying=dying), range(6))
        with pytest.raises(workers.WorkerDied):  # and the pool, broken, answers so at once
            pool.result(pool.submit(_dies, 0, ()))
    assert not multiprocessing.active_children()


def test_leaving_by_an_exception_kills_the_workers_mid_task():
    """A BadInput or Ctrl-C in the parent: the workers are killed, not waited for."""
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with workers.Pool(2) as pool:
            pool.submit(time.sleep, 60)
            pool.submit(time.sleep, 60)
            time.sleep(0.2)
            raise KeyboardInterrupt
    assert time.monotonic() - started < 30 and not multiprocessing.active_children()
