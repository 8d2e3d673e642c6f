"""Ring collective matmuls against numpy on 4 simulated devices (float32, tolerance 1e-5 relative)."""

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from perfkit.kernels.collective_matmul import all_gather_matmul, matmul_reduce_scatter

N = 4


def _mesh(n=N):
    return Mesh(np.array(jax.devices()[:n]), ("x",))


@pytest.mark.parametrize("impl", ["xla", "ring"])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("assemble", ["dus", "concat"])
def test_all_gather_matmul_matches_numpy(impl, bidirectional, assemble):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N * 6, 16)).astype(np.float32)
    ws = [rng.standard_normal((16, n)).astype(np.float32) for n in (8, 24)]

    def f(xs, w0, w1):
        return tuple(all_gather_matmul(xs, [w0, w1], axis_name="x", impl=impl,
                                       bidirectional=bidirectional, assemble=assemble))

    g = jax.jit(jax.shard_map(f, mesh=_mesh(), in_specs=(P("x"), P(), P()), out_specs=(P(), P()),
                              check_vma=False))
    for got, w in zip(g(x, *ws), ws):
        np.testing.assert_allclose(np.asarray(got), x @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", ["xla", "ring"])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_matmul_reduce_scatter_matches_numpy(impl, bidirectional):
    rng = np.random.default_rng(1)
    # Row-parallel: each rank holds a slice of K for both pairs; the global result sums over ranks.
    x0 = rng.standard_normal((N * 4, N * 8)).astype(np.float32)
    w0 = rng.standard_normal((N * 8, 12)).astype(np.float32)
    x1 = rng.standard_normal((N * 4, N * 4)).astype(np.float32)
    w1 = rng.standard_normal((N * 4, 12)).astype(np.float32)

    def f(a0, b0, a1, b1):
        return matmul_reduce_scatter([(a0, b0), (a1, b1)], axis_name="x", impl=impl,
                                     bidirectional=bidirectional)

    g = jax.jit(jax.shard_map(f, mesh=_mesh(), in_specs=(P(None, "x"), P("x"), P(None, "x"), P("x")),
                              out_specs=P("x"), check_vma=False))
    np.testing.assert_allclose(np.asarray(g(x0, w0, x1, w1)), x0 @ w0 + x1 @ w1, rtol=1e-5, atol=1e-4)
