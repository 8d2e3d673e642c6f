"""Pad plans: alignment and minimality (hypothesis), pad / unpad round trips, per-shard valid rows."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.kernels import padding

lengths = st.integers(1, 100_000)
shard_counts = st.sampled_from([1, 2, 4, 8])


@given(lengths, shard_counts)
def test_ring_halves_plan_is_the_least_even_split(length, shards):
    plan = padding.plan_ring_halves(length, shards)
    assert plan.padded % (2 * shards) == 0 and plan.shard_rows % 2 == 0
    assert 0 <= plan.pad < 2 * shards  # the least such padding


@given(lengths, shard_counts, st.sampled_from([8, 16]))
def test_whole_tiles_plan_gives_each_ring_half_whole_tiles(length, shards, tile):
    plan = padding.plan_whole_tiles(length, shards, tile)
    assert (plan.shard_rows // 2) % tile == 0 and plan.shard_rows % 2 == 0
    assert 0 <= plan.pad < 2 * shards * tile


@given(lengths, shard_counts)
def test_lanes_plan_gives_each_shard_whole_lanes(length, shards):
    plan = padding.plan_lanes(length, shards)
    assert plan.shard_rows % 128 == 0 and plan.padded == plan.shard_rows * shards
    assert 0 <= plan.pad < 128 * shards


def test_plans_at_the_reference_pr_shapes():
    assert padding.plan_whole_tiles(4680, 4).padded == 4736  # Wan 480x832x9 at tp=4
    assert padding.plan_lanes(75_600, 4).padded == 75_776  # Wan 720p at CP=4
    assert padding.plan_ring_halves(2310, 4).padded == 2312  # LTX-2 480x704x49


@settings(deadline=None)  # jax arrays: the first pad of each shape compiles
@given(st.integers(1, 300), shard_counts, st.integers(0, 2), st.booleans())
def test_pad_then_unpad_round_trips(length, shards, axis, as_jax):
    plan = padding.plan_lanes(length, shards, lanes=8)
    shape = [2, 3, 2]
    shape[axis] = length
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    x = jnp.asarray(x) if as_jax else x
    padded = padding.pad(x, plan, axis)
    assert padded.shape[axis] == plan.padded and type(padded) is type(x)
    tail = np.take(np.asarray(padded), np.arange(length, plan.padded), axis=axis)
    assert not tail.any()  # pad rows are zeros (RoPE angle 0 = identity rotation)
    np.testing.assert_array_equal(np.asarray(padding.unpad(padded, plan, axis)), np.asarray(x))


@given(st.integers(1, 5000), shard_counts)
def test_shard_valid_rows_count_the_real_rows_of_each_shard(length, shards):
    plan = padding.plan_lanes(length, shards)
    rows = plan.shard_valid_rows()
    # Hand count: global row r is real when r < length, and lives in shard r // shard_rows.
    real = np.arange(plan.padded) < length
    np.testing.assert_array_equal(rows, real.reshape(shards, -1).sum(axis=1))


def test_wrong_lengths_are_refused_with_the_shapes():
    plan = padding.plan_ring_halves(10, 4)
    with pytest.raises(ValueError, match="axis 1 of shape \\(1, 9, 3\\) has 9 rows, the plan expects 10"):
        padding.pad(np.zeros((1, 9, 3)), plan)
    with pytest.raises(ValueError, match="the plan expects 16"):
        padding.unpad(np.zeros((1, 10, 3)), plan)
    with pytest.raises(ValueError, match="multiple of shards"):
        padding.plan_multiple(10, 4, 6)
