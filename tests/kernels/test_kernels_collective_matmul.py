"""Collective matmuls level against level on 2, 4 and 8 simulated devices: numpy -> ``xla`` -> ``ring``
-> ``pallas`` (Pallas TPU kernels, interpreted on CPU with the race detector on).

Tolerances: float32 compute levels agree to rtol 1e-5 (sums regrouped: the ring adds per-block
partials in another order; the kernel multiplies column tiles, which the CPU dot blocks differently);
bfloat16 to one output ulp (2^-8 relative; each level rounds its float32 sum once). Integer-valued
inputs make every level exact (all sums are exact in float32): there only data moves, and any
misplaced row shows.
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from kernel_testing import AXIS, sharded
from perfkit.kernels import collective_matmul_pallas as pallas_kernels
from perfkit.kernels import interpret
from perfkit.kernels.collective_matmul import all_gather_matmul, matmul_reduce_scatter, unsupported_reason
from perfkit.kernels.interpret import run_interpreted

TOLERANCE = {"float32": dict(rtol=1e-5, atol=1e-4), "bfloat16": dict(rtol=8e-3, atol=8e-3)}


def _array(rng, shape, dtype="float32", integers=False):
    x = rng.integers(-3, 4, shape) if integers else rng.standard_normal(shape)
    return jnp.asarray(x, dtype)


def _f32(x) -> np.ndarray:
    return np.asarray(jnp.asarray(x, jnp.float32))


def _ag_program(n, lead, n_weights, **options):
    """x (*lead, n * m, K) sharded by rows; returns per weight (n, *lead, n * m, N): every rank's result."""
    def body(x, *weights):
        outs = all_gather_matmul(x, weights, axis_name=AXIS, **options)
        return tuple(out[None] for out in outs)

    rows = P(*[None] * len(lead), AXIS)
    return sharded(body, n, (rows, *[P()] * n_weights), tuple([P(AXIS)] * n_weights))


def _rs_program(n, lead, n_pairs, **options):
    """pairs of x (*lead, M, n * k) sharded by columns, w (n * k, N) by rows; returns (*lead, M, N)."""
    def body(*flat):
        return matmul_reduce_scatter(list(zip(flat[::2], flat[1::2])), axis_name=AXIS, **options)

    cols, rows = P(*[None] * (len(lead) + 1), AXIS), P(AXIS)
    return sharded(body, n, (cols, rows) * n_pairs, P(*[None] * len(lead), AXIS))


def _ag_inputs(rng, n, lead, m, k, widths, dtype="float32", integers=False):
    x = _array(rng, (*lead, n * m, k), dtype, integers)
    return x, [_array(rng, (k, w), dtype, integers) for w in widths]


def _rs_inputs(rng, n, lead, m, ks, width, dtype="float32", integers=False):
    return [(_array(rng, (*lead, n * m, n * k), dtype, integers), _array(rng, (n * k, width), dtype, integers))
            for k in ks]


class CollectiveMatmulLevels:
    """The level tests. ``INTERPRET``: run Pallas kernels in TPU interpret mode with the race detector
    (any CPU), or compiled (on TPU)."""

    INTERPRET = True

    def run(self, program, *args):
        if not self.INTERPRET:
            return jax.block_until_ready(program(*args))
        result = run_interpreted(program, *args, detect_races=True)
        assert not result.races_found
        return result.outputs

    def all_gather(self, impl, n, x, weights, **options):
        lead = x.shape[:-2]
        outs = self.run(_ag_program(n, lead, len(weights), impl=impl, **options), x, *weights)
        return [_f32(o) for o in outs]

    def reduce_scatter(self, impl, n, pairs, **options):
        lead = pairs[0][0].shape[:-2]
        return _f32(self.run(_rs_program(n, lead, len(pairs), impl=impl, **options), *[t for p in pairs for t in p]))

    # numpy -> xla ------------------------------------------------------------------------------

    @pytest.mark.parametrize("n,lead", [(2, ()), (4, (2,)), (8, (1,))])
    def test_xla_matches_numpy(self, rng, n, lead):
        x, weights = _ag_inputs(rng, n, lead, 3, 16, (8, 24))
        for got, w in zip(self.all_gather("xla", n, x, weights), weights):
            for rank in got:
                np.testing.assert_allclose(rank, _f32(x) @ _f32(w), **TOLERANCE["float32"])
        pairs = _rs_inputs(rng, n, lead, 3, (8, 4), 12)
        want = sum(_f32(a).astype(np.float64) @ _f32(b) for a, b in pairs)
        np.testing.assert_allclose(self.reduce_scatter("xla", n, pairs), want, **TOLERANCE["float32"])

    # xla -> ring -------------------------------------------------------------------------------

    @pytest.mark.parametrize("bidirectional", [True, False])
    @pytest.mark.parametrize("assemble", ["dus", "concat"])
    @pytest.mark.parametrize("n,lead,m,widths,dtype", [
        (2, (), 6, (8,), "float32"),
        (4, (2,), 5, (8, 24, 40), "float32"),  # odd rows: one-directional ring
        (8, (1,), 4, (16, 8, 8, 24), "bfloat16"),
    ])
    def test_ring_all_gather_matmul_matches_xla(self, rng, bidirectional, assemble, n, lead, m, widths, dtype):
        x, weights = _ag_inputs(rng, n, lead, m, 16, widths, dtype)
        want = self.all_gather("xla", n, x, weights)
        got = self.all_gather("ring", n, x, weights, bidirectional=bidirectional, assemble=assemble)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **TOLERANCE[dtype])

    @pytest.mark.parametrize("bidirectional", [True, False])
    @pytest.mark.parametrize("n,lead,m,ks,dtype", [
        (2, (), 4, (8,), "float32"),
        (4, (2,), 3, (8, 4), "float32"),  # odd rows per rank
        (8, (1,), 2, (4, 12), "bfloat16"),
    ])
    def test_ring_matmul_reduce_scatter_matches_xla(self, rng, bidirectional, n, lead, m, ks, dtype):
        pairs = _rs_inputs(rng, n, lead, m, ks, 12, dtype)
        want = self.reduce_scatter("xla", n, pairs)
        got = self.reduce_scatter("ring", n, pairs, bidirectional=bidirectional)
        np.testing.assert_allclose(got, want, **TOLERANCE[dtype])

    # ring -> pallas ----------------------------------------------------------------------------

    @pytest.mark.parametrize("n,lead,m,widths,dtype", [
        (2, (), 16, (128,), "float32"),
        (4, (2,), 16, (128, 384, 256), "float32"),  # mixed widths, one 128-wide tile stream
        (8, (1,), 16, (256, 256), "float32"),
        (4, (2,), 32, (128, 256, 128, 384), "bfloat16"),
    ])
    def test_pallas_all_gather_matmul_matches_ring(self, rng, n, lead, m, widths, dtype):
        x, weights = _ag_inputs(rng, n, lead, m, 128, widths, dtype)
        assert unsupported_reason("all_gather_matmul", x[..., :m, :], weights, ranks=n) is None
        want = self.all_gather("ring", n, x, weights)
        for g, w in zip(self.all_gather("pallas", n, x, weights), want):
            np.testing.assert_allclose(g, w, **TOLERANCE[dtype])

    @pytest.mark.parametrize("n,lead,m,ks,width,dtype", [
        (2, (), 16, (128,), 128, "float32"),
        (4, (2,), 16, (128, 256), 256, "float32"),  # two pairs of different K; two column tiles
        (8, (1,), 16, (128,), 384, "float32"),
        (4, (2,), 32, (256, 128), 128, "bfloat16"),
    ])
    def test_pallas_matmul_reduce_scatter_matches_ring(self, rng, n, lead, m, ks, width, dtype):
        pairs = _rs_inputs(rng, n, lead, m, ks, width, dtype)
        local = [(x[..., : x.shape[-1] // n], w[: w.shape[0] // n]) for x, w in pairs]
        assert unsupported_reason("matmul_reduce_scatter", local, ranks=n) is None
        want = self.reduce_scatter("ring", n, pairs)
        np.testing.assert_allclose(self.reduce_scatter("pallas", n, pairs), want, **TOLERANCE[dtype])

    # exact where only data moves ---------------------------------------------------------------

    @pytest.mark.parametrize("impl", ["xla", "ring", "pallas"])
    def test_integer_inputs_are_exact_at_every_level(self, rng, impl):
        n, lead = 4, (2,)
        x, weights = _ag_inputs(rng, n, lead, 16, 128, (128, 256), integers=True)
        for got, w in zip(self.all_gather(impl, n, x, weights), weights):
            for rank in got:
                np.testing.assert_array_equal(rank, _f32(x) @ _f32(w))
        pairs = _rs_inputs(rng, n, lead, 16, (128, 128), 128, integers=True)
        want = sum(_f32(a) @ _f32(b) for a, b in pairs)
        np.testing.assert_array_equal(self.reduce_scatter(impl, n, pairs), want)


class TestInterpreted(CollectiveMatmulLevels):
    INTERPRET = True


@pytest.mark.skipif(jax.default_backend() != "tpu", reason="compiled Pallas TPU kernels need a TPU")
class TestCompiledOnTpu(CollectiveMatmulLevels):
    INTERPRET = False


# The race detector, and a flaw it must catch -----------------------------------------------------


def _one_slot_short(rng, op):
    """A kernel program with one receive slot fewer than its flow control assumes, and its inputs."""
    n, lead = 4, (1,)
    slots = pallas_kernels.RING_SLOTS - 1
    if op == "all_gather_matmul":
        x, weights = _ag_inputs(rng, n, lead, 16, 128, (128,))
        return sharded(lambda x, w: pallas_kernels.all_gather_matmul(x, [w], axis_name=AXIS, recv_slots=slots)[0],
                       n, (P(None, AXIS), P()), P()), (x, *weights)
    (pair,) = _rs_inputs(rng, n, lead, 16, (128,), 256)
    return sharded(lambda x, w: pallas_kernels.matmul_reduce_scatter([(x, w)], axis_name=AXIS, recv_slots=slots),
                   n, (P(None, None, AXIS), P(AXIS)), P(None, AXIS)), pair


@pytest.mark.parametrize("op", ["all_gather_matmul", "matmul_reduce_scatter"])
def test_race_detector_catches_one_receive_slot_too_few(rng, op):
    program, args = _one_slot_short(rng, op)
    assert run_interpreted(program, *args, detect_races=True).races_found


@pytest.mark.parametrize("setting,detected", [("1", True), ("0", False)])
def test_detect_races_env_switches_the_detector_for_every_kernel(rng, monkeypatch, setting, detected):
    monkeypatch.setenv(interpret.DETECT_RACES_ENV, setting)
    program, args = _one_slot_short(rng, "all_gather_matmul")
    with interpret.collect_races() as races:
        jax.block_until_ready(program(*args))  # traced here, outside run_interpreted
    assert races.found is detected


# What the kernels cannot take, and the fallback --------------------------------------------------


def _spec(shape, dtype="float32"):
    return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))


@pytest.mark.parametrize("x,widths,ranks,reason", [
    (_spec((2, 32, 256)), (128, 384), 4, None),
    (_spec((1184, 5120), "bfloat16"), (1280, 1280, 1280), 4, None),  # Wan 2.1 14B q/k/v at tp=4, padded
    (_spec((5, 128)), (128,), 4, "5 rows per rank: need an even number"),
    (_spec((24, 128)), (128,), 4, "12 rows per ring half: need a multiple of 8"),
    (_spec((32, 128), "bfloat16"), (128,), 4, None),  # 16 rows per half: one bfloat16 tile
    (_spec((16, 128), "bfloat16"), (128,), 4, "8 rows per ring half: need a multiple of 16"),
    (_spec((16, 96)), (128,), 4, "contraction widths [96]: need multiples of 128"),
    (_spec((16, 128)), (128, 200), 4, "output widths [128, 200]: need a common multiple-of-128 column tile"),
    (_spec((16, 128), "float16"), (128,), 4, "need one of float32 / bfloat16"),
    (_spec((16, 128)), (128,), 1, "1 rank: nothing to communicate"),
    (_spec((16384, 8192)), (512,), 4, "MiB of VMEM, over the 48 MiB budget"),
])
def test_all_gather_matmul_unsupported_reasons(x, widths, ranks, reason):
    weights = [_spec((x.shape[-1], w), x.dtype) for w in widths]
    got = unsupported_reason("all_gather_matmul", x, weights, ranks=ranks)
    assert got is None if reason is None else reason in got


def test_matmul_reduce_scatter_unsupported_reasons():
    def reason(m, ks, width, ranks=4, dtype="float32"):
        pairs = [(_spec((m, k), dtype), _spec((k, width), dtype)) for k in ks]
        return unsupported_reason("matmul_reduce_scatter", pairs, ranks=ranks)

    assert reason(128, (128, 256), 256) is None
    assert "60 rows: need a multiple of 2 x 4 ranks" in reason(60, (128,), 128)
    assert "contraction widths [128, 64]" in reason(64, (128, 64), 128)
    assert "output widths [100]" in reason(64, (128,), 100)
    # Wan attention out at tp=4, padded: the float32 receive slots of one hop exceed the budget.
    assert "over the 48 MiB budget" in reason(4736, (1280,), 5120, dtype="bfloat16")
    with pytest.raises(ValueError, match="op must be one of"):
        unsupported_reason("all_reduce", [], ranks=4)


def test_pallas_falls_back_to_the_ring_with_a_notice(rng, caplog):
    n, lead = 4, (2,)
    x, weights = _ag_inputs(rng, n, lead, 5, 16, (8, 24))  # odd rows, narrow: no kernel takes them
    with caplog.at_level(logging.WARNING, logger="perfkit.kernels.collective_matmul"):
        got = TestInterpreted().all_gather("pallas", n, x, weights)
    assert "cannot take this shape (5 rows per rank: need an even number (two ring halves)); using the JAX ring" \
        in caplog.text
    for g, w in zip(got, TestInterpreted().all_gather("ring", n, x, weights)):
        np.testing.assert_array_equal(g, w)


def test_sequence_parallel_plan_runs_the_pallas_kernels(monkeypatch, caplog):
    """``SequenceParallel(impl="pallas")`` through a Wan block at widths every kernel takes (no
    fallback notice) matches the same plan on the JAX rings."""
    from perfkit.models import wan
    from perfkit.models.pipeline import DenoiseConfig, Denoiser
    from perfkit.models.plans import make_plan

    # 128 tokens / 4 ranks = 16 rows per ring half; 512 / 4 ranks = 128-wide shards of every weight.
    monkeypatch.setitem(wan.CONFIGS, "kernel-widths", wan.WanConfig(dim=512, heads=4, ffn=512, blocks=1,
                                                                     grid=(2, 8, 8)))
    run = DenoiseConfig(steps=1, seed=5)
    calls = []
    for op in ("all_gather_matmul", "matmul_reduce_scatter"):
        kernel = getattr(pallas_kernels, op)
        monkeypatch.setattr(pallas_kernels, op, lambda *a, _k=kernel, _op=op, **kw: calls.append(_op) or _k(*a, **kw))

    def latents(impl):
        den = Denoiser("wan", "kernel-widths", make_plan("sp", impl=impl), jax.devices()[:4], run)
        result = run_interpreted(den.step)
        assert not result.races_found
        return _f32(result.outputs)

    with caplog.at_level(logging.WARNING, logger="perfkit.kernels.collective_matmul"):
        got = latents("pallas")
    assert "cannot take" not in caplog.text
    # One block: q/k/v, cross-attention q and FFN up gather; attention out, cross out, FFN down scatter.
    assert sorted(calls) == ["all_gather_matmul"] * 3 + ["matmul_reduce_scatter"] * 3
    np.testing.assert_allclose(got, latents("ring"), **TOLERANCE["float32"])


@pytest.mark.parametrize("dtype,lead", [("bfloat16", ()), ("float32", (2,))])
def test_kernels_lower_for_tpu(monkeypatch, dtype, lead):
    """Both kernels pass Pallas' Mosaic lowering (exported for TPU from this CPU host): the TPU-side
    rules Pallas checks while lowering hold. The later Mosaic compile inside libtpu needs a TPU."""
    monkeypatch.setattr(pallas_kernels, "kernel_interpret_mode", lambda: False)
    n, m = 4, 32
    x = _spec((*lead, n * m, 256), dtype)
    weights = [_spec((256, 128), dtype), _spec((256, 384), dtype)]
    program = _ag_program(n, lead, 2, impl="pallas")
    assert "tpu_custom_call" in jax.export.export(program, platforms=["tpu"])(x, *weights).mlir_module()
    pairs = [(_spec((*lead, n * m, n * 128), dtype), _spec((n * 128, 256), dtype))]
    program = _rs_program(n, lead, 1, impl="pallas")
    assert "tpu_custom_call" in jax.export.export(program, platforms=["tpu"])(*pairs[0]).mlir_module()


def test_pallas_kernels_are_exact_with_eager_dmas(rng):
    """The same flow control with every DMA done as soon as it starts (the default runs them as late
    as a wait allows): no race, and integer inputs still give exact results."""
    n, lead = 4, (2,)
    x, weights = _ag_inputs(rng, n, lead, 16, 128, (128, 256), integers=True)
    result = run_interpreted(_ag_program(n, lead, 2, impl="pallas"), x, *weights, dma_execution_mode="eager")
    assert not result.races_found
    for got, w in zip(result.outputs, weights):
        for rank in _f32(got):
            np.testing.assert_array_equal(rank, _f32(x) @ _f32(w))
    pairs = _rs_inputs(rng, n, lead, 16, (128, 256), 256, integers=True)
    result = run_interpreted(_rs_program(n, lead, 2, impl="pallas"), *[t for p in pairs for t in p],
                             dma_execution_mode="eager")
    assert not result.races_found
    np.testing.assert_array_equal(_f32(result.outputs), sum(_f32(a) @ _f32(b) for a, b in pairs))


def test_run_interpreted_reports_a_race_in_any_of_several_kernels(rng):
    """The flawed kernel first, a correct one after it: the interpreter keeps only the last call's
    detector, run_interpreted must still see the first one's race."""
    flawed, args = _one_slot_short(rng, "all_gather_matmul")
    correct = _ag_program(4, (1,), 1, impl="pallas")
    assert run_interpreted(lambda *a: (flawed(*a), correct(*a)), *args).races_found
    assert not run_interpreted(correct, *args).races_found


def test_pallas_rings_on_one_axis_of_a_two_axis_mesh(rng):
    """A (2, 4) mesh: batch over "y", rows over "x"; each "y" row of devices runs its own ring, the
    kernels address neighbours by their "x" coordinate only."""
    from jax.sharding import Mesh

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("y", AXIS))

    def program(fn, in_specs, out_specs):
        return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False))

    x, (w,) = _ag_inputs(rng, 4, (2,), 16, 128, (256,))
    ag = program(lambda x, w: all_gather_matmul(x, [w], axis_name=AXIS, impl="pallas")[0],
                 (P("y", AXIS), P()), P("y"))
    result = run_interpreted(ag, x, w)
    assert not result.races_found
    np.testing.assert_allclose(_f32(result.outputs), _f32(x) @ _f32(w), **TOLERANCE["float32"])

    (pair,) = _rs_inputs(rng, 4, (2,), 16, (128,), 128)
    rs = program(lambda a, b: matmul_reduce_scatter([(a, b)], axis_name=AXIS, impl="pallas"),
                 (P("y", None, AXIS), P(AXIS)), P("y", AXIS))
    result = run_interpreted(rs, *pair)
    assert not result.races_found
    np.testing.assert_allclose(_f32(result.outputs), _f32(pair[0]) @ _f32(pair[1]), **TOLERANCE["float32"])
