"""The end of each chip's trace, for hangs: its last device ops, which chips stopped earliest, and what
the others were in at that moment (a chip stuck in a matmul while the rest wait in a collective shows
as one early stop and a column of ``ici`` ops)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfkit.trace.events import device_ops

OP_COLUMNS = ["rank", "device", "step", "name", "kind", "category", "start_ps", "end_ps", "dur_ps"]
EVENT_COLUMNS = tuple(c for c in OP_COLUMNS if c != "end_ps")  # all it reads


def last_ops(events: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The last ``k`` device ops of each (rank, device) by end time, oldest first."""
    ops = device_ops(events)
    ops = ops.assign(end_ps=ops["start_ps"] + ops["dur_ps"]).sort_values(["rank", "device", "end_ps"], kind="stable")
    return ops.groupby(["rank", "device"]).tail(k)[OP_COLUMNS].reset_index(drop=True)


def chips(events: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device), earliest stop first: ``last_end_ps``, ``before_last_ps`` (how long
    before the last chip to stop it stopped), and the op it was in when the first chip stopped
    (``at_first_stop_*``: the op running then, else its last op before then, else its first op after)."""
    ops = device_ops(events)
    ops = ops.assign(end_ps=ops["start_ps"] + ops["dur_ps"])
    last = ops.groupby(["rank", "device"])["end_ps"].max().rename("last_end_ps").reset_index()
    last = last.sort_values(["last_end_ps", "rank", "device"], kind="stable").reset_index(drop=True)
    first_stop = int(last["last_end_ps"].iloc[0])
    last["before_last_ps"] = int(last["last_end_ps"].max()) - last["last_end_ps"]
    # the op covering the first stop; else the latest one ending before it; else the earliest after
    ops = ops.assign(rank_key=np.where(ops["start_ps"] <= first_stop,
                                       np.where(ops["end_ps"] > first_stop, 2, 1), 0),
                     time_key=np.where(ops["start_ps"] <= first_stop, ops["end_ps"], -ops["start_ps"]))
    at = (ops.sort_values(["rank_key", "time_key"], kind="stable").groupby(["rank", "device"]).tail(1)
          [["rank", "device", "name", "kind", "category"]]
          .rename(columns={c: f"at_first_stop_{c}" for c in ("name", "kind", "category")}))
    return last.merge(at, on=["rank", "device"], how="left")
