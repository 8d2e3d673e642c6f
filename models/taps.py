"""Taps inside the bundled models: named intermediate arrays (each block's attention, MLP and output)
that a tapped step program returns beside the latents, for ``perfkit.record.tap``.

A family's forward calls ``tap(name, x, stream=...)`` where ``x`` is laid out as that stream's rows
under the plan. Outside ``collecting()`` (the timed step) a tap is nothing: the compiled step is the
same as without taps. Inside it (while ``perfkit.models.pipeline`` traces its tapped program) each tap
is kept, and ``whole`` turns it into the full logical array, rows in plain order, pad rows cut: the
same array under every plan, so taps of a ``tp`` and an ``sp`` run compare.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from perfkit.models.plans import AXIS, Plan

_found: list | None = None  # (name, array, stream) while a tapped program is traced


def tap(name: str, x: jax.Array, *, stream: str) -> None:
    """Keep ``x`` (B, S', C), rows of ``stream``, under ``name`` while a tapped program is traced."""
    if _found is not None:
        _found.append((name, x, stream))


@contextlib.contextmanager
def collecting():
    """Collect the taps of the forward traced inside: yields the list ``tap`` appends to."""
    global _found
    outer, _found = _found, []
    try:
        yield _found
    finally:
        _found = outer


def whole(plan: Plan, x: jax.Array, stream: str) -> jax.Array:
    """(B, S', C) rows of ``stream`` on this device -> (B, S, C), every real row in plain order, the
    same on every device (inside the plan's ``shard_map``)."""
    layout = plan.layout(stream)
    if not layout.sharded:  # whole on every device already (tp's all-reduce, replicated streams)
        return x
    gathered = layout.gathered
    positions = np.empty(layout.rows, np.int64)
    real = gathered >= 0
    positions[gathered[real]] = np.flatnonzero(real)  # plain row r sits at gathered position positions[r]
    rows = lax.all_gather(x, AXIS, axis=1, tiled=True)
    if np.array_equal(positions, np.arange(layout.rows)):
        return rows[:, :layout.rows]
    return jnp.take(rows, jnp.asarray(positions), axis=1)
