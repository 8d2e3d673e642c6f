"""All ranks and chips of an events frame as one Chrome / Perfetto JSON trace: a process per (rank,
device) ("rank 0 TPU 3", "rank 1 host"), a thread per line, complete ("X") events in microseconds from
the frame's origin. Written in chunks, one formatted string per event, never a dict per event."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

CHUNK = 200_000


def _literals(column: pd.Series) -> np.ndarray:
    """Each row's value as a JSON string literal (an object array: each category escaped once, not per
    event)."""
    cat = column.astype("category")
    return np.array([json.dumps(str(v)) for v in cat.cat.categories] + ['""'], object)[cat.cat.codes.to_numpy()]


def write_perfetto(events: pd.DataFrame, path: str | Path) -> int:
    """Write ``events`` to ``path``; returns the number of events written."""
    path = Path(path)
    process = pd.factorize(pd.MultiIndex.from_arrays([events["rank"], events["device"]]))
    pid, procs = process[0], process[1]
    line = events["line"].astype("category")
    tid = pd.factorize(pd.MultiIndex.from_arrays([pid, line.cat.codes.to_numpy()]))
    names, cats, kinds = (_literals(events[c]) for c in ("name", "category", "kind"))
    steps = events["step"].to_numpy()
    ts = events["start_ps"].to_numpy() / 1e6
    dur = events["dur_ps"].to_numpy() / 1e6
    with path.open("w") as out:
        out.write('{"displayTimeUnit": "ns", "otherData": {"origin_ns": %d}, "traceEvents": [\n'
                  % events.attrs.get("origin_ns", 0))
        meta = [{"ph": "M", "name": "process_name", "pid": i,
                 "args": {"name": f"rank {r} " + (f"device {d}" if d >= 0 else "host")}} for i, (r, d) in enumerate(procs)]
        meta += [{"ph": "M", "name": "process_sort_index", "pid": i, "args": {"sort_index": i}} for i in range(len(procs))]
        meta += [{"ph": "M", "name": "thread_name", "pid": int(p), "tid": i,
                  "args": {"name": str(line.cat.categories[c]) if c >= 0 else ""}} for i, (p, c) in enumerate(tid[1])]
        out.write(",\n".join(json.dumps(m) for m in meta))
        columns = (pid, tid[0], ts, dur, names, cats, kinds, steps)
        for at in range(0, len(events), CHUNK):
            rows = zip(*(c[at:at + CHUNK].tolist() for c in columns))  # Python values: 2.5x faster to format
            out.write(",\n" + ",\n".join(
                f'{{"ph":"X","pid":{p},"tid":{t},"ts":{start:.6f},"dur":{d:.6f},"name":{name},"cat":{cat},'
                f'"args":{{"kind":{kind},"step":{step}}}}}' for p, t, start, d, name, cat, kind, step in rows))
        out.write("\n]}\n")
    return len(events)
