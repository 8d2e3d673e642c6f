"""A TPU op's two clocks, and where they part.

An XSpace's TPU op is placed in the trace on the host-synchronized clock (what xprof's trace viewer
shows, and what every perfkit figure but ``hlo_stats`` measures: the ops' times against each other and
their steps' spans), and carries its time on the chip's own clock as stats (``device_offset_ps``,
``device_duration_ps``: what xprof's op_profile and hlo_stats count). The synchronization moves time
between neighbouring ops: on xprof's own 4-chip profile a third of the ops' two durations part by more
than 1%, while each chip's sums agree closely. The outputs name it where it happens.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfkit.trace.events import chip_frame, chip_key, run_starts

COLUMNS = ("rank", "device", "dur_ps", "device_duration_ps")  # all ``parted`` reads
PARTED = 0.01  # an op's two durations part where they differ by more than this share of the chip's


def parted(events: pd.DataFrame) -> list[dict]:
    """Per chip whose ops carry their chip's clock, in order: ``{rank, device, ops, parted, parted_ps}``: how
    many carry it, on how many the trace's duration parts from the chip's by more than ``PARTED``, and the
    differences summed (ps, each taken whole); none from a frame built without the chip clock's column.
    Plain records: they ride in frames' ``attrs``."""
    if "device_duration_ps" not in events:
        return []
    own = events["device_duration_ps"].to_numpy()
    carry = own >= 0
    if not carry.any():
        return []
    gap = np.abs(events["dur_ps"].to_numpy() - own)
    part = carry & (gap > PARTED * own)
    gap *= part
    # per run of one chip's rows (a chip's events come together), then per chip
    rank, device = events["rank"].to_numpy(), events["device"].to_numpy()
    first = run_starts(rank, device)
    keys, chip = np.unique(chip_key(rank[first], device[first]), return_inverse=True)
    sums = [np.bincount(chip, weights=np.add.reduceat(x, first, dtype=np.int64), minlength=keys.size)
            for x in (carry, part, gap)]  # (float64: exact below 2**53)
    chips = chip_frame(keys, events["rank"].dtype, events["device"].dtype)
    return [{"rank": int(r), "device": int(d), "ops": int(n), "parted": int(k), "parted_ps": int(t)}
            for r, d, n, k, t in zip(chips["rank"], chips["device"], *sums) if n]
