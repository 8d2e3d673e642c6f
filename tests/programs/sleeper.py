"""A measured program for runner tests: N steps of a fixed sleep, reported through perfkit.record.

argv: steps sleep_ms [--frames]. SLEEP_MS in the env overrides sleep_ms (variants change env only).
"""

import os
import sys
import time

import numpy as np

from perfkit import record

steps, sleep_ms = int(sys.argv[1]), float(os.environ.get("SLEEP_MS", sys.argv[2]))
for _ in range(steps):
    t = time.perf_counter()
    time.sleep(sleep_ms / 1e3)
    record.step((time.perf_counter() - t) * 1e3)
record.value("total_s", steps * sleep_ms / 1e3)
out = record.outputs_dir()
if out is not None and "--frames" in sys.argv:
    rng = np.random.default_rng(int(os.environ.get("FRAME_SEED", "0")))
    np.save(out / "frames.npy", rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8))
