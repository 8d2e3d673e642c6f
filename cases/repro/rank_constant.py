"""A rank-dependent value entering a compiled program: as a Python constant (A) or a runtime array (B).

Each of WORLD processes (one CPU device each, under jax.distributed) holds CHUNK rows of a sequence of
TOTAL rows, padded to WORLD * CHUNK; only the last rank holds pad rows. Every step multiplies the rows
by a weight, zeroes the pad rows and passes the result one rank along a ring (collective-permute), as
the sequence-parallel rings of the reference TPU PR do.

- ``OFFSET_AS=constant`` (A): this rank's count of valid rows is a Python int, so the program slices
  and pads with it. Ranks 0-2 (all rows valid) compile one program; the last rank compiles another.
  It runs silently here; on TPU the peers wrote into the wrong receive buffers.
- ``OFFSET_AS=array`` (B): the count is a runtime input; every rank compiles the same program.

Reads the launcher variables perfkit sets (PERFKIT_COORDINATOR, PERFKIT_RANK, PERFKIT_WORLD) and reports
step times with perfkit.record. argv: [steps].
"""

import os
import sys
import time

import numpy as np

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
CHUNK, WIDTH = 64, 128
RANK, WORLD = int(os.environ.get("PERFKIT_RANK", "0")), int(os.environ.get("PERFKIT_WORLD", "1"))
TOTAL = WORLD * CHUNK - 10  # the last rank holds 10 pad rows
OFFSET_AS = os.environ.get("OFFSET_AS", "constant")

import jax  # noqa: E402  (after the environment is read; XLA_FLAGS come from the runner)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from perfkit import record  # noqa: E402

if WORLD > 1:
    jax.distributed.initialize(coordinator_address=os.environ["PERFKIT_COORDINATOR"], num_processes=WORLD,
                               process_id=RANK, initialization_timeout=60, heartbeat_timeout_seconds=10,
                               shutdown_timeout_seconds=10)
mesh = Mesh(np.array(jax.devices()), ("x",))
valid = max(0, min(CHUNK, TOTAL - RANK * CHUNK))  # rows of this rank's shard that are not padding
ring = [(i, (i + 1) % WORLD) for i in range(WORLD)]


def step(x, w, valid_rows):
    """x: [CHUNK, WIDTH] this rank's rows; w: [WIDTH, WIDTH]; valid_rows: [1] int32."""
    if OFFSET_AS == "constant":
        # The Python int is baked into the program: a slice and a pad on the last rank only.
        y = jnp.pad(x[:valid] @ w, ((0, CHUNK - valid), (0, 0)))
    else:
        y = jnp.where(jnp.arange(CHUNK)[:, None] < valid_rows[0], x @ w, 0.0)
    return jax.lax.ppermute(jnp.tanh(y), "x", ring)  # one hop of a ring: the neighbour's rows


f = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("x"), P(), P("x")), out_specs=P("x")))
device = jax.local_devices()[0]


def global_array(local: np.ndarray, spec: P, shape: tuple) -> jax.Array:
    return jax.make_array_from_single_device_arrays(shape, NamedSharding(mesh, spec), [jax.device_put(local, device)])


rng = np.random.default_rng(RANK)
x = global_array(rng.standard_normal((CHUNK, WIDTH), np.float32), P("x"), (WORLD * CHUNK, WIDTH))
w = global_array(np.random.default_rng(99).standard_normal((WIDTH, WIDTH), np.float32) / WIDTH**0.5, P(),
                 (WIDTH, WIDTH))
v = global_array(np.array([valid], np.int32), P("x"), (WORLD,))
for _ in range(STEPS):
    t = time.perf_counter()
    x = f(x, w, v)
    x.block_until_ready()
    record.step((time.perf_counter() - t) * 1e3)
out = record.outputs_dir()
if out is not None and RANK == 0:
    np.save(out / "rows.npy", np.asarray(x.addressable_shards[0].data))
