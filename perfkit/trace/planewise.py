"""Per-chip analyses of large XSpaces one plane at a time, in worker processes: the breakdown, the diff's
device time, the tail and the collectives, as ``breakdown(load(...))``, ``diff(load(...), load(...))``,
``tail``'s functions and ``collectives.analyse(load(...))`` give them, without one process holding and
sweeping every chip's events.

A chip's figures read only its own ops and the step markers that hold for it, and on a TPU profile both
sit on the chip's plane (``XLA Ops`` and ``Steps``). So each plane is read, classified and measured by
itself, one process per core, and the parent only combines the results (breakdown rows stacked, the
diff's sums added, the tail picked from each chip's last ops, each chip's collective instances matched
across the chips: ``collectives.matched``); a file of small planes (one host's share
of a big job's profile) is one task, read whole. Planes cross only where a chip has no markers of its own
and its host has step annotations, where the host plane runs ops of a device another plane has, or where
a rank's traces are in several files; those, a ``--steps`` pattern, Kineto files,
files too small to pay for workers, anything the readers or an analysis refuse and a first stop before a
chip's last ops (the tail) are read together instead (``events.load``), which also says what is wrong with a bad file.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pandas as pd

from perfkit.common.workers import Pool, may_start_workers, usable_cores
from perfkit.errors import BadInput
from perfkit.trace import breakdown as breakdowns
from perfkit.trace import collectives as collective_instances
from perfkit.trace import diff as diffs
from perfkit.trace import tail as tails
from perfkit.trace import events, timeline, xplane

# Planes below this size on average are analysed with the rest of their file, one task a file: each analysis
# has fixed costs (a frame, the spans' pandas merges) that a folder of 16 small files paid 64 times.
SMALL_PLANE_BYTES = 4 << 20


class _Plane(NamedTuple):
    """What a worker returns for one plane (or a file read whole): the analysis of it, and what says
    whether that stands alone."""

    file: int
    offset: int              # where the plane is in its file: planes in this order are a file's frame's order
    origin_ns: int | None    # the plane's first line timestamp (its start_ps 0); None: no events read
    result: object           # the analysis of the plane's events
    markers: np.ndarray      # (k,) int32 devices its step markers hold for, each once (-1: the host's)
    op_devices: np.ndarray   # (d,) int32 devices its ops run on


class _Task(NamedTuple):
    jobs: list[xplane.PlaneJob]      # one plane; or every plane of a file of small planes, read together
    metadata: list[xplane.PlaneJob]  # the file's /host:metadata planes (its programs)
    rank: int
    host: str
    window: str                      # the spans the analysis measures in ("step": markers count)
    analysis: Callable               # events frame -> result; picklable
    columns: tuple[str, ...]         # the events columns it reads


def _plane(task: _Task) -> _Plane | None:
    """One plane (or a file of small planes) read and analysed by itself: its ``_Plane``; None where the
    readers or the analysis refuse it (the caller then reads the files together, which says why)."""
    job = task.jobs[0]
    try:
        raw = xplane.read_planes(task.jobs, task.metadata, task.rank, task.host)
        if raw is None:
            return _Plane(job.file, job.start, None, None, np.zeros(0, np.int32), np.zeros(0, np.int32))
        frame = events.frame(raw, None, 0, events.wanted_columns(task.columns))
        result = task.analysis(frame)
    except BadInput:
        return None
    category, device = frame["category"].cat, frame["device"].to_numpy()
    codes = category.codes.to_numpy()
    markers = np.unique(device[codes == category.categories.get_loc("step")])
    op_devices = np.unique(device[events.is_device_op(frame)])
    return _Plane(job.file, job.start, raw.origin_ns, result, markers, op_devices)


def _bytes(jobs: list[xplane.PlaneJob]) -> int:
    return sum(job.end - job.start for job in jobs)


def _stands_alone(planes: list[_Plane], window: str) -> bool:
    """Whether one file's planes, analysed apart, give the figures of the file analysed whole."""
    op_devices = [p.op_devices for p in planes]
    if sum(d.size for d in op_devices) != np.unique(np.concatenate(op_devices)).size:
        return False  # a device's ops on two planes (host-plane ops of a device plane's chip)
    if window == "trace":
        return True
    annotated = [bool((p.markers == -1).any()) for p in planes]  # the host's step annotations
    for p, own in zip(planes, annotated):
        if np.setdiff1d(p.op_devices, p.markers).size and not own and any(annotated):
            return False  # chips without markers take the host's annotations from another plane
    return True


def _steps_from(planes: list[_Plane]) -> str:
    """Where one file's steps come from, as ``steps.assign`` names it."""
    markers = np.concatenate([p.markers for p in planes])
    return "Steps line" if (markers >= 0).any() else "step annotations" if markers.size else "none"


def _apart(paths: list[str | Path], step_pattern: str | None, window: str, workers: int | None, analysis: Callable,
           columns: tuple[str, ...]) -> tuple[list[_Plane], list[str]] | None:
    """``analysis`` of every plane with events of the traces at ``paths``, and the steps_from of the files;
    None where analysing the planes apart would not give the figures of the files read together."""
    files = events.ranked_files(list(paths))
    workers = workers or usable_cores()
    if step_pattern is not None or workers < 2 or not may_start_workers():
        return None
    if not all(events.is_xplane(f) for f, _ in files) or len({rank for _, rank in files}) < len(files):
        return None  # Kineto files; or a rank's traces in several files, whose spans may join them
    tasks = []
    for i, (path, rank) in enumerate(files):
        try:
            host, jobs = xplane.planes(path, i)
        except BadInput:
            return None
        if any(job.name is None for job in jobs):
            return None  # a plane whose name comes after its lines: which holds the programs is unknown
        metadata = [job for job in jobs if job.name == "/host:metadata"]
        read = [job for job in jobs if xplane.events_read(job.name)]
        small = len(read) > 1 and _bytes(read) < SMALL_PLANE_BYTES * len(read)
        per_task = [read] if small else [[job] for job in read]  # small planes: the file is one task
        tasks += [_Task(task_jobs, metadata, rank, host, window, analysis, columns) for task_jobs in per_task]
    if len(tasks) < 2 or sum(_bytes(t.jobs) for t in tasks) < xplane.PARALLEL_BYTES:
        return None
    tasks.sort(key=lambda t: -_bytes(t.jobs))  # the largest first: the workers finish together
    with Pool(min(workers, len(tasks))) as pool:
        results = pool.map(_plane, tasks)
    if any(r is None for r in results):
        return None
    results.sort(key=lambda r: (r.file, r.offset))
    by_file = [[r for r in results if r.file == i and r.origin_ns is not None] for i in range(len(files))]
    if not all(by_file) or not all(_stands_alone(planes, window) for planes in by_file):
        return None
    planes = [p for file_planes in by_file for p in file_planes]
    origin = min(p.origin_ns for p in planes)
    if any((p.origin_ns - origin) * 1000 >= 2**62 for p in planes):
        return None  # clocks apart: the files read together say so
    return planes, sorted({_steps_from(file_planes) for file_planes in by_file})


def _shifts(planes: list[_Plane]) -> list[int]:
    """Each plane's times (from its own origin) to add for the files' one origin, ps."""
    origin = min(p.origin_ns for p in planes)
    return [(p.origin_ns - origin) * 1000 for p in planes]


def _stacked(rows: list[pd.DataFrame], shifts: list[int]) -> pd.DataFrame | None:
    """Breakdown rows of planes analysed apart as those of the files read together; None without any."""
    parts = [r.assign(start_ps=r["start_ps"] + shift) for r, shift in zip(rows, shifts) if len(r)]
    if not parts:  # (no device ops: read together, for the command to say so)
        return None
    return pd.concat(parts, ignore_index=True).sort_values(["rank", "device", "step"], kind="stable", ignore_index=True)


def breakdown_traces(paths: list[str | Path], step_pattern: str | None = None, window: str = "step",
                     workers: int | None = None) -> tuple[pd.DataFrame, list[str]]:
    """``breakdown.breakdown`` of the traces at ``paths`` and the events' ``steps_from``: from their planes
    broken down apart in ``workers`` processes (default one per core) where that gives the same rows,
    else from all events read together."""
    apart = _apart(paths, step_pattern, window, workers, functools.partial(breakdowns.breakdown, window=window),
                   timeline.COLUMNS)
    if apart is not None:
        planes, steps_from = apart
        rows = _stacked([p.result for p in planes], _shifts(planes))
        if rows is not None:
            return rows, steps_from
    frame = events.load(list(paths), step_pattern, workers, breakdowns.EVENT_COLUMNS)
    return breakdowns.breakdown(frame, window), frame.attrs["steps_from"]


def _collectives(frame: pd.DataFrame) -> tuple[pd.DataFrame, collective_instances.ChipInstances]:
    return breakdowns.breakdown(frame), collective_instances.chip_instances(frame)


def collectives_traces(paths: list[str | Path], step_pattern: str | None = None, workers: int | None = None
                       ) -> tuple[dict, list[str]]:
    """``collectives.analyse`` of the traces at ``paths`` and the events' ``steps_from``: from each plane's
    breakdown and chip instances (``collectives.chip_instances``), stacked and matched across chips,
    where planes apart give the same, else from all events read together."""
    apart = _apart(paths, step_pattern, "step", workers, _collectives, collective_instances.EVENT_COLUMNS)
    if apart is not None:
        planes, steps_from = apart
        shifts = _shifts(planes)
        rows = _stacked([p.result[0] for p in planes], shifts)
        if rows is not None:
            found = collective_instances.stack([(p.result[1], shift) for p, shift in zip(planes, shifts)])
            del planes, apart  # the workers' results, stacked: their memory freed before the matching's
            return collective_instances.tables(collective_instances.matched(found), rows), steps_from
    frame = events.load(list(paths), step_pattern, workers, collective_instances.EVENT_COLUMNS)
    return collective_instances.analyse(frame), frame.attrs["steps_from"]


def _trial(frame: pd.DataFrame) -> tuple[pd.DataFrame, tuple[pd.DataFrame, int], collective_instances.ChipInstances]:
    laid = timeline.layout(frame)  # one sweep for the breakdown and the op table
    return (breakdowns.breakdown(frame, layout=laid), diffs.op_time(frame, "kind", layout=laid),
            collective_instances.chip_instances(frame))


TRIAL_COLUMNS = tuple(dict.fromkeys(collective_instances.EVENT_COLUMNS + diffs.EVENT_COLUMNS["kind"]))


def trial_apart(paths: list[str | Path], workers: int | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame, dict, list[str]] | None:
    """What a run's summary takes from one trial's traces, from their planes analysed apart: the breakdown
    rows, the op table (``diff.per_step`` by kind), ``collectives.analyse`` and the events' ``steps_from``;
    None where planes apart would not give what the traces read together give (the caller reads them so)."""
    apart = _apart(paths, None, "step", workers, _trial, TRIAL_COLUMNS)
    if apart is None:
        return None
    planes, steps_from = apart
    shifts = _shifts(planes)
    rows = _stacked([p.result[0] for p in planes], shifts)
    sums = [p.result[1] for p in planes if p.result[1][1]]
    if rows is None or not sums:  # no device ops: read together, for the summary to say so
        return None
    table = diffs.per_key(pd.concat([groups for groups, _ in sums], ignore_index=True), sum(n for _, n in sums))
    found = collective_instances.stack([(p.result[2], shift) for p, shift in zip(planes, shifts)])
    del planes, apart  # the workers' results, stacked: their memory freed before the matching's
    return rows, table, collective_instances.tables(collective_instances.matched(found), rows), steps_from


def _per_key(paths: list[str | Path], by: str, step_pattern: str | None, window: str, workers: int | None
             ) -> pd.DataFrame:
    columns = diffs.EVENT_COLUMNS[by]
    apart = _apart(paths, step_pattern, window, workers, functools.partial(diffs.op_time, by=by, window=window),
                   columns)
    if apart is not None:
        sums = [p.result for p in apart[0] if p.result[1]]
        if sums:  # (none: read together, for per_step to say there are no device ops)
            return diffs.per_key(pd.concat([g for g, _ in sums], ignore_index=True), sum(n for _, n in sums), by)
    return diffs.per_step(events.load(list(paths), step_pattern, workers, columns), by, window)


def diff_traces(a: list[str | Path], b: list[str | Path], by: str = "kind", step_pattern: str | None = None,
                window: str = "step", workers: int | None = None) -> pd.DataFrame:
    """``diff.diff`` of the traces at ``a`` and at ``b``: each side's device time per key summed over its
    planes analysed apart where that gives the same sums, else over all its events read together."""
    return diffs.compare(*(_per_key(paths, by, step_pattern, window, workers) for paths in (a, b)))


def tail_traces(paths: list[str | Path], k: int = 5, workers: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``tail.chips`` and ``tail.last_ops(k)`` of the traces at ``paths``: picked from each plane's
    candidates (``tail.candidates``) where the first chip to stop stops past every chip's floor, else
    from all events read together."""
    apart = _apart(paths, None, "step", workers, functools.partial(tails.candidates, k=k), tails.EVENT_COLUMNS)
    if apart is not None:
        origin = min(p.origin_ns for p in apart[0])  # of every plane read, as the files' frames count from
        planes = [(p.result, (p.origin_ns - origin) * 1000) for p in apart[0] if len(p.result[0])]
        if planes:  # (none: read together, for the command to say there are no device ops)
            picked = events.concat([ops.assign(start_ps=ops["start_ps"] + shift) for (ops, _), shift in planes])
            floors = pd.concat([floor["floor_ps"] + shift for (_, floor), shift in planes])
            chips = tails.chips(picked)
            if (chips["last_end_ps"].min() >= floors).all():
                return chips, tails.last_ops(picked, k)
    frame = events.load(list(paths), None, workers, tails.EVENT_COLUMNS)
    return tails.chips(frame), tails.last_ops(frame, k)
