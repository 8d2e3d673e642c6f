"""Rotary position embeddings over several position axes (frame, row, column for video tokens)."""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np


def rope_angles(
    positions: np.ndarray,  # (S, A) integer positions along A axes
    axes_dims: Sequence[int],  # rotary channels per axis (each even); sum = head_dim
    theta: float = 10000.0,
) -> np.ndarray:  # (S, head_dim // 2) angles, float64
    """Angles of each channel pair; axis a owns ``axes_dims[a] // 2`` consecutive pairs."""
    parts = []
    for a, d in enumerate(axes_dims):
        inv_freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
        parts.append(positions[:, a : a + 1].astype(np.float64) * inv_freq[None, :])
    return np.concatenate(parts, axis=1)


def apply_rope_interleaved(
    x: jax.Array,  # (B, S, H, D)
    angles: jax.Array,  # (S, D // 2)
) -> jax.Array:  # (B, S, H, D)
    """Rotates channel pairs (2j, 2j + 1) by ``angles[:, j]``."""
    cos = jnp.cos(angles)[None, :, None, :].astype(jnp.float32)
    sin = jnp.sin(angles)[None, :, None, :].astype(jnp.float32)
    xf = x.astype(jnp.float32).reshape(*x.shape[:-1], -1, 2)
    a, b = xf[..., 0], xf[..., 1]
    out = jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1)
    return out.reshape(x.shape).astype(x.dtype)
