"""The end of each chip's trace, for hangs: its last device ops, which chips stopped earliest, and what
the others were in at that moment (a chip stuck in a matmul while the rest wait in a collective shows
as one early stop and a column of ``ici`` ops).

Both read the frame's columns as arrays and pick rows per chip with a few linear passes (a per-chip
maximum, a radix sort by chip), never sorting the millions of ops of a large profile.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from perfkit.trace.classify import CATEGORIES

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
    category = events["category"].cat
    rows = np.flatnonzero(np.isin(category.codes.to_numpy(), category.categories.get_indexer(list(CATEGORIES))))
    rank, device = events["rank"].to_numpy()[rows], events["device"].to_numpy()[rows]
    packed = (rank.astype(np.int64) << 32) | (device.astype(np.int64) + 2**31)  # orders like (rank, device)
    chip, keys = pd.factorize(packed, sort=True)
    chips = pd.DataFrame({"rank": (keys >> 32).astype(rank.dtype),
                          "device": ((keys & 0xFFFFFFFF) - 2**31).astype(device.dtype)})
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


def last_ops(events: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The last ``k`` device ops of each (rank, device) by end time, oldest first (ops ending together in
    the frame's order)."""
    ops = _ops(events)
    by_chip = np.argsort(ops.chip, kind="stable")  # a radix sort of small ints: each chip's ops together, in order
    bounds = np.searchsorted(ops.chip[by_chip], np.arange(len(ops.chips) + 1))
    picked = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        mine = by_chip[a:b]
        end = ops.end[mine]
        if end.size > k:  # only ops ending at or after the k-th latest end can be among the last k
            mine = mine[end >= np.partition(end, end.size - k)[end.size - k]]
        order = np.lexsort((mine, ops.end[mine]))  # by end, then by position: the frame's order at ties
        picked.append(mine[order][-k:])
    take = np.concatenate(picked) if picked else np.zeros(0, np.int64)
    out = events.iloc[ops.rows[take]].assign(end_ps=ops.end[take])
    return out[OP_COLUMNS].reset_index(drop=True)


def chips(events: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device), earliest stop first: ``last_end_ps``, ``before_last_ps`` (how long
    before the last chip to stop it stopped), and the op it was in when the first chip stopped
    (``at_first_stop_*``: the op running then, else its last op before then, else its first op after);
    no rows without device ops."""
    ops = _ops(events)
    n = len(ops.chips)
    if not n:
        return pd.DataFrame(columns=["rank", "device", "last_end_ps", "before_last_ps",
                                     *(f"at_first_stop_{c}" for c in ("name", "kind", "category"))])
    last_end = _last_per_chip(ops.chip, ops.end, n)
    first_stop = int(last_end.min())
    # The op covering the first stop (the latest-ending one), else the latest one ending before it, else
    # the earliest after; at ties the last in the frame's order. One key orders them: an op that started
    # by then counts its end (a covering op ends after every op that ended before), one after -start.
    key = np.where(ops.start <= first_stop, ops.end, -ops.start)
    best = key == _last_per_chip(ops.chip, key, n)[ops.chip]
    at = _last_per_chip(ops.chip, np.arange(ops.rows.size), n, best)
    out = ops.chips.assign(last_end_ps=last_end)
    out["before_last_ps"] = int(last_end.max()) - out["last_end_ps"]
    for column in ("name", "kind", "category"):
        out[f"at_first_stop_{column}"] = events[column].iloc[ops.rows[at]].array
    return out.sort_values(["last_end_ps", "rank", "device"], kind="stable", ignore_index=True)
