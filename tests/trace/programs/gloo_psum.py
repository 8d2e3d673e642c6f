"""One process of a two-process JAX CPU job (gloo collectives, one CPU device each): a psum of a sharded matmul,
three steps profiled into OUT, each inside a StepTraceAnnotation numbered by the step.

argv: process id (0 or 1), coordinator port, OUT
"""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402


def main(process: int, port: int, out: str) -> None:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process)
    mesh = Mesh(np.array(jax.devices()), ("x",))
    step = jax.jit(jax.shard_map(lambda v: jax.lax.psum(jnp.tanh(v @ v.T), "x"), mesh=mesh, in_specs=P("x"),
                                 out_specs=P()))
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.ones((256, 256), np.float32))
    step(x).block_until_ready()  # compiled before the profile
    jax.profiler.start_trace(out)
    for i in range(3):
        with jax.profiler.StepTraceAnnotation("step", step_num=i):
            step(x).block_until_ready()
    jax.profiler.stop_trace()
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
