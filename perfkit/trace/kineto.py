"""PyTorch Kineto chrome-trace JSON (``.json`` or ``.json.gz``) into columnar events.

GPU events (``cat`` kernel, gpu_memcpy, gpu_memset) are device ops of ``args.device`` on line
``stream <tid>``; ``ProfilerStep#N`` annotations are step markers (``gpu_user_annotation`` ones per
device, ``user_annotation`` ones for the whole rank); everything else is host activity. The rank is
``distributedInfo.rank`` when the file has it. A trace with no GPU events (CPU / gloo) uses its CPU ops
instead (device 0): ``c10d::`` ops and gloo's ``gloo:*`` spans are its ICI. Timestamps are float microseconds in the file,
read as float64 (sub-microsecond digits of epoch-sized values are lost).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from perfkit.errors import BadInput
from perfkit.trace.programs import Programs
from perfkit.trace.raw import ROLES, RawTrace, StringTable

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
STEP_PREFIX = "ProfilerStep#"


MAX_JSON_BYTES = 2 << 30  # inflated text of a .json.gz; past it the file is refused (a gzip bomb)


def inflate(raw: bytes, path: Path) -> bytes:
    """A gzip file's text (every member), refused as soon as it passes ``MAX_JSON_BYTES``."""
    parts, size = [], 0
    while raw:
        member, data = zlib.decompressobj(wbits=31), raw
        while not member.eof:
            piece = member.decompress(data, 1 << 24)
            size += len(piece)
            if size > MAX_JSON_BYTES:
                raise BadInput(f"inflates to more than {MAX_JSON_BYTES:,} bytes (a gzip bomb?)", path=path)
            parts.append(piece)
            data = member.unconsumed_tail
            if not data and not piece:
                raise EOFError("the gzip stream ends before its end marker")
        raw = member.unused_data
    return b"".join(parts)


def load_json(path: Path) -> dict:
    """A chrome-trace JSON document, gzip or not; BadInput when truncated or not a trace."""
    try:
        raw = path.read_bytes()
        text = inflate(raw, path) if raw[:2] == b"\x1f\x8b" else raw
        doc = json.loads(text)
    except RecursionError:
        raise BadInput("not a readable chrome-trace JSON (nested too deep)", path=path) from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"not a readable chrome-trace JSON ({type(exc).__name__}: {str(exc)[:80]})",
                       path=path) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise BadInput("not a Kineto / chrome trace: no traceEvents list", path=path)
    return doc


def read(path: Path, rank: int) -> RawTrace:
    doc = load_json(path)
    rank = int((doc.get("distributedInfo") or {}).get("rank", rank))
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    if not events:
        raise BadInput("no complete ('X') events in traceEvents", path=path)
    cats = [e.get("cat", "") for e in events]
    names = [str(e.get("name", "")) for e in events]
    try:
        ts_us = np.array([e["ts"] for e in events], np.float64)
        dur_us = np.array([e.get("dur", 0) for e in events], np.float64)
    except (TypeError, ValueError):
        raise BadInput("an event's ts or dur is not a number", path=path, field="traceEvents") from None
    on_gpu = np.array([c in DEVICE_CATS for c in cats], bool)
    is_step = np.array([n.startswith(STEP_PREFIX) for n in names], bool)
    role = np.full(len(events), ROLES["host"], np.int8)
    device = np.full(len(events), -1, np.int32)
    if on_gpu.any():
        role[on_gpu] = ROLES["op"]
        gpu_step = is_step & np.array([c == "gpu_user_annotation" for c in cats], bool)
        dev_of = [e.get("args", {}).get("device", e.get("pid")) for e in events]
        for i in np.flatnonzero(on_gpu | gpu_step):
            device[i] = int(dev_of[i]) if str(dev_of[i]).isdigit() else 0
    else:  # CPU-only trace: its CPU ops, and gloo's collective spans (on gloo's threads), stand in for device ops
        role[np.array([c == "cpu_op" or (c == "user_annotation" and n.startswith("gloo:"))
                       for c, n in zip(cats, names)], bool)] = ROLES["op"]
        device[role == ROLES["op"]] = 0
    role[is_step] = ROLES["step"]
    origin_us = float(np.floor(ts_us.min()))
    strings = StringTable()
    tids = [f"stream {e.get('tid')}" if g else f"{e.get('pid')}/{e.get('tid')}" for e, g in zip(events, on_gpu)]
    lines = StringTable()
    n = len(events)
    columns = {
        "name": strings.codes(names), "line": lines.codes(tids), "device": device, "role": role,
        "start_ps": np.rint((ts_us - origin_us) * 1e6).astype(np.int64),
        "dur_ps": np.rint(np.maximum(dur_us, 0) * 1e6).astype(np.int64),
        "step": np.full(n, -1, np.int32), "program_id": np.zeros(n, np.uint64),
        "program_known": np.zeros(n, bool), "stall_ps": np.zeros(n, np.int64),
        "hlo_op": np.full(n, -1, np.int32), "hlo_module": np.full(n, -1, np.int32),
        "hlo_category": np.full(n, -1, np.int32),
    }
    # ns as an int: epoch microseconds * 1000 as a float is past 2**53 (off by up to 128 ns)
    return RawTrace(path=path, rank=rank, host=path.name.split(".")[0], origin_ns=int(origin_us) * 1000, columns=columns,
                    strings=strings, lines=lines.values, programs=Programs({}, path))
