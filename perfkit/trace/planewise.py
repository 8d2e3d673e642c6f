"""The breakdown of large XSpaces one plane at a time, in worker processes: the rows
``breakdown(load(paths, columns=EVENT_COLUMNS))`` gives, without one process holding and sweeping every
chip's events.

A chip's rows read only its own ops and the step markers that hold for it, and on a TPU profile both sit
on the chip's plane (``XLA Ops`` and ``Steps``). So each plane is read, classified and broken down by
itself, one process per core, and the parent stacks the rows (one per chip and step). Planes cross only
where a chip has no markers of its own and its host has step annotations, where the host plane runs ops
of a device another plane has, or where a rank's traces are in several files; those, a ``--steps``
pattern, Kineto files, files too small to pay for workers and anything the readers refuse are read
together instead (``events.load``), which also says what is wrong with a bad file.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from perfkit.errors import BadInput
from perfkit.trace import breakdown as analysis
from perfkit.trace import events, xplane
from perfkit.trace.classify import CATEGORIES

_KEYS = ["rank", "device", "step"]


class _PlaneRows(NamedTuple):
    """What a worker returns for one plane: its rows and what says whether they stand alone."""

    file: int
    origin_ns: int | None    # the plane's first line timestamp; None: no events read
    rows: pd.DataFrame | None  # its breakdown, start_ps from origin_ns
    markers: np.ndarray      # (k,) int32 devices its step markers hold for, each once (-1: the host's)
    op_devices: np.ndarray   # (d,) int32 devices its ops run on


def _plane_rows(task: tuple[xplane.PlaneJob, list[xplane.PlaneJob], int, str, str]) -> _PlaneRows | None:
    """One plane read and broken down by itself; None where the readers refuse it (the caller reads the
    files together, which says why)."""
    job, metadata, rank, host, window = task
    try:
        raw = xplane.read_plane(job, metadata, rank, host)
        if raw is None:
            return _PlaneRows(job.file, None, None, np.zeros(0, np.int32), np.zeros(0, np.int32))
        frame = events.frame(raw, None, 0, events.wanted_columns(analysis.EVENT_COLUMNS))
    except BadInput:
        return None
    category, device = frame["category"].cat, frame["device"].to_numpy()
    codes = category.codes.to_numpy()
    markers = np.unique(device[codes == category.categories.get_loc("step")])
    op_devices = np.unique(device[np.isin(codes, category.categories.get_indexer(list(CATEGORIES)))])
    return _PlaneRows(job.file, raw.origin_ns, analysis.breakdown(frame, window), markers, op_devices)


def _stands_alone(planes: list[_PlaneRows], window: str) -> bool:
    """Whether one file's planes, broken down apart, give the rows of the file broken down whole."""
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


def _steps_from(planes: list[_PlaneRows]) -> str:
    """Where one file's steps come from, as ``steps.assign`` names it."""
    markers = np.concatenate([p.markers for p in planes])
    return "Steps line" if (markers >= 0).any() else "step annotations" if markers.size else "none"


def _read_apart(files: list[tuple[Path, int]], window: str, workers: int) -> tuple[pd.DataFrame, list[str]] | None:
    """The rows and steps_from of ``files`` from their planes broken down apart; None where that would
    not give the rows of the files read together."""
    if workers < 2 or not xplane.fork_safe() or not all(events.is_xplane(f) for f, _ in files):
        return None
    if len({rank for _, rank in files}) < len(files):
        return None  # a rank's traces in several files: its spans may join them
    tasks = []
    for i, (path, rank) in enumerate(files):
        try:
            host, jobs = xplane.planes(path, i)
        except BadInput:
            return None
        if any(job.name is None for job in jobs):
            return None  # a plane whose name comes after its lines: which holds the programs is unknown
        metadata = [job for job in jobs if job.name == "/host:metadata"]
        tasks += [(job, metadata, rank, host, window) for job in jobs if xplane.events_read(job.name)]
    if len(tasks) < 2 or sum(t[0].end - t[0].start for t in tasks) < xplane.PARALLEL_BYTES:
        return None
    tasks.sort(key=lambda t: t[0].start - t[0].end)  # the largest first: the workers finish together
    with multiprocessing.get_context("fork").Pool(min(workers, len(tasks))) as pool:
        results = pool.map(_plane_rows, tasks, chunksize=1)
    if any(r is None for r in results):
        return None
    by_file = [[r for r in results if r.file == i and r.origin_ns is not None] for i in range(len(files))]
    if not all(by_file) or not all(_stands_alone(planes, window) for planes in by_file):
        return None
    origin = min(r.origin_ns for planes in by_file for r in planes)
    if any((r.origin_ns - origin) * 1000 >= 2**62 for planes in by_file for r in planes):
        return None  # clocks apart: the files read together say so
    parts = [r.rows.assign(start_ps=r.rows["start_ps"] + (r.origin_ns - origin) * 1000)
             for planes in by_file for r in planes if len(r.rows)]
    if not parts:
        return None  # no device ops: the command says so
    rows = pd.concat(parts, ignore_index=True)
    if rows.duplicated(_KEYS).any():
        return None  # one step of one chip in two files: the files read together refuse them
    rows = rows.sort_values(_KEYS, kind="stable", ignore_index=True)
    return rows, sorted({_steps_from(planes) for planes in by_file})


def breakdown_traces(paths: list[str | Path], step_pattern: str | None = None, window: str = "step",
                     workers: int | None = None) -> tuple[pd.DataFrame, list[str]]:
    """``breakdown.breakdown`` of the traces at ``paths`` and the events' ``steps_from``: from their planes
    broken down apart in ``workers`` processes (default one per core) where that gives the same rows,
    else from all events read together."""
    files = events.ranked_files(list(paths))
    if step_pattern is None:
        apart = _read_apart(files, window, workers or len(os.sched_getaffinity(0)))
        if apart is not None:
            return apart
    frame = events.load(list(paths), step_pattern, workers, analysis.EVENT_COLUMNS)
    return analysis.breakdown(frame, window), frame.attrs["steps_from"]
