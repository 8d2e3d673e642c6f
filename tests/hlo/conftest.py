"""Fixtures of the hlo tests: real multi-process dumps, generated once per test session and shared by the
xdist workers (a file lock)."""

import fcntl
import shutil
from pathlib import Path

import pytest
from hlo_dumps import MODES, generate


@pytest.fixture(scope="session")
def real_dumps(tmp_path_factory, worker_id) -> dict[str, Path]:
    """{"constant": folder of rank0..3/, "array": folder of rank0..3/} holding each rank's XLA dumps."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "hlo_real_dumps"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").exists():
            for mode in MODES:
                shutil.rmtree(root / mode, ignore_errors=True)
            generate(root)
            (root / "done").touch()
    return {mode: root / mode for mode in MODES}


@pytest.fixture
def dumps_copy(real_dumps, tmp_path):
    """A private, editable copy of one mode's dumps."""
    def copy(mode: str) -> Path:
        dest = tmp_path / mode
        shutil.copytree(real_dumps[mode], dest)
        return dest
    return copy
