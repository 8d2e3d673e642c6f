"""``perfkit.common.workers.Handover``: a worker's big result comes back whole through a memfd the parent
maps, not through the pool's pipe; where the platform has no memfd, through the pipe as it is."""

import os
import sys

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
    with workers.pool(2) as pool:
        handed = pool.map(_result, [1, 2, 3], chunksize=1)
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
