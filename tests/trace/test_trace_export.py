"""``perfkit.trace.export``: the Perfetto / Chrome JSON of an events frame, worked by hand."""

import json

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
