"""Collective matmuls for sequence parallelism: all-gather fused into a column-parallel matmul, and a
row-parallel matmul fused into a reduce-scatter.

Both are called inside ``jax.shard_map`` over ``axis_name`` (n ranks). ``impl`` picks the level:

- ``"xla"``: ``all_gather`` + dot / dot + ``psum_scatter``; the reference the others are tested against.
- ``"ring"``: a bidirectional ``ppermute`` ring. Each hop multiplies the chunk a rank holds while the
  next chunk is in flight, so the transfer hides behind the matmul.
- ``"pallas"``: the same rings as Pallas TPU kernels with remote DMA (``collective_matmul_pallas``;
  TPU interpret mode off TPU). Shapes a kernel cannot take fall back to the ring with a logged notice;
  ``unsupported_reason`` says why.

Rank-dependent positions (which rows a hop produces) come from ``lax.axis_index``, a runtime value, so
every rank compiles the same program.
"""

from __future__ import annotations

import logging
from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax

from perfkit.kernels import collective_matmul_pallas as pallas
from perfkit.kernels.precision import compute_dtype
from perfkit.kernels.ring import shift

IMPLS = ("xla", "ring", "pallas")
ASSEMBLIES = ("dus", "concat")
OPS = ("all_gather_matmul", "matmul_reduce_scatter")

log = logging.getLogger(__name__)


def _check(impl: str, assemble: str = "dus") -> None:
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    if assemble not in ASSEMBLIES:
        raise ValueError(f"assemble must be one of {ASSEMBLIES}, got {assemble!r}")


def _dot(x: jax.Array, w: jax.Array) -> jax.Array:
    # Accumulate in float32 (float64 inputs in float64); cast back once.
    return jnp.matmul(x, w, preferred_element_type=compute_dtype(x.dtype)).astype(x.dtype)


def unsupported_reason(op: str, *operands, ranks: int) -> str | None:
    """Why the Pallas kernel of ``op`` cannot take these operands on ``ranks`` ranks; None when it can.

    ``op="all_gather_matmul"``: operands ``x`` (..., m, K) and ``weights`` [(K, N_i)];
    ``op="matmul_reduce_scatter"``: operand ``pairs`` [(x_i (..., M, K_i), w_i (K_i, N))]. Arrays or
    ``jax.ShapeDtypeStruct``s, as one rank sees them inside ``shard_map``."""
    if op == "all_gather_matmul":
        return pallas.all_gather_matmul_unsupported(*operands, ranks)
    if op == "matmul_reduce_scatter":
        return pallas.matmul_reduce_scatter_unsupported(*operands, ranks)
    raise ValueError(f"op must be one of {OPS}, got {op!r}")


def _pallas_takes(op: str, *operands, ranks: int) -> bool:
    reason = unsupported_reason(op, *operands, ranks=ranks)
    if reason is not None:
        log.warning("%s: the Pallas kernel cannot take this shape (%s); using the JAX ring", op, reason)
    return reason is None


# ----------------------------------------------------------------------------------------------------
# all-gather + matmul


def all_gather_matmul(
    x: jax.Array,  # (..., m, K): this rank's row shard
    weights: Sequence[jax.Array],  # 1 to 4 of (K, N_i), column-parallel; widths may differ
    *,
    axis_name: str,
    impl: str = "ring",
    bidirectional: bool = True,
    assemble: str = "dus",
) -> list[jax.Array]:  # one (..., m * n, N_i) per weight, rows in global (rank) order
    """``[all_gather(x) @ w for w in weights]``, with the gather fused into the matmuls.
    ``bidirectional`` and ``assemble`` shape the JAX ring; the Pallas kernel is always bidirectional
    and writes each product tile at its final rows."""
    _check(impl, assemble)
    if not 1 <= len(weights) <= 4:
        raise ValueError(f"all_gather_matmul takes 1 to 4 weights, got {len(weights)}")
    if impl == "xla":
        return all_gather_matmul_reference(x, weights, axis_name=axis_name)
    n = lax.axis_size(axis_name)
    if n == 1:
        return [_dot(x, w) for w in weights]
    if impl == "pallas" and _pallas_takes("all_gather_matmul", x, weights, ranks=n):
        return pallas.all_gather_matmul(x, weights, axis_name=axis_name)
    m = x.shape[-2]
    halves = 2 if bidirectional and m % 2 == 0 else 1
    return _all_gather_matmul_ring(x, weights, axis_name, n, halves, assemble)


def all_gather_matmul_reference(
    x: jax.Array,  # (..., m, K)
    weights: Sequence[jax.Array],  # of (K, N_i)
    *,
    axis_name: str,
) -> list[jax.Array]:  # one (..., m * n, N_i) per weight
    """The ``xla`` level: ``all_gather`` the rows, then one dot per weight."""
    full = lax.all_gather(x, axis_name, axis=x.ndim - 2, tiled=True)
    return [_dot(full, w) for w in weights]


def _all_gather_matmul_ring(x, weights, axis_name, n, halves, assemble):
    """Half h of every row shard travels in direction +1 (h=0) or -1 (h=1). At hop s rank i holds
    half 0 of shard i - s and half 1 of shard i + s, and multiplies them while they move on."""
    i = lax.axis_index(axis_name)
    lead, m = x.shape[:-2], x.shape[-2]
    mh = m // halves
    chunks = [x[..., h * mh:(h + 1) * mh, :] for h in range(halves)]
    directions = (1, -1)[:halves]
    # products[h][s][w]: product of weight w with the half h chunk held at hop s
    products = [[None] * n for _ in range(halves)]
    for s in range(n):
        for h in range(halves):
            products[h][s] = [_dot(chunks[h], w) for w in weights]
        if s < n - 1:
            chunks = [shift(c, axis_name, d) for c, d in zip(chunks, directions)]

    outs = []
    for wi, w in enumerate(weights):
        width = w.shape[1]
        if assemble == "dus":
            out = jnp.zeros((*lead, n, halves, mh, width), x.dtype)
            zeros = (0,) * len(lead)
            for s in range(n):
                for h, d in enumerate(directions):
                    block = (i - d * s) % n
                    piece = products[h][s][wi][..., None, None, :, :]
                    out = lax.dynamic_update_slice(out, piece, (*zeros, block, h, 0, 0))
        else:
            # Stack hop results, then pick each block's hop with a runtime gather: block b was
            # computed at hop (i - b) * d mod n.
            per_half = []
            b = jnp.arange(n)
            for h, d in enumerate(directions):
                stacked = jnp.stack([products[h][s][wi] for s in range(n)], axis=-3)
                per_half.append(jnp.take(stacked, ((i - b) * d) % n, axis=-3))
            out = jnp.stack(per_half, axis=-3)  # (..., n, halves, mh, width)
        outs.append(out.reshape(*lead, n * m, width))
    return outs


# ----------------------------------------------------------------------------------------------------
# matmul + reduce-scatter


def matmul_reduce_scatter(
    pairs: Sequence[tuple[jax.Array, jax.Array]],  # 1 or 2 of (x_i (..., M, K_i), w_i (K_i, N)), row-parallel
    *,
    axis_name: str,
    impl: str = "ring",
    bidirectional: bool = True,
) -> jax.Array:  # (..., M / n, N): this rank's rows of sum_i x_i @ w_i, summed over the axis
    """``psum_scatter(sum_i x_i @ w_i)`` over rows, with the scatter fused into the matmuls, summed
    in float32. ``bidirectional`` shapes the JAX ring; the Pallas kernel is always bidirectional."""
    _check(impl)
    if not 1 <= len(pairs) <= 2:
        raise ValueError(f"matmul_reduce_scatter takes 1 or 2 (x, w) pairs, got {len(pairs)}")
    n = lax.axis_size(axis_name)
    big_m = pairs[0][0].shape[-2]
    if any(x.shape[-2] != big_m for x, _ in pairs) or big_m % n:
        raise ValueError(f"rows {[x.shape[-2] for x, _ in pairs]} must agree and divide by {n} ranks")
    if impl == "xla":
        return matmul_reduce_scatter_reference(pairs, axis_name=axis_name)
    if n == 1:
        return _partial(pairs, 0, big_m).astype(pairs[0][0].dtype)
    if impl == "pallas" and _pallas_takes("matmul_reduce_scatter", pairs, ranks=n):
        return pallas.matmul_reduce_scatter(pairs, axis_name=axis_name)
    m = big_m // n
    halves = 2 if bidirectional and m % 2 == 0 else 1
    return _matmul_reduce_scatter_ring(pairs, axis_name, n, m, halves)


def matmul_reduce_scatter_reference(
    pairs: Sequence[tuple[jax.Array, jax.Array]],  # of (x_i (..., M, K_i), w_i (K_i, N))
    *,
    axis_name: str,
) -> jax.Array:  # (..., M / n, N)
    """The ``xla`` level: the dots summed in float32, then ``psum_scatter`` over rows."""
    x0 = pairs[0][0]
    total = sum(jnp.matmul(x, w, preferred_element_type=compute_dtype(x.dtype)) for x, w in pairs)
    return lax.psum_scatter(total, axis_name, scatter_dimension=x0.ndim - 2, tiled=True).astype(x0.dtype)


def _partial(pairs, start, rows):
    """sum_i x_i[start:start+rows] @ w_i in float32; ``start`` may be a runtime value."""
    acc = None
    for x, w in pairs:
        sl = lax.dynamic_slice_in_dim(x, start, rows, axis=x.ndim - 2)
        part = jnp.matmul(sl, w, preferred_element_type=compute_dtype(x.dtype))
        acc = part if acc is None else acc + part
    return acc


def _matmul_reduce_scatter_ring(pairs, axis_name, n, m, halves):
    """Half h of each block's accumulator travels in direction -1 (h=0) or +1 (h=1). At hop s rank i
    adds its partial product for block i - d (s + 1) to what it received and sends it on; after n - 1
    hops the accumulator that arrives holds block i summed over all ranks."""
    i = lax.axis_index(axis_name)
    mh = m // halves
    directions = (-1, 1)[:halves]
    accs = [None] * halves
    for s in range(n):
        for h, d in enumerate(directions):
            block = (i - d * (s + 1)) % n
            part = _partial(pairs, block * m + h * mh, mh)
            accs[h] = part if s == 0 else accs[h] + part
            if s < n - 1:
                accs[h] = shift(accs[h], axis_name, d)
    out = accs[0] if halves == 1 else jnp.concatenate(accs, axis=-2)
    return out.astype(pairs[0][0].dtype)
