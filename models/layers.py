"""Building blocks shared by the model families: parameter specs, norms, modulation, embeddings."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Weight:
    """A parameter's shape, its parallel kind (column / row / replicated) and its init scale.

    ``scale=None`` means 1/sqrt(fan_in) (shape[0]); ``ones=True`` for norm gains near 1."""

    shape: tuple[int, ...]
    kind: str = "replicated"
    scale: float | None = None
    ones: bool = False


def is_weight(x) -> bool:
    return isinstance(x, Weight)


def init_params(specs, seed: int, dtype=jnp.float32):
    """Random parameters for a tree of ``Weight`` specs, fixed by ``seed`` (no checkpoints)."""
    leaves, treedef = jax.tree.flatten(specs, is_leaf=is_weight)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    out = []
    for key, w in zip(keys, leaves):
        noise = jax.random.normal(key, w.shape, jnp.float32)
        if w.ones:
            arr = 1.0 + 0.1 * noise
        else:
            arr = noise * (w.scale if w.scale is not None else 1.0 / math.sqrt(w.shape[0]))
        out.append(arr.astype(dtype))
    return jax.tree.unflatten(treedef, out)


def param_kinds(specs):
    return jax.tree.map(lambda w: w.kind, specs, is_leaf=is_weight)


def layer_norm(x, eps=1e-6):
    """LayerNorm without affine parameters (the adaLN blocks modulate afterwards), in float32."""
    xf = x.astype(jnp.float32)
    mu = xf.mean(-1, keepdims=True)
    var = ((xf - mu) ** 2).mean(-1, keepdims=True)
    return ((xf - mu) * jax.lax.rsqrt(var + eps)).astype(x.dtype)


def rms_norm(x, gain, eps=1e-6):
    xf = x.astype(jnp.float32)
    out = xf * jax.lax.rsqrt((xf * xf).mean(-1, keepdims=True) + eps) * gain.astype(jnp.float32)
    return out.astype(x.dtype)


def modulate(x, shift, scale):
    """adaLN: ``x * (1 + scale) + shift`` with (B, D) shift / scale broadcast over tokens."""
    return x * (1 + scale[:, None, :]) + shift[:, None, :]


def split_heads(x, head_dim):
    return x.reshape(*x.shape[:-1], -1, head_dim)


def merge_heads(x):
    return x.reshape(*x.shape[:-2], -1)


def timestep_features(t, dim=256, max_period=10000.0):
    """Sinusoidal features of flow-matching time t in [0, 1] (scaled by 1000, as the DiTs do)."""
    half = dim // 2
    freqs = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)
    args = (t.astype(jnp.float32) * 1000.0)[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


def grid_positions(grid: tuple[int, ...]) -> np.ndarray:
    """(prod(grid), len(grid)) integer positions of tokens laid out row-major over ``grid``."""
    mesh = np.meshgrid(*[np.arange(g) for g in grid], indexing="ij")
    return np.stack([m.reshape(-1) for m in mesh], axis=1)
