"""Fixtures of the model tests."""

import fcntl

import numpy as np
import pytest
from model_testing import plain_outputs


@pytest.fixture(scope="session")
def reference(tmp_path_factory, worker_id):
    """reference(family, kind, guidance): ``model_testing.plain_outputs``, computed once a session and shared
    by xdist's workers (a file lock a reference), where each worker compiled every plain model it checked
    against."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "model_references"
    root.mkdir(exist_ok=True)

    def get(family: str, kind: str, guidance: float | None) -> dict[str, np.ndarray]:
        path = root / f"{family}-{kind}-{guidance}.npz"
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.exists():
                part = path.with_suffix(".part.npz")
                np.savez(part, **plain_outputs(family, kind, guidance))
                part.rename(path)
        with np.load(path) as saved:
            return {name: saved[name] for name in saved.files}

    return get
