"""Op-level benchmark of the SP kernels: ``python -m perfkit.kernels.bench --preset wan-qkv --impl pallas``.

Times one op at the shapes of a reference-PR model (Wan 2.1 14B at 480x832x9, FLUX.1-dev at 1024^2)
on every visible device, and speaks the metrics protocol: one ``record.step(ms)`` per timed call (the
first, which compiles, is a step too: cases drop it as warmup), ``first_call_s``, and the largest
difference from the ``xla`` level; the steps a case traces (``capture.trace``) are profiled and marked (a traced
step 0's ``first_call_s`` holds the profiler's cost too). Off TPU the shapes are shrunk (``--size auto``) so the
Pallas kernels run in TPU interpret mode in seconds; the timings then measure the interpreter, not a chip.
With ``PERFKIT_DETECT_RACES=1`` the interpreter runs its race detector and ``races_found`` is recorded.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import click
import numpy as np

# the runs' flag builder, so bench and runs spell the flags alike
from perfkit.common.xla import xla_flags

MATMUL_OPS = ("all_gather_matmul", "matmul_reduce_scatter")
ATTENTION_OPS = ("ulysses_attention", "ring_attention")
AXIS = "x"


@dataclasses.dataclass(frozen=True)
class OpShape:
    """Global shapes of one op, before sharding over the ranks.

    all_gather_matmul: x (rows, k[0]), column-parallel weights (k[0], widths[i] / n) on each rank.
    matmul_reduce_scatter: per pair x (rows, k[i] / n) and w (k[i] / n, widths[0]) on each rank.
    attention: q, k, v (1, rows, heads, head_dim); ``rows`` real tokens, padded per shard to 128 lanes.
    """

    op: str
    rows: int
    k: tuple[int, ...] = ()
    widths: tuple[int, ...] = ()
    heads: int = 0
    head_dim: int = 0

    def small(self, n: int) -> OpShape:
        """The same op and structure at CPU size: every dimension the kernels tile stays aligned."""
        if self.op in ATTENTION_OPS:
            return dataclasses.replace(self, rows=32 * n - 5, heads=2 * n, head_dim=64)
        lanes = 128 * n
        return dataclasses.replace(self, rows=32 * n, k=tuple(lanes * (i + 1) for i in range(len(self.k))),
                                   widths=tuple(lanes for _ in self.widths))


# The reference PR's shapes (tp = 4): Wan 2.1 14B (dim 5120, FFN 13824, 40 heads, 4680 tokens padded
# to 4736) and FLUX.1-dev single blocks (dim 3072, MLP 12288, 4096 image + 512 text tokens).
PRESETS = {
    "wan-qkv": OpShape("all_gather_matmul", 4736, (5120,), (5120, 5120, 5120)),
    "wan-ffn-up": OpShape("all_gather_matmul", 4736, (5120,), (13824,)),
    "wan-attn-out": OpShape("matmul_reduce_scatter", 4736, (5120,), (5120,)),
    "wan-ffn-down": OpShape("matmul_reduce_scatter", 4736, (13824,), (5120,)),
    "flux-single-in": OpShape("all_gather_matmul", 4608, (3072,), (3072, 3072, 3072, 12288)),
    "flux-single-out": OpShape("matmul_reduce_scatter", 4608, (3072, 12288), (3072,)),
    "wan-attention": OpShape("ring_attention", 4680, heads=40, head_dim=128),
}


def build(shape: OpShape, impl: str, devices, dtype: str, seed: int = 0):
    """(program, reference program, inputs): ``jit(shard_map(...))`` of the op over ``devices``."""
    # jax only once the op bench runs: XLA_FLAGS (--devices) must be set first
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    from perfkit.kernels import attention, collective_matmul, padding

    n = len(devices)
    mesh = Mesh(np.asarray(devices), (AXIS,))
    rng = np.random.default_rng(seed)

    def array(*dims):
        return jnp.asarray(rng.standard_normal(dims, np.float32) / np.sqrt(dims[-1]), dtype)

    def program(fn, in_specs, out_specs):
        return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False))

    if shape.op == "all_gather_matmul":
        inputs = [array(shape.rows, shape.k[0])] + [array(shape.k[0], w // n) for w in shape.widths]
        specs = (P(AXIS), *[P()] * len(shape.widths)), tuple(P(AXIS) for _ in shape.widths)

        def op(impl, x, *weights):  # each rank's full product, stacked: (n * rows, N_i / n)
            return tuple(collective_matmul.all_gather_matmul(x, weights, axis_name=AXIS, impl=impl))
    elif shape.op == "matmul_reduce_scatter":
        inputs = [t for k in shape.k for t in (array(shape.rows, k), array(k, shape.widths[0]))]
        specs = (P(None, AXIS), P(AXIS)) * len(shape.k), P(AXIS)

        def op(impl, *flat):
            return collective_matmul.matmul_reduce_scatter(list(zip(flat[::2], flat[1::2])), axis_name=AXIS,
                                                           impl=impl)
    else:
        plan = padding.plan_lanes(shape.rows, n)
        inputs = [padding.pad(array(1, shape.rows, shape.heads, shape.head_dim), plan) for _ in range(3)]
        seq = P(None, AXIS)
        specs = (seq, seq, seq), seq
        sharded = getattr(attention, shape.op)

        def op(impl, q, k, v):  # ``impl`` "xla": the single-device reference on the gathered sequence
            if impl == "xla":
                full = [jax.lax.all_gather(t, AXIS, axis=1, tiled=True) for t in (q, k, v)]
                out = attention.attention_reference(*full, kv_valid_len=plan.length)
                return jax.lax.dynamic_slice_in_dim(out, jax.lax.axis_index(AXIS) * q.shape[1], q.shape[1], 1)
            return sharded(q, k, v, axis_name=AXIS, kv_valid_len=plan.length)

    def kernel_step(*args):  # the measured program: its module, jit_kernel_step, is the step `perfkit cost` reads
        return op(impl, *args)

    def reference(*args):
        return op("xla", *args)

    return program(kernel_step, *specs), program(reference, *specs), inputs


def max_abs_diff(a, b) -> float:
    # jax only once the op bench runs: XLA_FLAGS (--devices) must be set first
    import jax

    return max(float(np.max(np.abs(np.asarray(x, np.float32) - np.asarray(y, np.float32))))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@click.command()
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default="wan-qkv", show_default=True,
              help="The op and its shapes.")
@click.option("--op", type=click.Choice(MATMUL_OPS + ATTENTION_OPS), default=None,
              help="Another op of the same kind at the preset's shapes (e.g. ulysses_attention).")
@click.option("--impl", type=click.Choice(["xla", "ring", "pallas"]), default="ring", show_default=True,
              help="Collective-matmul level (attention ops: xla = the gathered reference).")
@click.option("--size", type=click.Choice(["auto", "full", "small"]), default="auto", show_default=True,
              help="auto: full shapes on TPU, small ones elsewhere.")
@click.option("--dtype", type=click.Choice(["bfloat16", "float32"]), default="bfloat16", show_default=True)
@click.option("--steps", type=int, default=10, show_default=True, help="Timed calls (the first compiles).")
@click.option("--devices", type=int, default=None,
              help="Simulated CPU devices (perfkit run sets them from the case's `devices`).")
def main(preset, op, impl, size, dtype, steps, devices):
    """Time one SP kernel op; one metrics-protocol step per call."""
    # Interpret-mode kernels deadlock with fewer XLA CPU threads than devices.
    os.environ.setdefault("NPROC", "16")
    if devices is not None:
        if "jax" in sys.modules:  # XLA reads the flag once, when jax starts
            raise click.UsageError("--devices must take effect before jax is imported")
        os.environ["XLA_FLAGS"] = xla_flags(os.environ.get("XLA_FLAGS", ""), devices, None)
    # jax only once the op bench runs: XLA_FLAGS (--devices) must be set first
    import jax

    from perfkit import record
    from perfkit.kernels import interpret

    shape = PRESETS[preset]
    if op is not None:
        if (op in ATTENTION_OPS) != (shape.op in ATTENTION_OPS):
            raise click.BadParameter(f"{op} does not take the shapes of preset {preset} ({shape.op})",
                                     param_hint="--op")
        shape = dataclasses.replace(shape, op=op)
    devices = jax.devices()
    if size == "small" or (size == "auto" and jax.default_backend() != "tpu"):
        shape = shape.small(len(devices))
    click.echo(f"{shape} impl={impl} dtype={dtype} on {len(devices)} x {devices[0].device_kind}")
    program, reference, inputs = build(shape, impl, devices, dtype)
    with interpret.collect_races() as races:
        for step in range(steps):
            traced = record.traced(step)  # (capture.trace: the step profiled, and left out of the timing)
            with record.jax_trace(traced, step):
                t0 = time.perf_counter()
                out = jax.block_until_ready(program(*inputs))
                ms = (time.perf_counter() - t0) * 1e3
            record.step(ms, **({"traced": True} if traced else {}))
            click.echo(f"step {step}: {ms:.3f} ms")
            if step == 0:
                record.value("first_call_s", ms / 1e3)  # compiles: tracing, lowering, XLA
    if os.environ.get(interpret.DETECT_RACES_ENV) == "1":
        record.value("races_found", float(races.found))
        click.echo(f"races found: {'yes' if races.found else 'none'}")
    diff = max_abs_diff(out, reference(*inputs))
    record.value("max_abs_diff_vs_xla", diff)
    click.echo(f"max |{impl} - xla| = {diff:.3g}")


if __name__ == "__main__":
    main()
