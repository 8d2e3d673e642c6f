"""A user program that honours the trace protocol: all_gather_matmul (IMPL=ring|xla) on 4 devices for
N steps, each reported with perfkit.record; the steps in PERFKIT_TRACE_STEPS are profiled into
PERFKIT_TRACE_DIR/step<i>, inside a StepTraceAnnotation numbered by the step.

argv: steps
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
from perfkit.kernels.collective_matmul import all_gather_matmul


def main(steps: int) -> None:
    impl = os.environ["IMPL"]
    trace_dir = os.environ.get("PERFKIT_TRACE_DIR")
    traced = {int(s) for s in os.environ.get("PERFKIT_TRACE_STEPS", "").split(",") if s}
    mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
    step = jax.jit(jax.shard_map(lambda x, w: all_gather_matmul(x, [w], axis_name="x", impl=impl)[0], mesh=mesh,
                                 in_specs=(P("x", None), P()), out_specs=P("x", None)))
    x = jax.device_put(jnp.ones((256, 128), jnp.float32), NamedSharding(mesh, P("x", None)))
    w = jnp.ones((128, 128), jnp.float32)
    for i in range(steps):
        if i in traced and trace_dir:
            jax.profiler.start_trace(str(Path(trace_dir) / f"step{i}"))
        with jax.profiler.StepTraceAnnotation("step", step_num=i):
            t = time.perf_counter()
            step(x, w).block_until_ready()
            ms = (time.perf_counter() - t) * 1e3
        if i in traced and trace_dir:
            jax.profiler.stop_trace()
        record.step(ms)


if __name__ == "__main__":
    main(int(sys.argv[1]))
