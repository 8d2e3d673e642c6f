"""Where each chip's step time went: compute, exposed ICI, exposed DCN (cross-slice collectives),
local DMA wait, idle; and how much of its collectives' time was hidden under compute.

Every instant of a step's span on a device is given to one part. On each line (TPU ``XLA Ops``, a GPU
stream, a CPU thread) the innermost running op owns the instant; across lines (GPU streams running at
once, and a GPU stream's op that the clocks' skew starts before the one before it ends: ``timeline``)
compute beats ICI beats DCN beats DMA, so a collective hidden behind compute costs nothing and
only its exposed part counts (on TPU that is the time in ``X-done``, where xprof counts it as compute).
Instants where nothing runs are idle. A compute op's own DMA stall (TPU ``dma_stall_duration_ps``)
moves from compute to DMA. The five parts add up to the span exactly (integer picoseconds); ``dcn`` is
zero but where a TPU profile has Megascale collectives.

A collective is in flight while one of its ops runs and, for an async pair on one line (``X-start`` ...
``X-done``, ``send`` / ``recv`` ... ``-done``), from the start op's start to the done op's end: ``comm``
is that time, ``hidden`` the part of it owned by compute ops, ``overlap`` = hidden / comm (HTA's
``comp_comm_overlap``). On GPU streams comm = hidden + exposed ICI; on TPU the rest of an async pair's
flight is spent in DMA ops or idle. A done op closes the latest open start on its line; a half without
its partner in the span counts only its own time.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from perfkit.common.units import PS_PER_MS
from perfkit.trace import clocks, timeline
from perfkit.trace.classify import CATEGORIES
from perfkit.trace.events import run_starts

PARTS = (*CATEGORIES, "idle")
TIMES = ["span_ps"] + [f"{p}_ps" for p in PARTS]  # a span and the parts it splits into
COMM = ["comm_ps", "hidden_ps"]  # collectives in flight, and the part of that under compute
COLUMNS = ["rank", "device", "step", *TIMES, *COMM, "overlap"]
BESIDE = ["start_ps", "past_marker_ps", "joined_markers"]  # of each span, beside the figures (``timeline.spans``)
EVENT_COLUMNS = tuple(dict.fromkeys(timeline.COLUMNS + clocks.COLUMNS))  # all it reads
_COMPUTE, _DMA = CATEGORIES.index("compute"), CATEGORIES.index("dma")
_COMM_BITS = sum(1 << i for i in timeline.COLLECTIVE_CLASSES)  # ICI and DCN collectives


def _within(values: np.ndarray, block: np.ndarray, reverse: bool) -> np.ndarray:
    """Running minimum of ``values`` inside each block of contiguous equal ``block`` (numbered up along
    the array): from the front, or from the back with ``reverse``. Blocks are kept apart by offsets
    larger than any value, so one ``minimum.accumulate`` serves them all."""
    big = 2 * int(np.abs(values).max(initial=0)) + 2
    if reverse:
        shifted = values + block * big
        return np.minimum.accumulate(shifted[::-1])[::-1] - block * big
    shifted = values - block * big
    return np.minimum.accumulate(shifted) + block * big


class Flight(NamedTuple):
    """Where collectives are in flight: pieces (indices) during which, and pieces after which until the
    next piece on the line (or the span's end) one is, with that gap's length."""

    during: np.ndarray
    after: np.ndarray
    gap: np.ndarray


def _in_flight(pc: timeline.Pieces, span_end: np.ndarray) -> Flight:
    """One pass per line: the open async pairs are a running count over the pieces that start or end
    one (dones without an open start dropped, then starts no later done closes), carried forward to
    the pieces between them."""
    n = pc.start.size
    at = np.flatnonzero(pc.pair)
    comm = (pc.under & _COMM_BITS) != 0  # a collective op runs: owns the piece or runs around it
    if not at.size:
        return Flight(np.flatnonzero(comm), at, at)
    line = pc.line[at]
    first = run_starts(line)
    lengths = np.diff(np.append(first, at.size))
    delta = pc.pair[at].astype(np.int64)
    total = np.cumsum(delta)
    count = total - np.repeat(total[first] - delta[first], lengths)
    del total, delta
    # corrections only where needed: a done before any start on its line; a start no done closes on it
    block = np.repeat(np.arange(first.size), lengths)
    if count.min() < 0:
        count -= np.minimum(_within(count, block, reverse=False), 0)
    if count[first[1:] - 1].any() or count[-1]:
        count -= _within(count, block, reverse=True)
    del block
    # each piece takes the count after the last pair piece at or before it on its line: a forward fill
    # of marker positions (pair pieces, and each line's first piece, which closes the line before)
    flag = np.zeros(n, bool)
    flag[at] = count > 0
    last = np.zeros(n, np.int32)
    line_first = run_starts(pc.line)
    last[line_first] = line_first
    last[at] = at
    np.maximum.accumulate(last, out=last)
    open_ = flag[last]
    del last, flag
    after = np.flatnonzero(open_)
    nxt = np.minimum(after + 1, n - 1)
    same = (after + 1 < n) & (pc.line[nxt] == pc.line[after])
    gap = np.where(same, pc.start[nxt], span_end[pc.span[after]]) - pc.end[after]
    open_ |= comm
    return Flight(np.flatnonzero(open_), after, np.maximum(gap, 0))


def _sweep(pc: timeline.Pieces, flight: Flight, n_spans: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spans with several lines: a sweep over every piece's start and end (class counts) and every
    in-flight stretch (a count of its own), in time order per span. (n_spans, classes) busy time,
    (n_spans,) comm and hidden time."""
    k = len(CATEGORIES)
    fs, gs = flight.during, flight.after
    n = pc.start.size
    span = np.concatenate([pc.span, pc.span, pc.span[fs], pc.span[fs], pc.span[gs], pc.span[gs]])
    time = np.concatenate([pc.start, pc.end, pc.start[fs], pc.end[fs], pc.end[gs], pc.end[gs] + flight.gap])
    order = np.lexsort((time, span))
    span, time = span[order], time[order]
    cls = np.concatenate([pc.cls, pc.cls, np.full(2 * (fs.size + gs.size), -1)])[order]
    step = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64), np.ones(fs.size, np.int64),
                           -np.ones(fs.size, np.int64), np.ones(gs.size, np.int64), -np.ones(gs.size, np.int64)])[order]
    counts = [np.cumsum(np.where(cls == c, step, 0)) for c in range(k)]
    flying = np.cumsum(np.where(cls < 0, step, 0)) > 0
    length = np.zeros(time.size, np.int64)
    length[:-1] = np.where(span[1:] == span[:-1], time[1:] - time[:-1], 0)
    owner = np.select([c > 0 for c in counts], list(range(k)), default=-1)
    busy = owner >= 0
    out = np.bincount(span[busy] * k + owner[busy], weights=length[busy], minlength=n_spans * k)
    comm = np.bincount(span[flying], weights=length[flying], minlength=n_spans)
    under = flying & (owner == _COMPUTE)
    hidden = np.bincount(span[under], weights=length[under], minlength=n_spans)
    return out.reshape(n_spans, k), comm, hidden


def _subset(pc: timeline.Pieces, flight: Flight, keep: np.ndarray) -> tuple[timeline.Pieces, Flight]:
    """The pieces where ``keep`` holds, with their in-flight indices renumbered."""
    index = np.cumsum(keep) - 1
    during, after = flight.during[keep[flight.during]], keep[flight.after]
    return (timeline.Pieces(*(a[keep] for a in pc)),
            Flight(index[during], index[flight.after[after]], flight.gap[after]))


def breakdown(events: pd.DataFrame, window: str = "step", layout: timeline.Layout | None = None) -> pd.DataFrame:
    """Per (rank, device, step): ``span_ps`` and ``compute_ps``, ``ici_ps``, ``dcn_ps``, ``dma_ps``, ``idle_ps``
    (adding up to the span), ``comm_ps``, ``hidden_ps``, ``overlap``, plus ``BESIDE``: ``start_ps`` of the span,
    and where it is more than its step markers (``timeline.spans``), ``past_marker_ps`` and ``joined_markers``.
    Steps as in ``perfkit.trace.steps`` (step -1: the whole trace of a device without step markers);
    ``window="trace"``: one span per device, its first op's start to its last op's end; either with
    ``timeline.LAST_STEP_DROPPED`` appended: without the last step (HTA's default). ``layout``:
    ``timeline.layout(events, window)`` where the caller has it already (it is read, never changed).
    ``attrs["measured"]``: the events' (``events.load``): host ops stood in for device ops where "host";
    ``attrs["outside"]``: per chip, its device ops that no step's span holds, as ``{rank, device, ops, op_ps}``
    (``timeline.Layout.outside``); ``attrs["clock"]``: per chip, where its ops' trace and chip clocks part
    (``timeline.Layout.clock``)."""
    laid = timeline.layout(events, window) if layout is None else layout
    spans, ops, stall, outside, clock = laid.spans, laid.ops, laid.stall, laid.outside, laid.clock
    if spans.empty:
        return _measured(pd.DataFrame(columns=COLUMNS + BESIDE), events, outside, clock)
    n, k = len(spans), len(CATEGORIES)
    span_end = spans["end_ps"].to_numpy(np.int64)
    pc = timeline.pieces(ops)
    flight = _in_flight(pc, span_end)
    # spans of one line (a TPU chip's XLA Ops): its pieces are disjoint, so plain sums are the answer
    lines = np.bincount(ops.span[run_starts(ops.line)], minlength=n)
    several = lines > 1
    one, fl = pc, flight
    if several.any():
        multi = several[pc.span]
        one, fl = _subset(pc, flight, ~multi)
    # float64 sums of integer picoseconds are exact below 2**53 ps (2.5 hours) per span and class
    length = np.subtract(one.end, one.start, dtype=np.float64)
    busy = np.bincount(one.span * k + one.cls, weights=length, minlength=n * k).reshape(n, k)
    comm = (np.bincount(one.span[fl.during], weights=length[fl.during], minlength=n)
            + np.bincount(one.span[fl.after], weights=fl.gap, minlength=n))
    under = fl.during[one.cls[fl.during] == _COMPUTE]
    hidden = np.bincount(one.span[under], weights=length[under], minlength=n)
    del length, under
    if several.any():
        b, c, h = _sweep(*_subset(pc, flight, multi), n)
        busy, comm, hidden = busy + b, comm + c, hidden + h
    busy, comm, hidden = (np.rint(x).astype(np.int64) for x in (busy, comm, hidden))
    moved = np.minimum(stall, busy[:, _COMPUTE])
    busy[:, _COMPUTE] -= moved
    busy[:, _DMA] += moved
    out = spans[["rank", "device", "step", *BESIDE]].copy()
    out["span_ps"] = span_end - spans["start_ps"].to_numpy()
    for i, c in enumerate(CATEGORIES):
        out[f"{c}_ps"] = busy[:, i]
    out["idle_ps"] = out["span_ps"] - busy.sum(axis=1)
    out["comm_ps"], out["hidden_ps"] = comm, hidden
    out["overlap"] = np.where(comm > 0, hidden / np.maximum(comm, 1), np.nan)
    return _measured(out[COLUMNS + BESIDE], events, outside, clock)


def _measured(rows: pd.DataFrame, events: pd.DataFrame, outside: list[dict], clock: list[dict]) -> pd.DataFrame:
    rows.attrs["measured"] = events.attrs.get("measured", ["device"])
    rows.attrs["outside"], rows.attrs["clock"] = outside, clock
    return rows


def mean_per_device(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-step rows of ``breakdown`` averaged over steps, per (rank, device); ``steps`` counts them,
    ``overlap`` is hidden / comm of the sums."""
    out = rows.groupby(["rank", "device"])[TIMES + COMM].mean().reset_index()
    out.insert(2, "steps", rows.groupby(["rank", "device"]).size().to_numpy())
    out["overlap"] = out["hidden_ps"] / out["comm_ps"].where(out["comm_ps"] > 0)
    return out


def empty_spans(spans: pd.DataFrame, side: str = "") -> list[str]:
    """Where ``spans`` (rows of rank, device, step and span_ps: ``breakdown`` rows, or ``diff.op_time``'s records of
    its spans of 0 ns) span 0 ns (a chip whose only kernel lasts 0 us): a line naming them, so that their zeros,
    which HTA's figures equal (its percentages NaN), do not read as a measurement; ``side`` follows the spans'
    names (trace diff's " in A")."""
    empty = spans.loc[spans["span_ps"] == 0, ["rank", "device", "step"]].itertuples(index=False)
    named = [f"rank {r} device {d} {f'step {s}' if s >= 0 else 'whole trace'}" for r, d, s in empty]
    if not named:
        return []
    if len(named) == 1:
        return [f"{named[0]}{side}: a span of 0 ns (its device ops all start and end at one instant): it measures no "
                "time, its zeros counted in the means over spans"]
    listed = "; ".join(named[:3]) + ("; ..." if len(named) > 3 else "")
    return [f"{len(named)} spans of 0 ns{side} ({listed}): their device ops all start and end at one instant: they "
            "measure no time, their zeros counted in the means over spans"]


def shown_parts(rows: pd.DataFrame) -> list[str]:
    """The parts worth showing for these rows: every part but DCN, and DCN where any row has some."""
    return [p for p in PARTS if p != "dcn" or (rows["dcn_ps"] > 0).any()]


def plot(means: pd.DataFrame, path, title: str = "") -> None:
    """A stacked bar per chip of its mean step: compute / ICI / DCN (where any) / DMA / idle, in ms; beside it a
    thin bar of the collectives' time in flight, its hidden part hatched."""
    # matplotlib: only when a plot is asked for
    from matplotlib.figure import Figure

    from perfkit.common.figures import PART_STYLE as STYLE, save_figure

    labels = [f"r{r}/d{d}" for r, d in zip(means["rank"], means["device"])]
    x = np.arange(len(labels))
    fig = Figure(figsize=(max(4.0, 0.5 * len(labels) + 2) + 1.5, 3.5))
    ax = fig.add_subplot()
    bottom = np.zeros(len(means))
    for part in shown_parts(means):
        ms = means[f"{part}_ps"].to_numpy() / PS_PER_MS
        label, color = STYLE[part]
        ax.bar(x - 0.1, ms, width=0.6, bottom=bottom, label=label, color=color)
        bottom += ms
    comm, hidden = (means[c].to_numpy() / PS_PER_MS for c in COMM)
    ax.bar(x + 0.3, comm, width=0.2, color="none", edgecolor=STYLE["ici"][1], label="collectives in flight")
    ax.bar(x + 0.3, hidden, width=0.2, color="none", edgecolor=STYLE["compute"][1], hatch="///",
           label="of it hidden under compute")
    ax.set_xticks(x, labels)
    ax.set_ylabel("mean step (ms)")
    ax.set_title(title or "step time per chip")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save_figure(fig, Path(path))
