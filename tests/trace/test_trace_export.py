"""``perfkit.trace.export``: the Perfetto / Chrome JSON of an events frame, worked by hand."""

import json
import subprocess
import sys

import pandas as pd

from perfkit.trace.export import write_perfetto


def test_processes_and_threads_by_first_appearance(tmp_path):
    """A host row of rank 1 first, then rank 0's chip 3 on two lines, then rank 1's host again and rank 0's
    chip 3 on a third line: processes and threads are numbered as they first appear, the host named as
    such, and times are microseconds from the origin with six decimals."""
    rows = [(1, -1, "python", "step 0", "step", "step", 0, 1_500_000, 2_000_000),
            (0, 3, "XLA Ops", "fusion.1", "compute", "fusion", 0, 7, 1_000_001),
            (0, 3, "Steps", "0", "step", "step", 0, 0, 3_000_000),
            (1, -1, "python", "step 1", "step", "step", 1, 4_000_000, 5),
            (0, 3, "XLA Modules", "jit_f", "module", "module", -1, 2, 999_999_999)]
    events = pd.DataFrame(rows, columns=["rank", "device", "line", "name", "category", "kind", "step", "start_ps",
                                         "dur_ps"])
    events.attrs["origin_ns"] = 42
    path = tmp_path / "t.json"
    assert write_perfetto(events, path) == 5
    doc = json.loads(path.read_text())
    assert doc["otherData"] == {"origin_ns": 42}
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    assert [(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "process_name"] == [
        (0, "rank 1 host"), (1, "rank 0 device 3")]
    assert [(e["pid"], e["tid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"] == [
        (0, 0, "python"), (1, 1, "XLA Ops"), (1, 2, "Steps"), (1, 3, "XLA Modules")]
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [(e["pid"], e["tid"], e["name"], e["args"]["step"]) for e in ops] == [
        (0, 0, "step 0", 0), (1, 1, "fusion.1", 0), (1, 2, "0", 0), (0, 0, "step 1", 1), (1, 3, "jit_f", -1)]
    raw = path.read_text()
    assert '"ts":1.500000,"dur":2.000000' in raw and '"ts":0.000007,"dur":1.000001' in raw
    assert '"ts":0.000002,"dur":999.999999' in raw and '"ts":4.000000,"dur":0.000005' in raw


WORKERS_SCRIPT = """
import os, sys
import numpy as np, pandas as pd
from perfkit.trace import export
os.sched_getaffinity = lambda pid: {0, 1, 2}  # three cores: this process and two workers, whatever the machine
export.CHUNK = 4
n = 103  # 26 chunks, the last one short
rows = {"rank": np.arange(n) % 2, "device": np.where(np.arange(n) % 3, 1, -1),
        "line": [f"line {i % 5}" for i in range(n)], "name": [f'op "{i % 7}"' for i in range(n)], "category": ["compute", "ici"] * 51 + ["step"],
        "kind": [f"k{i % 4}" for i in range(n)], "step": np.arange(n) // 10, "start_ps": np.arange(n) * 1_234_567,
        "dur_ps": np.arange(n) * 89 + 1}
events = pd.DataFrame(rows)
for c in ("line", "name", "category", "kind"):
    events[c] = events[c].astype("category")
chunk = export._chunk
def logged(columns, at):
    print(os.getpid(), file=open(sys.argv[3], "a"))
    return chunk(columns, at)
export._chunk = logged
export.PARALLEL_EVENTS = 10**9
export.write_perfetto(events, sys.argv[1])
export.PARALLEL_EVENTS = 1
export.write_perfetto(events, sys.argv[2])
print(os.getpid())
"""


def test_chunks_formatted_by_workers_are_the_bytes_formatted_here(tmp_path):
    """A frame of 26 chunks written by this process alone and by it and two forked workers (in a fresh
    process: fork is safe only from a single-threaded one): the same bytes, the workers' chunks included."""
    here, shared, log = tmp_path / "here.json", tmp_path / "shared.json", tmp_path / "pids"
    res = subprocess.run([sys.executable, "-c", WORKERS_SCRIPT, str(here), str(shared), str(log)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    parent = res.stdout.split()[-1]
    pids = log.read_text().split()
    assert pids[:26] == [parent] * 26  # the first file: every chunk here
    # then every third chunk here and the others in the workers: which worker takes which is the scheduler's
    # choice (on a loaded machine one can take them all before the other starts)
    theirs = [pid for pid in pids[26:] if pid != parent]
    assert pids[26:].count(parent) == 9 and len(theirs) == 17 and 1 <= len(set(theirs)) <= 2
    assert shared.read_bytes() == here.read_bytes()
    # the 103 events; 4 processes (rank i % 2, host or not), each named and sorted; 20 threads (and line i % 5)
    assert len(json.loads(here.read_text())["traceEvents"]) == 103 + 2 * 4 + 20
