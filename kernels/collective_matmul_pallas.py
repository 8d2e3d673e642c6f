"""Collective matmuls as Pallas TPU kernels with remote DMA: the bidirectional rings of
``collective_matmul`` (``impl="ring"``), each as one kernel.

- ``all_gather_matmul``: this rank's row shard is split in two halves, kept in VMEM and passed VMEM to
  VMEM to both neighbours (half 0 to the right, half 1 to the left); one double-buffered stream of
  weight column tiles runs across hops and weights, both halves are multiplied by each tile as it
  arrives, and each product tile is written once, straight to its final rows of the output.
- ``matmul_reduce_scatter``: for every column tile the partial product of the block a hop works on is
  added to the accumulator tile received from upstream and sent on at once (VMEM to VMEM); the last
  hop writes its sums to the output.

Flow control: receive slots are written by the upstream neighbour only after a credit (a semaphore
signal from the receiver) says the previous content was consumed. The protocol lets a sender run
``RING_SLOTS - 1`` hops ahead of its receiver, so the receive buffers have ``RING_SLOTS`` slots; the
tests plant one slot fewer and expect the race detector to catch it.

Rank-dependent values (neighbours, which rows a hop reads or writes) come from ``lax.axis_index`` at
run time: every rank runs the same program. Called inside ``jax.shard_map`` over ``axis_name``; off TPU
the kernels run in TPU interpret mode (``perfkit.kernels.interpret``). ``unsupported_reason`` says why
a shape cannot be taken (``collective_matmul`` then falls back to the JAX ring).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from perfkit.kernels.interpret import kernel_interpret_mode

RING_SLOTS = 2  # receive slots per direction the flow control is written for
LANES = 128
DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.bfloat16))


@dataclasses.dataclass(frozen=True)
class Tiling:
    """Block sizes: column tiles of the weight stream, and the VMEM the kernel may use."""

    column_tile_limit: int = 512  # widest column tile (a multiple of 128 dividing every width is used)
    vmem_budget_bytes: int = 48 * 2**20  # scratch larger than this is refused (fallback to the ring)


DEFAULT_TILING = Tiling()


def _row_tile(dtype) -> int:
    # Rows of one (sublane) tile: 8 for 32-bit, 16 for 16-bit types.
    return 8 * 4 // jnp.dtype(dtype).itemsize


def _column_tile(widths: Sequence[int], tiling: Tiling) -> int | None:
    """The widest multiple of 128 (at most the limit) dividing every width; None if there is none."""
    common = math.gcd(*widths)
    for tile in range(tiling.column_tile_limit // LANES * LANES, 0, -LANES):
        if common % tile == 0:
            return tile
    return None


def _common_reason(dtypes, rows_per_half: int, contraction: Sequence[int], widths: Sequence[int],
                   ranks: int, tiling: Tiling) -> tuple[str | None, int]:
    """Checks shared by both kernels; returns (reason or None, column tile)."""
    if ranks < 2:
        return f"{ranks} rank: nothing to communicate", 0
    if len({jnp.dtype(d) for d in dtypes}) != 1 or jnp.dtype(dtypes[0]) not in DTYPES:
        return f"dtypes {sorted({str(jnp.dtype(d)) for d in dtypes})}: need one of float32 / bfloat16", 0
    row_tile = _row_tile(dtypes[0])
    if rows_per_half < row_tile or rows_per_half % row_tile:
        return (f"{rows_per_half} rows per ring half: need a multiple of {row_tile} "
                f"(pad with perfkit.kernels.padding.plan_whole_tiles)"), 0
    if any(k % LANES for k in contraction):
        return f"contraction widths {list(contraction)}: need multiples of {LANES}", 0
    tile = _column_tile(widths, tiling)
    if tile is None:
        return f"output widths {list(widths)}: need a common multiple-of-{LANES} column tile", 0
    return None, tile


def _budget_reason(scratch_bytes: int, tiling: Tiling) -> str | None:
    if scratch_bytes > tiling.vmem_budget_bytes:
        budget = tiling.vmem_budget_bytes / 2**20
        return f"needs {scratch_bytes / 2**20:.1f} MiB of VMEM, over the {budget:.0f} MiB budget"
    return None


def _flat_batch(x: jax.Array) -> jax.Array:  # (..., rows, K) -> (B, rows, K)
    return x.reshape(math.prod(x.shape[:-2]), *x.shape[-2:])


def _dot(x_ref, w) -> jax.Array:
    """(B, rows, K) ref @ (K, tn) value -> (B * rows, tn) float32."""
    x = x_ref[...]
    return jnp.dot(x.reshape(-1, x.shape[-1]), w, preferred_element_type=jnp.float32)


def _neighbours(axis_name: str, n: int):
    i = lax.axis_index(axis_name)
    return i, lax.rem(i + 1, n), lax.rem(i + n - 1, n)


def _enter_barrier(axis_name: str, peers) -> None:
    """Both neighbours have entered the kernel (their scratch exists) before any remote access."""
    barrier = pltpu.get_barrier_semaphore()
    for peer in peers:
        pl.semaphore_signal(barrier, 1, device_id={axis_name: peer}, device_id_type=pl.DeviceIdType.MESH)
    pl.semaphore_wait(barrier, len(peers))


def _compiler_params(tiling: Tiling) -> pltpu.CompilerParams:
    return pltpu.CompilerParams(collective_id=0, vmem_limit_bytes=tiling.vmem_budget_bytes + 16 * 2**20)


# ----------------------------------------------------------------------------------------------------
# all-gather + matmul


def all_gather_matmul_unsupported(x, weights, ranks: int, tiling: Tiling = DEFAULT_TILING) -> str | None:
    """Why ``all_gather_matmul`` cannot take x (..., m, K) and weights [(K, N_i)] on ``ranks`` ranks
    (arrays or ``jax.ShapeDtypeStruct``); None when it can."""
    m, k = x.shape[-2:]
    if m % 2:
        return f"{m} rows per rank: need an even number (two ring halves)"
    widths = [w.shape[1] for w in weights]
    reason, tile = _common_reason([x.dtype, *(w.dtype for w in weights)], m // 2, [k], widths, ranks, tiling)
    return reason or _budget_reason(_ag_scratch_bytes(x, tile, RING_SLOTS), tiling)


def _ag_scratch_bytes(x, tile: int, slots: int) -> int:
    b, (m, k), item = math.prod(x.shape[:-2]), x.shape[-2:], jnp.dtype(x.dtype).itemsize
    return item * (2 * slots * b * m // 2 * k + 2 * k * tile + 4 * b * m // 2 * tile)


def all_gather_matmul(
    x: jax.Array,  # (..., m, K): this rank's row shard
    weights: Sequence[jax.Array],  # 1 to 4 of (K, N_i), column-parallel
    *,
    axis_name: str,
    tiling: Tiling = DEFAULT_TILING,
    recv_slots: int = RING_SLOTS,  # tests plant RING_SLOTS - 1: a flaw the race detector must catch
) -> list[jax.Array]:  # one (..., m * n, N_i) per weight, rows in global (rank) order
    """``[all_gather(x) @ w for w in weights]`` as one kernel. Check ``all_gather_matmul_unsupported``
    first: this function assumes it returned None."""
    n = lax.axis_size(axis_name)
    lead, (m, k) = x.shape[:-2], x.shape[-2:]
    xb = _flat_batch(x)
    b, mh = xb.shape[0], m // 2
    widths = tuple(w.shape[1] for w in weights)
    tile = _column_tile(widths, tiling)
    kernel = functools.partial(_ag_kernel, axis_name=axis_name, n=n, widths=widths, tile=tile, slots=recv_slots)
    any_space = pl.BlockSpec(memory_space=pl.ANY)
    outs = pl.pallas_call(
        kernel,
        out_shape=[jax.ShapeDtypeStruct((b, n * m, width), x.dtype) for width in widths],
        in_specs=[any_space] * (1 + len(weights)),
        out_specs=[any_space] * len(weights),
        scratch_shapes=[
            pltpu.VMEM((2, recv_slots, b, mh, k), x.dtype),  # x halves, per direction and slot
            pltpu.VMEM((2, k, tile), weights[0].dtype),  # the weight-tile stream, double-buffered
            pltpu.VMEM((2, 2, b, mh, tile), x.dtype),  # product tiles on their way out, per slot, half
            pltpu.SemaphoreType.DMA((2,)),  # loading x halves
            pltpu.SemaphoreType.DMA((2,)),  # sending halves
            pltpu.SemaphoreType.DMA((2,)),  # receiving halves
            pltpu.SemaphoreType.REGULAR((2,)),  # credits: the downstream neighbour freed a slot
            pltpu.SemaphoreType.DMA((2,)),  # weight tiles
            pltpu.SemaphoreType.DMA((2, 2)),  # product tiles
        ],
        compiler_params=_compiler_params(tiling),
        interpret=kernel_interpret_mode(),
        name="all_gather_matmul",
    )(xb, *weights)
    return [out.reshape(*lead, n * m, out.shape[-1]) for out in outs]


def _ag_kernel(x_hbm, *refs, axis_name, n, widths, tile, slots):
    """Refs: x (B, m, K) and the weights (K, N_i) in HBM, the outputs (B, n * m, N_i) in HBM, then the
    scratch of ``all_gather_matmul``. Hop s multiplies half 0 of shard i - s and half 1 of shard i + s
    while both travel on."""
    nw = len(widths)
    w_hbm, out_hbm = refs[:nw], refs[nw:2 * nw]
    halves, wbuf, obuf, load_sem, send_sem, recv_sem, credit, w_sem, out_sem = refs[2 * nw:]
    b, m, _ = x_hbm.shape
    mh = m // 2
    i, right, left = _neighbours(axis_name, n)
    downstream, upstream = (right, left), (left, right)  # half 0 travels +1, half 1 travels -1

    loads = [pltpu.make_async_copy(x_hbm.at[:, pl.ds(h * mh, mh)], halves.at[h, 0], load_sem.at[h])
             for h in range(2)]
    for c in loads:
        c.start()
    for c in loads:
        c.wait()
    _enter_barrier(axis_name, (right, left))

    tiles = [(wi, j) for wi, width in enumerate(widths) for j in range(width // tile)]  # one hop's stream
    per_hop = len(tiles)

    def weight_copy(t, slot):
        wi, j = tiles[t]
        return pltpu.make_async_copy(w_hbm[wi].at[:, pl.ds(j * tile, tile)], wbuf.at[slot], w_sem.at[slot])

    def out_copy(wi, row, col, slot, h):
        return pltpu.make_async_copy(obuf.at[slot, h], out_hbm[wi].at[:, pl.ds(row, mh), pl.ds(col, tile)],
                                     out_sem.at[slot, h])

    weight_copy(0, 0).start()

    def hop(s, carry):
        cur, nxt = lax.rem(s, slots), lax.rem(s + 1, slots)
        sends = [pltpu.make_async_remote_copy(
            halves.at[h, cur], halves.at[h, nxt], send_sem.at[h], recv_sem.at[h],
            device_id={axis_name: downstream[h]}, device_id_type=pl.DeviceIdType.MESH) for h in range(2)]

        @pl.when(s < n - 1)
        def _forward():
            # The receiver's slot nxt held its hop s + 1 - RING_SLOTS chunk: wait until it is done.
            @pl.when(s >= RING_SLOTS - 1)
            def _():
                for h in range(2):
                    pl.semaphore_wait(credit.at[h], 1)
            for c in sends:
                c.start()

        rows = ((i - s) % n * m, (i + s) % n * m + mh)  # final rows of half 0 (shard i-s), half 1 (i+s)
        for t, (wi, j) in enumerate(tiles):
            g = s * per_hop + t
            slot = lax.rem(g, 2)
            weight_copy(t, slot).wait()
            if t + 1 < per_hop:
                weight_copy(t + 1, 1 - slot).start()
            else:
                @pl.when(s < n - 1)
                def _next_hop_first_tile():
                    weight_copy(0, 1 - slot).start()
            w = wbuf[slot]
            for h in range(2):
                @pl.when(g >= 2)
                def _staging_free():  # this staging slot's previous tile (two back) has left
                    out_copy(0, 0, 0, slot, h).wait()
                obuf[slot, h] = _dot(halves.at[h, cur], w).astype(obuf.dtype).reshape(b, mh, tile)
                out_copy(wi, rows[h], j * tile, slot, h).start()

        @pl.when(s < n - 1)
        def _settle():
            for c in sends:
                c.wait_send()
                c.wait_recv()

            # Done with slot cur: the upstream neighbour refills it at its hop s + RING_SLOTS - 1.
            @pl.when(s + RING_SLOTS - 1 <= n - 2)
            def _():
                for h in range(2):
                    pl.semaphore_signal(credit.at[h], 1, device_id={axis_name: upstream[h]},
                                        device_id_type=pl.DeviceIdType.MESH)
        return carry

    lax.fori_loop(0, n, hop, 0)
    last = n * per_hop
    for g in range(max(0, last - 2), last):
        for h in range(2):
            out_copy(0, 0, 0, g % 2, h).wait()


# ----------------------------------------------------------------------------------------------------
# matmul + reduce-scatter


def matmul_reduce_scatter_unsupported(pairs, ranks: int, tiling: Tiling = DEFAULT_TILING) -> str | None:
    """Why ``matmul_reduce_scatter`` cannot take ``pairs`` [(x_i (..., M, K_i), w_i (K_i, N))] on
    ``ranks`` ranks (arrays or ``jax.ShapeDtypeStruct``); None when it can."""
    big_m = pairs[0][0].shape[-2]
    if big_m % (2 * ranks):
        return f"{big_m} rows: need a multiple of 2 x {ranks} ranks (two ring halves per block)"
    dtypes = [t.dtype for pair in pairs for t in pair]
    reason, tile = _common_reason(dtypes, big_m // ranks // 2, [w.shape[0] for _, w in pairs],
                                  [pairs[0][1].shape[1]], ranks, tiling)
    return reason or _budget_reason(_rs_scratch_bytes(pairs, ranks, tile, RING_SLOTS), tiling)


def _rs_scratch_bytes(pairs, ranks: int, tile: int, slots: int) -> int:
    x0, w0 = pairs[0]
    b, mh, width = math.prod(x0.shape[:-2]), x0.shape[-2] // ranks // 2, w0.shape[1]
    item = jnp.dtype(x0.dtype).itemsize
    per_pair = sum(item * (4 * b * mh * w.shape[0] + 2 * w.shape[0] * tile) for _, w in pairs)
    return per_pair + 4 * (2 * slots * b * mh * width + 4 * b * mh * tile) + item * 4 * b * mh * tile


def matmul_reduce_scatter(
    pairs: Sequence[tuple[jax.Array, jax.Array]],  # 1 or 2 of (x_i (..., M, K_i), w_i (K_i, N))
    *,
    axis_name: str,
    tiling: Tiling = DEFAULT_TILING,
    recv_slots: int = RING_SLOTS,  # tests plant RING_SLOTS - 1: a flaw the race detector must catch
) -> jax.Array:  # (..., M / n, N): this rank's rows of sum_i x_i @ w_i, summed over the axis
    """``psum_scatter(sum_i x_i @ w_i)`` as one kernel, accumulating in float32 as the JAX ring does.
    Check ``matmul_reduce_scatter_unsupported`` first: this function assumes it returned None."""
    n = lax.axis_size(axis_name)
    x0, w0 = pairs[0]
    lead, big_m, width = x0.shape[:-2], x0.shape[-2], w0.shape[1]
    xs = [_flat_batch(x) for x, _ in pairs]
    b, m = xs[0].shape[0], big_m // n
    mh = m // 2
    tile = _column_tile([width], tiling)
    per_hop = width // tile
    kernel = functools.partial(_rs_kernel, axis_name=axis_name, n=n, tile=tile, slots=recv_slots)
    any_space = pl.BlockSpec(memory_space=pl.ANY)
    scratch = []
    for x, w in zip(xs, (w for _, w in pairs)):
        scratch += [pltpu.VMEM((2, 2, b, mh, x.shape[-1]), x.dtype),  # x rows per hop slot and half
                    pltpu.VMEM((2, w.shape[0], tile), w.dtype)]  # the weight-tile stream
    scratch += [
        pltpu.VMEM((2, recv_slots, b, mh, width), jnp.float32),  # received accumulators, per half, slot
        pltpu.VMEM((2, 2, b, mh, tile), jnp.float32),  # accumulator tiles on their way downstream
        pltpu.VMEM((2, 2, b, mh, tile), x0.dtype),  # finished tiles on their way to the output
        pltpu.SemaphoreType.DMA((2, len(pairs), 2)),  # x rows, per hop slot, pair, half
        pltpu.SemaphoreType.DMA((len(pairs), 2)),  # weight tiles, per pair and slot
        pltpu.SemaphoreType.DMA((2, 2)),  # sending tiles, per half and staging slot
        pltpu.SemaphoreType.DMA((2, recv_slots, per_hop)),  # receiving tiles, per half, slot, tile
        pltpu.SemaphoreType.REGULAR((2,)),  # credits: the downstream neighbour consumed a tile
        pltpu.SemaphoreType.DMA((2, 2)),  # output tiles, per half and staging slot
    ]
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((b, m, width), x0.dtype),
        in_specs=[any_space] * (2 * len(pairs)),
        out_specs=any_space,
        scratch_shapes=scratch,
        compiler_params=_compiler_params(tiling),
        interpret=kernel_interpret_mode(),
        name="matmul_reduce_scatter",
    )(*[t for x, (_, w) in zip(xs, pairs) for t in (x, w)])
    return out.reshape(*lead, m, width)


def _rs_kernel(*refs, axis_name, n, tile, slots):
    """Refs: per pair x (B, M, K_i) and w (K_i, N) in HBM, the output (B, M / n, N) in HBM, per pair
    its x-row and weight-tile buffers, then the shared scratch of ``matmul_reduce_scatter``. Hop s adds
    this rank's partial product of block i + 1 + s (half 0) / i - 1 - s (half 1) to what arrived."""
    n_pairs = (len(refs) - 10) // 4  # 4 refs per pair (2 inputs, 2 buffers), the output, 9 shared
    x_hbm, w_hbm = refs[0:2 * n_pairs:2], refs[1:2 * n_pairs:2]
    out_hbm = refs[2 * n_pairs]
    xbuf, wbuf = refs[2 * n_pairs + 1:4 * n_pairs + 1:2], refs[2 * n_pairs + 2:4 * n_pairs + 1:2]
    recv, sbuf, obuf, x_sem, w_sem, send_sem, recv_sem, credit, out_sem = refs[4 * n_pairs + 1:]
    b, m, width = out_hbm.shape
    mh = m // 2
    per_hop = width // tile
    i, right, left = _neighbours(axis_name, n)
    downstream, upstream = (left, right), (right, left)  # half 0's accumulators travel -1, half 1's +1
    _enter_barrier(axis_name, (right, left))

    def block_rows(s, h):  # first row of half h of the block worked on at hop s: i + 1 + s (h=0), i - 1 - s
        return lax.rem(i + (1 - 2 * h) * (s + 1) + (s + 1) * n, n) * m + h * mh

    def x_copies(s, slot):
        return [pltpu.make_async_copy(x_hbm[p].at[:, pl.ds(block_rows(s, h), mh)], xbuf[p].at[slot, h],
                                      x_sem.at[slot, p, h]) for p in range(n_pairs) for h in range(2)]

    def weight_copy(p, j, slot):
        return pltpu.make_async_copy(w_hbm[p].at[:, pl.ds(j * tile, tile)], wbuf[p].at[slot], w_sem.at[p, slot])

    def send(h, stage, s, j):  # staging slot ``stage`` -> downstream's receive slot of hop s, tile j
        return pltpu.make_async_remote_copy(
            sbuf.at[h, stage], recv.at[h, lax.rem(s, slots), :, :, pl.ds(j * tile, tile)],
            send_sem.at[h, stage], recv_sem.at[h, lax.rem(s, slots), j],
            device_id={axis_name: downstream[h]}, device_id_type=pl.DeviceIdType.MESH)

    def out_copy(h, j):
        return pltpu.make_async_copy(obuf.at[h, j % 2], out_hbm.at[:, pl.ds(h * mh, mh), pl.ds(j * tile, tile)],
                                     out_sem.at[h, j % 2])

    sent = (n - 1) * per_hop  # tiles sent downstream per half (every hop but the last)
    for c in x_copies(0, 0):
        c.start()
    for p in range(n_pairs):
        weight_copy(p, 0, 0).start()

    def hop(s, carry):
        xslot = lax.rem(s, 2)
        for c in x_copies(s, xslot):
            c.wait()

        @pl.when(s < n - 1)
        def _prefetch_rows():
            for c in x_copies(s + 1, 1 - xslot):
                c.start()

        for j in range(per_hop):
            g = s * per_hop + j
            slot = lax.rem(g, 2)  # of the weight stream and of the staging buffers
            partial = [None, None]
            for p in range(n_pairs):
                weight_copy(p, j, slot).wait()
                if j + 1 < per_hop:
                    weight_copy(p, j + 1, 1 - slot).start()
                else:
                    @pl.when(s < n - 1)
                    def _next_hop_first_tile(p=p):
                        weight_copy(p, 0, 1 - slot).start()
                w = wbuf[p][slot]
                for h in range(2):
                    part = _dot(xbuf[p].at[xslot, h], w).reshape(b, mh, tile)
                    partial[h] = part if partial[h] is None else partial[h] + part
            for h in range(2):
                @pl.when((g >= 2) & (g - 2 < sent))
                def _staging_free(h=h):  # the staging slot's previous tile (two back), if sent, has left
                    send(h, slot, 0, 0).wait_send()
                sbuf[h, slot] = partial[h]

                @pl.when(s > 0)
                def _add_received(h=h):
                    prev = lax.rem(s - 1, slots)  # upstream filled it at its hop s - 1
                    send(h, slot, s - 1, j).wait_recv()
                    sbuf[h, slot] += recv[h, prev, :, :, pl.ds(j * tile, tile)]

                    # Consumed: upstream may refill this tile of the slot at its hop s - 1 + RING_SLOTS.
                    @pl.when(s - 1 + RING_SLOTS <= n - 2)
                    def _credit():
                        pl.semaphore_signal(credit.at[h], 1, device_id={axis_name: upstream[h]},
                                            device_id_type=pl.DeviceIdType.MESH)

                @pl.when(s < n - 1)
                def _send_on(h=h):
                    @pl.when(s >= RING_SLOTS)
                    def _slot_free():  # the receiver consumed the tile of hop s - RING_SLOTS there
                        pl.semaphore_wait(credit.at[h], 1)
                    send(h, slot, s, j).start()

                @pl.when(s == n - 1)
                def _write_out(h=h):
                    if j >= 2:
                        out_copy(h, j - 2).wait()
                    obuf[h, j % 2] = sbuf[h, slot].astype(obuf.dtype)
                    out_copy(h, j).start()
        return carry

    lax.fori_loop(0, n, hop, 0)
    for g in range(max(0, n * per_hop - 2), sent):  # sends no later staging write waited for
        for h in range(2):
            send(h, g % 2, 0, 0).wait_send()
    for j in range(max(0, per_hop - 2), per_hop):
        for h in range(2):
            out_copy(h, j).wait()
