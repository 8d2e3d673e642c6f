"""Test session set-up: 8 simulated CPU devices, set before anything imports jax."""

import os
from pathlib import Path

import pytest

os.environ["XLA_FLAGS"] = " ".join(
    f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f
) + " --xla_force_host_platform_device_count=8"
os.environ.setdefault("NPROC", "16")  # Pallas interpret kernels deadlock with fewer threads (platform-facts)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    """../shared/fixtures, or a clean skip where that folder is absent (e.g. a bare clone)."""
    if not FIXTURES.is_dir():
        pytest.skip("../shared/fixtures is absent")
    return FIXTURES
