"""CPU timings of the SP kernels, Pallas kernels in TPU interpret mode: ``python benchmarks/kernels_interpret.py``.

For each op (the bench presets at CPU size) and 2, 4 and 8 simulated devices: the median wall time of
a call after the first (compiling) one, per level (matmuls: xla / ring / pallas; attention: the
gathered reference / Ulysses / ring). Interpret-mode times measure the interpreter
(every DMA, semaphore and buffer access is a host callback), never a TPU; they show what the tests
cost and that the kernels finish, nothing about on-chip speed.
"""

from __future__ import annotations

import os
import sys
import time

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
os.environ.setdefault("NPROC", "16")  # interpret-mode kernels deadlock with fewer threads than devices
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import dataclasses  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from perfkit.kernels.bench import ATTENTION_OPS, PRESETS, build  # noqa: E402

CALLS = 5
# (level, op override, impl) per kind of op
LEVELS = {"matmul": [("xla", None, "xla"), ("ring", None, "ring"), ("pallas", None, "pallas")],
          "attention": [("xla", None, "xla"), ("ulysses", "ulysses_attention", "ring"),
                        ("ring", "ring_attention", "ring")]}


def time_op(preset: str, level: str, op: str | None, impl: str, n: int, dtype: str) -> dict:
    shape = PRESETS[preset].small(n)
    shape = dataclasses.replace(shape, op=op or shape.op)
    program, _, inputs = build(shape, impl, jax.devices()[:n], dtype)
    t0 = time.perf_counter()
    jax.block_until_ready(program(*inputs))
    first = time.perf_counter() - t0
    times = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        jax.block_until_ready(program(*inputs))
        times.append(time.perf_counter() - t0)
    return {"preset": preset, "op": shape.op, "level": level, "ranks": n, "dtype": dtype,
            "first_call_s": round(first, 2), "median_ms": round(float(np.median(times)) * 1e3, 1)}


def main(dtype: str = "bfloat16") -> pd.DataFrame:
    rows = []
    for preset, shape in PRESETS.items():
        for n in (2, 4, 8):
            for level, op, impl in LEVELS["attention" if shape.op in ATTENTION_OPS else "matmul"]:
                rows.append(time_op(preset, level, op, impl, n, dtype))
                print(rows[-1], file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


if __name__ == "__main__":
    frame = main(*sys.argv[1:])
    print(frame.pivot_table(index=["preset", "ranks"], columns="level", values="median_ms").to_string())
    print()
    print(frame[frame.level == "pallas"][["preset", "ranks", "first_call_s", "median_ms"]].to_string(index=False))
