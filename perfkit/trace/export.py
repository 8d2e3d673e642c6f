"""All ranks and chips of an events frame as one Chrome / Perfetto JSON trace: a process per (rank, device)
("rank 0 TPU 3", "rank 1 host"), a thread per line, complete ("X") events in microseconds from the frame's
origin; a top-level key (``MARKER``) says it is perfkit's export. Written in chunks, one formatted string per
event, never a dict per event; the chunks of a large frame are formatted by worker processes
(``common.workers.Pool``), one per core, and written here in order."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import deque
from pathlib import Path

import numpy as np
import pandas as pd

from perfkit.common.workers import Pool, may_start_workers, usable_cores
from perfkit.trace.events import chip_key, first_rows

# Events formatted at a time: small enough that a chunk's strings reuse the memory the last one freed (large
# chunks' strings are fresh pages each time: benchmarks/trace_breakdown.py --command export).
CHUNK = 50_000
PARALLEL_EVENTS = 1_000_000  # below this, formatting here is sooner done than starting workers
# A top-level key of the export's own (the Chrome trace format keeps such keys as the trace's metadata), written
# first after displayTimeUnit: how perfkit knows its export, a view of the traces it merged, when given it to analyse
# (``is_export``: by the key and its value, wherever a copy written again holds them)
MARKER = "perfkit_export"
_HEAD = '{"displayTimeUnit": "ns", "%s": "perfkit trace export --perfetto", ' % MARKER
# the marker as a key and its value wherever a JSON writer puts them (indented, keys sorted, after the events); in
# a string (an event's name) its quotes would be escaped, so no such text there matches
_MARKED = re.compile(rb'"%s"\s*:\s*"perfkit trace export --perfetto"' % MARKER.encode())
_SCAN = 1 << 20  # bytes of text read at a time
_OVERLAP = 1 << 12  # the end of each read kept before the next: a match across the two, its spaces within this


def _literals(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's value as a JSON string literal: the literals (an object array: each category escaped
    once, not per event, "" last) and each row's index into them (-1: missing)."""
    cat = column.astype("category")
    return np.array([json.dumps(str(v)) for v in cat.cat.categories] + ['""'], object), cat.cat.codes.to_numpy()


def write_perfetto(events: pd.DataFrame, path: str | Path) -> int:
    """Write ``events`` to ``path`` (its folder made as needed, as for every file perfkit writes); returns the
    number of events written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # processes and threads by first appearance, each from one int64 key a row (a MultiIndex of the pairs
    # makes a tuple a row), named after the first row of each
    rank, device = events["rank"].to_numpy(), events["device"].to_numpy()
    pid, chips = pd.factorize(chip_key(rank, device))
    line = events["line"].astype("category")
    codes = line.cat.codes.to_numpy()
    tid, threads = pd.factorize(pid * (len(line.cat.categories) + 1) + codes + 1)
    proc_row, thread_row = first_rows(pid, len(chips)), first_rows(tid, len(threads))
    texts = [_literals(events[c]) for c in ("name", "category", "kind")]
    with path.open("wb") as file:
        # the text is ASCII (json escapes the rest): encoded here, in one step a chunk, where a text file's
        # encoder goes a piece at a time (benchmarks/trace_breakdown.py --command export)
        def write(text: str) -> None:
            file.write(text.encode())

        write(_HEAD + '"otherData": {"origin_ns": %d}, "traceEvents": [\n' % events.attrs.get("origin_ns", 0))
        meta = [{"ph": "M", "name": "process_name", "pid": i,
                 "args": {"name": f"rank {r} " + (f"device {d}" if d >= 0 else "host")}}
                for i, (r, d) in enumerate(zip(rank[proc_row].tolist(), device[proc_row].tolist()))]
        meta += [{"ph": "M", "name": "process_sort_index", "pid": i, "args": {"sort_index": i}} for i in range(len(chips))]
        meta += [{"ph": "M", "name": "thread_name", "pid": p, "tid": i,
                  "args": {"name": str(line.cat.categories[c]) if c >= 0 else ""}}
                 for i, (p, c) in enumerate(zip(pid[thread_row].tolist(), codes[thread_row].tolist()))]
        write(",\n".join(json.dumps(m) for m in meta))
        columns = (pid, tid, events["start_ps"].to_numpy(), events["dur_ps"].to_numpy(), texts,
                   events["step"].to_numpy())
        _write_chunks(file, columns, range(0, len(events), CHUNK))
        write("\n]}\n")
    return len(events)


def is_export(path: Path) -> bool:
    """Whether the file at ``path`` (gzipped or not) is a ``write_perfetto`` export, or one loaded and written again
    (its keys reordered, indented): the marker's key and value in its text. Read only where a trace held no
    device ops, so normal traces are never read twice; the text is scanned a piece at a time, never parsed."""
    try:
        with path.open("rb") as file:
            zipped = file.read(2) == b"\x1f\x8b"
        with gzip.open(path) if zipped else path.open("rb") as file:
            kept = b""
            while piece := file.read(_SCAN):
                if _MARKED.search(kept + piece):
                    return True
                kept = piece[-_OVERLAP:]
    except (OSError, EOFError, zlib.error):  # a damaged gzip: no export perfkit wrote
        return False
    return False


def _write_chunks(file, columns: tuple, chunks: range) -> None:
    """``_chunk`` of each of ``chunks`` written in order: a large frame's formatted by this process and
    (cores - 1) workers (each with its own copy of ``columns``), chunk by chunk in turn, this one taking
    every cores-th (its chunks need no copy through a pipe), at most two chunks a worker ahead of the
    writing."""
    cores = usable_cores()
    if cores < 2 or len(chunks) * CHUNK < PARALLEL_EVENTS or not may_start_workers():
        for at in chunks:
            file.write(_chunk(columns, at))
        return
    with Pool(cores - 1, shared=columns) as pool:
        ahead: deque = deque()
        theirs = (at for k, at in enumerate(chunks) if k % cores)
        for k, at in enumerate(chunks):
            while len(ahead) < 2 * (cores - 1) and (nxt := next(theirs, None)) is not None:
                ahead.append(pool.submit(_chunk, nxt))
            file.write(_chunk(columns, at) if k % cores == 0 else pool.result(ahead.popleft()))


def _chunk(columns: tuple, at: int) -> bytes:
    """Events ``at:at + CHUNK`` of ``columns``, formatted, each after a separator. Each chunk takes its
    times in microseconds and its texts itself: the whole frame's would be made serially, before the
    first chunk, in six arrays as long as the frame."""
    pid, tid, start_ps, dur_ps, texts, steps = columns
    part = slice(at, at + CHUNK)
    rows = zip(pid[part].tolist(), tid[part].tolist(), (start_ps[part] / 1e6).tolist(), (dur_ps[part] / 1e6).tolist(),
               *(literals[codes[part]].tolist() for literals, codes in texts), steps[part].tolist())
    return (",\n" + ",\n".join(
        f'{{"ph":"X","pid":{p},"tid":{t},"ts":{start:.6f},"dur":{d:.6f},"name":{name},"cat":{cat},'
        f'"args":{{"kind":{kind},"step":{step}}}}}' for p, t, start, d, name, cat, kind, step in rows)).encode()
