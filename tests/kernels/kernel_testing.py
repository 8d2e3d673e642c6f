"""Helpers of the kernel tests: meshes of the simulated CPU devices (8, set in tests/conftest.py)."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh

AXIS = "x"


def sharded(fn, n: int, in_specs, out_specs):
    """``jit(shard_map(fn))`` over the first ``n`` devices on mesh axis ``AXIS``."""
    mesh = Mesh(np.array(jax.devices()[:n]), (AXIS,))
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False))
