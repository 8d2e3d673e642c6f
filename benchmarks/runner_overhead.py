"""What the runner itself costs: per-trial launch and teardown, the stack-dump hook's start-up time,
how soon a hung trial is ended after its timeout, and the statistics on large runs.

    .venv/bin/python benchmarks/runner_overhead.py [--repeats 10] [--stats-only]

Figures are medians over ``--repeats`` (wall clock, this machine as loaded as it is).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perfkit.run import stackdump
from perfkit.analysis import stats
from perfkit.analysis import timing
from perfkit.run.launch import RankProcess, run_ranks

NOOP = "pass"
HANG = "import threading; threading.Event().wait()"


def python_start_s(env: dict, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", NOOP], env=env, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def trial_wall_s(base: Path, code: str, ranks: int, env: dict, timeout: float, repeats: int) -> float:
    walls = []
    for i in range(repeats):
        procs = [RankProcess(r, [sys.executable, "-c", code],
                             {**env, stackdump.STACKS_ENV: str(base / f"t{i}/rank{r}/stacks.txt")}, base / f"t{i}/rank{r}")
                 for r in range(ranks)]
        walls.append(run_ranks(procs, timeout=timeout).wall_s)
    return statistics.median(walls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--stats-only", action="store_true", help="only the statistics figures")
    args = ap.parse_args()
    if not args.stats_only:
        launch_figures(args.repeats)
    stats_figures(args.repeats)


def launch_figures(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        hook = stackdump.hook_dir(base / "hook")
        plain = dict(os.environ)
        hooked = {**plain, "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), plain.get("PYTHONPATH")]))}
        bare, with_hook = python_start_s(plain, repeats), python_start_s(
            {**hooked, stackdump.STACKS_ENV: str(base / "s.txt")}, repeats)
        print(f"python start-up: {bare * 1e3:.1f} ms bare, {with_hook * 1e3:.1f} ms with the stack-dump hook")
        for ranks in (1, 4):
            wall = trial_wall_s(base / f"noop{ranks}", NOOP, ranks, hooked, 60, repeats)
            print(f"trial of {ranks} no-op rank(s): {wall * 1e3:.1f} ms wall (python start-up included)")
        timeout = 1.0
        wall = trial_wall_s(base / "hang", HANG, 4, hooked, timeout, max(3, repeats // 3))
        print(f"hung trial of 4 ranks, timeout {timeout:.0f} s: ended {wall - timeout:.2f} s after the timeout "
              "(stack dumps included)")


def stats_figures(repeats: int) -> None:
    rng = np.random.default_rng(0)
    for n_trials, n_steps in ((8, 100), (8, 1000), (32, 1000)):
        a = [10 + rng.normal(0, 0.3, n_steps) for _ in range(n_trials)]
        b = [10.5 + rng.normal(0, 0.3, n_steps) for _ in range(n_trials)]
        walls = []
        for _ in range(repeats):
            t = time.perf_counter()
            c = stats.compare(a, b)
            walls.append(time.perf_counter() - t)
        print(f"compare {n_trials}+{n_trials} trials x {n_steps} steps (4000 bootstrap draws): "
              f"{statistics.median(walls) * 1e3:.1f} ms (median of {repeats}, first call {walls[0] * 1e3:.1f} ms), "
              f"ratio {c.ratio:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}]")
    trials = [{"index": i, "variant": "ab"[i % 2], "round": i // 2, "status": "ok", "warmup": 2,
               "steps_ms": list(10 + rng.normal(0, 0.3, 200)), "natural_ms": [9.5]} for i in range(64)]
    t = time.perf_counter()
    steps = timing.steps_frame(trials)
    timing.variant_timing(steps)
    timing.compare_variants(steps, "a", ["b"], min_effect=0.02, seed=0)
    print(f"timing frames + comparisons, 64 trials x 200 steps: {(time.perf_counter() - t) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
