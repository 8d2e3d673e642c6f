"""The ring on one mesh axis, as the JAX-level kernels use it: pass an array to a neighbour."""

from __future__ import annotations

import jax
from jax import lax


def shift(x: jax.Array, axis_name: str, direction: int) -> jax.Array:
    """Send ``x`` (any shape) to rank ``i + direction`` (mod n); returns what rank ``i - direction`` sent."""
    n = lax.axis_size(axis_name)
    return lax.ppermute(x, axis_name, perm=[(j, (j + direction) % n) for j in range(n)])
