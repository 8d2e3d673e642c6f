"""Rotary position embeddings over several position axes (frame, row, column for video tokens).

Two layouts of the same rotation. Interleaved (the checkpoints' layout) rotates channel pairs
(2j, 2j + 1); split halves rotates pairs (j, j + D/2): a slice and a concatenation, where interleaved
needs a minor-dimension relayout (a measurable share of a compiled TPU denoise step).
``split_halves_permutation`` converts one into the other: permuting each head's q / k channels with it
(projection output features, q / k norm gains) turns the interleaved rotation into split halves, and
q . k is unchanged because q and k are permuted alike. Do it once, on the host, when loading weights.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from perfkit.kernels.precision import compute_dtype


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


def _cos_sin(angles: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
    # (S, D/2) -> two (1, S, 1, D/2) factors in the compute dtype, broadcasting over batch and heads
    angles = angles.astype(compute_dtype(dtype))[None, :, None, :]
    return jnp.cos(angles), jnp.sin(angles)


def apply_rope_interleaved(
    x: jax.Array,  # (B, S, H, D)
    angles: jax.Array,  # (S, D // 2)
) -> jax.Array:  # (B, S, H, D)
    """Rotates channel pairs (2j, 2j + 1) by ``angles[:, j]``."""
    cos, sin = _cos_sin(angles, x.dtype)
    xf = x.astype(cos.dtype).reshape(*x.shape[:-1], -1, 2)
    a, b = xf[..., 0], xf[..., 1]
    out = jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1)
    return out.reshape(x.shape).astype(x.dtype)


def apply_rope_split_halves(
    x: jax.Array,  # (B, S, H, D)
    angles: jax.Array,  # (S, D // 2)
) -> jax.Array:  # (B, S, H, D)
    """Rotates channel pairs (j, j + D/2) by ``angles[:, j]``."""
    cos, sin = _cos_sin(angles, x.dtype)
    a, b = jnp.split(x.astype(cos.dtype), 2, axis=-1)
    return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1).astype(x.dtype)


def split_halves_permutation(head_dim: int) -> np.ndarray:  # (head_dim,) channel indices
    """``[0, 2, ..., D-2, 1, 3, ..., D-1]``: ``x[..., perm]`` moves interleaved pair j to (j, j + D/2),
    so ``apply_rope_interleaved(x, a)[..., perm] == apply_rope_split_halves(x[..., perm], a)``."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be even and >= 2, got {head_dim}")
    return np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])


def permute_head_channels(
    w: np.ndarray | jax.Array,  # (..., H * D, ...): heads x head channels along ``axis``
    perm: np.ndarray,  # (D,) from split_halves_permutation
    axis: int = -1,
) -> np.ndarray | jax.Array:  # same shape as w
    """Applies ``perm`` to every head's channels along ``axis``: a q / k projection's output features
    (axis -1 of a (K, H * D) weight), or a per-head norm gain (D,)."""
    axis = axis % w.ndim
    d = len(perm)
    if w.shape[axis] % d:
        raise ValueError(f"axis {axis} of shape {tuple(w.shape)} is not a whole number of heads of {d}")
    heads = w.reshape(*w.shape[:axis], w.shape[axis] // d, d, *w.shape[axis + 1:])
    return heads.take(perm, axis=axis + 1).reshape(w.shape)
