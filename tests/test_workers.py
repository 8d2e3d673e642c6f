"""``perfkit.common.workers``: a worker's big result comes back whole through a memfd the parent reads, not
through the pool's pipe (``Handover``; where the platform has no memfd, through the pipe as it is); a worker
that dies mid-task ends its caller's wait with ``WorkerDied``."""

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


def _result(seed: int) -> workers.Handover:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"t": rng.integers(0, 2**40, 1_000_000),
                          "kind": pd.Categorical(rng.choice(["a", "b"], 1_000_000))})
    return workers.Handover((seed, frame, np.arange(3_000_000) * seed))


def _memfds() -> list[str]:
    """The memfds of results this process holds open."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            pass
    return [link for link in found if link.startswith("/memfd:perfkit")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd and /proc: Linux only")
def test_a_workers_arrays_come_back_whole_and_writable():
    with workers.Pool(2) as pool:
        handed = pool.map(_result, [1, 2, 3])
        assert all(len(h.head) < 10_000 for h in handed)  # 32 MB of arrays each, not in the pipe's pickle
        got = [h.take() for h in handed]
    for seed, (s, frame, ramp) in zip([1, 2, 3], got):
        rng = np.random.default_rng(seed)
        assert s == seed and (frame["t"].to_numpy() == rng.integers(0, 2**40, 1_000_000)).all()
        assert frame["kind"].tolist() == rng.choice(["a", "b"], 1_000_000).tolist()
        assert (ramp == np.arange(3_000_000) * seed).all()
        ramp[0] = -1  # the parent's own copy, to change
    assert not _memfds()  # no descriptor of the workers' memory is left open here


def test_without_memfd_the_object_itself_goes_through_the_pipe(monkeypatch):
    monkeypatch.delattr(os, "memfd_create", raising=False)
    handed = _result(4)
    assert handed.where is None and handed.take()[0] == 4


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
