"""Classifier-free guidance is what its formula says: one guided Euler step equals
x + dt * (v_u + g * (v_c - v_u)), with v_c the velocity of a plain conditional step and v_u that of a
step whose conditions are zeroed, both taken from unguided Denoisers (an independent path: batch 1,
no concatenation)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_testing import CONFIGS, FAMILIES

from perfkit.models.pipeline import DenoiseConfig, Denoiser
from perfkit.models.plans import make_plan

SCALE = 4.0


def first_step(den: Denoiser) -> tuple[dict, dict, float]:
    """(state before, state after one Euler step, dt) of ``den`` from its seeded noise."""
    den.state, den.index = dict(den.noise), 0
    before = {n: np.asarray(x) for n, x in den.state.items()}
    den.step()
    return before, {n: np.asarray(x) for n, x in den.state.items()}, float(den.sigmas[1] - den.sigmas[0])


def denoiser(family: str, guidance: float | None) -> Denoiser:
    """``family``'s even config on one device in float32."""
    return Denoiser(family, CONFIGS[family]["even"], make_plan("local"), jax.devices()[:1],
                    DenoiseConfig(steps=2, guidance=guidance, seed=3, dtype="float32"))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_guided_step_is_uncond_plus_scale_times_the_difference(family):
    x0, guided, dt = first_step(denoiser(family, SCALE))
    plain = denoiser(family, None)
    _, cond, _ = first_step(plain)
    # the unconditional step: the same compiled program, its conditions zeroed
    plain.conditions = {n: jnp.zeros_like(c) for n, c in plain.conditions.items()}
    _, uncond, _ = first_step(plain)
    for name, x in x0.items():
        v_c, v_u = (cond[name] - x) / dt, (uncond[name] - x) / dt
        expected = x + dt * (v_u + SCALE * (v_c - v_u))
        np.testing.assert_allclose(guided[name], expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
        # Guidance changes the step: the check above is not met by a step that ignores it.
        assert np.abs(expected - cond[name]).max() > 1e-3
