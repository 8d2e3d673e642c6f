"""Device time per (program, HLO op), defined as xprof's ``hlo_stats`` tool defines it, so that tool can
referee perfkit's reading of a profile:

- an op's occurrences, total time and self time (total minus the time of the ops nested inside it on
  the same line: a ``while`` around its body; on a GPU stream, where kernels never nest, the total) are
  summed over every chip and rank;
- every device event is one occurrence, also where one HLO op launches several GPU kernels in a row
  (xprof 2.24 counts them so: 79 occurrences of ``cudnn-conv.1``, two kernels each, in the MI300 fixture);
- device events with no HLO op or no program (GPU kernels launched outside XLA, copies) are not in
  those rows: ``unattributed`` counts them apart, by name.

Only device ops count: the ``Async XLA Ops`` line (in-flight spans of async pairs), step markers and
module spans do not, as in xprof.

An op that carries its time on the chip's own clock (a TPU's ``device_offset_ps`` / ``device_duration_ps``)
is timed and nested by it, as xprof does; the trace's (host-synchronized) times of the same ops, which
every other perfkit figure uses, can part from it by tens of milliseconds (the test on xprof's own TPU profile
``tpu_inference_2`` pins one such op, ``copy-done.2``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfkit.trace.events import device_ops
from perfkit.trace.timeline import on_gpu_stream, parents

COLUMNS = ["program_id", "hlo_module", "hlo_op", "occurrences", "total_ps", "self_ps"]


def _timed(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each op's start and duration (n,) int64 as xprof times it: on its chip's own clock where it
    carries that, else the trace's."""
    start, dur = ops["start_ps"].to_numpy(np.int64), ops["dur_ps"].to_numpy(np.int64)
    own_start, own_dur = ops["device_offset_ps"].to_numpy(np.int64), ops["device_duration_ps"].to_numpy(np.int64)
    own = (own_start >= 0) & (own_dur >= 0)
    return np.where(own, own_start, start), np.where(own, own_dur, dur)


def _self_ps(ops: pd.DataFrame, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each op's duration less that of the ops nested directly inside it on its line (whole trace); a GPU
    stream's kernel its whole duration (kernels never nest: xprof's reading too)."""
    line = ops.groupby(["rank", "device", "line"], observed=True, sort=False).ngroup().to_numpy(np.int64)
    parent = parents(line, start, start + dur)
    child = np.flatnonzero(parent >= 0)
    inner = np.bincount(parent[child], weights=dur[child], minlength=len(ops))
    return np.where(on_gpu_stream(ops["line"]), dur, dur - inner.astype(np.int64))


def attributed(ops: pd.DataFrame) -> np.ndarray:
    """(n,) bool: device ops that name both their HLO op and their program."""
    return (ops["hlo_op"].notna() & ops["program_id"].notna()).to_numpy()


def hlo_stats(events: pd.DataFrame) -> pd.DataFrame:
    """One row per (program_id, hlo_module (its program's), hlo_op): ``occurrences``, ``total_ps``, ``self_ps`` (columns
    ``COLUMNS``), largest self time first."""
    ops = device_ops(events)
    start, dur = _timed(ops)
    ops = ops.assign(time_ps=dur, self_ps=_self_ps(ops, start, dur))[attributed(ops)]
    if ops.empty:
        return pd.DataFrame(columns=COLUMNS)
    out = (ops.groupby(["program_id", "hlo_module", "hlo_op"], observed=True, dropna=False)
           .agg(occurrences=("time_ps", "size"), total_ps=("time_ps", "sum"), self_ps=("self_ps", "sum"))
           .reset_index())
    out["hlo_op"], out["hlo_module"] = out["hlo_op"].astype(str), out["hlo_module"].astype(str)
    return out.sort_values(["self_ps", "hlo_op"], ascending=[False, True], ignore_index=True)[COLUMNS]


def unattributed(events: pd.DataFrame) -> pd.DataFrame:
    """Device ops outside ``hlo_stats`` (no HLO op or no program), per name: ``count``, ``total_ps``."""
    ops = device_ops(events)
    ops = ops[~attributed(ops)]
    out = ops.groupby("name", observed=True).agg(count=("dur_ps", "size"), total_ps=("dur_ps", "sum")).reset_index()
    out["name"] = out["name"].astype(str)
    return out.sort_values(["total_ps", "name"], ascending=[False, True], ignore_index=True)
