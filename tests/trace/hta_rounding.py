"""HTA 0.5.0's default rounding of a Kineto trace (each event's start up, end down, to whole us), by a plain reading
of the file: the device ops it moves, the time it takes off their union, and the note perfkit gives of such a
trace."""

import gzip
import json
import math
from decimal import Decimal
from pathlib import Path

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events")


def _device_events(path: Path) -> list[dict]:
    """The device events (MTIA's: those with a stream, as HTA counts them), read with Decimal from the JSON."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)
    events = doc if isinstance(doc, list) else doc["traceEvents"]  # (a 2020 trace: the events alone)
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS
            and (e["cat"] != "mtia_ccp_events" or "stream" in e.get("args", {}))]


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


def rounded_off_us(path: Path) -> Decimal:
    """The us HTA's rounding takes off the device events' union (each device's: ``args.device``, else the pid),
    the events it rounds to nothing or less left out."""
    by_device: dict = {}
    for e in _device_events(path):
        by_device.setdefault(e.get("args", {}).get("device", e.get("pid")), []).append((e["ts"], e["ts"] + e["dur"]))
    rounded = {d: [(math.ceil(s), math.floor(t)) for s, t in spans] for d, spans in by_device.items()}
    return sum(_union(spans) - _union([(s, t) for s, t in rounded[d] if t > s]) for d, spans in by_device.items())


def rounding_notes(path: Path) -> list[str]:
    """perfkit's note of the trace at ``path`` where HTA's rounding moves a device op of it; none where none moves."""
    ops = between_us(path)
    if not ops:
        return []
    moved = f"{ops} device op{' starts or ends' if ops == 1 else 's start or end'}"
    return [f"{path}: {moved} between whole us: HTA 0.5.0 rounds each event inward to whole us (start up, end down) by "
            f"default, which takes {rounded_off_us(path):.3f} us off the time the device ops run (their union: HTA's "
            "compute plus non-compute time of this trace, which its idle time gains less the under 2 us its kernel "
            "time loses at its ends); with HTA_DISABLE_NS_ROUNDING=1 it reads them unrounded, as perfkit does"]
