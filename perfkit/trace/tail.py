"""The end of each chip's trace, for hangs: its last device ops, whose traces stop earliest, and what
the others' traces were in at that moment (a chip stuck in a matmul while the rest wait in a collective shows
as one early end and a column of ``ici`` ops). A trace stops at the last op that ended: the profiler writes an op
when it ends, so a chip cut inside an op (a collective it waits in) stops at the op before it.

Both read the frame's columns as arrays and pick rows per chip with a few linear passes (a per-chip
maximum, a radix sort by chip), never sorting the millions of ops of a large profile.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from perfkit.trace.events import chip_frame, chip_key, is_device_op

OP_COLUMNS = ["rank", "device", "step", "name", "kind", "category", "start_ps", "end_ps", "dur_ps"]
EVENT_COLUMNS = tuple(c for c in OP_COLUMNS if c != "end_ps")  # all it reads


class _Ops(NamedTuple):
    """The device ops of a frame: their rows, chip (index into ``chips``), start and end."""

    rows: np.ndarray
    chip: np.ndarray
    start: np.ndarray
    end: np.ndarray
    chips: pd.DataFrame  # rank, device of each chip, sorted


def _ops(events: pd.DataFrame) -> _Ops:
    rows = np.flatnonzero(is_device_op(events))
    rank, device = events["rank"].to_numpy()[rows], events["device"].to_numpy()[rows]
    chip, keys = pd.factorize(chip_key(rank, device), sort=True)
    chips = chip_frame(keys, rank.dtype, device.dtype)
    start = events["start_ps"].to_numpy()[rows]
    return _Ops(rows, chip.astype(np.int32), start, start + events["dur_ps"].to_numpy()[rows], chips)


def _last_per_chip(chip: np.ndarray, values: np.ndarray, count: int, among: np.ndarray | None = None) -> np.ndarray:
    """Per chip, the largest of ``values`` (over the ops where ``among`` holds; the dtype's minimum for a
    chip with none)."""
    out = np.full(count, np.iinfo(values.dtype).min, values.dtype)
    if among is None:
        np.maximum.at(out, chip, values)
    else:
        np.maximum.at(out, chip[among], values[among])
    return out


def _by_chip(ops: _Ops) -> list[np.ndarray]:
    """Each chip's ops (indices), in the frame's order."""
    by_chip = np.argsort(ops.chip, kind="stable")  # a radix sort of small ints: each chip's ops together, in order
    bounds = np.searchsorted(ops.chip[by_chip], np.arange(len(ops.chips) + 1))
    return [by_chip[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _kth_latest_end(end: np.ndarray, k: int) -> int:
    """The ``k``-th latest of one chip's op ends (its earliest where it has fewer)."""
    return int(np.partition(end, end.size - k)[end.size - k]) if end.size > k else int(end.min())


def last_ops(events: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The last ``k`` device ops of each (rank, device) by end time, oldest first (ops ending together in
    the frame's order)."""
    ops = _ops(events)
    picked = []
    for mine in _by_chip(ops):
        mine = mine[ops.end[mine] >= _kth_latest_end(ops.end[mine], k)]  # only those can be among the last k
        order = np.lexsort((mine, ops.end[mine]))  # by end, then by position: the frame's order at ties
        picked.append(mine[order][-k:])
    take = np.concatenate(picked) if picked else np.zeros(0, np.int64)
    out = events.iloc[ops.rows[take]].assign(end_ps=ops.end[take])
    return out[OP_COLUMNS].reset_index(drop=True)


def chips(events: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device), earliest trace end first: ``last_end_ps`` (where its trace stops, which is not
    where the chip stopped: the op it was in then is not written), ``before_last_ps`` (how long before the last
    chip's trace it ends), and the op its trace was in when the first chip's trace ended (``at_first_stop_*``:
    the op running then, else its last op before then, else its first op after); no rows without device ops."""
    ops = _ops(events)
    n = len(ops.chips)
    if not n:
        return pd.DataFrame(columns=["rank", "device", "last_end_ps", "before_last_ps",
                                     *(f"at_first_stop_{c}" for c in ("name", "kind", "category"))])
    last_end = _last_per_chip(ops.chip, ops.end, n)
    at = _in_at(ops, n, int(last_end.min()))
    out = ops.chips.assign(last_end_ps=last_end)
    out["before_last_ps"] = int(last_end.max()) - out["last_end_ps"]
    for column in ("name", "kind", "category"):
        out[f"at_first_stop_{column}"] = events[column].iloc[ops.rows[at]].array
    return out.sort_values(["last_end_ps", "rank", "device"], kind="stable", ignore_index=True)


def _in_at(ops: _Ops, n: int, stop: int) -> np.ndarray:
    """Per chip, the op (index into ``ops``) it was in at ``stop``: the op covering it (the latest-ending
    one), else the latest one ending before it, else the earliest after; at ties the last in the frame's
    order. One key orders them: an op that started by then counts its end (a covering op ends after every
    op that ended before), one after -start."""
    key = np.where(ops.start <= stop, ops.end, -ops.start)
    best = key == _last_per_chip(ops.chip, key, n)[ops.chip]
    return _last_per_chip(ops.chip, np.arange(ops.rows.size), n, best)


def at_stop(events: pd.DataFrame, stop_ps: int) -> pd.DataFrame:
    """The events ``chips`` picks from where the first chip stops at ``stop_ps``: per chip its last op to
    end and the op it was in then (the frame's order). Chips of disjoint parts of a profile each give
    theirs; stacked, they give what the whole frame gives."""
    ops = _ops(events)
    return _at_stop(events, ops, _by_chip(ops), stop_ps)


def _at_stop(events: pd.DataFrame, ops: _Ops, by_chip: list[np.ndarray], stop_ps: int) -> pd.DataFrame:
    keep = np.zeros(ops.rows.size, bool)
    for mine in by_chip:  # (each chip's ops in the frame's order: the last of equals is the last there)
        start, end = ops.start[mine], ops.end[mine]
        key = np.where(start <= stop_ps, end, -start)  # as _in_at orders them
        keep[mine[np.flatnonzero(key == key.max())[-1]]] = True
        keep[mine[np.flatnonzero(end == end.max())[-1]]] = True
    return events.iloc[ops.rows[keep]]


FLOOR_SHARE = 8  # a chip's candidates: its ops ending in the last eighth of its ops' time span (or its last k)


class Ends(NamedTuple):
    """What a part of a profile gives ``last_ops`` and ``chips`` (``ends``)."""

    candidates: pd.DataFrame  # per chip, the ops ending at or after its floor and those ending last before it
    floors: pd.DataFrame      # rank, device, floor_ps per chip
    stop_ps: int              # its first chip's stop (its chips' earliest last end; -1 without device ops)
    at_stop: pd.DataFrame     # ``at_stop`` of its own first stop


def ends(events: pd.DataFrame, k: int = 5) -> Ends:
    """The events ``last_ops(k)`` and ``chips`` pick from: ``candidates`` (the frame's order) always give
    the last ``k`` ops, and the op a chip was in at any first stop past its floor (the earlier of its
    k-th latest end and its last end less an eighth of its span); ``at_stop``, at this part's own first
    stop. Chips of disjoint parts of a profile (``perfkit.trace.shards``) each give theirs; stacked, they
    give what the whole frame gives wherever the first stop is past every floor of a part, or is the part's own."""
    ops = _ops(events)
    by_chip = _by_chip(ops)
    floor, last = np.zeros(len(ops.chips), np.int64), np.zeros(len(ops.chips), np.int64)
    keep = np.zeros(ops.rows.size, bool)
    for c, mine in enumerate(by_chip):
        end = ops.end[mine]
        last[c] = end.max()
        span = int(last[c]) - int(ops.start[mine].min())
        floor[c] = min(_kth_latest_end(end, k), int(end.max()) - span // FLOOR_SHARE)
        late = end >= floor[c]
        if not late.all():  # the latest ending before the floor: the op in progress at a stop just after it
            late |= end == end[~late].max()
        keep[mine[late]] = True
    rows, floors = events.iloc[ops.rows[keep]], ops.chips.assign(floor_ps=floor)
    if not len(ops.chips):
        return Ends(rows, floors, -1, rows)
    stop = int(last.min())
    return Ends(rows, floors, stop, _at_stop(events, ops, by_chip, stop))
