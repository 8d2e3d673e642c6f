"""Helpers of the model tests: small configs of every family and denoise runs on the simulated CPU
devices (8, set in tests/conftest.py)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from perfkit import models
from perfkit.models.pipeline import DenoiseConfig, Denoiser
from perfkit.models.plans import Plan, make_plan

FAMILIES = ("wan", "flux", "hunyuan", "ltx2")
STEPS = 2
GUIDANCE = 4.0


def _tiny(family: str, **changes):
    return dataclasses.replace(models.get(family).configs["tiny"], **changes)


# Per family: "even" streams split over 4 devices; "odd" ones need the ``pad`` option. One block of
# each kind keeps the compiles short.
CONFIGS = {
    "wan": {"even": _tiny("wan", blocks=1, grid=(2, 4, 8)), "odd": _tiny("wan", blocks=1, grid=(3, 5, 6))},
    # FLUX: 64 image + 16 text rows; odd: 35 + 10 (both streams padded)
    "flux": {"even": _tiny("flux"), "odd": _tiny("flux", grid=(1, 5, 7), text_len=10)},
    # HunyuanVideo: 64 video + 12 text rows, joined chunks of 19 straddle the boundary; odd: 35 + 10
    "hunyuan": {"even": _tiny("hunyuan"), "odd": _tiny("hunyuan", grid=(1, 5, 7), text_len=10)},
    # LTX-2: 64 or 90 video rows, 10 audio rows (never split)
    "ltx2": {"even": _tiny("ltx2", blocks=1, grid=(2, 4, 8)), "odd": _tiny("ltx2", blocks=1)},
}


def denoise(family: str, config, plan: Plan, devices: int, *, guidance=None, dtype="float32", seed=3) -> Denoiser:
    """A Denoiser after ``STEPS`` Euler steps."""
    den = Denoiser(family, config, plan, jax.devices()[:devices], DenoiseConfig(STEPS, guidance, seed, dtype))
    for _ in range(STEPS):
        den.step()
    return den


def outputs(den: Denoiser) -> dict[str, np.ndarray]:
    """Every denoised stream's latents (B, S, C), pad rows cut, as float64 numpy."""
    return {name: np.asarray(den.latents_of(name), np.float64) for name in den.state}


def plain_outputs(family: str, kind: str, guidance: float | None) -> dict[str, np.ndarray]:
    """The plain model (plan ``local``, one device) in float64: what every plan is checked against (the
    ``reference`` fixture, tests/models/conftest.py)."""
    with jax.enable_x64(True):
        return outputs(denoise(family, CONFIGS[family][kind], make_plan("local"), 1, guidance=guidance,
                               dtype="float64"))
