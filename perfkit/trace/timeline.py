"""Device ops laid out on their lines: the spans (steps, or a device's whole trace) they are measured in,
their nesting on one line (a ``while`` around its body, a CPU thunk around what it calls), and the
disjoint pieces of a line's time each op owns. Shared by ``breakdown`` and ``diff``.

Built for profiles of millions of ops: it reads the frame's columns as numpy arrays (no copy of the
frame through a boolean mask) and uses that a reader delivers each line's ops in time order, properly
nested, so every step is a linear pass; it sorts only where that does not hold (then only those ops).
"""

from __future__ import annotations

import re
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from perfkit.errors import DefinitionNote
from perfkit.trace import clocks
from perfkit.trace.classify import CATEGORIES
from perfkit.trace.events import chip_frame, chip_key, run_starts

# GPU stream lines as the readers name them: Kineto "stream <tid>", xplane "Stream #<k>(...)"
_GPU_STREAM = re.compile(r"stream \d+$|Stream #\d+")
COLLECTIVE_CLASSES = (CATEGORIES.index("ici"), CATEGORIES.index("dcn"))  # classes of collectives (communication)
_IS_COLLECTIVE = np.isin(np.arange(len(CATEGORIES)), COLLECTIVE_CLASSES).astype(np.int8)  # by class
WINDOWS = ("step", "trace")  # spans: each step marker's window, or a device's first to last op
LAST_STEP_DROPPED = "/last-step-dropped"  # a window's suffix: ops from the last step marker's start on not measured
COLUMNS = ("rank", "device", "line", "kind", "category", "start_ps", "dur_ps", "step", "stall_ps",
           "launch_step")  # all layout reads


def parents(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For ops given as (n,) arrays (``group``: int64 id of the line they share; ``start`` < ``end``), the
    index of the op each one runs inside (its innermost enclosing op on the same line), -1 for top-level
    ops. Intervals on a line are taken as properly nested; a partial overlap counts as nesting."""
    n = start.size
    parent = np.full(n, -1, np.int64)
    in_order = _in_line_order(run_starts(group), start, end, group) if n else True
    order = np.arange(n) if in_order else np.lexsort((-end, start, group))  # outer op first at a tie
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


def _pack(columns: list[np.ndarray]) -> np.ndarray:
    """One int64 key per row for int columns >= -1 that orders like the tuple of columns."""
    key = np.zeros(columns[0].size, np.int64)
    for c in columns:
        c = c.astype(np.int64) + 1
        key *= int(c.max(initial=0)) + 1
        key += c
    return key


def spans(extents: pd.DataFrame, markers: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device, step) measured: ``start_ps``, ``end_ps``; and where the span is not its
    markers' alone (as profilers count a step's time): ``past_marker_ps``, how far it runs past their end, and
    ``joined_markers``, how many of its markers began after all earlier ones had ended (stretches joined).

    ``extents``: per (rank, device, step) of device ops, ``op_start`` and ``op_end`` (first start and
    last end); ``markers``: step markers (rank, device, step, start_ps, dur_ps; device -1 holds for every
    device of the rank). A step's span on a device runs from its markers' first start to the later of
    their last end and the end of the step's last op there, so an idle step still has a span. A device
    without markers gets one span over all its ops, step -1."""
    # numpy on chip keys (``chip_key``): a profile's thousands of steps per chip take pandas' merges and
    # groupbys longer than the chips' millions of ops take the rest of the layout (benchmarks/trace_breakdown.py)
    op_chip, op_step = chip_key(extents["rank"].to_numpy(), extents["device"].to_numpy()), extents["step"].to_numpy()
    chips = np.unique(op_chip)
    device, step = markers["device"].to_numpy(), markers["step"].to_numpy()
    chip = chip_key(markers["rank"].to_numpy(), device)
    start = markers["start_ps"].to_numpy()
    end = start + markers["dur_ps"].to_numpy()
    own = np.flatnonzero((device >= 0) & np.isin(chip, chips))
    # a rank's markers (device -1) hold for each of its chips with ops and no markers of their own
    bare = chips[~np.isin(chips, chip[own])]
    shared = np.flatnonzero(device < 0)
    first, last = (np.searchsorted(bare >> 32, chip[shared] >> 32, side) for side in ("left", "right"))
    count = last - first
    into = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count - first, count)  # each marker's chips
    rows = np.concatenate([own, np.repeat(shared, count)])
    w_chip, w_step = np.concatenate([chip[own], bare[into]]), step[rows]
    # the windows of each (chip, step): the earliest start, the latest end
    order = np.lexsort((w_step, w_chip))
    w_chip, w_step, w_start, w_end = w_chip[order], w_step[order], start[rows][order], end[rows][order]
    at = run_starts(w_chip, w_step)
    joined = _joined(at, w_start, w_end)
    w_chip, w_step = w_chip[at], w_step[at]
    w_start = np.minimum.reduceat(w_start, at) if at.size else w_start
    w_end = np.maximum.reduceat(w_end, at) if at.size else w_end
    marked_end = w_end
    # a window runs on to the end of its step's last op there
    packed = _pack([np.searchsorted(chips, np.concatenate([w_chip, op_chip])), np.concatenate([w_step, op_step])])
    w_key, op_key = packed[:w_chip.size], packed[w_chip.size:]
    by_key = np.argsort(op_key)
    found = by_key[np.minimum(np.searchsorted(op_key, w_key, sorter=by_key), by_key.size - 1)]
    w_end = np.maximum(w_end, np.where(op_key[found] == w_key, extents["op_end"].to_numpy()[found], 0))
    # a chip without windows: its ops' extent
    whole = np.flatnonzero((op_step == -1) & ~np.isin(op_chip, w_chip))
    out_chip, out_step = np.concatenate([w_chip, op_chip[whole]]), np.concatenate([w_step, op_step[whole]])
    order = np.lexsort((out_step, out_chip))
    out = chip_frame(out_chip[order], extents["rank"].dtype, extents["device"].dtype)
    out["step"] = out_step[order]
    out["start_ps"] = np.concatenate([w_start, extents["op_start"].to_numpy()[whole]])[order].astype(np.int64)
    out["end_ps"] = np.concatenate([w_end, extents["op_end"].to_numpy()[whole]])[order].astype(np.int64)
    unmarked = np.zeros(whole.size, np.int64)
    out["past_marker_ps"] = np.concatenate([w_end - marked_end, unmarked])[order].astype(np.int64)
    out["joined_markers"] = np.concatenate([joined, unmarked])[order]
    return out


def _joined(first: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per window (its markers' ``start`` / ``end`` (n,), each window's a run from ``first``): how many of them
    began after all that began before had ended, beyond the first (a step's annotation retried under its number):
    a sweep over the starts (+1) and ends (-1), starts first where they meet."""
    window = np.repeat(np.arange(first.size), _lengths(first, start.size))
    n = start.size
    kind = np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)])
    sweep = np.lexsort((kind, np.concatenate([start, end]), np.concatenate([window, window])))
    open_before = np.cumsum(np.where(kind[sweep] == 0, 1, -1)) - 1  # at a start: the markers open before it
    apart = (sweep < n) & (open_before == 0)
    return np.bincount(window[sweep[apart]], minlength=first.size) - 1


class Ops(NamedTuple):
    """Device ops in measuring order: by line within a span, each line in time order (outer op first
    when two start together). (n,) arrays; ``row``: the op's row in the events frame."""

    row: np.ndarray     # int32 (int64 past 2**31 rows)
    span: np.ndarray    # int32 row of the spans table
    line: np.ndarray    # int32 id of (span, line), numbered in this order: ops of one line are contiguous
    start: np.ndarray   # int64 ps
    end: np.ndarray     # int64 ps, never past the span's end
    cls: np.ndarray     # int8 index into CATEGORIES
    pair: np.ndarray    # int8: +1 a collective's async start (``X-start``, ``send``, ``recv``), -1 its ``X-done``


class Layout(NamedTuple):
    spans: pd.DataFrame    # rank, device, step, start_ps, end_ps, past_marker_ps, joined_markers (``spans``)
    ops: Ops
    stall: np.ndarray      # (spans,) int64 ps: TPU dma_stall_duration_ps of the span's compute ops
    outside: list[dict]    # per chip, its device ops outside every step's span (``_outside``)
    clock: list[dict]      # per chip, where its ops' trace and chip clocks part (``clocks.parted``)
    no_duration: int = 0   # device ops of no duration in the spans measured (held by none of ``ops``)


def _outside(rank: np.ndarray, device: np.ndarray, dur: np.ndarray) -> list[dict]:
    """Device ops (n,) that no span holds (on a device with step markers: before its first step, after its
    last, between two): per chip, sorted, ``{rank, device, ops, op_ps}``: how many and their durations summed
    (nested ops each count). Plain records: they ride in frames' ``attrs``, which pandas copies and compares."""
    if not rank.size:
        return []
    keys, chip = np.unique(chip_key(rank, device), return_inverse=True)
    chips = chip_frame(keys, rank.dtype, device.dtype)
    ops = np.bincount(chip, minlength=keys.size)
    op_ps = np.bincount(chip, weights=dur, minlength=keys.size)  # float64: exact below 2**53 ps a chip
    return [{"rank": int(r), "device": int(d), "ops": int(n), "op_ps": int(t)}
            for r, d, n, t in zip(chips["rank"], chips["device"], ops, op_ps)]


def outside_total(outside: list[dict]) -> tuple[int, int]:
    """Records of ``Layout.outside`` (of any chips, trials) summed: how many ops, and their durations (ps)."""
    return sum(c["ops"] for c in outside), sum(c["op_ps"] for c in outside)


def on_gpu_stream(line: pd.Series) -> np.ndarray:
    """(n,) bool: the ops of a categorical ``line`` column that run on a GPU stream, where kernels run one
    after another and never nest (one that starts before the one before it ends is the clocks' skew)."""
    return _stream_lines(line)[line.cat.codes.to_numpy()]


def _stream_lines(line: pd.Series) -> np.ndarray:
    """(k + 1,) bool: which of a categorical ``line`` column's k categories are GPU streams (the last entry, for
    code -1, False)."""
    return np.array([bool(_GPU_STREAM.match(str(c))) for c in line.cat.categories] + [False])


def _codes(column: pd.Series, table) -> np.ndarray:
    """A categorical column's codes mapped through ``table`` (category value -> number), -1 unmapped."""
    lookup = np.array([table(v) for v in column.cat.categories] + [-1], np.int8)
    return lookup[column.cat.codes.to_numpy()]  # code -1 (missing) reads the last entry


def _pair_role(kind: str) -> int:
    if kind.endswith("-start") or kind in ("send", "recv"):
        return 1
    return -1 if kind.endswith("-done") else 0


def _lengths(first: np.ndarray, n: int) -> np.ndarray:
    return np.diff(np.append(first, n))


def layout(events: pd.DataFrame, window: str = "step") -> Layout:
    """The device ops of ``events`` (dur > 0) placed in their spans: per step marker, or with ``window``
    ``"trace"`` one span per device from its first op's start to its last op's end (step -1), ops of no
    duration included (as HTA's kernel time: whole-microsecond traces round short ops to 0). A window ending
    in ``LAST_STEP_DROPPED`` (HTA's default, ``include_last_profiler_step=False``) leaves out each device's last
    step (``_before_last_step``) where it has two or more."""
    window, drop_last = window.removesuffix(LAST_STEP_DROPPED), window.endswith(LAST_STEP_DROPPED)
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, with or without {LAST_STEP_DROPPED}")
    cls_all = _codes(events["category"], lambda c: CATEGORIES.index(c) if c in CATEGORIES else -1)
    dur = events["dur_ps"].to_numpy()
    row = np.flatnonzero(cls_all >= 0)
    markers = events.loc[events["category"] == "step", ["rank", "device", "step", "start_ps", "dur_ps"]]
    if drop_last:
        for note in events.attrs.get("last_step_notes", ()) + _one_step_kept(markers):
            warnings.warn(note, DefinitionNote, stacklevel=2)
    if drop_last and row.size:
        launch = events["launch_step"].to_numpy()[row] if "launch_step" in events else np.full(row.size, -1)
        row = row[_before_last_step(markers, events["rank"].to_numpy()[row], events["device"].to_numpy()[row],
                                    launch, events["start_ps"].to_numpy()[row])]
    if row.size and row[-1] < 2**31:
        row = row.astype(np.int32)
    if not row.size:
        none = np.zeros(0, np.int64)
        return Layout(pd.DataFrame(columns=["rank", "device", "step", "start_ps", "end_ps", "past_marker_ps",
                                            "joined_markers"]),
                      Ops(none, none.astype(np.int32), none.astype(np.int32), none, none, none.astype(np.int8),
                          none.astype(np.int8)), none, [], clocks.parted(events))
    take = _taker(row)
    rank, device, start = (take(events[c].to_numpy()) for c in ("rank", "device", "start_ps"))
    end = start + take(dur)  # never past its span's end: a span ends at or after its ops' last end
    step = take(events["step"].to_numpy()) if window == "step" else np.zeros(row.size, np.int32) - 1
    # extents per (rank, device, step) from runs of equal keys (ops arrive grouped), then the runs joined
    first = run_starts(rank, device, step)
    keys = {"rank": rank[first], "device": device[first], "step": step[first]}
    order = np.lexsort((keys["step"], keys["device"], keys["rank"]))  # a key's runs together (it may have several)
    at = run_starts(*(v[order] for v in keys.values()))
    ext = pd.DataFrame({**{k: v[order][at] for k, v in keys.items()},
                        "op_start": np.minimum.reduceat(np.minimum.reduceat(start, first)[order], at),
                        "op_end": np.maximum.reduceat(np.maximum.reduceat(end, first)[order], at)})
    if drop_last:  # (the last window's ops are gone: its marker must not make an empty span)
        markers = markers[markers["start_ps"] < _last_marker(markers, markers["rank"].to_numpy(),
                                                             markers["device"].to_numpy())[0]]
    span_rows = spans(ext, markers if window == "step" else markers.iloc[:0])
    # span of each run: the runs' keys packed with the spans' keys (one packing, so the same ranges)
    packed = _pack([np.concatenate([span_rows[c].to_numpy(), v]) for c, v in keys.items()])
    span_key, run_key = packed[:len(span_rows)], packed[len(span_rows):]
    at = np.minimum(np.searchsorted(span_key, run_key), len(span_key) - 1)  # spans are sorted by key
    span = np.repeat(np.where(span_key[at] == run_key, at, -1).astype(np.int32), _lengths(first, row.size))
    apart = np.flatnonzero(span < 0)  # ops outside every step window of a device with markers: not measured
    outside = _outside(rank[apart], device[apart], end[apart] - start[apart])  # (ops of no duration too)
    busy = end > start
    no_duration = int(((span >= 0) & ~busy).sum())
    if not busy.all():  # ops of no duration bound the spans above; they take no time, so go no further
        row, span, rank, device, start, end = (v[busy] for v in (row, span, rank, device, start, end))
        take = _taker(row)
        apart = np.flatnonzero(span < 0)
    del rank, device, step, keys
    cls = take(cls_all)
    role = np.array([_pair_role(k) for k in events["kind"].cat.categories] + [0], np.int8)
    pair = role[take(events["kind"].cat.codes.to_numpy())]
    pair *= _IS_COLLECTIVE[cls]  # copy-start / copy-done are local DMA, not collectives
    stall = _stall(take(events["stall_ps"].to_numpy()), span, cls, len(span_rows))
    fields = [row, span, take(events["line"].cat.codes.to_numpy()), start, end, cls, pair]
    if apart.size:
        fields = [f[span >= 0] for f in fields]
    row, span, line, start, end, cls, pair = fields
    first = run_starts(span, line)
    if not _in_line_order(first, start, end, span, line):
        order = np.lexsort((-end, start, line, span))
        row, span, line, start, end, cls, pair = (f[order] for f in (row, span, line, start, end, cls, pair))
        first = run_starts(span, line)
    lane = _skewed(events["line"], line, first, start, end)
    if lane.any():  # the skewed ops run beside the line: a line of their own, just after it
        line = line.astype(np.int64) * 2 + lane
        order = np.lexsort((-end, start, line, span))
        row, span, line, start, end, cls, pair = (f[order] for f in (row, span, line, start, end, cls, pair))
        first = run_starts(span, line)
    line_id = np.repeat(np.arange(first.size, dtype=np.int32), _lengths(first, row.size))
    return Layout(span_rows, Ops(row, span, line_id, start, end, cls, pair), stall, outside, clocks.parted(events),
                  no_duration)


def _skewed(lines: pd.Series, line: np.ndarray, first: np.ndarray, start: np.ndarray, end: np.ndarray
            ) -> np.ndarray:
    """(n,) int8: 1 for an op on a GPU stream that starts before an earlier op on its line ends (ops in line
    order, ``first``: where each line's run starts). A stream runs its kernels one after another, so that
    overlap is the clocks' skew, not nesting: the two ran side by side, and across lines compute owns such an
    instant (HTA's union of compute kernels does the same)."""
    skew = np.zeros(line.size, np.int8)
    streams = _stream_lines(lines)
    if not streams.any():  # a TPU's or a CPU's lines: nothing to look at
        return skew
    on_stream = streams[line]
    after = np.ones(line.size, bool)
    after[first] = False  # an op with an op before it on its line
    touched = np.flatnonzero(after[1:] & on_stream[1:] & (start[1:] < end[:-1])) + 1
    runs = np.unique(np.searchsorted(first, touched, side="right") - 1)  # the few lines where the clocks skew
    bounds = np.append(first, line.size)
    for r in runs:
        a, b = bounds[r], bounds[r + 1]
        latest = np.maximum.accumulate(end[a:b - 1])  # the latest end before each later op of the line
        skew[a + 1:b] = start[a + 1:b] < latest
    return skew


def _one_step_kept(markers: pd.DataFrame) -> list[str]:
    """With the last step dropped, the marker lines (a rank's host, or its device's own) that hold one step: kept,
    as HTA keeps a one-step trace's, said so that a header's "last step dropped" is not read as that step's. A
    host's markers that hold for no device (each has its own) are numbered -1 (``steps.assign``): no step of any."""
    counts = markers[markers["step"] >= 0].groupby(["rank", "device"])["step"].agg(["size", "first"])
    return [f"rank {r}{'' if d < 0 else f' device {d}'} has one step ({n}): kept with --last-step drop, as HTA "
            "keeps it (it drops the last step only where there are two or more); --last-step keep measures the same"
            for (r, d), (size, n) in counts.iterrows() if size == 1]


def _last_marker(markers: pd.DataFrame, rank: np.ndarray, device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each (rank, device) (n,) given, of the step markers that hold for it (its own, else its rank's
    host markers) where there are two or more (HTA drops nothing of a one-step trace): the last one's start
    (int64 max where none) and step number (-2 where none). Looked up once per distinct pair."""
    none = (np.iinfo(np.int64).max, -2)
    last = {}
    for (r, d), group in markers.groupby(["rank", "device"]):
        at = group["start_ps"].to_numpy().argmax()
        last[(int(r), int(d))] = (int(group["start_ps"].iloc[at]), int(group["step"].iloc[at])) if len(group) > 1 else none
    codes, pairs = pd.factorize(pd.MultiIndex.from_arrays([rank, device]))
    table = np.array([last.get((int(r), int(d)), last.get((int(r), -1), none)) for r, d in pairs.tolist()],
                     np.int64).reshape(-1, 2)
    return table[codes, 0], table[codes, 1]


def _before_last_step(markers: pd.DataFrame, rank: np.ndarray, device: np.ndarray, launch: np.ndarray,
                      start: np.ndarray) -> np.ndarray:
    """Which of these ops (n,) bool are not in the last step, as HTA decides it: launched in an earlier
    ProfilerStep (``launch``: the step number, a Kineto op's ``launch_step``), else (launch unknown, -1)
    starting before the last step marker."""
    last_start, last_step = _last_marker(markers, rank, device)
    return np.where(launch >= 0, launch != last_step, start < last_start)


def _taker(row: np.ndarray):
    """A function: a column's values at ``row`` (ascending). Device ops sit in long runs of rows (a
    plane's line after line), so where the runs are few they are copied as slices, faster than a gather."""
    breaks = np.flatnonzero(np.diff(row) != 1) + 1
    if breaks.size > row.size >> 10 or not row.size:
        return lambda values: values[row]
    bounds = list(zip(row[np.append(0, breaks)].tolist(), (row[np.append(breaks - 1, row.size - 1)] + 1).tolist()))
    return lambda values: np.concatenate([values[a:b] for a, b in bounds])


def _stall(stall: np.ndarray, span: np.ndarray, cls: np.ndarray, n_spans: int) -> np.ndarray:
    """Per span, the DMA stall of its compute ops (``stall``, ``span``, ``cls``: (n,) of the ops)."""
    op = np.flatnonzero(stall)
    op = op[(span[op] >= 0) & (cls[op] == CATEGORIES.index("compute"))]
    return np.bincount(span[op], weights=stall[op], minlength=n_spans).astype(np.int64)


def _in_line_order(first: np.ndarray, start: np.ndarray, end: np.ndarray, *line: np.ndarray) -> bool:
    """Whether ops already come line by line (``first``: where each run of one ``line`` key starts), no
    line split in two places, each line in (start, -end) order, as readers give them (then no sort: a
    sort of millions of ops costs about a second)."""
    ds = np.diff(start)
    ok = (ds > 0) | ((ds == 0) & (end[1:] <= end[:-1]))
    ok[first[1:] - 1] = True  # a new line may start anywhere
    return bool(ok.all()) and pd.MultiIndex.from_arrays([k[first] for k in line]).is_unique


class Pieces(NamedTuple):
    """Each line's busy time cut into disjoint pieces, each owned by the innermost op running then;
    (m,) arrays in time order per line."""

    span: np.ndarray
    line: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cls: np.ndarray
    pair: np.ndarray   # the owning op's async role on its first piece (a start / done op is one piece)
    under: np.ndarray  # bit c set: an op of class c owns the piece or runs around it


def _bit(cls: np.ndarray) -> np.ndarray:
    return np.left_shift(1, cls.astype(np.int16))


def nested(ops: Ops) -> tuple[np.ndarray, np.ndarray]:
    """The ops of lines where some op runs inside another (indices, in measuring order), and the parent
    of each among them (an index into that list, -1 top-level): only those lines are searched."""
    overlap = (ops.line[1:] == ops.line[:-1]) & (ops.end[:-1] > ops.start[1:])
    if not overlap.any():
        none = np.zeros(0, np.int64)
        return none, none
    sub = np.flatnonzero(np.isin(ops.line, np.unique(ops.line[1:][overlap])))
    return sub, parents(ops.line[sub], ops.start[sub], ops.end[sub])


def pieces(ops: Ops) -> Pieces:
    """Disjoint owned pieces of every line: a line without nesting is its ops as they are; a nested one
    is cut around each op's children."""
    sub, parent = nested(ops)
    if not sub.size:
        return Pieces(ops.span, ops.line, ops.start, ops.end, ops.cls, ops.pair, _bit(ops.cls))
    line, s, e = ops.line[sub], ops.start[sub], ops.end[sub]
    n = sub.size
    cls = ops.cls[sub]
    under = _bit(cls)
    while True:  # one round per nesting level: each op takes its parent's classes
        deeper = under | np.where(parent >= 0, under[np.maximum(parent, 0)], 0)
        if (deeper == under).all():
            break
        under = deeper
    nxt_same = np.append(line[1:] == line[:-1], False)
    # an op's first piece runs from its start to its first child's start (the next op) or its end
    first_end = np.where(nxt_same, np.minimum(e, np.append(s[1:], 0)), e)
    # after each child, its parent resumes until the parent's next child starts or the parent ends
    child = np.flatnonzero(parent >= 0)
    p = parent[child]
    resume = np.minimum(e[child], e[p])
    # the next op starting at or after ``resume`` on that line: searched on times made increasing across lines
    lo = run_starts(line)
    width = np.maximum.reduceat(e, lo) - s[lo] + 1 if n else e
    offset = np.concatenate([[0], np.cumsum(width)[:-1]]) - s[lo]
    shift = np.repeat(offset, np.diff(np.append(lo, n)))
    at = np.searchsorted(s + shift, resume + shift[child])
    line_end = np.repeat(np.append(lo[1:], n), np.diff(np.append(lo, n)))
    within = at < line_end[child]
    resume_end = np.where(within, np.minimum(e[p], s[np.minimum(at, n - 1)]), e[p])
    span_sub = ops.span[sub]
    cand = [
        (span_sub, line, s, first_end, cls, ops.pair[sub], under),
        (span_sub[child], line[child], resume, resume_end, cls[p], np.zeros(child.size, np.int8), under[p]),
    ]
    cut = [np.concatenate(x) for x in zip(*cand)]
    keep = cut[3] > cut[2]
    cut = [c[keep] for c in cut]
    order = np.lexsort((cut[2], cut[1]))
    cut = [c[order] for c in cut]
    later = np.append(cut[1][1:] == cut[1][:-1], False)  # a partial overlap: the earlier piece ends where the next starts
    cut[3] = np.where(later, np.minimum(cut[3], np.append(cut[2][1:], 0)), cut[3])
    flat = np.setdiff1d(np.arange(ops.line.size), sub, assume_unique=True)  # each line's pieces stay contiguous
    return Pieces(*(np.concatenate([a[flat], b]) for a, b in
                    zip((ops.span, ops.line, ops.start, ops.end, ops.cls, ops.pair, _bit(ops.cls)), cut)))


class Measured(NamedTuple):
    """Device ops placed in the spans they are measured in."""

    spans: pd.DataFrame  # rank, device, step, start_ps, end_ps, past_marker_ps, joined_markers (``spans``)
    ops: pd.DataFrame    # device ops inside a span, plus: span (row of ``spans``), end_ps (cut at the span's
    #                      end), parent (row of ``ops`` it runs inside, -1), self_ps (end - start - children)


def measured(events: pd.DataFrame, window: str, columns: list[str], laid: Layout | None = None) -> Measured:
    """The device ops of ``events`` (the ``columns`` the caller reads) with their spans, nesting and
    exclusive (self) time; ``laid``: ``layout(events, window)`` where the caller has it already."""
    spans_, ops = (layout(events, window) if laid is None else laid)[:2]
    parent = np.full(ops.row.size, -1, np.int64)
    sub, inside = nested(ops)
    parent[sub] = np.where(inside >= 0, sub[np.maximum(inside, 0)], -1)
    child = np.flatnonzero(parent >= 0)
    inner = np.bincount(parent[child], weights=np.minimum(ops.end[child], ops.end[parent[child]]) - ops.start[child],
                        minlength=ops.row.size)
    frame = events[columns].take(ops.row).assign(span=ops.span, end_ps=ops.end, parent=parent,
                                                 self_ps=(ops.end - ops.start) - inner.astype(np.int64))
    return Measured(spans_, frame.reset_index(drop=True))
