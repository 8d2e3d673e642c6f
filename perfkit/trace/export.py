"""All ranks and chips of an events frame as one Chrome / Perfetto JSON trace: a process per (rank,
device) ("rank 0 TPU 3", "rank 1 host"), a thread per line, complete ("X") events in microseconds from
the frame's origin. Written in chunks, one formatted string per event, never a dict per event."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from perfkit.trace.events import chip_key, first_rows

# Events formatted at a time: 200k took 4x the system time on 6M events (their strings' memory mapped afresh
# for each chunk), 50k as little as 20k.
CHUNK = 50_000


def _literals(column: pd.Series) -> np.ndarray:
    """Each row's value as a JSON string literal (an object array: each category escaped once, not per
    event)."""
    cat = column.astype("category")
    return np.array([json.dumps(str(v)) for v in cat.cat.categories] + ['""'], object)[cat.cat.codes.to_numpy()]


def write_perfetto(events: pd.DataFrame, path: str | Path) -> int:
    """Write ``events`` to ``path``; returns the number of events written."""
    path = Path(path)
    # processes and threads by first appearance, each from one int64 key a row (a MultiIndex of the pairs
    # makes a tuple a row: 10x slower), named after the first row of each
    rank, device = events["rank"].to_numpy(), events["device"].to_numpy()
    pid, chips = pd.factorize(chip_key(rank, device))
    line = events["line"].astype("category")
    codes = line.cat.codes.to_numpy()
    tid, threads = pd.factorize(pid * (len(line.cat.categories) + 1) + codes + 1)
    proc_row, thread_row = first_rows(pid, len(chips)), first_rows(tid, len(threads))
    names, cats, kinds = (_literals(events[c]) for c in ("name", "category", "kind"))
    steps = events["step"].to_numpy()
    ts = events["start_ps"].to_numpy() / 1e6
    dur = events["dur_ps"].to_numpy() / 1e6
    with path.open("wb") as file:
        # the text is ASCII (json escapes the rest): encoded here, in one step a chunk, where a text file's
        # encoder took 7x longer
        def write(text: str) -> None:
            file.write(text.encode())

        write('{"displayTimeUnit": "ns", "otherData": {"origin_ns": %d}, "traceEvents": [\n'
              % events.attrs.get("origin_ns", 0))
        meta = [{"ph": "M", "name": "process_name", "pid": i,
                 "args": {"name": f"rank {r} " + (f"device {d}" if d >= 0 else "host")}}
                for i, (r, d) in enumerate(zip(rank[proc_row].tolist(), device[proc_row].tolist()))]
        meta += [{"ph": "M", "name": "process_sort_index", "pid": i, "args": {"sort_index": i}} for i in range(len(chips))]
        meta += [{"ph": "M", "name": "thread_name", "pid": p, "tid": i,
                  "args": {"name": str(line.cat.categories[c]) if c >= 0 else ""}}
                 for i, (p, c) in enumerate(zip(pid[thread_row].tolist(), codes[thread_row].tolist()))]
        write(",\n".join(json.dumps(m) for m in meta))
        columns = (pid, tid, ts, dur, names, cats, kinds, steps)
        for at in range(0, len(events), CHUNK):
            rows = zip(*(c[at:at + CHUNK].tolist() for c in columns))  # Python values: 2.5x faster to format
            write(",\n" + ",\n".join(
                f'{{"ph":"X","pid":{p},"tid":{t},"ts":{start:.6f},"dur":{d:.6f},"name":{name},"cat":{cat},'
                f'"args":{{"kind":{kind},"step":{step}}}}}' for p, t, start, d, name, cat, kind, step in rows))
        write("\n]}\n")
    return len(events)
