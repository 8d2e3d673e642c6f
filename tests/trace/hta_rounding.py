"""HTA 0.5.0's default rounding of a Kineto trace (each event's start up, end down, to whole us), by a plain reading
of the file: the device ops it moves, the time it takes off their union, and the note perfkit gives of such a
trace."""

import gzip
import json
import math
from decimal import Decimal
from pathlib import Path

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events")


def _events(path: Path) -> list[dict]:
    """The trace's events, read with Decimal from the JSON."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)
    return doc if isinstance(doc, list) else doc["traceEvents"]  # (a 2020 trace: the events alone)


def _device_events(path: Path, drop_last: bool = False) -> list[dict]:
    """The device events (MTIA's: those with a stream, as HTA counts them); with ``drop_last``, those of a trace
    of two or more host ProfilerSteps less the ones launched in its last (or, launched in none, starting at or after
    its start)."""
    events = _events(path)
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS
           and (e["cat"] != "mtia_ccp_events" or "stream" in e.get("args", {}))]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X"
                   and str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation")
    if not drop_last or len(steps) < 2:
        return ops
    last = steps[-1]
    runtime = ("_runtime", "Runtime", "cuda_driver")
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("ph") == "X"
              and str(e.get("cat", "")).endswith(runtime) and "correlation" in e.get("args", {})}

    def kept(op):
        at = launch.get(op.get("args", {}).get("correlation"))
        if at is not None and any(s <= at < t for s, t in steps):
            return not last[0] <= at < last[1]
        return op["ts"] < last[0]
    return [e for e in ops if kept(e)]


def between_us(path: Path) -> int:
    """The device events whose start or end has digits under the us."""
    return sum(e["ts"] % 1 != 0 or (e["ts"] + e["dur"]) % 1 != 0 for e in _device_events(path))


def _union(intervals: list[tuple]) -> Decimal:
    """The length [start, end) intervals cover, merged one by one in order of start."""
    total, reach = Decimal(0), None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def rounded_off_us(path: Path, drop_last: bool = False) -> Decimal:
    """The us HTA's rounding takes off the device events' union (each device's: ``args.device``, else the pid),
    the events it rounds to nothing or less left out; with ``drop_last``, of the events left with the last step
    dropped."""
    by_device: dict = {}
    for e in _device_events(path, drop_last):
        by_device.setdefault(e.get("args", {}).get("device", e.get("pid")), []).append((e["ts"], e["ts"] + e["dur"]))
    rounded = {d: [(math.ceil(s), math.floor(t)) for s, t in spans] for d, spans in by_device.items()}
    return sum(_union(spans) - _union([(s, t) for s, t in rounded[d] if t > s]) for d, spans in by_device.items())


def rounding_notes(path: Path) -> list[str]:
    """perfkit's note of the trace at ``path`` where HTA's rounding moves a device op of it; none where none moves."""
    ops = between_us(path)
    if not ops:
        return []
    moved = f"{ops} device op{' starts or ends' if ops == 1 else 's start or end'}"
    every, dropped = rounded_off_us(path), rounded_off_us(path, drop_last=True)
    windows = "" if every == dropped else (f" with every step kept, {dropped:.3f} us with the last step dropped (the "
                                          "ops launched in it left out, as by HTA's default)")
    return [f"{path}: {moved} between whole us: HTA 0.5.0 rounds each event inward to whole us (start up, end down) by "
            f"default, which takes {every:.3f} us off the time the device ops run (their union: HTA's "
            "compute plus non-compute time of this trace, which its idle time gains less the under 2 us its kernel "
            f"time loses at its ends){windows}; with HTA_DISABLE_NS_ROUNDING=1 it reads them unrounded, as perfkit "
            "does"]
