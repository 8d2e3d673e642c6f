"""Parse + classify throughput and peak memory of ``perfkit.trace.events.load`` on a large synthetic
TPU-shaped xplane (8 chips, ``Steps`` and ``XLA Ops`` lines, per-event stats).

    .venv/bin/python benchmarks/trace_parse.py                  # 5.2M events
    .venv/bin/python benchmarks/trace_parse.py --events 1000000 --profiledata

The load runs in a fresh process pinned to one core; its peak RSS (ru_maxrss) is reported next to the
RSS of the same process before loading, and to the size of the same events as Python dicts (measured
on a sample). ``--profiledata`` also times ``jax.profiler.ProfileData`` walking every event.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHIPS = 8
# (name, hlo_category, share of events): a step of a collective-matmul ring on TPU
OPS = [("fusion.%d", "convolution fusion", 6), ("loop_fusion.%d", "loop fusion", 4),
       ("collective-permute-start.%d", "collective-permute", 2), ("collective-permute-done.%d", "collective-permute", 2),
       ("all-gather-start.%d", "all-gather", 1), ("all-gather-done.%d", "all-gather", 1),
       ("copy-start.%d", "copy-start", 1), ("copy-done.%d", "copy-done", 1)]


def build(path: Path, events: int) -> dict:
    from perfkit.trace.synthetic import XSpaceWriter

    per_chip = events // CHIPS
    per_step = 2000
    space = XSpaceWriter("bench-host")
    first = space.plane("/device:TPU:0")
    ids = [first.op(name % k, hlo_category=cat, program_id=1) for name, cat, share in OPS for k in range(share * 4)]
    steps_line, ops_line = first.line("Steps", 1_000), first.line("XLA Ops", 1_000)
    t = 0
    for i in range(per_chip):
        if i % per_step == 0:
            steps_line.event(first.op(str(i // per_step)), t, per_step * 1_000_000, step_num=i // per_step)
        stats = {"run_id": 7} if i % 4 else {"run_id": 7, "dma_stall_duration_ps": 50_000}
        ops_line.event(ids[i % len(ids)], t, 900_000 + (i * 7919) % 100_000, **stats)
        t += 1_000_000
    for chip in range(1, CHIPS):
        space.proto.planes.add().CopyFrom(first.proto)
        space.proto.planes[-1].name = f"/device:TPU:{chip}"
    space.save(path)
    return {"events": (per_chip + -(-per_chip // per_step)) * CHIPS, "bytes": path.stat().st_size}


def peak_rss_mb(reset: bool = False) -> float:
    """This process's peak RSS (Linux VmHWM, reset on request: ru_maxrss would keep the parent's peak
    across fork + exec)."""
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024


def measure(path: Path) -> dict:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    from perfkit.trace import events

    before = peak_rss_mb(reset=True)
    t, cpu = time.perf_counter(), time.process_time()
    frame = events.load([path])
    seconds, cpu_seconds = time.perf_counter() - t, time.process_time() - cpu
    peak = peak_rss_mb()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    sample = frame.head(10_000).to_dict("records")  # the same events as Python dicts, measured on a sample
    dict_bytes = sum(sys.getsizeof(r) + sum(sys.getsizeof(v) for v in r.values()) for r in sample) / len(sample)
    return {"rows": len(frame), "seconds": seconds, "events_per_s": len(frame) / seconds,
            "cpu_seconds": cpu_seconds, "events_per_cpu_s": len(frame) / cpu_seconds,
            "load_average": os.getloadavg()[0],
            "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
            "rss_before_mb": before, "rss_peak_mb": peak,
            "frame_mb": frame.memory_usage(deep=True).sum() / 2**20,
            "as_dicts_mb": dict_bytes * len(frame) / 2**20,
            "ops_by_category": frame["category"].value_counts().to_dict()}


def profiledata(path: Path) -> dict:
    from jax.profiler import ProfileData

    t = time.perf_counter()
    n = 0
    for plane in ProfileData.from_file(str(path)).planes:
        for line in plane.lines:
            for ev in line.events:
                ev.name, ev.start_ns, ev.duration_ns  # noqa: B018 (what a reader needs of each event)
                n += 1
    seconds = time.perf_counter() - t
    return {"events": n, "seconds": seconds, "events_per_s": n / seconds}  # same process: wall time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5_200_000)
    ap.add_argument("--profiledata", action="store_true", help="also time jax.profiler.ProfileData")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.xplane.pb"
        t = time.perf_counter()
        built = build(path, args.events)
        print(f"built {built['events']:,} events, {built['bytes'] / 2**20:.0f} MiB "
              f"({built['bytes'] / built['events']:.1f} B/event) in {time.perf_counter() - t:.1f} s")
        out = subprocess.run([sys.executable, __file__, "--measure", str(path)], check=True, capture_output=True,
                             text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"load (parse + classify + steps), one core: {r['rows']:,} events in {r['seconds']:.2f} s wall = "
              f"{r['events_per_s'] / 1e6:.2f} M events/s; {r['cpu_seconds']:.2f} s CPU = "
              f"{r['events_per_cpu_s'] / 1e6:.2f} M events/s (machine load average {r['load_average']:.1f}; "
              f"process user {r['user_s']:.2f} s, system {r['sys_s']:.2f} s, imports included)")
        print(f"peak RSS {r['rss_peak_mb']:.0f} MiB (process before loading {r['rss_before_mb']:.0f} MiB); "
              f"frame {r['frame_mb']:.0f} MiB; the same events as Python dicts ~{r['as_dicts_mb']:.0f} MiB")
        print(f"categories: {r['ops_by_category']}")
        if args.profiledata:
            p = profiledata(path)
            print(f"jax.profiler.ProfileData walk: {p['events']:,} events in {p['seconds']:.2f} s = "
                  f"{p['events_per_s'] / 1e6:.2f} M events/s")


if __name__ == "__main__":
    main()
