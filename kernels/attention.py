"""Attention over (batch, seq, heads, head_dim) arrays, with padded keys masked.

``attention_reference`` is the plain single-device computation every sharded variant is tested against.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def attention_reference(
    q: jax.Array,  # (B, Sq, H, D)
    k: jax.Array,  # (B, Sk, H, D)
    v: jax.Array,  # (B, Sk, H, D)
    *,
    kv_valid_len: int | jax.Array | None = None,  # keys at positions >= this never contribute
) -> jax.Array:  # (B, Sq, H, D)
    """softmax(q k^T / sqrt(D)) v, in float32, cast back to q's dtype."""
    scale = q.shape[-1] ** -0.5
    logits = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
    if kv_valid_len is not None:
        keep = jnp.arange(k.shape[1]) < kv_valid_len
        logits = jnp.where(keep[None, None, None, :], logits, -jnp.inf)
    probs = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, v.astype(jnp.float32))
    return out.astype(q.dtype)
