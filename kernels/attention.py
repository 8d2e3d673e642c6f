"""Attention over (batch, seq, heads, head_dim) arrays, with padded keys masked.

``attention_reference`` is the plain single-device computation every sharded variant is tested
against. The sharded variants are called inside ``jax.shard_map`` over ``axis_name`` (n ranks), each
rank holding a contiguous sequence shard of q, k and v:

- ``ulysses_attention``: an all-to-all trades the sequence shard for a head shard, attention runs over
  the whole sequence with H / n heads, and a second all-to-all trades back.
- ``ring_attention``: q stays; K / V blocks travel the ring (``ppermute``), each hop's partial result
  is merged into the running one by log-sum-exp.

Keys at global positions >= ``kv_valid_len`` (sequence pad rows, see ``perfkit.kernels.padding``)
never contribute; it may be a Python int or a runtime scalar. Softmax is computed in float32 (or the input type where wider).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from perfkit.kernels.precision import compute_dtype
from perfkit.kernels.ring import shift

ValidLen = int | jax.Array | None


def attention_reference(
    q: jax.Array,  # (B, Sq, H, D)
    k: jax.Array,  # (B, Sk, H, D)
    v: jax.Array,  # (B, Sk, H, D)
    *,
    kv_valid_len: ValidLen = None,  # keys at positions >= this never contribute
) -> jax.Array:  # (B, Sq, H, D)
    """softmax(q k^T / sqrt(D)) v, in float32 (float64 for float64 inputs), cast back to q's dtype."""
    scale = q.shape[-1] ** -0.5
    acc = compute_dtype(q.dtype)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q.astype(acc), k.astype(acc)) * scale
    if kv_valid_len is not None:
        keep = jnp.arange(k.shape[1]) < kv_valid_len
        logits = jnp.where(keep[None, None, None, :], logits, -jnp.inf)
    probs = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v.astype(acc))
    return out.astype(q.dtype)


def ulysses_attention(
    q: jax.Array,  # (B, Sq / n, H, D): this rank's sequence shard; H divisible by n
    k: jax.Array,  # (B, Sk / n, H, D)
    v: jax.Array,  # (B, Sk / n, H, D)
    *,
    axis_name: str,
    kv_valid_len: ValidLen = None,  # global key positions >= this never contribute
) -> jax.Array:  # (B, Sq / n, H, D): this rank's sequence shard of the output
    """Attention over the whole sequence, heads sharded between two all-to-alls (DeepSpeed Ulysses)."""
    n = lax.axis_size(axis_name)
    if q.shape[2] % n:
        raise ValueError(f"ulysses_attention: {q.shape[2]} heads do not split over {n} ranks")

    def to_heads(t):  # (B, S/n, H, D) -> (B, S, H/n, D); shards arrive in rank order = global order
        return lax.all_to_all(t, axis_name, split_axis=2, concat_axis=1, tiled=True)

    out = attention_reference(to_heads(q), to_heads(k), to_heads(v), kv_valid_len=kv_valid_len)
    return lax.all_to_all(out, axis_name, split_axis=1, concat_axis=2, tiled=True)


def ring_attention(
    q: jax.Array,  # (B, Sq / n, H, D): this rank's sequence shard
    k: jax.Array,  # (B, Sk / n, H, D)
    v: jax.Array,  # (B, Sk / n, H, D)
    *,
    axis_name: str,
    kv_valid_len: ValidLen = None,  # global key positions >= this never contribute
) -> jax.Array:  # (B, Sq / n, H, D)
    """Attention of the local queries over every rank's keys: K / V blocks are passed around the ring
    while the block in hand is attended to; partial results merge by log-sum-exp."""
    n = lax.axis_size(axis_name)
    i = lax.axis_index(axis_name)  # runtime: every rank compiles the same program
    block = k.shape[1]
    acc = compute_dtype(q.dtype)
    qf = q.astype(acc) * q.shape[-1] ** -0.5
    out = jnp.zeros(q.shape, acc)
    lse = jnp.full((q.shape[0], q.shape[2], q.shape[1]), -jnp.inf, acc)  # (B, H, Sq/n)
    for s in range(n):
        source = (i - s) % n  # the rank whose K / V block this rank holds at hop s
        keep = None
        if kv_valid_len is not None:
            keep = source * block + jnp.arange(block) < kv_valid_len
        out, lse = _merge(out, lse, *_attend_block(qf, k, v, keep))
        if s < n - 1:
            k, v = shift(k, axis_name, 1), shift(v, axis_name, 1)
    return out.astype(q.dtype)


def _attend_block(qf, k, v, keep):
    """Normalised attention of scaled ``qf`` (compute dtype) (B, Sq, H, D) over one key block, and its
    log-sum-exp (B, H, Sq); -inf (and a zero output) where every key of the block is masked."""
    logits = jnp.einsum("bqhd,bkhd->bhqk", qf, k.astype(qf.dtype))
    if keep is not None:
        logits = jnp.where(keep[None, None, None, :], logits, -jnp.inf)
    peak = jnp.max(logits, axis=-1)
    peak = jnp.where(jnp.isfinite(peak), peak, 0.0)
    weights = jnp.exp(logits - peak[..., None])
    total = jnp.sum(weights, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v.astype(qf.dtype))
    out = out / jnp.where(total > 0, total, 1.0).transpose(0, 2, 1)[..., None]
    lse = jnp.where(total > 0, peak + jnp.log(total), -jnp.inf)
    return out, lse


def _merge(out_a, lse_a, out_b, lse_b):
    """Two normalised partial results over disjoint key sets -> the result over their union."""
    lse = jnp.logaddexp(lse_a, lse_b)
    base = jnp.where(jnp.isfinite(lse), lse, 0.0)

    def weight(part_lse):  # (B, H, Sq) -> (B, Sq, H, 1)
        return jnp.exp(part_lse - base).transpose(0, 2, 1)[..., None]

    return out_a * weight(lse_a) + out_b * weight(lse_b), lse
