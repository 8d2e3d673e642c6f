"""A variant that adds collectives of known size and count: the attribution must name them.

On the case's devices (one process, a ``shard_map`` over all of them), a step is LAYERS small matmuls on
the first COLUMNS columns of a row-sharded f32[ROWS, WIDTH] block per device. ``EXTRA_ALL_REDUCES=k``
(variant B) adds k all-reduces of the whole block (``ROWS * WIDTH * 4`` bytes each) after them, chained
so XLA can neither combine nor drop them. The compute is kept small beside the collectives: the first
all-reduce also absorbs the chips' skew in the compute before it, time that A's chips spend idle. The
steps of PERFKIT_TRACE_STEPS (first to last) are profiled as one trace into PERFKIT_TRACE_DIR/steps, each
inside a StepTraceAnnotation numbered by the step (a profile per step would give files whose CPU clocks
each start with their own session). Independently of any trace, each trial also times the k
all-reduces alone (the same chain, compiled by itself) and reports the median as the value
``collectives_alone_ms``: what B's attribution of its all-reduces should cover.

argv: [steps]
"""

import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from perfkit import record

ROWS, WIDTH, COLUMNS, LAYERS = 512, 1024, 128, 2
EXTRA = int(os.environ.get("EXTRA_ALL_REDUCES", "0"))
ALONE_REPEATS = 30


def chain(y):
    """EXTRA all-reduces, each on the last one's result (scaled back, so values stay bounded)."""
    for _ in range(EXTRA):
        y = jax.lax.psum(y, "x") * (1.0 / jax.lax.axis_size("x"))
    return y


def step(x, w):
    h = x[:, :COLUMNS]
    for _ in range(LAYERS):
        h = jnp.tanh(h @ w)
    x = x.at[:, :COLUMNS].set(h)
    return x + chain(x) * 1e-3


def main(steps: int) -> None:
    trace_dir = os.environ.get("PERFKIT_TRACE_DIR")
    traced = sorted(int(s) for s in os.environ.get("PERFKIT_TRACE_STEPS", "").split(",") if s) if trace_dir else []
    mesh = Mesh(np.array(jax.devices()), ("x",))
    n = len(jax.devices())
    spec = dict(mesh=mesh, in_specs=(P("x", None), P()), out_specs=P("x", None))
    run = jax.jit(jax.shard_map(step, **spec))
    alone = jax.jit(jax.shard_map(lambda x, w: chain(x), **spec))
    x = jax.device_put(jnp.asarray(np.random.default_rng(0).standard_normal((n * ROWS, WIDTH)), jnp.float32),
                       NamedSharding(mesh, P("x", None)))
    w = jnp.asarray(np.random.default_rng(1).standard_normal((COLUMNS, COLUMNS)) / COLUMNS**0.5, jnp.float32)
    for i in range(steps):
        if traced and i == traced[0]:  # one profile of the traced steps: one file a rank, one clock
            jax.profiler.start_trace(str(Path(trace_dir) / "steps"))
        with jax.profiler.StepTraceAnnotation("step", step_num=i):
            t = time.perf_counter()
            run(x, w).block_until_ready()
            ms = (time.perf_counter() - t) * 1e3
        if traced and i == traced[-1]:
            jax.profiler.stop_trace()
        record.step(ms, **({"traced": True} if traced and traced[0] <= i <= traced[-1] else {}))
    if EXTRA:
        alone(x, w).block_until_ready()  # compiled
        times = []
        for _ in range(ALONE_REPEATS):
            t = time.perf_counter()
            alone(x, w).block_until_ready()
            times.append((time.perf_counter() - t) * 1e3)
        record.value("collectives_alone_ms", float(np.median(times)))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
