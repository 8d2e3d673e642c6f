"""One path for every trace analysis: the traces cut into shards that stand alone, each shard read and
analysed by the same function (in worker processes where there are several shards, else here), and
the shards' results combined by the same code whether there is one shard or many.

The cut (``cut``) is decided from what the files say before any event is decoded: their names, ranks,
plane names and sizes, and the heads of a few planes (``xplane.plane_head``):

- a ``--steps`` pattern (its markers may sit on any plane), a Kineto file, a rank in several files, a
  plane named after its lines, or traces too small to pay for workers: one shard, the files read
  together (``events.load``);
- else each XSpace file is a shard, or, where its planes are big, each plane is, save planes that need
  each other: a host plane that may run a device's ops (``hlo_op`` and ``device_ordinal`` stats) keeps
  its file one shard; one that may annotate steps (a ``step_num`` stat) takes along the device planes
  without a ``Steps`` line (their steps are its annotations).

Each shard's result carries its origin (the wall clock of its start_ps 0), its step markers and what it
measured. The combine moves every result to the earliest origin (breakdown rows stacked, the diff's sums
added, the tail picked from each chip's candidates, collective instances stacked and matched across
chips), names each file's step source, and refuses a file as ``events.load`` would (no events, clocks
apart). A device plane apart whose steps would be its host's annotations read with them (its own markers
instants, or none where its ``Steps`` line is another) is refused in one line: ``--steps`` reads its
file as one shard.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pandas as pd

from perfkit.common.workers import Pool, may_start_workers, usable_cores
from perfkit.errors import BadInput
from perfkit.trace import breakdown, collectives, diff, events, steps, tail, timeline, xplane
from perfkit.trace.raw import ROLES

# Planes below this size on average are a shard with the rest of their file: each analysis has fixed costs
# (a frame, the spans' pandas merges) that a folder of 16 small files paid 64 times.
SMALL_PLANE_BYTES = 4 << 20
_HOST_PLANE = "/host:CPU"


class Shard(NamedTuple):
    """Traces read and analysed by themselves."""

    files: list[tuple[Path, int]]       # (path, rank): a plane shard's one file
    planes: list[xplane.PlaneJob] | None  # the file's planes it reads; None: the ``paths`` whole
    paths: list[str | Path]             # files and folders read together (``events.load``), where ``planes`` is None
    metadata: list[xplane.PlaneJob]     # the file's /host:metadata planes (its programs)
    host: str                           # the file's host name
    start_ns: int | None                # the file's ``xplane.profile_start``
    step_pattern: str | None
    annotated: bool                     # its file's host plane may annotate steps
    with_host: bool                     # it holds its file's host plane

    @property
    def bytes(self) -> int:
        return sum(job.end - job.start for job in self.planes or ())


class Cut(NamedTuple):
    """Traces cut into shards."""

    files: list[tuple[Path, int]]  # every trace file (``events.ranked_files``)
    shards: list[Shard]            # several only where they pay for ``workers`` processes
    workers: int


class Part(NamedTuple):
    """What the map returns for one shard."""

    result: object             # the analysis of the shard's events; None: no events, or ``error``
    origin_ns: int | None      # the wall clock of its start_ps 0; None: no events
    files: list[str]           # the files its events came from
    sources: list[str]         # where its steps came from, as its frame says (``steps.assign``)
    first_marker: str | None   # the name of its first step marker
    markers: np.ndarray        # (k,) int32 the devices its step markers hold for (-1: the host's)
    unmarked: np.ndarray       # (d,) int32 devices with ops and no markers of their own (annotated files)
    instants: list[int]        # devices whose own markers are instants (annotated files)
    measured: list[str]
    error: BadInput | None


def cut(paths: list[str | Path], step_pattern: str | None = None, window: str = "step", workers: int | None = None
        ) -> Cut:
    """The traces at ``paths`` cut into shards (the module docstring says how)."""
    files = events.ranked_files(list(paths))
    workers = workers or usable_cores()
    whole = Cut(files, [Shard(files, None, list(paths), [], "", None, step_pattern, False, True)], workers)
    if step_pattern is not None or workers < 2 or not may_start_workers():
        return whole
    if not all(events.is_xplane(f) for f, _ in files) or len({rank for _, rank in files}) < len(files):
        return whole  # Kineto files; or a rank's traces in several files, whose spans may join them
    shards = []
    for i, (path, rank) in enumerate(files):
        host, jobs = xplane.planes(path, i)
        if any(job.name is None for job in jobs):
            return whole  # a plane whose name comes after its lines: which holds the programs is unknown
        metadata = [job for job in jobs if job.name == "/host:metadata"]
        read = [job for job in jobs if xplane.events_read(job.name)]
        start = xplane.profile_start(jobs)
        shards += [Shard([(path, rank)], group, [], metadata, host, start, None, annotated,
                         any(job.name == _HOST_PLANE for job in group)) for group, annotated in _groups(read, window)]
    if len(shards) < 2 or sum(s.bytes for s in shards) < xplane.PARALLEL_BYTES:
        return whole
    return Cut(files, shards, workers)


def _groups(read: list[xplane.PlaneJob], window: str) -> list[tuple[list[xplane.PlaneJob], bool]]:
    """One file's planes whose events are read, in groups that stand alone, each with whether the file's
    host may annotate steps."""
    if len(read) < 2 or sum(job.end - job.start for job in read) < SMALL_PLANE_BYTES * len(read):
        return [(read, False)] if read else []
    host = [job for job in read if job.name == _HOST_PLANE]
    stats = xplane.plane_head(host[0]).stats if host else frozenset()
    if {"hlo_op", "device_ordinal"} <= stats:
        return [(read, False)]  # the host may run a device's ops: that device's plane and it together
    if "step_num" not in stats or not window.startswith("step"):
        return [([job], False) for job in read]
    devices = [job for job in read if xplane.device_plane(job.name)]
    along = [job for job in devices if not xplane.plane_head(job).stepped]  # their steps: the host's annotations
    apart = [job for job in read if job not in along and job not in host]
    groups = [sorted(host + along, key=lambda job: job.start)] + [[job] for job in apart]
    return [(group, True) for group in sorted(groups, key=lambda group: group[0].start)]  # the file's order


def _part(task: tuple[Shard, Callable, tuple[str, ...], int]) -> Part:
    """One shard read and analysed (in a worker, or here)."""
    shard, analysis, columns, workers = task
    none = np.zeros(0, np.int32)
    try:
        if shard.planes is None:
            frame = events.load(shard.paths, shard.step_pattern, workers, columns)
            return Part(analysis(frame), frame.attrs["origin_ns"], frame.attrs["files"], frame.attrs["steps_from"],
                        None, none, none, [], frame.attrs["measured"], None)
        (path, rank), = shard.files
        wanted = events.wanted_columns(columns)
        raw = xplane.read_planes(shard.planes, shard.metadata, rank, shard.host, events.clock_columns(wanted),
                                 shard.start_ns)
        if raw is None:
            return Part(None, None, [str(path)], [], None, none, none, [], [], None)
        cols = raw.columns
        role, device = cols["role"], cols["device"]
        marker = role == ROLES["step"]
        host_marks = bool((marker & (device < 0)).any())
        instants = steps.instants(cols) if shard.annotated or host_marks else []
        if host_marks and instants:  # demoted (``steps.demote_instants``): no longer markers
            marker &= ~np.isin(device, instants)
        at = np.flatnonzero(marker)
        first = raw.strings.values[cols["name"][at[0]]] if at.size else None
        markers = np.unique(device[at])
        unmarked = np.setdiff1d(np.unique(device[role == ROLES["op"]]), markers) if shard.annotated else none
        measured = [raw.measured]
        origin = raw.origin_ns
        frame = events.frame(raw, None, 0, wanted)  # (consumes the raw columns)
        return Part(analysis(frame), origin, [str(path)], [frame.attrs["steps_from"]], first, markers, unmarked,
                    instants, measured, None)
    except BadInput as exc:
        return Part(None, None, [], [], None, none, none, [], [], exc)


def _map(cut: Cut, analyses: list[Callable], columns: tuple[str, ...]) -> list[Part]:
    """Each shard's ``analyses[i]`` (events frame -> result; picklable), in the shards' order."""
    tasks = [(shard, analysis, columns, cut.workers) for shard, analysis in zip(cut.shards, analyses)]
    if len(tasks) == 1:
        return [_part(tasks[0])]
    order = sorted(range(len(tasks)), key=lambda i: -cut.shards[i].bytes)  # the largest first: they finish together
    with Pool(min(cut.workers, len(tasks))) as pool:
        done = pool.map(_part, [tasks[i] for i in order])
    parts: list[Part] = [None] * len(tasks)  # type: ignore[list-item]
    for i, part in zip(order, done):
        parts[i] = part
    return parts


class NoDeviceOps(BadInput):
    """A side of ``op_table`` with no device ops in its steps: under ``--last-step drop``, the one refusal that
    reading it again with the last step kept can explain (a malformed file is refused as it is, read once)."""


class Combined(NamedTuple):
    """The shards' results on one clock."""

    results: list           # of the shards with events, in the files' order
    shifts: list[int]       # each one's times to add for the earliest origin, ps
    steps_from: list[str]   # where the steps came from, each file's (``steps.assign``'s names)
    measured: list[str]     # "device", "host" where host ops stood in, "cpu" for XLA's CPU devices (``events.load``)
    files: list[str]        # the files read
    shards: list[int]       # the shards whose results these are


def _combined(cut: Cut, parts: list[Part]) -> Combined:
    """The parts' results with their shifts; BadInput for what ``events.load`` refuses (the first part's
    refusal in the files' order, a file without events, clocks apart)."""
    for part in parts:
        if part.error is not None:
            raise part.error
    found = [i for i, part in enumerate(parts) if part.origin_ns is not None]
    if cut.shards[0].planes is None:  # the files read together: load said what is wrong, and its origin is theirs
        whole = parts[0]
        return Combined([whole.result], [0], whole.sources, whole.measured, whole.files, [0])
    origins, sources = [], set()
    for path, _ in cut.files:
        mine = [parts[k] for k in found if cut.shards[k].files[0][0] == path]
        if not mine:
            raise BadInput("no events on any TPU, GPU or CPU plane", path=path)
        origin = min(p.origin_ns for p in mine)
        for p in mine:
            if (p.origin_ns - origin) * 1000 >= 2**62:
                raise xplane.clocks_apart(path, "a plane", (p.origin_ns - origin) * 1000)
        origins.append(origin)
        if len(mine) == 1:
            sources.update(mine[0].sources)
            continue
        marked = [p for p in mine if p.markers.size]
        sources.add(steps.source(marked[0].first_marker if marked else None,
                                 any((p.markers >= 0).any() for p in mine)))
        if any((p.markers < 0).any() for p in mine):
            for k in found:
                p, shard = parts[k], cut.shards[k]
                lost = sorted({*p.unmarked.tolist(), *p.instants})
                if shard.files[0][0] == path and shard.annotated and not shard.with_host and lost:
                    raise BadInput(f"device {lost[0]}'s steps are its host's step annotations, which its plane read "
                                   "apart does not hold: pass --steps to name the step markers", path=path)
    placed = events.one_clock([path for path, _ in cut.files], origins)
    moved = {path: at - o for (path, _), at, o in zip(cut.files, placed, origins)}  # (a file of its own clock)
    origin = min(placed)
    return Combined([parts[k].result for k in found],
                    [(parts[k].origin_ns + moved[cut.shards[k].files[0][0]] - origin) * 1000 for k in found],
                    sorted(sources), sorted({m for k in found for m in parts[k].measured}),
                    [str(path) for path, _ in cut.files], found)


def _analysed(cut: Cut, analysis: Callable, columns: tuple[str, ...]) -> Combined:
    return _combined(cut, _map(cut, [analysis] * len(cut.shards), columns))


def analysed(paths: list[str | Path], analysis: Callable, columns: tuple[str, ...], workers: int | None = None
             ) -> Combined:
    """``analysis`` (events frame of ``columns`` -> result; picklable) of each shard of the traces at ``paths``,
    steps from their markers."""
    return _analysed(cut(paths, None, "step", workers), analysis, columns)


def _stacked(rows: list[pd.DataFrame], done: Combined) -> pd.DataFrame:
    """Breakdown rows of the shards as one table, on one clock, ordered by chip and step."""
    parts = [r.assign(start_ps=r["start_ps"] + shift) for r, shift in zip(rows, done.shifts) if len(r)]
    out = (pd.concat(parts, ignore_index=True).sort_values(["rank", "device", "step"], kind="stable", ignore_index=True)
           if parts else rows[0])
    out.attrs["measured"] = done.measured
    out.attrs["files"] = done.files
    out.attrs["outside"] = _per_chip([r.attrs["outside"] for r in rows])
    out.attrs["clock"] = _per_chip([r.attrs["clock"] for r in rows])
    return out


def _per_chip(parts: list[list[dict]]) -> list[dict]:
    """The shards' records of their chips (``timeline.Layout.outside``, ``clocks.parted``), in chip order."""
    return sorted((chip for part in parts for chip in part), key=lambda chip: (chip["rank"], chip["device"]))


def breakdown_traces(paths: list[str | Path], step_pattern: str | None = None, window: str = "step",
                     workers: int | None = None) -> tuple[pd.DataFrame, list[str]]:
    """``breakdown.breakdown`` of the traces at ``paths`` and where their steps came from."""
    done = _analysed(cut(paths, step_pattern, window, workers), functools.partial(breakdown.breakdown, window=window),
                     breakdown.EVENT_COLUMNS)
    return _stacked(done.results, done), done.steps_from


def _op_table(sums: list[tuple[pd.DataFrame, int]], by: str, done: Combined) -> pd.DataFrame:
    """``diff.per_step``'s table from the shards' ``diff.op_time`` sums."""
    outside = _per_chip([groups.attrs["outside"] for groups, _ in sums])
    clock = _per_chip([groups.attrs["clock"] for groups, _ in sums])
    beyond = _per_chip([groups.attrs["beyond_markers"] for groups, _ in sums])
    empty = _per_chip([groups.attrs["empty_spans"] for groups, _ in sums])
    chips, still = (sum(groups.attrs[k] for groups, _ in sums) for k in ("chips", "no_duration"))  # disjoint chips
    sums = [s for s in sums if s[1]]
    if not sums:
        raise NoDeviceOps("no device ops in the trace", path=", ".join(done.files) or None)
    table = diff.per_key(pd.concat([groups for groups, _ in sums], ignore_index=True), sum(n for _, n in sums), by)
    table.attrs["measured"] = done.measured
    table.attrs["outside"] = outside
    table.attrs["clock"] = clock
    table.attrs["beyond_markers"] = beyond
    table.attrs["empty_spans"] = empty
    table.attrs["chips"], table.attrs["no_duration"] = chips, still
    table.attrs["steps_from"] = done.steps_from
    return table


def op_table(paths: list[str | Path], by: str = "kind", step_pattern: str | None = None, window: str = "step",
             workers: int | None = None) -> pd.DataFrame:
    """``diff.per_step`` of the traces at ``paths``: device time per step keyed ``by``."""
    done = _analysed(cut(paths, step_pattern, window, workers), functools.partial(diff.op_time, by=by, window=window),
                     diff.EVENT_COLUMNS[by])
    return _op_table(done.results, by, done)


def diff_traces(a: list[str | Path], b: list[str | Path], by: str = "kind", step_pattern: str | None = None,
                window: str = "step", workers: int | None = None) -> pd.DataFrame:
    """``diff.diff`` of the traces at ``a`` and at ``b``; BadInput where one side's host ops stand in for device
    ops and the other's are device ops (CPU time against device time)."""
    ta, tb = (op_table(paths, by, step_pattern, window, workers) for paths in (a, b))
    return compare_tables(ta, tb, a, b)


def compare_tables(ta: pd.DataFrame, tb: pd.DataFrame, a: list[str | Path], b: list[str | Path]) -> pd.DataFrame:
    """``diff.compare`` of the op tables ``ta`` and ``tb`` (``op_table`` of the traces at ``a`` and at ``b``);
    BadInput where one side's host ops stand in for device ops and the other's are device ops (CPU time against
    device time). The one check for every diff of two traces: ``diff_traces``'s and ``Profile.diff``'s."""
    host = ["host" in t.attrs.get("measured", ()) for t in (ta, tb)]
    if host[0] != host[1]:
        names = [", ".join(map(str, paths)) for paths in (a, b)]
        raise BadInput(f"{'AB'[host[1]]} has no device events (its CPU ops stand in, host time), {'AB'[host[0]]} has: "
                       "their times do not compare", path=" vs ".join(names))
    return diff.compare(ta, tb)


def matched(found: list[tuple[collectives.ChipInstances, int]], done: Combined) -> pd.DataFrame:
    """``collectives.instances`` of the traces from the shards' chip instances (with their shifts): stacked on
    one clock and matched across chips."""
    stacked = collectives.stack(found)
    del found[:]  # the shards' instances, stacked: their memory freed before the matching's
    return collectives.matched(stacked, collectives.kineto_messages(done.files))


def _collective_tables(found: list[tuple[collectives.ChipInstances, int]], rows: pd.DataFrame,
                       done: Combined) -> dict:
    """``collectives.analyse``'s tables from the shards' chip instances (with their shifts)."""
    return collectives.tables(matched(found, done), rows)


def _collectives(frame: pd.DataFrame) -> tuple[pd.DataFrame, collectives.ChipInstances]:
    return breakdown.breakdown(frame), collectives.chip_instances(frame)


def collectives_traces(paths: list[str | Path], step_pattern: str | None = None, workers: int | None = None
                       ) -> tuple[dict, list[str]]:
    """``collectives.analyse`` of the traces at ``paths`` (with ``files``: those read) and where their steps came
    from."""
    done = _analysed(cut(paths, step_pattern, "step", workers), _collectives, collectives.EVENT_COLUMNS)
    rows = _stacked([r for r, _ in done.results], done)
    found = [(inst, shift) for (_, inst), shift in zip(done.results, done.shifts)]
    done.results.clear()
    return {**_collective_tables(found, rows, done), "files": done.files}, done.steps_from


def step_programs(frame: pd.DataFrame) -> dict[str, int]:
    """Device time (ps) of the ops inside a step, per XLA program (``hlo_module``): the programs the steps ran,
    which a run's costing takes for its step program (an init or tapping program runs outside the steps)."""
    ops = frame[events.is_device_op(frame) & (frame["step"] >= 0).to_numpy() & frame["hlo_module"].notna().to_numpy()]
    return {str(k): int(v) for k, v in ops.groupby("hlo_module", observed=True)["dur_ps"].sum().items()}


def _trial(frame: pd.DataFrame) -> tuple[pd.DataFrame, tuple[pd.DataFrame, int], collectives.ChipInstances,
                                         pd.DataFrame, dict[str, int]]:
    laid = timeline.layout(frame)  # one sweep for the breakdown, the op tables and the span parts
    rows = breakdown.breakdown(frame, layout=laid)
    return (rows, diff.op_time(frame, "kind", layout=laid), collectives.chip_instances(frame),
            diff.span_parts(frame, rows, layout=laid), step_programs(frame))


TRIAL_COLUMNS = tuple(dict.fromkeys(collectives.EVENT_COLUMNS + diff.EVENT_COLUMNS["kind"]
                                    + diff.EVENT_COLUMNS["op"]))


class Trial(NamedTuple):
    """What a run's summary takes from one trial's traces."""

    rows: pd.DataFrame   # ``breakdown.breakdown``
    table: pd.DataFrame  # ``diff.per_step`` by kind
    collectives: dict    # ``collectives.analyse``
    parts: pd.DataFrame  # ``diff.span_parts`` (the attribution's)
    programs: dict[str, int]  # ``step_programs``
    steps_from: list[str]
    measured: list[str]  # as ``events.load`` says


def _parts_stacked(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The shards' span parts as one frame (times are durations: no shifts); ``attrs["outside"]`` per chip."""
    out = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    out.attrs["outside"] = _per_chip([p.attrs["outside"] for p in parts])
    return out


def trial_traces(paths: list[str | Path], workers: int | None = None) -> Trial:
    """The breakdown, op table, collectives and span parts of one trial's traces at ``paths``."""
    done = _analysed(cut(paths, None, "step", workers), _trial, TRIAL_COLUMNS)
    rows = _stacked([r for r, _, _, _, _ in done.results], done)
    table = _op_table([s for _, s, _, _, _ in done.results], "kind", done)
    parts = _parts_stacked([p for _, _, _, p, _ in done.results])
    programs: Counter[str] = Counter()  # (update, not +: a program of 0 ps in the steps stays named)
    for *_, shard in done.results:
        programs.update(shard)
    found = [(inst, shift) for (_, _, inst, _, _), shift in zip(done.results, done.shifts)]
    done.results.clear()
    return Trial(rows, table, _collective_tables(found, rows, done), parts, programs, done.steps_from, done.measured)


def _span_parts(frame: pd.DataFrame) -> pd.DataFrame:
    laid = timeline.layout(frame)
    return diff.span_parts(frame, breakdown.breakdown(frame, layout=laid), layout=laid)


def parts_traces(paths: list[str | Path], workers: int | None = None) -> pd.DataFrame:
    """``diff.span_parts`` of the traces at ``paths``: each (rank, device, step) span's parts."""
    return _parts_stacked(_analysed(cut(paths, None, "step", workers), _span_parts, diff.EVENT_COLUMNS["op"]).results)


def tail_traces(paths: list[str | Path], k: int = 5, workers: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``tail.chips`` and ``tail.last_ops(k)`` of the traces at ``paths`` (``tail_along``)."""
    chips, last, _ = tail_along(paths, k, None, (), workers)
    return chips, last


def _ends_along(frame: pd.DataFrame, k: int, along: Callable | None) -> tuple[tail.Ends, object]:
    return tail.ends(frame, k), along(frame) if along is not None else None


def tail_along(paths: list[str | Path], k: int, along: Callable | None, columns: tuple[str, ...],
               workers: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, Combined]:
    """``tail.chips`` and ``tail.last_ops(k)`` of the traces at ``paths``, from each shard's ends
    (``tail.ends``); where a shard's chips neither hold the first stop nor have all their floors before
    it, what they were in then from a second round over the shards (``tail.at_stop``). And ``along`` (events
    frame of ``columns`` -> result; picklable; None: nothing) of each shard, from the same read of its events."""
    shards = cut(paths, None, "step", workers)
    both = _analysed(shards, functools.partial(_ends_along, k=k, along=along),
                     tuple(dict.fromkeys(tail.EVENT_COLUMNS + columns)))
    along_done = both._replace(results=[result for _, result in both.results])
    done = both._replace(results=[ends for ends, _ in both.results])
    found = [(ends, shift) for ends, shift in zip(done.results, done.shifts) if len(ends.candidates)]
    if not found:  # no device ops: the tables of no rows
        return tail.chips(done.results[0].candidates), tail.last_ops(done.results[0].candidates, k), along_done
    stop = min(ends.stop_ps + shift for ends, shift in found)
    picks = [ends.at_stop if ends.stop_ps + shift == stop
             else ends.candidates if (ends.floors["floor_ps"] + shift <= stop).all() else None for ends, shift in found]
    if any(p is None for p in picks):
        again = Cut(shards.files, [shards.shards[i] for i in done.shards], shards.workers)
        redone = _map(again, [functools.partial(tail.at_stop, stop_ps=stop - shift) for shift in done.shifts],
                      tail.EVENT_COLUMNS)
        picks = [part.result for part, ends in zip(redone, done.results) if len(ends.candidates)]
    shifts = [shift for _, shift in found]
    return (tail.chips(_ops_stacked(picks, shifts, done)),
            tail.last_ops(_ops_stacked([ends.candidates for ends, _ in found], shifts, done), k), along_done)


def _ops_stacked(frames: list[pd.DataFrame], shifts: list[int], done: Combined) -> pd.DataFrame:
    """Events of the shards as one frame, on one clock; ``attrs``: ``measured`` and ``steps_from``, as read."""
    out = events.concat([f.assign(start_ps=f["start_ps"] + shift) for f, shift in zip(frames, shifts)])
    out.attrs.update(measured=done.measured, steps_from=done.steps_from)
    return out
