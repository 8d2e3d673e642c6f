"""Sequence padding for sequence-parallel layouts: how many pad rows, and pad / unpad helpers.

A token sequence of ``length`` rows is padded at its tail so it splits into ``shards`` equal row
shards that the kernels can take:

- ``plan_ring_halves``: a multiple of 2 x shards (each shard splits into the two halves a
  bidirectional ring sends each way);
- ``plan_whole_tiles``: each ring half a whole number of ``tile`` rows (the Pallas kernels' row tiles;
  Wan's 4680 rows become 4736 at 4 shards, tile 16);
- ``plan_lanes``: each shard a multiple of 128 rows (lane-aligned reshapes in Ulysses attention;
  75,600 -> 75,776 at 4 shards).

Padding happens eagerly, before the compiled graph (``pad`` / ``unpad`` on concrete arrays). Padding
inside a compiled graph and slicing each rank's shard at a Python-constant offset let XLA fold the pad
on some ranks only: the ranks compiled different programs, and collectives paired by order wrote into
each other's live buffers: a hang (``cases/repro/rank_constant.py`` compiles such programs). Anything
rank-dependent (e.g. ``PadPlan.shard_valid_rows``) enters compiled code as a runtime array, sharded over the mesh axis.
Pad keys must be masked in attention: pass ``kv_valid_len=plan.length``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

LANES = 128
DEFAULT_TILE = 16  # rows of a bfloat16 sublane tile


@dataclasses.dataclass(frozen=True)
class PadPlan:
    """``length`` real rows padded at the tail to ``padded`` rows, split into ``shards`` row shards."""

    length: int
    padded: int
    shards: int

    @property
    def pad(self) -> int:
        return self.padded - self.length

    @property
    def shard_rows(self) -> int:
        return self.padded // self.shards

    def shard_valid_rows(self) -> np.ndarray:  # (shards,) int32
        """Real (non-pad) rows in each shard; pass it sharded over the mesh axis (a runtime value)."""
        starts = np.arange(self.shards) * self.shard_rows
        return np.clip(self.length - starts, 0, self.shard_rows).astype(np.int32)


def plan_multiple(length: int, shards: int, multiple: int) -> PadPlan:
    """The least padding that makes ``length`` a multiple of ``multiple`` (itself a multiple of shards)."""
    if length < 1 or shards < 1 or multiple < 1:
        raise ValueError(f"need length, shards, multiple >= 1, got {length}, {shards}, {multiple}")
    if multiple % shards:
        raise ValueError(f"multiple {multiple} must be a multiple of shards {shards}")
    return PadPlan(length, -(-length // multiple) * multiple, shards)


def plan_ring_halves(length: int, shards: int) -> PadPlan:
    """Every shard an even number of rows: the two halves of a bidirectional ring."""
    return plan_multiple(length, shards, 2 * shards)


def plan_whole_tiles(length: int, shards: int, tile: int = DEFAULT_TILE) -> PadPlan:
    """Every ring half (half a shard) a whole number of ``tile`` rows."""
    return plan_multiple(length, shards, 2 * shards * tile)


def plan_lanes(length: int, shards: int, lanes: int = LANES) -> PadPlan:
    """Every shard a multiple of ``lanes`` rows."""
    return plan_multiple(length, shards, shards * lanes)


def pad(
    x: np.ndarray | jax.Array,  # (..., plan.length, ...): ``plan.length`` rows along ``axis``
    plan: PadPlan,
    axis: int = 1,  # the sequence axis of (B, S, ...) arrays
) -> np.ndarray | jax.Array:  # (..., plan.padded, ...)
    """``x`` with ``plan.pad`` zero rows appended along ``axis`` (numpy stays numpy). Eager: call it
    on concrete arrays, outside ``jit``."""
    _check_rows(x, axis, plan.length, "pad")
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, plan.pad)
    return np.pad(x, widths) if isinstance(x, np.ndarray) else jnp.pad(x, widths)


def unpad(
    x: np.ndarray | jax.Array,  # (..., plan.padded, ...)
    plan: PadPlan,
    axis: int = 1,
) -> np.ndarray | jax.Array:  # (..., plan.length, ...)
    """The first ``plan.length`` rows of ``x`` along ``axis`` (the inverse of ``pad``)."""
    _check_rows(x, axis, plan.padded, "unpad")
    index = [slice(None)] * x.ndim
    index[axis] = slice(0, plan.length)
    return x[tuple(index)]


def _check_rows(x: np.ndarray | jax.Array, axis: int, rows: int, what: str) -> None:
    if x.shape[axis] != rows:
        raise ValueError(f"{what}: axis {axis} of shape {tuple(x.shape)} has {x.shape[axis]} rows, "
                         f"the plan expects {rows}")
