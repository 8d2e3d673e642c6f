"""The denoise loop every model family shares: flow-matching Euler steps from seeded noise, optional
classifier-free guidance (batch 2), and a fixed random linear decoder to uint8 RGB frames.

``Denoiser`` compiles one step as ``jit(shard_map(...))`` for a plan on a 1-D mesh; time enters as a
runtime array so every step reuses one program.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from perfkit import models
from perfkit.models import layers as L
from perfkit.models.plans import AXIS, Plan

PIXELS_PER_TOKEN = 8  # decoder: one latent token -> an 8x8 RGB patch


@dataclasses.dataclass(frozen=True)
class DenoiseConfig:
    """What one denoise run does (the model and plan are given apart)."""

    steps: int = 8
    guidance: float | None = None  # CFG scale; None = a single conditional batch
    seed: int = 0
    dtype: str = "float32"


def euler_sigmas(steps: int) -> np.ndarray:
    return np.linspace(1.0, 0.0, steps + 1, dtype=np.float32)


class Denoiser:
    """Holds sharded parameters and latents; ``step()`` runs one Euler step on the devices."""

    def __init__(self, family: str, config: str, plan: Plan, devices, run: DenoiseConfig):
        fam = models.get(family)
        if config not in fam.configs:
            raise KeyError(f"model {family!r} has configs {sorted(fam.configs)}, not {config!r}")
        self.cfg = cfg = fam.configs[config]
        self.run, self.plan = run, plan
        self.mesh = Mesh(np.asarray(devices), (AXIS,))
        dtype = jnp.dtype(run.dtype)
        specs = fam.param_specs(cfg)
        kinds = L.param_kinds(specs)
        param_pspecs = jax.tree.map(plan.param_spec, kinds)
        params = L.init_params(specs, run.seed, dtype)
        self.params = jax.device_put(params, jax.tree.map(self._sharding, param_pspecs))

        rng = np.random.default_rng(run.seed + 1)
        noise = rng.standard_normal((1, cfg.tokens, cfg.in_channels)).astype(np.float32)
        text = rng.standard_normal((1, cfg.text_len, cfg.text_dim)).astype(np.float32)
        self.latents = jax.device_put(noise.astype(dtype), self._sharding(plan.stream_spec))
        self.text = jax.device_put(text.astype(dtype), self._sharding(P()))
        self.sigmas = euler_sigmas(run.steps)
        self.index = 0

        body = partial(_euler_step, forward=partial(fam.forward, cfg=cfg, plan=plan),
                       guidance=run.guidance)
        stream = plan.stream_spec
        self._step = jax.jit(jax.shard_map(
            body, mesh=self.mesh, in_specs=(param_pspecs, stream, P(), P(), P()), out_specs=stream,
            check_vma=False))

    def _sharding(self, spec: P) -> NamedSharding:
        return NamedSharding(self.mesh, spec)

    def step(self) -> jax.Array:
        """One Euler step; returns the new latents (not waited on: the caller decides when to sync)."""
        t, t_next = self.sigmas[self.index], self.sigmas[self.index + 1]
        self.latents = self._step(self.params, self.latents, jnp.float32(t), jnp.float32(t_next - t),
                                  self.text)
        self.index += 1
        return self.latents

    def lower_text(self) -> str:
        """The optimized HLO of the step program (what every device runs)."""
        args = (self.params, self.latents, jnp.float32(1), jnp.float32(-0.1), self.text)
        return self._step.lower(*args).compile().as_text()

    def frames(self) -> np.ndarray:
        """Decode the current latents to uint8 frames (T, H, W, 3)."""
        return decode(np.asarray(jax.device_get(self.latents), np.float32)[0], self.cfg.grid)


def _euler_step(params, x, t, dt, text, *, forward, guidance):
    b = x.shape[0]
    tt = jnp.full((b,), t)
    if guidance is None:
        v = forward(params, x, tt, text)
    else:
        both = forward(params, jnp.concatenate([x, x]), jnp.concatenate([tt, tt]),
                       jnp.concatenate([text, jnp.zeros_like(text)]))
        v_cond, v_uncond = both[:b], both[b:]
        v = v_uncond + guidance * (v_cond - v_uncond)
    return (x.astype(jnp.float32) + dt * v.astype(jnp.float32)).astype(x.dtype)


def decode(latents: np.ndarray, grid: tuple[int, int, int], seed: int = 1234) -> np.ndarray:
    """A fixed random linear decoder: (S, C) latent tokens -> (T, H*8, W*8, 3) uint8 frames."""
    t, h, w = grid
    c = latents.shape[-1]
    p = PIXELS_PER_TOKEN
    proj = np.random.default_rng(seed).standard_normal((c, p * p * 3)).astype(np.float32) / np.sqrt(c)
    pix = np.tanh(latents @ proj)  # (S, p*p*3) in (-1, 1)
    pix = pix.reshape(t, h, w, p, p, 3).transpose(0, 1, 3, 2, 4, 5).reshape(t, h * p, w * p, 3)
    return np.clip(np.round((pix + 1.0) * 127.5), 0, 255).astype(np.uint8)
