"""Parallel plans: how an unchanged model block runs on a 1-D device mesh.

A model is written once against the four operations of ``Plan`` (as gpt-fast's ``tp.py`` swaps layers
of an unchanged model). Each weight is tagged with a ``kind``: ``"column"`` (output features split: q,
k, v, FFN up), ``"row"`` (input features split: attention out, FFN down) or ``"replicated"``.

- ``local``: one device; plain dots.
- ``tp``: heads sharded; the activation stream is replicated; an all-reduce after row-parallel matmuls.
- ``sp``: the stream is sequence-sharded; the all-gather is fused into column-parallel matmuls and the
  reduce-scatter out of row-parallel ones (``perfkit.kernels.collective_matmul``, ``impl`` selectable).
  Attention sees the whole sequence with local heads, exactly as under ``tp``.

"stream" arrays are the (B, S, ...) token activations; "context" arrays (text embeddings) are
replicated under every plan.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from perfkit.kernels import collective_matmul as cm
from perfkit.kernels.attention import attention_reference

AXIS = "x"


def _dot(x, w):
    return jnp.matmul(x, w, preferred_element_type=jnp.float32).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class Plan:
    """Single device: the plain model. Subclasses change where data lives and which collectives run."""

    name = "local"

    def param_spec(self, kind: str) -> P:
        return P()

    @property
    def stream_spec(self) -> P:
        """Partitioning of (B, S, ...) stream arrays at block boundaries."""
        return P()

    def project(self, x: jax.Array, weights: Sequence[jax.Array], *, stream: bool = True) -> list[jax.Array]:
        """Column-parallel projections of ``x`` (B, S, K): one (B, S', N_i) per weight."""
        return [_dot(x, w) for w in weights]

    def project_out(self, pairs: Sequence[tuple[jax.Array, jax.Array]]) -> jax.Array:
        """Row-parallel projection ``sum_i x_i @ w_i`` back into the stream."""
        return sum(_dot(x, w) for x, w in pairs)

    def attention(self, q, k, v, *, kv_valid_len=None, kv_stream: bool = True) -> jax.Array:
        """Attention on projected q, k, v (B, S, H', D); ``kv_stream=False`` for context keys."""
        return attention_reference(q, k, v, kv_valid_len=kv_valid_len)

    def projected_rows(self, table: jax.Array) -> jax.Array:
        """Rows of a per-token (S, ...) table that match a projected stream array's rows."""
        return table


@dataclasses.dataclass(frozen=True)
class TensorParallel(Plan):
    """Megatron tensor parallelism: heads / FFN columns sharded, all-reduce after row-parallel matmuls."""

    name = "tp"

    def param_spec(self, kind: str) -> P:
        return {"column": P(None, AXIS), "row": P(AXIS, None)}.get(kind, P())

    def project_out(self, pairs):
        return lax.psum(super().project_out(pairs), AXIS)


@dataclasses.dataclass(frozen=True)
class SequenceParallel(TensorParallel):
    """Megatron sequence parallelism with collective matmuls: the stream is sequence-sharded between
    projections; all-gather + matmul in, matmul + reduce-scatter out."""

    name = "sp"
    impl: str = "ring"
    bidirectional: bool = True
    assemble: str = "dus"

    @property
    def stream_spec(self) -> P:
        return P(None, AXIS)

    def project(self, x, weights, *, stream=True):
        if not stream:
            return super().project(x, weights)
        return cm.all_gather_matmul(x, weights, axis_name=AXIS, impl=self.impl,
                                    bidirectional=self.bidirectional, assemble=self.assemble)

    def project_out(self, pairs):
        return cm.matmul_reduce_scatter(pairs, axis_name=AXIS, impl=self.impl,
                                        bidirectional=self.bidirectional)


PLANS = {"local": Plan, "tp": TensorParallel, "sp": SequenceParallel}


def make_plan(name: str, **options) -> Plan:
    """A plan by name, with its options (e.g. ``make_plan("sp", impl="xla")``)."""
    if name not in PLANS:
        raise ValueError(f"unknown plan {name!r}; known: {sorted(PLANS)}")
    cls = PLANS[name]
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"plan {name!r} takes options {sorted(known) or 'none'}, not {sorted(unknown)}")
    return cls(**options)
