"""TP and SP plans of the tiny Wan-like model against the single-device model."""

import jax
import numpy as np
import pytest

from perfkit.models.pipeline import DenoiseConfig, Denoiser
from perfkit.models.plans import make_plan

RUN = DenoiseConfig(steps=2, seed=3)


def _latents(plan, n):
    den = Denoiser("wan", "tiny", plan, jax.devices()[:n], RUN)
    for _ in range(RUN.steps):
        den.step()
    return np.asarray(den.latents), den


@pytest.fixture(scope="module")
def reference():
    return _latents(make_plan("local"), 1)[0]


@pytest.mark.parametrize("name,options", [("tp", {}), ("sp", {"impl": "ring"}), ("sp", {"impl": "xla"})])
def test_plan_matches_single_device(reference, name, options):
    got, _ = _latents(make_plan(name, **options), 4)
    # float32; the plans only reorder sums, so differences are rounding (measured ~1e-6).
    np.testing.assert_allclose(got, reference, rtol=0, atol=2e-5)


def test_frames_are_uint8_video():
    _, den = _latents(make_plan("local"), 1)
    frames = den.frames()
    cfg = den.cfg
    assert frames.dtype == np.uint8 and frames.shape == (cfg.grid[0], cfg.grid[1] * 8, cfg.grid[2] * 8, 3)
    assert frames.std() > 10  # not a constant image
