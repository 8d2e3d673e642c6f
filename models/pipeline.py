"""The denoise loop every model family shares: flow-matching Euler steps from seeded noise, optional
classifier-free guidance (batch 2), and a fixed random linear decoder to uint8 RGB frames.

``Denoiser`` binds a plan to the family's streams, pads the streams that need it (eagerly, on the host,
before anything is compiled), and compiles one step as ``jit(shard_map(...))`` on a 1-D mesh; time
enters as a runtime array so every step reuses one program. Pad rows are cut when latents are read.
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
from perfkit.kernels import padding
from perfkit.kernels.precision import compute_dtype
from perfkit.models import layers as L
from perfkit.models import taps
from perfkit.models.plans import AXIS, Plan, Stream

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
    """Holds sharded parameters and streams; ``step()`` runs one Euler step on the devices, ``program``
    (``step_program``'s jit function, to lower or trace it with ``params``, ``state``, ``conditions``).

    ``config`` is a config name of the family or one of its config objects. The first denoised stream
    is the one decoded to frames and exposed as ``latents``."""

    def __init__(self, family: str, config, plan: Plan, devices, run: DenoiseConfig):
        fam = models.get(family)
        self.cfg = cfg = fam.config(config)
        self.mesh = Mesh(np.asarray(devices), (AXIS,))
        streams = fam.streams(cfg)
        self.plan = plan = plan.bind(streams, len(devices))
        dtype = jnp.dtype(run.dtype)

        specs = fam.param_specs(cfg)
        param_pspecs = jax.tree.map(plan.param_spec, L.param_kinds(specs))
        params = L.init_params(specs, run.seed, dtype)
        if plan.split_rope:
            params = L.permute_for_split_rope(params, specs)
        self.params = jax.device_put(params, jax.tree.map(self._sharding, param_pspecs))

        inputs = {name: s for name, s in streams.items() if isinstance(s, Stream)}
        rng = np.random.default_rng(run.seed + 1)
        host = {name: rng.standard_normal((1, s.rows, s.channels)).astype(np.float32) for name, s in inputs.items()}
        put = {name: self._put(name, x.astype(dtype)) for name, x in host.items()}
        denoised = [name for name, s in inputs.items() if s.denoised]
        self.primary = denoised[0]
        self.noise = {name: put[name] for name in denoised}
        self.state = dict(self.noise)
        self.conditions = {name: x for name, x in put.items() if name not in self.noise}
        self.sigmas = euler_sigmas(run.steps)
        self.index = 0

        self.program = step_program(fam, cfg, plan, self.mesh, param_pspecs, self.state, self.conditions, run.guidance)
        self._tap_names: list[str] = []
        self._tapped = None  # the tapped program, made by the first ``taps()``
        self._make_tapped = partial(step_program, fam, cfg, plan, self.mesh, param_pspecs, self.state,
                                    self.conditions, run.guidance, self._tap_names)

    def _sharding(self, spec: P) -> NamedSharding:
        return NamedSharding(self.mesh, spec)

    def _put(self, stream: str, x) -> jax.Array:
        """(B, S, C) whole stream, host or device -> padded (eagerly) and placed as the plan lays it out."""
        pad = self.plan.layout(stream).pad
        return jax.device_put(x if pad is None else padding.pad(x, pad), self._sharding(self.plan.stream_spec(stream)))

    def latents_of(self, stream: str) -> jax.Array:
        """A denoised stream's current latents (B, S, C), pad rows cut."""
        pad = self.plan.layout(stream).pad
        x = self.state[stream]
        return x if pad is None or pad.pad == 0 else padding.unpad(x, pad)

    @property
    def latents(self) -> jax.Array:
        """The decoded stream's latents (B, S, C), pad rows cut."""
        return self.latents_of(self.primary)

    @latents.setter
    def latents(self, value) -> None:
        """Restart from ``value`` (B, S, C) of the decoded stream; other denoised streams restart from
        their seeded noise."""
        self.state = {**self.noise, self.primary: self._put(self.primary, value)}

    def step(self) -> jax.Array:
        """One Euler step; returns the decoded stream's new (padded) latents, not waited on."""
        t, t_next = self.sigmas[self.index], self.sigmas[self.index + 1]
        self.state = self.program(self.params, self.state, self.conditions, jnp.float32(t),
                                jnp.float32(t_next - t))
        self.index += 1
        return self.state[self.primary]

    def taps(self) -> list[tuple[str, jax.Array]]:
        """The forward's taps (``perfkit.models.taps``) at the current step, by name in the order the
        forward makes them: each the whole logical array (B, S, C), replicated on every device. Run by a
        second, tapped program from the same state, which it leaves alone (the timed step is untouched)."""
        if self._tapped is None:
            self._tapped = self._make_tapped()
        t, t_next = self.sigmas[self.index], self.sigmas[self.index + 1]
        _, arrays = self._tapped(self.params, self.state, self.conditions, jnp.float32(t), jnp.float32(t_next - t))
        return list(zip(self._tap_names, arrays))

    def frames(self) -> np.ndarray:
        """Decode the current latents to uint8 frames (T, H, W, 3)."""
        return decode(np.asarray(jax.device_get(self.latents), np.float32)[0], self.cfg.grid)


def step_program(fam, cfg, plan: Plan, mesh: Mesh, param_pspecs, state, conditions, guidance: float | None,
                 tap_names: list[str] | None = None):
    """One Euler step of ``fam`` at ``cfg`` as ``jit(shard_map(...))`` over ``mesh`` (``plan`` bound to the
    streams): the program ``Denoiser`` runs and ``perfkit.cost.paper`` lowers. ``state`` and ``conditions``
    name the denoised and the conditioning streams (their keys are read). With ``tap_names`` (a list,
    filled with the taps' names when the program is traced) the program returns (latents, [taps])."""
    def specs(names) -> dict[str, P]:
        return {name: plan.stream_spec(name) for name in names}

    body = partial(_euler_step, forward=partial(fam.forward, cfg=cfg, plan=plan), guidance=guidance)
    out_specs = specs(state)
    if tap_names is not None:  # every tap gathered whole: replicated
        body, out_specs = partial(_tapped_step, step=body, plan=plan, names=tap_names), (out_specs, P())
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(param_pspecs, specs(state), specs(conditions), P(), P()),
                                 out_specs=out_specs, check_vma=False))


def _tapped_step(*args, step, plan: Plan, names: list[str]):
    """``step`` (the Euler step) and the taps its forward made, each whole (``taps.whole``); their
    names go to ``names`` (a list: jax would sort a dict's keys, and the order is the taps')."""
    with taps.collecting() as found:
        out = step(*args)
    names[:] = [name for name, _, _ in found]
    return out, [taps.whole(plan, x, stream) for _, x, stream in found]


# The name is the compiled program's (``jit__euler_step``): perfkit.cost.programs finds the step by it.
def _euler_step(params, latents, conditions, t, dt, *, forward, guidance):
    """latents, conditions: name -> (B, S', C) stream arrays; returns the stepped latents."""
    b = next(iter(latents.values())).shape[0]
    tt = jnp.full((b,), t)
    if guidance is None:
        v = forward(params, {**latents, **conditions}, tt)
    else:  # one batch of 2: conditional, then unconditional (conditions zeroed)
        both = forward(params, {**{n: jnp.concatenate([x, x]) for n, x in latents.items()},
                                **{n: jnp.concatenate([c, jnp.zeros_like(c)]) for n, c in conditions.items()}},
                       jnp.concatenate([tt, tt]))
        v = {n: both[n][b:] + guidance * (both[n][:b] - both[n][b:]) for n in latents}
    out = {}
    for n, x in latents.items():
        wide = compute_dtype(x.dtype)
        out[n] = (x.astype(wide) + dt.astype(wide) * v[n].astype(wide)).astype(x.dtype)
    return out


def decode(latents: np.ndarray, grid: tuple[int, int, int], seed: int = 1234) -> np.ndarray:
    """A fixed random linear decoder: (S, C) latent tokens -> (T, H*8, W*8, 3) uint8 frames."""
    t, h, w = grid
    c = latents.shape[-1]
    p = PIXELS_PER_TOKEN
    proj = np.random.default_rng(seed).standard_normal((c, p * p * 3)).astype(np.float32) / np.sqrt(c)
    pix = np.tanh(latents @ proj)  # (S, p*p*3) in (-1, 1)
    pix = pix.reshape(t, h, w, p, p, 3).transpose(0, 1, 3, 2, 4, 5).reshape(t, h * p, w * p, 3)
    return np.clip(np.round((pix + 1.0) * 127.5), 0, 255).astype(np.uint8)
