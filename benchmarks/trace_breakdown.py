"""``perfkit trace breakdown`` end to end (the whole CLI process) on a large TPU-shaped XSpace, against
xprof's ``op_profile`` on the same file in the same run: wall time, the ratio, and both peak RSS.

    .venv/bin/python benchmarks/trace_breakdown.py                      # 6M events, xprof once
    .venv/bin/python benchmarks/trace_breakdown.py --events 12000000 --no-xprof
    .venv/bin/python benchmarks/trace_breakdown.py --files 16 --events 3000000 --no-xprof   # a folder
    .venv/bin/python benchmarks/trace_breakdown.py --command collectives --no-xprof       # or diff, tail, export
    .venv/bin/python benchmarks/trace_breakdown.py --shape xprof                        # xprof's own shape

The XSpace: CHIPS chips, each a ``Steps`` line and an ``XLA Ops`` line of ops in ``PATTERN`` (about 42%
of op time in collectives: async all-gather and collective-permute pairs), every op with its
``self_duration_ps`` stat and every fourth compute op with a DMA stall stat (about 24 bytes an event, as
issue 15's 145 MB file), program id a 64-bit fingerprint above 2**63; the program's HLO in
``/host:metadata``. ``--shape xprof`` builds the profile as xprof's own files are: 1000 steps, each op of
a step a distinct instruction, a ``group_id`` stat (the step) on every event in place of the self
time, each op's time on its chip's clock (``device_offset_ps``, ``device_duration_ps``: on real TPU ops
both, the offset 6 bytes), ``flops`` and ``bytes_accessed`` on the ops' metadata (about 42 bytes an
event). The
events are encoded with numpy (protobuf's Python objects would take minutes at this size), the rest
(metadata, headers) with ``perfkit.trace.synthetic``. Each command runs under ``/usr/bin/time -v``
(peak RSS of the largest process; user + system CPU of the process and the workers it waited for),
``--repeats`` times each, interleaved (perfkit, xprof, the import floor: a Python process that imports
numpy and pandas and does nothing else; the read floor: perfkit's reader alone, ``_READ_FLOOR``; the parse
floor: protobuf's own C parser on the same planes, ``_PARSE_FLOOR``), so that the machine's drift slows all
five alike; printed as
medians, and the ratio of each perfkit run to the xprof run beside it. On a shared machine wall times
follow the load average (printed): CPU times compare the two tools' work where wall times cannot. perfkit's
modules are byte-compiled first, as installing it does (xprof's are, by pip): with PYTHONDONTWRITEBYTECODE set
(the CI and benchmark machines set it) each run would otherwise compile the command's modules again, before its
workers start.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from perfkit.trace.synthetic import FINGERPRINT, Uint64, XSpaceWriter

CHIPS = 4
OPS_PER_STEP = 2000
# (name, opcode, hlo_category, duration ns): one repeat of a collective-matmul-like ring
PATTERN = [("fusion.{}", "fusion", "convolution fusion", 1000), ("loop_fusion.{}", "fusion", "loop fusion", 650),
           ("all-gather-start.{}", "all-gather-start", "all-gather", 100),
           ("all-gather-done.{}", "all-gather-done", "all-gather", 700),
           ("collective-permute-start.{}", "collective-permute-start", "collective-permute", 100),
           ("collective-permute-done.{}", "collective-permute-done", "collective-permute", 450),
           ("copy-start.{}", "copy-start", "data formatting", 50), ("copy-done.{}", "copy-done", "data formatting", 250)]
NAMES_PER_KIND = 16  # distinct op names per kind in the program
XPROF_STEPS = 1000  # steps of the xprof-shaped profile
PERFKIT = [sys.executable, "-m", "perfkit.cli"]
PACKAGE = Path(__file__).resolve().parents[1] / "perfkit"


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Protobuf varints of (n,) uint64 values as an (n, 10) uint8 matrix and (n,) lengths."""
    v = values.astype(np.uint64)
    groups = np.stack([(v >> np.uint64(7 * k)) & np.uint64(0x7F) for k in range(10)], axis=1).astype(np.uint8)
    bits = np.zeros(v.size, np.int64)
    rest = v.copy()
    while rest.any():
        bits += rest > 0
        rest >>= np.uint64(7)
    length = np.maximum(bits, 1)
    groups[np.arange(10)[None, :] < (length - 1)[:, None]] |= 0x80
    return groups, length


def _pack(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-row concatenation of (matrix (n, k), lengths (n,)) pieces (each row's first ``length`` bytes):
    a (n, K) matrix holding each row's bytes from column 0, and the rows' lengths."""
    matrix = np.concatenate([m for m, _ in pieces], axis=1)
    keep = np.concatenate([np.arange(m.shape[1])[None, :] < length[:, None] for m, length in pieces], axis=1)
    sizes = keep.sum(axis=1)
    out = np.zeros((matrix.shape[0], int(sizes.max(initial=0))), np.uint8)
    rows = np.repeat(np.arange(matrix.shape[0]), sizes)
    out[rows, np.arange(rows.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)] = matrix[keep]
    return out, sizes


def _const(n: int, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    return np.tile(np.frombuffer(data, np.uint8), (n, 1)), np.full(n, len(data))


def _stat(stat_id: int, values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """XEvent field 4 (one int64 XStat, metadata id ``stat_id`` < 128) per row where ``present``."""
    n = values.size
    stat, stat_size = _pack([_const(n, bytes([0x08, stat_id, 0x20])), _varints(values)])
    head = np.concatenate([np.full((n, 1), 0x22, np.uint8), stat_size[:, None].astype(np.uint8)], axis=1)
    return _pack([(head, np.full(n, 2)), (stat, stat_size)])[0], (stat_size + 2) * present


def _events(metadata_id: np.ndarray, offset: np.ndarray, dur: np.ndarray, stats: list[tuple[int, np.ndarray]],
            every: list[tuple[int, np.ndarray]] = ()) -> bytes:
    """XLine field 4 (events) for every row: metadata id, offset, duration, each (stat id < 128, values)
    of ``stats`` where its value is > 0 and each of ``every`` on every row."""
    n = metadata_id.size
    body, size = _pack([_const(n, b"\x08"), _varints(metadata_id), _const(n, b"\x10"), _varints(offset),
                        _const(n, b"\x18"), _varints(dur), *(_stat(k, v, v > 0) for k, v in stats),
                        *(_stat(k, v, np.ones(n, bool)) for k, v in every)])
    matrix, sizes = _pack([_const(n, b"\x22"), _varints(size), (body, size)])
    keep = np.arange(matrix.shape[1])[None, :] < sizes[:, None]
    return matrix[keep].tobytes()


def _field(number: int, payload: bytes) -> bytes:
    head, length = _varints(np.array([len(payload)], np.uint64))
    return bytes([number << 3 | 2]) + head[0, :length[0]].tobytes() + payload


def build(path: Path, events: int, chips: int = CHIPS, shape: str = "benchmark", host: str = "bench-host") -> dict:
    """The XSpace described above with about ``events`` events (ops and step markers); ``shape`` "xprof":
    ``XPROF_STEPS`` steps, each op of a step a distinct instruction of the program, a ``group_id`` stat
    (the step) on every event, ``device_offset_ps`` / ``device_duration_ps`` on every op and ``flops`` /
    ``bytes_accessed`` on the ops' metadata, as xprof's own files carry them. ``host``: the hostname it records
    (a folder's files each their own: files alike byte for byte are one profile given twice)."""
    xprof = shape == "xprof"
    if xprof:
        steps = XPROF_STEPS
        per_step = events // chips // steps - 1  # ops; each step has its marker
        per_chip, names_per_kind = per_step * steps, -(-per_step // len(PATTERN))
    else:
        per_step, names_per_kind = OPS_PER_STEP, NAMES_PER_KIND
        per_chip = events * OPS_PER_STEP // (OPS_PER_STEP + 1) // chips
        steps = -(-per_chip // OPS_PER_STEP)
    space = XSpaceWriter(host)
    ops = [(name.format(k), opcode, "f32[1024,512]") for name, opcode, _, _ in PATTERN for k in range(names_per_kind)]
    space.program(FINGERPRINT, "jit_ring_step", ops)
    durations = np.array([d for *_, d in PATTERN], np.int64) * 1000
    i = np.arange(per_chip)
    kind = (i % per_step if xprof else i) % len(PATTERN)
    dur = durations[kind] + (i * 7919) % 50_000
    offset = np.concatenate([[0], np.cumsum(dur + 20_000)[:-1]])
    stall = np.where(i % 4 == 0, 30_000, 0) * (kind < 2)
    collective = np.isin(kind, [2, 3, 4, 5])
    extras = {}  # plane name -> its XLA Ops line, as bytes of field 3 appended to the plane's message
    for chip in range(chips):
        plane = space.plane(f"/device:TPU:{chip}")
        plane.stat("peak_teraflops_per_second", 918.0)
        costs = {"flops": 2**30, "bytes_accessed": 2**21} if xprof else {}
        ids = np.array([plane.op(name.format(k), hlo_category=cat, program_id=Uint64(FINGERPRINT),
                                 symbol_id=j * names_per_kind + k + 1, **costs)
                        for j, (name, _, cat, _) in enumerate(PATTERN) for k in range(names_per_kind)], np.uint64)
        step_line = plane.line("Steps", 1_000)
        bounds = np.append(offset[::per_step], offset[-1] + dur[-1])
        for s in range(steps):
            step_line.event(plane.op(str(s)), int(bounds[s]), int(bounds[s + 1] - bounds[s]), step_num=s,
                            **({"group_id": s} if xprof else {}))
        name = (i % per_step) // len(PATTERN) if xprof else (i // len(PATTERN)) % NAMES_PER_KIND
        metadata = ids[kind * names_per_kind + name]
        stamp, stamp_len = _varints(np.array([1_000], np.uint64))
        header = b"\x08\x63" + _field(2, b"XLA Ops") + b"\x18" + stamp[0, :stamp_len[0]].tobytes()
        stats = [(plane.stat_id("dma_stall_duration_ps"), stall.astype(np.uint64))]
        if xprof:  # the step of every event, as xprof's grouping writes it, and each op's time on its chip's
            # clock (here 1 ns off the trace's start), as a TPU writes it
            every = [(plane.stat_id("group_id"), (i // per_step).astype(np.uint64)),
                     (plane.stat_id("device_offset_ps"), (offset + 1_000).astype(np.uint64)),
                     (plane.stat_id("device_duration_ps"), dur.astype(np.uint64))]
        else:  # a self time on every op, as real TPU ops carry it
            every = []
            stats.append((plane.stat_id("self_duration_ps"), dur.astype(np.uint64)))
        extras[plane.proto.name] = _field(3, header + _events(metadata, offset.astype(np.uint64), dur.astype(np.uint64),
                                                              stats, every))
    planes = list(space.proto.planes)
    del space.proto.planes[:]
    with path.open("wb") as f:
        for plane in planes:
            f.write(_field(1, plane.SerializeToString() + extras.get(plane.name, b"")))
        f.write(space.proto.SerializeToString())  # the hostnames after the planes, as a profiler's file has them
    return {"events": chips * (per_chip + steps), "bytes": path.stat().st_size,
            "collective_share": float(dur[collective].sum() / dur.sum())}


_XPROF = """import shutil, sys, tempfile
from pathlib import Path
from xprof.convert import raw_to_tool_data
with tempfile.TemporaryDirectory() as fresh:  # xprof caches its op stats beside the input
    copy = Path(fresh) / Path(sys.argv[1]).name
    shutil.copyfile(sys.argv[1], copy)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "op_profile", {})
print(len(data))
"""


# The read floor: perfkit's reader alone on every plane, one per worker as the command reads them (the largest
# first), its compiled loops and numpy: no pandas, no frame, no analysis. What any perfkit command on the file costs
# at least.
_READ_FLOOR = """
import sys
from pathlib import Path
from perfkit.common.workers import Pool, usable_cores
from perfkit.trace import xplane

def read(task):
    job, metadata = task
    return xplane.read_planes([job], metadata, 0, "", ()) is not None  # (no chip-clock column: none is read always)

host, jobs = xplane.planes(Path(sys.argv[1]), 0)
metadata = [job for job in jobs if job.name == "/host:metadata"]
planes = sorted((job for job in jobs if xplane.events_read(job.name)), key=lambda job: job.start - job.end)
with Pool(min(usable_cores(), len(planes))) as pool:
    assert all(pool.map(read, [(job, metadata) for job in planes]))
assert "pandas" not in sys.modules
"""


# The parse floor: protobuf's own parser (upb, in C) parsing every plane the reader reads, one per worker as the
# command reads them; nothing of the events reaches Python. What reading the file with the protobuf library costs.
_PARSE_FLOOR = """
import sys
from pathlib import Path
from perfkit.common.workers import Pool, usable_cores
from perfkit.trace import xplane
from perfkit.trace.protos import XPLANE

def parse(job):
    with job.path.open("rb") as file:
        file.seek(job.start)
        return len(XPLANE.FromString(file.read(job.end - job.start)).lines)

host, jobs = xplane.planes(Path(sys.argv[1]), 0)
planes = sorted((job for job in jobs if xplane.events_read(job.name)), key=lambda job: job.start - job.end)
with Pool(min(usable_cores(), len(planes))) as pool:
    assert all(pool.map(parse, planes))
assert "pandas" not in sys.modules
"""


# The command without trace.memory's allocator tuning (glibc's defaults and numpy's huge-page advice): what
# the tuning saves, in system time above all.
_UNTUNED = """
import sys
import perfkit.trace.memory as memory
memory.reuse_freed_memory = lambda: None
sys.argv = ["perfkit", *sys.argv[1:]]
from perfkit.cli import main
main()
"""


def timed(argv: list[str]) -> dict:
    """Wall seconds and peak RSS (MiB) of one process, from /usr/bin/time -v."""
    done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{argv[:4]} failed ({done.returncode}): {done.stderr[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    h, m, sec = (float(g or 0) for g in wall.groups())
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    user, system = (float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", done.stderr).group(1))
                    for kind in ("User", "System"))
    return {"wall_s": 3600 * h + 60 * m + sec, "rss_mib": rss / 1024, "cpu_s": user + system, "sys_s": system,
            "stdout": done.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=6_000_000, help="events in all (default 6M)")
    ap.add_argument("--files", type=int, default=1, help="split over this many files of CHIPS chips' share")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-xprof", action="store_true", help="time perfkit alone")
    ap.add_argument("--keep", type=Path, help="build into this folder and keep it")
    ap.add_argument("--untuned", action="store_true",
                    help="also time the command without trace.memory's allocator tuning, interleaved")
    ap.add_argument("--command", choices=["breakdown", "diff", "tail", "collectives", "export"], default="breakdown",
                    help="the perfkit trace command timed (diff: the input against itself, twice the events)")
    ap.add_argument("--shape", choices=["benchmark", "xprof"], default="benchmark",
                    help="the profile's shape: the benchmark's own, or xprof's (many steps, group_id on every event)")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="trace-bench-"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / f"host{k}.xplane.pb" for k in range(args.files)]
        built = [build(p, args.events // args.files, shape=args.shape, host=f"bench-host{k}" if k else "bench-host")
                 for k, p in enumerate(paths)]
        events, size = sum(b["events"] for b in built), sum(b["bytes"] for b in built)
        print(f"built {events:,} events ({args.shape} shape) in {len(paths)} file(s), {size / 1e6:.0f} MB, "
              f"{100 * built[0]['collective_share']:.0f}% of op time in collectives")
        os.sync()  # the built file on disk first: its writeback would otherwise share the cores with the timed runs
        compileall.compile_dir(PACKAGE, quiet=1)
        target = str(paths[0] if len(paths) == 1 else folder)
        command = [*PERFKIT, "trace", args.command, target] + [target] * (args.command == "diff")
        if args.command == "export":
            command += ["--perfetto", str(folder / "export.json")]
        anchor = not (args.no_xprof or len(paths) > 1 or args.command != "breakdown")
        runs, xprof, floors, numpy_floors, reads, parses, untuned = [], [], [], [], [], [], []
        for _ in range(args.repeats):  # interleaved: a slower hour slows every command alike
            runs.append(timed(command))
            if args.untuned:
                untuned.append(timed([sys.executable, "-c", _UNTUNED, *command[3:]]))
            if anchor:
                xprof.append(timed([sys.executable, "-c", _XPROF, str(paths[0])]))
                floors.append(timed([sys.executable, "-c", "import numpy, pandas"])["wall_s"])
                numpy_floors.append(timed([sys.executable, "-c", "import numpy"])["wall_s"])
                reads.append(timed([sys.executable, "-c", _READ_FLOOR, str(paths[0])]))
                parses.append(timed([sys.executable, "-c", _PARSE_FLOOR, str(paths[0])]))
        wall, cpu = (statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s"))
        rss = max(r["rss_mib"] for r in runs)
        each = ", ".join(f"{r['wall_s']:.2f}" for r in runs)
        print(f"perfkit trace {args.command}: {wall:.2f} s wall (median of {len(runs)}: {each}), {cpu:.2f} s CPU "
              f"(user + system, workers included), peak RSS {rss:.0f} MiB, {events / wall / 1e6:.1f} M events/s; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if untuned:
            u = {k: statistics.median(r[k] for r in untuned) for k in ("wall_s", "cpu_s", "sys_s")}
            print(f"without trace.memory's allocator tuning: {u['wall_s']:.2f} s wall, {u['cpu_s']:.2f} s CPU of which "
                  f"{u['sys_s']:.2f} s system (tuned: {statistics.median(r['sys_s'] for r in runs):.2f} s), peak RSS "
                  f"{max(r['rss_mib'] for r in untuned):.0f} MiB")
        if not anchor:
            print("xprof op_profile: not run" + (" (one file only)" if len(paths) > 1 else "")
                  + (" (the anchor of breakdown only)" if args.command != "breakdown" else ""))
            return
        x = {k: statistics.median(r[k] for r in xprof) for k in ("wall_s", "cpu_s")}
        x_rss = max(r["rss_mib"] for r in xprof)
        pairs = ", ".join(f"{b['wall_s'] / a['wall_s']:.1f}" for a, b in zip(runs, xprof))
        x_each = ", ".join(f"{r['wall_s']:.2f}" for r in xprof)
        print(f"xprof op_profile: {x['wall_s']:.2f} s wall (median of {len(xprof)}: {x_each}), {x['cpu_s']:.2f} s CPU, "
              f"peak RSS {x_rss:.0f} MiB; load average {os.getloadavg()[0]:.1f}")
        print(f"perfkit is {x['wall_s'] / wall:.1f}x faster in wall time (run by run: {pairs}), "
              f"{x['cpu_s'] / cpu:.1f}x in CPU time, with {x_rss / rss:.1f}x less peak memory")
        floor, numpy_import = statistics.median(floors), statistics.median(numpy_floors)
        print(f"import floor: Python importing numpy and pandas (what the command loads first) {floor:.2f} s; "
              f"at 20x xprof ({x['wall_s'] / 20:.2f} s) {x['wall_s'] / 20 - floor:.2f} s would be left to read "
              f"{size / 1e6:.0f} MB and analyse {events / 1e6:.0f}M events")
        read = {k: statistics.median(r[k] for r in reads) for k in ("wall_s", "cpu_s")}
        print(f"read floor: perfkit's reader alone on every plane, a worker per core (no pandas, no "
              f"analysis) {read['wall_s']:.2f} s wall, {read['cpu_s']:.2f} s CPU: {read['wall_s'] * 20 / x['wall_s']:.1f}x "
              f"what 20x xprof allows the whole command")
        parse = {k: statistics.median(r[k] for r in parses) for k in ("wall_s", "cpu_s")}
        print(f"parse floor: protobuf's C parser (upb) parsing the same planes, a worker per core, nothing handed to "
              f"Python {parse['wall_s']:.2f} s wall, {parse['cpu_s']:.2f} s CPU; with pandas imported (the import floor "
              f"less Python importing numpy alone, {numpy_import:.2f} s) {parse['wall_s'] + floor - numpy_import:.2f} s: "
              f"{(parse['wall_s'] + floor - numpy_import) * 20 / x['wall_s']:.1f}x what 20x xprof allows the whole command")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
