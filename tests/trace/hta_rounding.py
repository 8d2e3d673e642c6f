"""HTA 0.5.0's default rounding of a Kineto trace (each event's start up, end down, to whole us), by a plain reading
of the file: the device ops it moves, and the note perfkit gives of such a trace."""

import gzip
import json
from decimal import Decimal
from pathlib import Path

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events")


def between_us(path: Path) -> int:
    """The device events (MTIA's: those with a stream, as HTA counts them) whose start or end has digits under the
    us, read with Decimal from the JSON."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)
    events = doc if isinstance(doc, list) else doc["traceEvents"]  # (a 2020 trace: the events alone)
    return sum(e["ts"] % 1 != 0 or (e["ts"] + e["dur"]) % 1 != 0 for e in events
               if e.get("ph") == "X" and e.get("cat") in GPU_CATS
               and (e["cat"] != "mtia_ccp_events" or "stream" in e.get("args", {})))


def rounding_notes(path: Path) -> list[str]:
    """perfkit's note of the trace at ``path`` where HTA's rounding moves a device op of it; none where none moves."""
    ops = between_us(path)
    if not ops:
        return []
    moved = f"{ops} device op{' starts or ends' if ops == 1 else 's start or end'}"
    return [f"{path}: {moved} between whole us: HTA 0.5.0 rounds each event inward to whole us (start up, end down) by "
            "default, which moves its figures of this trace; with HTA_DISABLE_NS_ROUNDING=1 it reads them unrounded, "
            "as perfkit does"]
