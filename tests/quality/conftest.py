"""Helpers for the quality tests: small synthetic clips and the CLI run in-process."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from perfkit.cli import cli


def _clip(frames=6, height=48, width=64, seed=0) -> np.ndarray:
    """A smooth moving gradient with mild noise, uint8 (T, H, W, 3): codec-friendly like real video."""
    rng = np.random.default_rng(seed)
    t, y, x = np.meshgrid(np.arange(frames), np.arange(height), np.arange(width), indexing="ij")
    base = np.stack([(x * 3 + t * 5) % 256, (y * 4 + t * 3) % 256, ((x + y) * 2) % 256], axis=-1)
    return np.clip(base + rng.integers(-6, 7, base.shape), 0, 255).astype(np.uint8)


def _noisy(frames: np.ndarray, amplitude: int, seed=1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(frames.astype(np.int16) + rng.integers(-amplitude, amplitude + 1, frames.shape), 0, 255
                   ).astype(np.uint8)


@pytest.fixture
def clip():
    return _clip


@pytest.fixture
def noisy():
    return _noisy


class Result:
    def __init__(self, res):
        self.exit_code, self.stdout, self.stderr = res.exit_code, res.stdout, res.stderr

    def json(self):
        return json.loads(self.stdout)


@pytest.fixture
def quality_cli():
    """Run ``perfkit quality ARGS`` in-process; returns exit code, stdout, stderr."""
    def run(*args):
        return Result(CliRunner().invoke(cli, ["quality", *map(str, args)]))
    return run
