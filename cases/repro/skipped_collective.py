"""A rank that skips one collective, so the run hangs: ``perfkit trace tail`` must name that rank and that
collective.

Each of WORLD processes (one CPU device each, under jax.distributed) holds a block of rows and passes it
HOPS times one rank along a ring (collective-permute), a small matmul between hops, as the sequence-parallel
rings of the reference TPU PR do. ``SKIP_RANK=r`` (variant B) makes rank r compile its step without hop
SKIP_HOP: a rank-dependent Python condition in the traced function, the kind of defect that made the
reference PR's chips part. On CPU (gloo) each rank's collective-permutes pair up in the order they come,
so rank r runs one hop ahead of the others, finishes its steps and waits for them at jax.distributed's
shutdown barrier, while the others wait in a hop rank r never runs: the trial hangs until the watchdog.
``SWAP_RANK=r`` instead makes rank r run hop SKIP_HOP with the ring's pairs reversed (same count and shapes, other
source_target_pairs): it and its neighbours wait on exchanges the others never post, and the trial hangs alike.

The steps of PERFKIT_TRACE_STEPS (first to last) are profiled as one trace into PERFKIT_TRACE_DIR/steps,
each in a StepTraceAnnotation numbered by the step; a timer stops the profile CUT_S seconds after it
started if the last traced step has not ended by then (a hung step's ops up to then are kept, as the
reference PR's per-rank traces were stopped by a timer). The watchdog ends the hung trial.
argv: [steps].
"""

import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
ROWS, WIDTH, HOPS, SKIP_HOP = 64, 128, 3, 1
CUT_S = float(os.environ.get("CUT_S", "10"))  # the profile's timer, seconds
RANK, WORLD = int(os.environ.get("PERFKIT_RANK", "0")), int(os.environ.get("PERFKIT_WORLD", "1"))
SKIP_RANK = int(os.environ.get("SKIP_RANK", "-1"))
SWAP_RANK = int(os.environ.get("SWAP_RANK", "-1"))

import jax  # noqa: E402  (after the environment is read; XLA_FLAGS come from the runner)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from perfkit import record  # noqa: E402

if WORLD > 1:
    jax.distributed.initialize(coordinator_address=os.environ["PERFKIT_COORDINATOR"], num_processes=WORLD,
                               process_id=RANK, initialization_timeout=60, heartbeat_timeout_seconds=10,
                               shutdown_timeout_seconds=600)  # a rank done early waits for its peers: a hang
mesh = Mesh(np.array(jax.devices()), ("x",))
ring = [(i, (i + 1) % WORLD) for i in range(WORLD)]


def step(x, w):
    """x: [ROWS, WIDTH] this rank's rows; HOPS ring hops, a matmul before each."""
    for hop in range(HOPS):
        x = jnp.tanh(x @ w)
        if not (RANK == SKIP_RANK and hop == SKIP_HOP):  # the defect: a Python constant of the rank
            x = jax.lax.ppermute(x, "x", [(j, i) for i, j in ring] if RANK == SWAP_RANK and hop == SKIP_HOP else ring)
    return x


f = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x")))
device = jax.local_devices()[0]


def global_array(local: np.ndarray, spec: P, shape: tuple) -> jax.Array:
    return jax.make_array_from_single_device_arrays(shape, NamedSharding(mesh, spec), [jax.device_put(local, device)])


x = global_array(np.random.default_rng(RANK).standard_normal((ROWS, WIDTH), np.float32), P("x"), (WORLD * ROWS, WIDTH))
w = global_array(np.random.default_rng(99).standard_normal((WIDTH, WIDTH), np.float32) / WIDTH**0.5, P(),
                 (WIDTH, WIDTH))
trace_dir = os.environ.get("PERFKIT_TRACE_DIR")
traced = sorted(int(s) for s in os.environ.get("PERFKIT_TRACE_STEPS", "").split(",") if s) if trace_dir else []
f.lower(x, w).compile()  # compiled before the profile: it holds the steps, not the compile
record.mark("compiled")
lock = threading.Lock()
profiling = False


def stop() -> None:
    """Ends the profile once: after the last traced step, or by the timer when a step hangs."""
    global profiling
    with lock:
        if profiling:
            profiling = False
            jax.profiler.stop_trace()


timer = threading.Timer(CUT_S, stop)
for i in range(STEPS):
    if traced and i == traced[0]:  # one profile of every traced step, as one file per rank
        jax.profiler.start_trace(str(Path(trace_dir) / "steps"))
        profiling = True
        timer.start()
    with jax.profiler.StepTraceAnnotation("step", step_num=i):
        t = time.perf_counter()
        x = f(x, w)
        x.block_until_ready()
        ms = (time.perf_counter() - t) * 1e3
    record.step(ms, **({"traced": True} if traced and traced[0] <= i <= traced[-1] else {}))
    if traced and i == traced[-1]:
        timer.cancel()
        stop()
