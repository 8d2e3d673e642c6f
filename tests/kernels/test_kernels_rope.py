"""Split-halves RoPE: the channel permutation turns the interleaved rotation into split halves, and
q . k (so attention) is unchanged when projections and q / k norm gains are permuted alike."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.kernels.rope import (apply_rope_interleaved, apply_rope_split_halves, permute_head_channels,
                                  rope_angles, split_halves_permutation)
from perfkit.models.layers import rms_norm

head_dims = st.integers(1, 16).map(lambda h: 2 * h)
few_head_dims = st.sampled_from([2, 6, 16])  # where jax compiles per shape: keep the shapes few


def _rotate_pairs_numpy(x, angles, first, second):
    """Plain numpy rotation of channel pairs (first[j], second[j]) by angles[:, j]."""
    out = x.astype(np.float64).copy()
    c, s = np.cos(angles)[None, :, None, :], np.sin(angles)[None, :, None, :]
    a, b = x[..., first].astype(np.float64), x[..., second].astype(np.float64)
    out[..., first], out[..., second] = a * c - b * s, a * s + b * c
    return out


@given(head_dims)
def test_split_halves_permutation_properties(d):
    perm = split_halves_permutation(d)
    assert sorted(perm) == list(range(d))
    # Interleaved pair j = channels (2j, 2j+1) lands at (j, j + D/2).
    inv = np.argsort(perm)
    np.testing.assert_array_equal(inv[0::2], np.arange(d // 2))
    np.testing.assert_array_equal(inv[1::2], np.arange(d // 2) + d // 2)


@settings(deadline=None, max_examples=15)
@given(few_head_dims, st.integers(0, 2**31))
def test_both_rotations_match_numpy_and_each_other(d, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 5, 3, d)).astype(np.float32)
    angles = rng.uniform(-10, 10, (5, d // 2)).astype(np.float32)
    half = d // 2
    inter = np.asarray(apply_rope_interleaved(jnp.asarray(x), jnp.asarray(angles)))
    split = np.asarray(apply_rope_split_halves(jnp.asarray(x), jnp.asarray(angles)))
    np.testing.assert_allclose(inter, _rotate_pairs_numpy(x, angles, np.arange(0, d, 2), np.arange(1, d, 2)),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(split, _rotate_pairs_numpy(x, angles, np.arange(half), np.arange(half, d)),
                               rtol=1e-5, atol=1e-5)
    perm = split_halves_permutation(d)
    np.testing.assert_allclose(
        inter[..., perm], np.asarray(apply_rope_split_halves(jnp.asarray(x[..., perm]), jnp.asarray(angles))),
        rtol=1e-6, atol=1e-6)


@settings(deadline=None, max_examples=10)
@given(st.sampled_from([4, 16]), st.integers(1, 2), st.integers(0, 2**31))
def test_permuted_projection_and_norm_keep_q_dot_k(d, heads, seed):
    rng = np.random.default_rng(seed)
    seq, dim = 6, 12
    x = rng.standard_normal((1, seq, dim)).astype(np.float32)
    wq, wk = (rng.standard_normal((dim, heads * d)).astype(np.float32) for _ in range(2))
    gq, gk = (1 + 0.3 * rng.standard_normal(d).astype(np.float32) for _ in range(2))
    angles = jnp.asarray(rope_angles(np.arange(seq)[:, None], [d]).astype(np.float32))

    def logits(wq, wk, gq, gk, rope):
        q = rms_norm(jnp.asarray(x @ wq).reshape(1, seq, heads, d), jnp.asarray(gq))
        k = rms_norm(jnp.asarray(x @ wk).reshape(1, seq, heads, d), jnp.asarray(gk))
        return np.asarray(jnp.einsum("bqhd,bkhd->bhqk", rope(q, angles), rope(k, angles)))

    perm = split_halves_permutation(d)
    before = logits(wq, wk, gq, gk, apply_rope_interleaved)
    after = logits(permute_head_channels(wq, perm), permute_head_channels(wk, perm),
                   permute_head_channels(gq, perm), permute_head_channels(gk, perm), apply_rope_split_halves)
    np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-4)
    # ...and the check has teeth: split halves without the permutation changes the logits.
    unpermuted = logits(wq, wk, gq, gk, apply_rope_split_halves)
    assert np.abs(unpermuted - before).max() > 1e-2


def test_permute_head_channels_refuses_partial_heads():
    with pytest.raises(ValueError, match="not a whole number of heads of 4"):
        permute_head_channels(np.zeros((3, 6)), split_halves_permutation(4))
