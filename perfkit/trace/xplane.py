"""``*.xplane.pb`` (XSpace: TPU, GPU and CPU planes) into columnar events, without TensorBoard.

``wire.split`` finds the planes in the file (reading their heads only), then (one plane read into an
array at a time) each plane's lines and each line's events in place; protobuf (``protos``) parses only
what is left: names, metadata, line headers. Events and their stats are decoded in chunks straight from the
plane's bytes by ``wire``'s compiled loops (no Python object per event), the stats wanted turned into columns with
numpy, and the event columns grow in place (no concatenation). What each event is comes from its plane and line:

- ``/device:TPU:N``: ``XLA Ops`` events are device ops, ``Steps`` events step markers, ``XLA Modules``
  module spans; op-level stats (``hlo_category``, ``program_id``) sit on the event metadata. An op's
  offset and duration are on the host-synchronized clock (xprof's trace viewer shows them); its stats
  ``device_offset_ps`` / ``device_duration_ps``, where it has them, on the chip's own (xprof's op_profile
  and hlo_stats count these): kept apart, for they part by up to tens of milliseconds.
  ``Async XLA Ops`` (the in-flight span of an async op whose -start / -done halves are on ``XLA Ops``)
  and other lines are kept as ``other`` (never counted); ``SKIPPED_LINES`` (LLO bundles, overlays,
  TraceMes inside ops, counter samples) are not decoded at all.
- ``/device:GPU:N``: events on ``Stream #k(...)`` lines are kernels, memcpys and memsets.
- ``/device:CUSTOM:Megascale Trace``: DCN (cross-slice) transfers, role ``dcn_transfer``, of the chip a
  ``device_ordinal`` stat names, else of the host (-1).
- ``/host:CPU``: events with ``hlo_op`` and ``device_ordinal`` stats are the ops of that CPU device;
  events with a ``step_num`` stat and the root mark ``_r`` (``StepTraceAnnotation``) are step markers, but for those
  inside another on their thread (xprof's grouping: ``_outermost_steps``); the rest is host activity (a
  ``TraceAnnotation``'s ``step_num`` without ``_r`` marks no step in xprof either; it keeps its number for ``--steps``).
- ``/host:metadata``: each program's ``HloProto`` (stat ``Hlo Proto``), read for opcodes and shapes.
- ``Task Environment``: its ``profile_start_time`` (epoch ns) only. The profiler (TSL's
  ``NormalizeTimestamps``) writes line timestamps as ns from that start, not from the epoch: the file's
  wall clock is their sum, without which files of several processes (a JAX run's ranks) would all start at 0.
- Skipped: SparseCore planes (``/device:TPU:N SparseCore M``: xprof's hlo_stats leaves them out too) and any
  other plane.

Stats of every XStat value type read: ints of the whole int64 and uint64 ranges, doubles, strings,
bytes and references. ``program_id`` (a program's 64-bit fingerprint on real TPUs, often above 2**63)
is kept as uint64 with a presence flag; the other int stats as int64 (-1 absent).
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from perfkit.common.workers import Pool, may_start_workers
from perfkit.errors import BadInput, DefinitionNote
from perfkit.trace import wire
from perfkit.trace.programs import Programs
from perfkit.trace.raw import ROLES, RawTrace, StringTable, file_host
from perfkit.trace.protos import XLINE, XPLANE, XSPACE

CHUNK = 1 << 15  # events decoded per batch: small enough to stay in cache and reuse memory, big enough that
# numpy's per-call overhead stays small (benchmarks/trace_breakdown.py's read floor)
PARALLEL_BYTES = 8 << 20  # planes' bytes below which starting workers costs more than it saves
# The columns of a RawTrace, as the reader fills them (raw.RawTrace says what each holds).
COLUMNS = {"name": np.int32, "line": np.int32, "device": np.int32, "role": np.int8, "start_ps": np.int64,
           "dur_ps": np.int64, "step": np.int32, "program_id": np.uint64, "program_known": np.bool_,
           "stall_ps": np.int64, "hlo_op": np.int32, "hlo_module": np.int32, "hlo_category": np.int32}
# A TPU op's time on its chip's own clock (int64 columns, -1 absent): decoded only where asked for, for real
# TPU ops carry both on every op and reading them costs (benchmarks/trace_breakdown.py --shape xprof).
DEVICE_CLOCK = ("device_offset_ps", "device_duration_ps")
# Line timestamps below this (1973 as epoch ns) count from the profile's start, not the epoch: a profile runs
# for hours at most, and an epoch timestamp of any real profile is decades above it.
EPOCH_NS = 10**17
_DENSE_IDS = 1 << 16  # event metadata ids below which the plane's tables have a row per id up to the largest
_LATEST_START_NS = 2**62  # a profile start past it (2116) is no wall clock: damaged, or not ns
_TASK_ENVIRONMENT = "Task Environment"
_GZIP_MAGIC = b"\x1f\x8b"
# The root mark ``StepTraceAnnotation`` (and TensorFlow's, PyTorch/XLA's step traces) sets beside ``step_num``: xprof
# groups steps under host events that carry it (TSL's ``group_events``), never under a plain ``TraceAnnotation``'s
# ``step_num`` alone.
ROOT = "_r"
INT_STATS = ("device_ordinal", "step_num", "group_id", ROOT, "dma_stall_duration_ps", *DEVICE_CLOCK)  # int64, -1 absent
STR_STATS = ("hlo_op", "hlo_module", "hlo_category")
# The mark a GPU tracer (CUPTI's, ROCm's) puts on each copy or fill it records, and the op kind it makes it where
# no HLO op names one: the names alone do not say (ROCm's copies are ``CopyDeviceToDevice``, ...).
COPY_STATS = {"memcpy_details": "memcpy", "memset_details": "memset"}
PROGRAM = "program_id"  # uint64 with a presence flag: fingerprints use the whole range
SKIPPED_LINES = frozenset({"Tensor Core", "TC Overlay", "XLA TraceMe", "_counters_"})
_DEVICE_PLANE = re.compile(r"/device:(TPU|GPU):(\d+)")
_DCN_PLANE = "/device:CUSTOM:Megascale Trace"
_STREAM_LINE = re.compile(r"Stream #\d+")
_INT_FIELDS, _DOUBLE_FIELD, _INLINE_STR_FIELDS, _REF_FIELD = (3, 4), 2, (5, 6), 7  # XStat value field numbers
_META_READ = frozenset((PROGRAM, *INT_STATS, *STR_STATS))  # the event metadata's stats the reader keeps
_INT_FIELD = np.isin(np.arange(8), _INT_FIELDS)  # by XStat value field number


class _Plane(NamedTuple):
    """What the reader needs of one plane, besides its lines."""

    kind: str                     # "TPU", "GPU", "dcn" or "host"
    device: int                   # device index for device planes, -1 otherwise
    # The tables below have a row per event metadata id up to the largest, or, where ``ids`` is set, per id
    # of ``ids``; and a last row for events that name no metadata of the plane.
    ids: np.ndarray | None        # the metadata ids, ascending, where too far apart for a row each up to the largest
    names: np.ndarray             # (rows,) int32: event metadata -> name code
    meta_int: dict[str, np.ndarray]  # stat name -> (rows,) int64: metadata-level int stats, -1 absent
    meta_str: dict[str, np.ndarray]  # stat name -> (rows,) int32: metadata-level string stats, -1 absent
    meta_program: np.ndarray      # (rows,) uint64: metadata-level program_id
    meta_program_known: np.ndarray  # (rows,) bool: ... where the metadata has one
    stat_names: dict[int, str]    # stat metadata id -> name
    copy_kinds: dict[str, int]    # of ``COPY_STATS`` those a GPU plane's stat metadata holds -> its kind's string code


def _plane_kind(name: str) -> tuple[str, int]:
    """("TPU" | "GPU" | "dcn" | "host", device index or -1) of a plane whose events are read; ("", -1)
    else."""
    m = _DEVICE_PLANE.fullmatch(name)
    if m:
        return m.group(1), int(m.group(2))
    return {"/host:CPU": ("host", -1), _DCN_PLANE: ("dcn", -1)}.get(name, ("", -1))


def _stat_value(stat, stat_names: dict[int, str]):
    """A stat's value as Python holds it: int (int64 or uint64), float, str (inline or a reference to a
    stat metadata name), bytes, or None when unset."""
    which = stat.WhichOneof("value")
    if which == "ref_value":
        return stat_names.get(stat.ref_value, "")
    return getattr(stat, which) if which else None


def _as_int(value) -> int | None:
    """An int-valued stat as a Python int (doubles truncated); None for strings, bytes, NaN, inf."""
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    return value if isinstance(value, int) else None


def _plane_tables(plane, kind: str, device: int, strings: StringTable) -> _Plane:
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    keys = sorted(mid for mid in plane.event_metadata if mid >= 0)  # (negative ones: no row any event can name)
    # Writers number metadata 1, 2, 3, ...; any other numbering (ids are the writer's to choose) gets a row an id
    sparse = bool(keys) and keys[-1] >= max(_DENSE_IDS, 4 * len(keys))
    size = (len(keys) if sparse else keys[-1] + 1 if keys else 0) + 1
    names = np.full(size, -1, np.int32)
    meta_int = {s: np.full(size, -1, np.int64) for s in INT_STATS}
    meta_str = {s: np.full(size, -1, np.int32) for s in STR_STATS}
    program, program_known = np.zeros(size, np.uint64), np.zeros(size, bool)
    for mid, row in zip(keys, range(len(keys)) if sparse else keys):
        md = plane.event_metadata[mid]
        names[row] = strings.code(md.name or md.display_name)
        for stat in md.stats:
            key = stat_names.get(stat.metadata_id)
            if key not in _META_READ:  # (flops, bytes_accessed, ...: real TPU metadata carries a dozen)
                continue
            value = _stat_value(stat, stat_names)
            number = _as_int(value)
            if key == PROGRAM and number is not None:
                program[row], program_known[row] = number % 2**64, True  # an int64 -1 is the uint64 2**64 - 1
            elif key in meta_int and number is not None and 0 <= number < 2**63:
                meta_int[key][row] = number
            elif key in meta_str and isinstance(value, (str, bytes)):
                meta_str[key][row] = strings.code(value if isinstance(value, str) else value.decode(errors="replace"))
    held = set(stat_names.values()) if kind == "GPU" else set()
    copy_kinds = {s: strings.code(k) for s, k in COPY_STATS.items() if s in held}
    ids = np.array(keys, np.int64) if sparse else None
    return _Plane(kind, device, ids, names, meta_int, meta_str, program, program_known, stat_names, copy_kinds)


def _programs(metadata_planes: list, path: Path) -> Programs:
    """The programs' HLO from the ``/host:metadata`` planes: one event metadata per program, named
    ``jit_f(6)``, with stats ``Hlo Proto`` and (not always set) ``program_id``."""
    protos: dict[int, bytes] = {}
    for plane in metadata_planes:
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for mid, md in plane.event_metadata.items():
            stats = {stat_names.get(s.metadata_id): _stat_value(s, stat_names) for s in md.stats}
            if isinstance(stats.get("Hlo Proto"), bytes):
                numbered = re.search(r"\((\d+)\)$", md.name)
                program_id = _as_int(stats.get("program_id")) or (int(numbered.group(1)) if numbered else mid)
                protos[program_id % 2**64] = stats["Hlo Proto"]  # as events hold it: uint64
    return Programs(protos, path)


def _wanted(plane: _Plane, role: int, clock: tuple[str, ...]) -> dict[int, str]:
    """The stats read on the events of a line of ``role``, by metadata id: a device or DCN line's events
    are all of the line's role, so the step stats are read only where they are step markers (xprof
    writes a ``group_id`` on every event), a device plane's events are of its own device, and of a device
    op's chip-clock stats (``DEVICE_CLOCK``) the ``clock`` ones."""
    names = set(INT_STATS + STR_STATS + (PROGRAM,))
    if role == ROLES["op"]:
        names |= set(plane.copy_kinds)
    if plane.kind != "host" and role != ROLES["step"]:
        names -= {"step_num", "group_id"}
    if plane.kind != "host":  # (a device's Steps line is xprof's steps without it)
        names.discard(ROOT)
    if role != ROLES["op"] or plane.kind == "host":
        names -= set(DEVICE_CLOCK)
    names -= set(DEVICE_CLOCK) - set(clock)
    if plane.kind in ("TPU", "GPU"):
        names.discard("device_ordinal")
    return {mid: name for mid, name in plane.stat_names.items() if name in names}


def _decode_events(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, plane: _Plane, strings: StringTable,
                   wanted: dict[int, str]) -> dict[str, np.ndarray]:
    """Events ``buf[starts[i]:ends[i]]`` (starts, ends: (n,) ints) -> metadata id, offset, duration and the
    ``wanted`` stats (``_wanted``) that some event of them carries (int ones -1 where absent or not an int,
    string ones -1 where absent or not a string, ``program_id`` uint64 with ``program_known``)."""
    n = starts.size
    metadata_id, offset_ps, dur_ps, stat_msg, ids, value_field, value, data, occurrences = wire.events(
        buf, starts, ends, np.fromiter(wanted, np.int64, len(wanted)))
    if occurrences >= 0:
        raise _Aggregated(occurrences)
    cols = {"metadata_id": metadata_id, "offset_ps": offset_ps, "dur_ps": dur_ps}
    for mid, name in wanted.items():
        rows = np.flatnonzero(ids == mid)
        if not rows.size:
            continue
        events, fields_, values = stat_msg[rows], value_field[rows], value[rows]
        if name not in cols:
            cols[name] = (np.full(n, -1, np.int32) if name in STR_STATS else np.zeros(n, np.uint64) if name == PROGRAM
                          else np.full(n, -1, np.int64))
        if name == PROGRAM and "program_known" not in cols:
            cols["program_known"] = np.zeros(n, bool)
        if name in STR_STATS:
            cols[name][events] = _string_codes(buf, data[rows], fields_, values, plane, strings)
            continue
        if name in COPY_STATS:  # the mark is what counts, not its text
            cols[name][events] = 1
            continue
        numeric = _INT_FIELD[fields_]
        doubles = fields_ == _DOUBLE_FIELD  # the raw bits are an IEEE double: truncated, NaN and inf dropped
        as_double = values[doubles].view(np.float64)
        finite = np.isfinite(as_double) & (np.abs(as_double) < 2**63)
        doubles[np.flatnonzero(doubles)[~finite]] = False
        if name == PROGRAM:
            bits = values.copy()
            bits[doubles] = as_double[finite].astype(np.int64).view(np.uint64)
            known = numeric | doubles
            cols[PROGRAM][events[known]], cols["program_known"][events[known]] = bits[known], True
        else:  # an int64 stat: uint64 values above 2**63 and negative ones stay absent
            ints = values.view(np.int64).copy()
            ints[doubles] = as_double[finite].astype(np.int64)
            ok = (numeric | doubles) & (ints >= 0)
            cols[name][events[ok]] = ints[ok]
    return cols


class _Aggregated(Exception):
    """Events that stand for several each (``num_occurrences``; args: the first one's): they have no start."""


def _string_codes(buf: np.ndarray, data: np.ndarray, fields_: np.ndarray, values: np.ndarray, plane: _Plane,
                  strings: StringTable) -> np.ndarray:
    """String codes of stats (references to stat metadata names, inline str / bytes); -1 for numbers."""
    codes = np.full(fields_.size, -1, np.int32)
    refs = np.flatnonzero(fields_ == _REF_FIELD)
    if refs.size:
        ref_ids, inverse = np.unique(values[refs], return_inverse=True)
        ref_codes = np.array([strings.code(plane.stat_names.get(int(r), "")) for r in ref_ids], np.int32)
        codes[refs] = ref_codes[inverse]
    for i in np.flatnonzero(np.isin(fields_, _INLINE_STR_FIELDS)):  # inline strings: rare, one by one
        start = int(data[i])
        codes[i] = strings.code(bytes(buf[start:start + int(values[i])]).decode(errors="replace"))
    return codes


def _line_role(plane: _Plane, line_name: str) -> int | None:
    """The role every event of a device-plane line has (host planes decide per event); None: a line
    not read (``SKIPPED_LINES``)."""
    if plane.kind == "dcn":
        return ROLES["dcn_transfer"]
    if plane.kind in ("TPU", "GPU") and line_name in SKIPPED_LINES:
        return None
    if plane.kind == "TPU":
        return {"XLA Ops": ROLES["op"], "Steps": ROLES["step"], "XLA Modules": ROLES["module"]}.get(
            line_name, ROLES["other"])
    if plane.kind == "GPU":
        if _STREAM_LINE.match(line_name):
            return ROLES["op"]
        return {"Steps": ROLES["step"], "XLA Modules": ROLES["module"]}.get(line_name, ROLES["other"])
    return ROLES["host"]


class PlaneJob(NamedTuple):
    """One plane of one file to survey or decode."""

    file: int   # index of the file among those read together
    path: Path
    start: int  # the plane's bytes in the file
    end: int
    name: str | None  # the plane's name, read ahead of its lines (None: not there)


class _PlaneRead(NamedTuple):
    """What decoding one plane into the shared columns returns to the process that merges files."""

    events: int
    lines: list[str]     # names of the lines read; the events' line codes count from 0 in this plane
    stamps: list[int]    # their timestamps (ns); start_ps is from the first
    strings: list[str]   # the plane's string table; the events' codes index it
    host: bool = False   # a /host:CPU plane (its device ops, if any, run on XLA's CPU devices)


def _incomplete(path: Path) -> BadInput:
    with path.open("rb") as file:
        if file.read(2) == _GZIP_MAGIC:  # (a whole profile compressed, as the trace.json.gz beside it is)
            return BadInput("gzip-compressed: an xplane.pb is read as the profiler writes it (gunzip it first)",
                            path=path)
    return BadInput("not a complete XSpace protobuf (truncated, damaged, or not an xplane.pb)", path=path)


def _split(buf, start: int, end: int, number: int, message, path: Path) -> tuple[np.ndarray, np.ndarray, object]:
    """``wire.split`` with the other fields parsed as ``message``; BadInput when the bytes are not one."""
    try:
        starts, ends, rest = wire.split(buf, start, end, number)
        return starts, ends, message.FromString(rest)
    except (wire.WireError, DecodeError):
        raise _incomplete(path) from None


def _name(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")


def planes(path: Path, file_index: int = 0) -> tuple[str, list[PlaneJob]]:
    """The XSpace's first hostname (else the file's name) and where its planes are in the file, with their names
    (the planes are not read)."""
    with path.open("rb") as file:
        whole = wire.FileBytes(file)  # only the planes' heads are read
        starts, ends, host = _space_head(whole, path)
        if not starts.size:
            raise BadInput("not an XSpace: no named planes", path=path)
        jobs = [PlaneJob(file_index, path, s, e, _name(wire.field_ahead(whole, s, e, 2)))
                for s, e in zip(starts.tolist(), ends.tolist())]
        if host is None and int(ends[-1]) == len(whole) and jobs[-1].name != _TASK_ENVIRONMENT:
            warnings.warn(_cut_note(path, jobs), DefinitionNote, stacklevel=2)
    seen = set()
    for name in (job.name for job in jobs if events_read(job.name)):
        if name in seen:  # a profiler names each plane once: two XSpaces in one file, merged by protobuf
            raise BadInput(f"two planes named {name!r}: two profiles in one file (written one after the other?)",
                           path=path)
        seen.add(name)
    return host or file_host(path), jobs


def _cut_note(path: Path, jobs: list[PlaneJob]) -> str:
    """A file with no hostnames that ends with a plane other than Task Environment: what is known of it, and the
    device planes read. A profiler records its hostname in every XSpace (TSL's ``ProfilerSession``) and adds Task
    Environment last, and protobuf writes the hostnames after every plane: a profiler's file cut short where a plane
    ends has neither, and so has a whole file another program wrote without them; the bytes do not tell the two
    apart. A file with hostnames before its planes (no protobuf serializer's order) is no profiler's file cut short,
    nor one cut just before its hostnames (it loses no plane); a cut inside a plane is refused (``_incomplete``)."""
    devices = [job.name for job in jobs if device_plane(job.name)]
    read = _named_planes(devices)
    return (f"{path}: it records no hostnames and ends with its plane {jobs[-1].name!r}, where a profiler's XSpace "
            f"ends with its Task Environment plane or its hostnames: written by another program, or cut short where a "
            f"plane ends, the planes after it missing ({len(devices)} device plane{'' if len(devices) == 1 else 's'} "
            f"read{': ' + read if devices else ''})")


def _named_planes(devices: list[str]) -> str:
    """Device planes by kind, each kind's numbers in runs (``/device:TPU:0 to 2, 4``): a gap in them shown."""
    numbers: dict[str, set[int]] = {}
    for name in devices:
        kind, index = _plane_kind(name)
        numbers.setdefault(kind, set()).add(index)
    named = []
    for kind, found in numbers.items():
        runs, ordered = [], sorted(found)
        for k in ordered:
            if runs and k == runs[-1][1] + 1:
                runs[-1][1] = k
            else:
                runs.append([k, k])
        parts = [f"{a} to {b}" if b > a + 1 else ", ".join(map(str, range(a, b + 1))) for a, b in runs]
        named.append(f"/device:{kind}:{', '.join(parts)}")
    return "; ".join(named)


def recorded_host(path: Path) -> str | None:
    """The first hostname the XSpace records (its profiler's machine), None where it records none (xprof's own
    test profiles); only the planes' heads are read."""
    with path.open("rb") as file:
        return _space_head(wire.FileBytes(file), path)[2]


def _space_head(whole: wire.FileBytes, path: Path) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Where an XSpace's planes are (their payloads' starts and ends) and its first recorded hostname, if any."""
    starts, ends, space = _split(whole, 0, len(whole), 1, XSPACE, path)
    return starts, ends, space.hostnames[0] if space.hostnames else None


class PlaneHead(NamedTuple):
    """What a plane says ahead of decoding its events."""

    stats: frozenset[str]  # the names of its stat metadata: every stat any of its events can carry
    stepped: bool          # whether a line named ``Steps`` (its ``name`` field) holds events


def plane_head(job: PlaneJob) -> PlaneHead:
    """A plane's stat names and whether it has a Steps line, its events skipped unread (each line's by its
    length)."""
    with job.path.open("rb") as file:
        whole = wire.FileBytes(file)
        starts, ends, plane = _split(whole, job.start, job.end, 3, XPLANE, job.path)
        stepped = any(wire.field_ahead(whole, s, e, 2) == b"Steps" and wire.field_ahead(whole, s, e, 4) is not None
                      for s, e in zip(starts.tolist(), ends.tolist()))
    return PlaneHead(frozenset(m.name for m in plane.stat_metadata.values()), stepped)


def _plane(job: PlaneJob) -> tuple[object, np.ndarray, list[int], list[int]]:
    """A plane read from its file: (XPlane without its lines, its bytes (padded), line starts, ends)."""
    try:
        with job.path.open("rb") as file:
            buf = wire.read(file, job.start, job.end - job.start)
    except wire.WireError:
        raise _incomplete(job.path) from None
    line_starts, line_ends, plane = _split(buf, 0, job.end - job.start, 3, XPLANE, job.path)
    if not plane.name:
        raise BadInput("not an XSpace: no named planes", path=job.path)
    return plane, buf, line_starts.tolist(), line_ends.tolist()


def _lines(plane: _Plane, buf: np.ndarray, line_starts: list[int], line_ends: list[int], path: Path):
    """The lines of a plane whose events are read: (XLine without events, role, event starts, ends)."""
    for line_start, line_end in zip(line_starts, line_ends):
        starts, ends, line = _split(buf, line_start, line_end, 4, XLINE, path)
        role = _line_role(plane, line.display_name or line.name) if starts.size else None
        if role is not None:
            yield line, role, starts, ends


class _Lines(NamedTuple):
    """A plane whose events are read, split into its lines: what both passes over it start from."""

    proto: object   # the XPlane without its lines
    plane: _Plane
    strings: StringTable
    buf: np.ndarray
    lines: list     # (XLine without events, role, event starts, ends) of each line read

    @property
    def events(self) -> int:
        return sum(starts.size for _, _, starts, _ in self.lines)


def _split_lines(job: PlaneJob) -> _Lines | str:
    """The plane of ``job`` split into lines, or its name where its events are not read."""
    proto, buf, line_starts, line_ends = _plane(job)
    kind, device = _plane_kind(proto.name)
    if not kind:
        return proto.name
    strings = StringTable()
    plane = _plane_tables(proto, kind, device, strings)
    return _Lines(proto, plane, strings, buf, list(_lines(plane, buf, line_starts, line_ends, job.path)))


def survey(job: PlaneJob) -> tuple[str, int]:
    """(plane name, events of it that are read): the first of the two passes over a plane."""
    split = _split_lines(job)
    return (split, 0) if isinstance(split, str) else (split.proto.name, split.events)


def decode(job: PlaneJob, out: dict[str, np.ndarray]) -> _PlaneRead:
    """The second pass: a plane's events decoded into ``out`` (views of exactly its rows; the
    ``DEVICE_CLOCK`` columns it holds are read)."""
    split = _split_lines(job)
    return _PlaneRead(0, [], [], []) if isinstance(split, str) else _decode_lines(job, split, out)


def _decode_lines(job: PlaneJob, split: _Lines, out: dict[str, np.ndarray]) -> _PlaneRead:
    proto, plane, strings, buf = split.proto, split.plane, split.strings, split.buf
    names, stamps, filled = [], [], 0
    for line, role, starts, ends in split.lines:
        base_ps = (line.timestamp_ns - (stamps or [line.timestamp_ns])[0]) * 1000
        if abs(base_ps) >= 2**62:
            raise clocks_apart(job.path, f"line {line.name!r} of {proto.name}", base_ps)
        names.append(line.display_name or line.name)
        stamps.append(line.timestamp_ns)
        wanted = _wanted(plane, role, tuple(c for c in DEVICE_CLOCK if c in out))
        for at in range(0, starts.size, CHUNK):
            try:
                cols = _decode_events(buf, starts[at:at + CHUNK], ends[at:at + CHUNK], plane, strings, wanted)
            except wire.WireError as exc:
                raise BadInput(f"malformed event on line {line.name!r} of {proto.name}: {exc}", path=job.path) from None
            except _Aggregated as exc:
                raise BadInput(f"line {line.name!r} of {proto.name} is aggregated ({exc.args[0]} occurrences in one "
                               "event, no start time): only a trace's timed events can be measured", path=job.path
                               ) from None
            negative = np.flatnonzero(cols["dur_ps"] < 0)
            if negative.size:  # an event that ends before it starts: no time to give any part of a step
                raise BadInput(f"an event of negative duration ({cols['dur_ps'][negative[0]]} ps) on line "
                               f"{line.name!r} of {proto.name}", path=job.path)
            n = cols["dur_ps"].size
            if filled + n > next(iter(out.values())).size:
                raise BadInput(f"plane {proto.name} holds more events than when it was first read", path=job.path)
            _resolve(cols, plane, role, len(names) - 1, base_ps, {k: v[filled:filled + n] for k, v in out.items()})
            filled += n
    if plane.kind == "host":
        _outermost_steps({k: v[:filled] for k, v in out.items()})
    return _PlaneRead(filled, names, stamps, strings.values, plane.kind == "host")


def _outermost_steps(out: dict[str, np.ndarray]) -> None:
    """Step annotations inside another on their thread (an epoch's ``StepTraceAnnotation`` around its steps')
    made host activity, in place: xprof groups a thread's events under the outermost one (its overview_page's
    steps), where each had been a step of its own and the outer ones' ops the inner ones'. They keep their
    number, for ``--steps`` may make them the markers."""
    marker = np.flatnonzero(out["role"] == ROLES["step"])
    if marker.size < 2:
        return
    line, start = out["line"][marker], out["start_ps"][marker]
    end = start + out["dur_ps"][marker]
    order = np.lexsort((-end, start, line))  # on each line by start, an enclosing marker before those it holds
    marker, line, end = marker[order], line[order], end[order]
    reach = end.copy()  # the latest end of the markers up to each on its line
    first = np.flatnonzero(np.diff(line, prepend=-1))
    for a, b in zip(first, [*first[1:], line.size]):
        reach[a:b] = np.maximum.accumulate(end[a:b])
    held = np.zeros(marker.size, bool)
    held[1:] = (reach[:-1] >= end[1:]) & (line[:-1] == line[1:])
    out["role"][marker[held]] = ROLES["host"]


def read_planes(jobs: list[PlaneJob], metadata: list[PlaneJob], rank: int, host: str,
                clock: tuple[str, ...] = DEVICE_CLOCK, start_ns: int | None = None) -> RawTrace | None:
    """Planes of one file (one, or all its planes whose events are read), each split once and decoded, as
    one RawTrace (the file's programs from its ``metadata`` planes; of ``DEVICE_CLOCK``, the ``clock``
    columns; ``start_ns``: its ``profile_start``); None where none has events."""
    splits = [(job, _split_lines(job)) for job in jobs]
    splits = [(job, split) for job, split in splits if not isinstance(split, str) and split.events]
    if not splits:
        return None
    columns = allocate(sum(split.events for _, split in splits), clock)
    reads, at = [], 0
    for job, split in splits:
        reads.append(_decode_lines(job, split, {k: v[at:at + split.events] for k, v in columns.items()}))
        at += split.events
    return _merge(jobs[0].path, rank, host, reads, columns, _file_programs(tuple(metadata), jobs[0].path), start_ns)


def profile_start(jobs: list[PlaneJob]) -> int | None:
    """The epoch ns its profile started at, as one file's ``Task Environment`` plane (among its ``jobs``) records
    it; None where it records none."""
    for job in jobs:
        if job.name == _TASK_ENVIRONMENT:
            start = plane_stats(job)[1].get("profile_start_time")
            if isinstance(start, int) and start >= _LATEST_START_NS:
                raise BadInput(f"its Task Environment plane's profile_start_time, {start} ns, is no epoch time "
                               "(after 2116)", path=job.path)
            return start if isinstance(start, int) and start > 0 else None
    return None


@functools.lru_cache(maxsize=4)
def _file_programs(metadata: tuple[PlaneJob, ...], path: Path) -> Programs:
    """A file's programs, read once per process for all the planes of it that process reads (a real TPU
    profile's metadata holds every program's HLO, megabytes each)."""
    return _programs([_plane(m)[0] for m in metadata], path)


def plane_stats(job: PlaneJob) -> tuple[str, dict]:
    """A plane's name and its own stats by name (``peak_teraflops_per_second`` ...); its lines are not
    decoded."""
    plane = _plane(job)[0]
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    return plane.name, {names.get(s.metadata_id): _stat_value(s, names) for s in plane.stats}


def events_read(name: str | None) -> bool:
    """Whether the events of a plane so named are read (a device, DCN or host plane)."""
    return bool(name) and bool(_plane_kind(name)[0])


def device_plane(name: str | None) -> bool:
    """Whether a plane so named is a TPU's or a GPU's."""
    return bool(name) and _plane_kind(name)[0] in ("TPU", "GPU")


def clocks_apart(path: Path, what: str, ps: int) -> BadInput:
    return BadInput(f"{what} starts {abs(ps) / 1e12 / 86400:.0f} days from the first line read (timestamps of "
                    "different clocks?)", path=path)


def _decode_alone(job: PlaneJob, events: int, clock: tuple[str, ...]) -> tuple[_PlaneRead, dict[str, np.ndarray]]:
    """A plane's ``events`` decoded into columns of its own (in a worker: the caller places them)."""
    columns = allocate(events, clock)
    return decode(job, columns), columns


def allocate(n: int, clock: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Event columns (``COLUMNS`` and of ``DEVICE_CLOCK`` the ``clock`` ones) for ``n`` events, uninitialized."""
    return {name: np.empty(n, dtype) for name, dtype in (*COLUMNS.items(), *((c, np.int64) for c in clock))}


def _merge(path: Path, rank: int, host: str, reads: list[_PlaneRead], columns: dict[str, np.ndarray],
           programs: Programs, start_ns: int | None) -> RawTrace:
    """One file's planes, decoded apart, as one RawTrace: line codes, string codes and start times made
    the file's, in place; its origin on the wall clock where its timestamps count from ``start_ns`` (its
    ``profile_start``)."""
    if not any(r.events for r in reads):
        raise BadInput("no events on any TPU, GPU or CPU plane", path=path)
    origin_ns = min(s for r in reads for s in r.stamps)
    strings, lines, at = StringTable(), [], 0
    for r in (r for r in reads if r.events):
        rows = slice(at, at + r.events)
        at += r.events
        if lines:
            columns["line"][rows] += len(lines)
        lines += r.lines
        shift_ps = (r.stamps[0] - origin_ns) * 1000
        if shift_ps >= 2**62:
            raise clocks_apart(path, "a plane", shift_ps)
        columns["start_ps"][rows] += shift_ps
        codes = strings.codes(r.strings)
        if not (codes == np.arange(codes.size)).all():  # planes after the first share the file's strings
            table = np.append(codes, -1).astype(np.int32)  # code -1 (absent) stays -1
            for name in ("name", "hlo_op", "hlo_module", "hlo_category"):
                np.take(table, columns[name][rows], out=columns[name][rows], mode="wrap")
    ops, at, on_devices = columns["role"] == ROLES["op"], 0, False
    for r in reads:  # device ops on a device plane, or only on the host's
        on_devices |= not r.host and bool(ops[at:at + r.events].any())
        at += r.events
    wall_ns = origin_ns + start_ns if start_ns and origin_ns < EPOCH_NS else origin_ns
    return RawTrace(path=path, rank=rank, host=host, origin_ns=wall_ns, columns=columns, strings=strings,
                    lines=lines, programs=programs, measured="device" if on_devices or not ops.any() else "cpu")


def read_all(files: list[tuple[Path, int]], workers: int = 1, clock: tuple[str, ...] = DEVICE_CLOCK
             ) -> list[RawTrace]:
    """``xplane.pb`` files (path, rank) as columnar events (of ``DEVICE_CLOCK``, the ``clock`` columns), one
    RawTrace each; BadInput when one is not a whole XSpace. Planes are surveyed (events counted), then decoded into one block: by ``workers`` worker
    processes when there are several planes and their bytes reach ``PARALLEL_BYTES`` (each plane into
    columns of its own, placed here)."""
    spaces = [planes(path, i) for i, (path, _) in enumerate(files)]
    jobs = [job for _, file_jobs in spaces for job in file_jobs]
    parallel = (workers > 1 and len(jobs) > 1 and sum(j.end - j.start for j in jobs) >= PARALLEL_BYTES
                and may_start_workers())
    if parallel:
        with Pool(min(workers, len(jobs))) as pool:
            surveyed = pool.map(survey, jobs)
    else:
        surveyed = [survey(job) for job in jobs]
    counts = np.array([n for _, n in surveyed], np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    columns = allocate(int(bounds[-1]), clock)
    rows = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    if parallel:
        reads = []
        with Pool(min(workers, len(jobs))) as pool:
            pending = [pool.submit(_decode_alone, job, int(n), clock) for job, n in zip(jobs, counts)]
            for part, got in zip(rows, pending):
                read, decoded = pool.result(got)
                for name, values in decoded.items():
                    columns[name][part] = values[:read.events]
                reads.append(read)
    else:
        reads = [decode(job, {k: v[part] for k, v in columns.items()}) for job, part in zip(jobs, rows)]
    traces = []
    for i, ((path, rank), (host, _)) in enumerate(zip(files, spaces)):
        mine = [k for k, job in enumerate(jobs) if job.file == i]
        rows = slice(int(bounds[mine[0]]), int(bounds[mine[-1] + 1]))
        metadata = [_plane(jobs[k])[0] for k in mine if surveyed[k][0] == "/host:metadata"]
        traces.append(_merge(path, rank, host, [reads[k] for k in mine], {k: v[rows] for k, v in columns.items()},
                             _programs(metadata, path), profile_start([jobs[k] for k in mine])))
    return traces


def _int32(values: np.ndarray) -> np.ndarray:
    """int64 stats >= -1 as int32, -1 where they do not fit (no device or step is numbered that high)."""
    return np.where(values < 2**31, values, -1).astype(np.int32)


def _resolve(cols: dict[str, np.ndarray], plane: _Plane, role: int, line_code: int, base_ps: int,
             out: dict[str, np.ndarray]) -> None:
    """Event stats over metadata stats, roles and devices: one chunk's final columns, written to ``out``
    (views of its rows). A device plane's events have its device, and only its step markers a step: the
    stats that would say otherwise are not looked up there."""
    md, none = cols["metadata_id"], plane.names.size - 1
    # rows in range, so the takes below are mode "clip": "raise" would buffer each result (a heap that grows)
    if plane.ids is None:
        md = np.where((md >= 0) & (md < none), md, none)
    else:
        row = np.minimum(np.searchsorted(plane.ids, md), none - 1)
        md = np.where(plane.ids[row] == md, row, none)

    def stat(s: str, into: np.ndarray | None = None) -> np.ndarray:
        """The event's own value of stat ``s`` where it has one (>= 0), else its metadata's."""
        value = np.take(plane.meta_str[s] if s in STR_STATS else plane.meta_int[s], md, out=into, mode="clip")
        if s in cols:
            np.copyto(value, cols[s], where=cols[s] >= 0)
        return value

    for s in STR_STATS:
        stat(s, out[s])
    for s, kind in plane.copy_kinds.items():  # a copy the tracer marked: its category, where the trace has none
        if s in cols:
            np.copyto(out["hlo_category"], kind, where=(cols[s] >= 0) & (out["hlo_category"] < 0))
    np.take(plane.names, md, out=out["name"], mode="clip")
    program, known = np.take(plane.meta_program, md, out=out["program_id"], mode="clip"), out["program_known"]
    np.take(plane.meta_program_known, md, out=known, mode="clip")
    if PROGRAM in cols:  # the event's own program id over its metadata's
        np.copyto(program, cols[PROGRAM], where=cols["program_known"])
        known |= cols["program_known"]
    roles, device, step = out["role"], out["device"], out["step"]
    number = stat("step_num") if plane.kind == "host" or role == ROLES["step"] else None
    if plane.kind == "dcn":  # DCN transfers of the chip they name, else of the host
        roles.fill(role)
        device[:] = _int32(stat("device_ordinal"))
    elif plane.kind == "host":
        ordinal = stat("device_ordinal")
        roles.fill(ROLES["host"])
        roles[(out["hlo_op"] >= 0) & (ordinal >= 0)] = ROLES["op"]
        roles[(number >= 0) & (stat(ROOT) > 0)] = ROLES["step"]
        device[:] = np.where(roles == ROLES["op"], _int32(ordinal), -1)
    else:
        roles.fill(role)
        device.fill(plane.device)
    if number is None:  # no step markers among these events
        step.fill(-1)
    else:
        step[:] = _int32(np.where(number >= 0, number, stat("group_id")))
        # a host event's step_num without the root mark stays, as an inner step's does: --steps may name it
        step[(roles != ROLES["step"]) & ((roles == ROLES["op"]) | (number < 0))] = -1
    out["line"].fill(line_code)
    np.add(cols["offset_ps"], base_ps, out=out["start_ps"])
    out["dur_ps"][:] = cols["dur_ps"]
    np.maximum(stat("dma_stall_duration_ps"), 0, out=out["stall_ps"])
    for clock in DEVICE_CLOCK:  # the events' own (no metadata carries them), where asked for
        if clock in out:
            out[clock][:] = cols[clock] if clock in cols else -1
