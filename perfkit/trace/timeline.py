"""Nesting of device ops on one line (a ``while`` around its body, a CPU thunk around what it calls), and
the step spans ops are measured against. Shared by ``breakdown`` and ``diff``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from perfkit.trace.events import device_ops


def parents(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For ops given as (n,) arrays (``group``: int64 id of the line they share; ``start`` < ``end``), the
    index of the op each one runs inside (its innermost enclosing op on the same line), -1 for top-level
    ops. Intervals on a line are taken as properly nested; a partial overlap counts as nesting."""
    n = start.size
    parent = np.full(n, -1, np.int64)
    order = np.lexsort((-end, start, group))  # outer op first when two start together
    g, s, e = group[order], start[order], end[order]
    same = g[1:] == g[:-1]
    if not (same & (e[:-1] > s[1:])).any():  # nothing overlaps: the common case on TPU and GPU streams
        return parent
    # depth = ops still open at each start: a sweep over starts (+1) and ends (-1), ends first at ties
    times = np.concatenate([s, e])
    kind = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])
    sweep = np.lexsort((kind, times, np.concatenate([g, g])))
    open_ops = np.cumsum(np.where(kind[sweep] == 1, 1, -1))
    depth = np.empty(n, np.int64)
    starts_at = sweep < n
    depth[sweep[starts_at]] = open_ops[starts_at] - 1
    # The parent of a depth-d op is the last depth-(d-1) op before it in start order (same line: an op in
    # between would start inside the parent and so be deeper).
    for d in range(1, int(depth.max(initial=0)) + 1):
        child = np.flatnonzero(depth == d)
        above = np.flatnonzero(depth == d - 1)
        found = above[np.searchsorted(above, child) - 1]
        parent[order[child]] = order[found]
    return parent


def spans(ops: pd.DataFrame, markers: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device, step) measured: ``start_ps``, ``end_ps``.

    ``ops``: device ops (rank, device, step, start_ps, dur_ps); ``markers``: step markers (rank, device,
    step, start_ps, dur_ps; device -1 holds for every device of the rank). A step's span on a device
    runs from its marker's start to the later of the marker's end and the end of the step's last op
    there, so an idle step still has a span. A device without markers gets one span over all its ops,
    step -1."""
    keys = ["rank", "device", "step"]
    devices = ops[["rank", "device"]].drop_duplicates()
    win = markers.assign(end_ps=markers["start_ps"] + markers["dur_ps"])[keys + ["start_ps", "end_ps"]]
    own = win[win["device"] >= 0].merge(devices, on=["rank", "device"])
    has_own = pd.MultiIndex.from_frame(own[["rank", "device"]])
    shared = win[win["device"] < 0].drop(columns="device").merge(devices, on="rank")
    shared = shared[~pd.MultiIndex.from_frame(shared[["rank", "device"]]).isin(has_own)]
    windows = pd.concat([own, shared[own.columns]]).groupby(keys).agg(start_ps=("start_ps", "min"),
                                                                      end_ps=("end_ps", "max"))
    op_end = (ops.assign(end_ps=ops["start_ps"] + ops["dur_ps"]).groupby(keys)
              .agg(op_start=("start_ps", "min"), op_end=("end_ps", "max")))
    measured = windows.join(op_end, how="left")
    measured["end_ps"] = np.maximum(measured["end_ps"], measured["op_end"].fillna(0)).astype(np.int64)
    covered = pd.MultiIndex.from_frame(windows.reset_index()[["rank", "device"]]).unique()
    whole = op_end.reset_index()
    whole = whole[(whole["step"] == -1) & ~pd.MultiIndex.from_frame(whole[["rank", "device"]]).isin(covered)]
    whole = whole.rename(columns={"op_start": "start_ps"}).assign(end_ps=whole["op_end"]).set_index(keys)
    out = pd.concat([measured[["start_ps", "end_ps"]], whole[["start_ps", "end_ps"]]]).astype(np.int64)
    return out.sort_index().reset_index()


class Measured(NamedTuple):
    """Device ops placed in the spans they are measured in."""

    spans: pd.DataFrame  # rank, device, step, start_ps, end_ps (``spans``)
    ops: pd.DataFrame    # device ops inside a span, plus: span (row of ``spans``), end_ps (cut at the span's
    #                      end), parent (row of ``ops`` it runs inside, -1), self_ps (end - start - children)


def measured(events: pd.DataFrame) -> Measured:
    """The device ops of ``events`` with their spans, nesting and exclusive (self) time."""
    ops = device_ops(events)
    ops = ops[ops["dur_ps"] > 0]
    markers = events.loc[events["category"] == "step", ["rank", "device", "step", "start_ps", "dur_ps"]]
    span_rows = spans(ops, markers)
    keys = ["rank", "device", "step"]
    ops = ops.merge(span_rows[keys].assign(span=np.arange(len(span_rows))), on=keys)
    g = ops["span"].to_numpy(np.int64)
    start = ops["start_ps"].to_numpy(np.int64)
    end = np.minimum(start + ops["dur_ps"].to_numpy(np.int64), span_rows["end_ps"].to_numpy()[g])
    line = ops["line"].cat.codes.to_numpy(np.int64)
    parent = parents(g * (int(line.max(initial=0)) + 1) + line, start, end)
    child = np.flatnonzero(parent >= 0)
    inner = np.bincount(parent[child], weights=(np.minimum(end[child], end[parent[child]]) - start[child]),
                        minlength=len(ops))
    ops = ops.assign(end_ps=end, parent=parent, self_ps=(end - start) - inner.astype(np.int64))
    return Measured(span_rows, ops)
