"""Ulysses and ring attention on 2, 4 and 8 simulated devices against attention_reference (itself
checked against numpy), padded and unpadded, float32 and bfloat16."""

import functools

import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from kernel_testing import AXIS, sharded
from perfkit.kernels import padding
from perfkit.kernels.attention import attention_reference, ring_attention, ulysses_attention

SHARDED = {"ulysses": ulysses_attention, "ring": ring_attention}
# float32: the variants only regroup the softmax sums (measured < 1e-6). bfloat16: inputs and outputs
# are rounded to 8 mantissa bits; the sum order still differs, so one output ulp (2^-8 relative).
TOLERANCE = {"float32": dict(rtol=2e-5, atol=2e-5), "bfloat16": dict(rtol=1.6e-2, atol=1.6e-2)}


def _numpy_attention(q, k, v, valid):
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    logits[..., valid:] = -np.inf
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


def _qkv(rng, batch, seq, heads, dim, dtype="float32"):
    return [rng.standard_normal((batch, seq, heads, dim)).astype(dtype) for _ in range(3)]


def _run(name, n, q, k, v, kv_valid_len):
    fn = functools.partial(SHARDED[name], axis_name=AXIS, kv_valid_len=kv_valid_len)
    spec = P(None, AXIS)
    return np.asarray(sharded(fn, n, (spec, spec, spec), spec)(q, k, v)).astype(np.float32)


@pytest.mark.parametrize("valid", [13, 16])
def test_reference_matches_numpy(rng, valid):
    q, k, v = _qkv(rng, 2, 16, 3, 8)
    got = np.asarray(attention_reference(q, k, v, kv_valid_len=valid))
    np.testing.assert_allclose(got, _numpy_attention(q, k, v, valid), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(SHARDED))
@pytest.mark.parametrize("n,batch,length,dtype", [
    (2, 1, 32, "float32"),  # unpadded
    (4, 2, 30, "float32"),  # padded to 32: two pad keys in the last shard
    (8, 1, 37, "float32"),  # padded to 48: the last shard holds only pad keys
    (4, 2, 29, "bfloat16"),
])
def test_sharded_attention_matches_reference(rng, name, n, batch, length, dtype):
    plan = padding.plan_ring_halves(length, n)
    q, k, v = (padding.pad(t, plan) for t in _qkv(rng, batch, length, 8, 16, dtype))
    want = np.asarray(attention_reference(q, k, v, kv_valid_len=plan.length)).astype(np.float32)
    got = _run(name, n, q, k, v, plan.length)
    np.testing.assert_allclose(got, want, **TOLERANCE[dtype])
    # Real rows against the unpadded computation in numpy: pad rows change nothing.
    real = _numpy_attention(*(padding.unpad(t, plan).astype(np.float32) for t in (q, k, v)), plan.length)
    np.testing.assert_allclose(padding.unpad(got, plan), real, **{"float32": TOLERANCE["float32"],
                               "bfloat16": dict(rtol=3e-2, atol=3e-2)}[dtype])


@pytest.mark.parametrize("name", sorted(SHARDED))
def test_pad_keys_never_reach_the_softmax(rng, name):
    """Pad keys built to win the softmax (aligned with every query, huge values): with the mask the
    output equals attention over the real keys; the unmasked run shows the test would see a leak."""
    n, length = 4, 26
    plan = padding.plan_ring_halves(length, n)
    q, k, v = (padding.pad(t, plan) for t in _qkv(rng, 1, length, 4, 8))
    k[:, length:] = 50.0 * np.abs(q).mean()
    q = np.abs(q)  # every query prefers the pad keys
    v[:, length:] = 1e4
    real = _numpy_attention(q, k, v, length)
    masked = _run(name, n, q, k, v, plan.length)
    np.testing.assert_allclose(masked, real, rtol=2e-5, atol=2e-5)
    leaked = _run(name, n, q, k, v, None)
    assert np.abs(leaked - real).max() > 100


def test_runtime_valid_length(rng):
    """kv_valid_len as a runtime array: one compiled program serves every length."""
    n, plan = 4, padding.plan_ring_halves(21, 4)
    q, k, v = (padding.pad(t, plan) for t in _qkv(rng, 1, 21, 4, 8))
    spec = P(None, AXIS)
    traces = []

    def body(q, k, v, valid):
        traces.append(1)
        return ring_attention(q, k, v, axis_name=AXIS, kv_valid_len=valid)

    fn = sharded(body, n, (spec, spec, spec, P()), spec)
    for valid in (21, 17):
        got = np.asarray(fn(q, k, v, jnp.int32(valid)))
        np.testing.assert_allclose(got, _numpy_attention(q, k, v, valid), rtol=2e-5, atol=2e-5)
    assert len(traces) == 1


def test_ulysses_refuses_heads_that_do_not_split(rng):
    q, k, v = _qkv(rng, 1, 8, 3, 4)
    with pytest.raises(ValueError, match="3 heads do not split over 4 ranks"):
        _run("ulysses", 4, q, k, v, None)
