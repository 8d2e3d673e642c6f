"""A small jax program for runner tests: jit a function, run it N steps, report the persistent
compilation-cache hits it saw (``compile_cache_hits``), as the bundled worker does.

argv: steps.
"""

import sys
import time

import jax
import jax.numpy as jnp

from perfkit import record
from perfkit.run.model_rank import CompileMeter

compiles = CompileMeter(jax.monitoring)
f = jax.jit(lambda x: jnp.tanh(x @ x.T) @ x)
x = jnp.ones((64, 64))
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    x = f(x).block_until_ready()
    record.step((time.perf_counter() - t) * 1e3)
record.value("compile_s", compiles.seconds)
record.value("compile_cache_hits", compiles.cache_hits)
