"""A measured program for runner tests: N steps of a fixed sleep, reported through perfkit.record.

argv: steps sleep_ms [--frames]. Variants change it through the environment only:
- SLEEP_MS overrides sleep_ms.
- REPORT_MS reports that step time instead of measuring (deterministic statistics); REPORT_ODD_MS is
  reported instead in trials with an odd PERFKIT_TRIAL.
- HANG_AT=k: after k steps, ranks listed in FAULT_RANKS (default: all) block forever in
  ``wait_for_peer`` while a helper thread sleeps in ``background_poll``; with SPAWN_CHILD=TAG they
  first start a child process, TAG in its argv, that sleeps (it must not outlive the trial). With
  HANG_UNLESS=PATH they do not hang once that file exists (a resumed run goes through).
- PRINT_MB=n: print n MB of filler lines to stdout before the first step. STDOUT_STEPS=1: steps are
  printed as ``step <ms> ms`` lines instead of metrics events (a program for ``step_regex``).
- LATE=1: SIGTERM ignored (jax.distributed catches it); after the first step the rank waits until perfkit asks for
  its stack dump (its timeout passed), then writes the other steps before perfkit's SIGKILL.
- CRASH_AT=k: after k steps, ranks in FAULT_RANKS print to stderr and exit with code 7.
- HOLD_WHILE=PATH: before the first step, wait while that file exists (a test holds a trial running).
- FRAME_SEED: seed of the frames written with --frames. DUMP_ENV=1 writes the PERFKIT_* and launcher
  variables the rank saw to outputs/env.json.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from perfkit import record

LAUNCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "JAX_ENABLE_COMPILATION_CACHE")


def background_poll():
    while True:
        time.sleep(0.05)


def wait_for_peer():
    threading.Event().wait()


steps, sleep_ms = int(sys.argv[1]), float(os.environ.get("SLEEP_MS", sys.argv[2]))
rank = os.environ.get("PERFKIT_RANK", "0")
faulty = rank in os.environ.get("FAULT_RANKS", rank).split(",")
odd_trial = int(os.environ.get("PERFKIT_TRIAL", "0")) % 2 == 1
reported = os.environ.get("REPORT_ODD_MS" if odd_trial and "REPORT_ODD_MS" in os.environ else "REPORT_MS")
if os.environ.get("PRINT_MB"):
    line = "x" * 1023 + "\n"
    for _ in range(int(os.environ["PRINT_MB"])):
        sys.stdout.write(line * 1024)
    sys.stdout.flush()
while os.environ.get("HOLD_WHILE") and os.path.exists(os.environ["HOLD_WHILE"]):
    time.sleep(0.05)
released = "HANG_UNLESS" in os.environ and os.path.exists(os.environ["HANG_UNLESS"])
if os.environ.get("LATE"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
for i in range(steps):
    if os.environ.get("LATE") and i == 1:
        while not os.path.getsize(os.environ["PERFKIT_STACKS"]):  # the hook created it empty at start
            time.sleep(0.01)
    if faulty and not released and os.environ.get("HANG_AT") == str(i):
        record.mark("waiting")
        if os.environ.get("SPAWN_CHILD"):
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", os.environ["SPAWN_CHILD"]])
        threading.Thread(target=background_poll, daemon=True).start()
        wait_for_peer()
    if faulty and os.environ.get("CRASH_AT") == str(i):
        print(f"sleeper: rank {rank} failing on purpose at step {i}", file=sys.stderr)
        sys.exit(7)
    t = time.perf_counter()
    time.sleep(sleep_ms / 1e3)
    ms = float(reported) if reported else (time.perf_counter() - t) * 1e3
    if os.environ.get("STDOUT_STEPS"):
        print(f"step {ms:.3f} ms", flush=True)
    else:
        record.step(ms)
record.value("total_s", steps * sleep_ms / 1e3)
out = record.outputs_dir()
if out is not None and "--frames" in sys.argv:
    import numpy as np  # only here: every other trial starts faster

    rng = np.random.default_rng(int(os.environ.get("FRAME_SEED", "0")))
    np.save(out / "frames.npy", rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8))
if out is not None and os.environ.get("DUMP_ENV"):
    seen = {k: v for k, v in os.environ.items() if k.startswith("PERFKIT_") or k in LAUNCH_VARS}
    (out / "env.json").write_text(json.dumps(seen))
