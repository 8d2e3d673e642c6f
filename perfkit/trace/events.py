"""Trace files (xplane.pb of TPU / GPU / CPU, Kineto JSON) into one tidy pandas events frame.

One row per event. Columns:

| column | dtype | meaning |
| --- | --- | --- |
| rank | int32 | Kineto ``distributedInfo.rank``, a ``rank<R>`` folder, ``<host>_<rank>.xplane.pb``, else per host |
| host | category | host name (XSpace hostname, else the file name) |
| device | int32 | device (chip) index; -1 for host activity |
| line | category | XLine / stream / thread the event sits on |
| name | category | event name |
| kind | category | device ops: opcode or kernel kind (``perfkit.trace.classify``); "" otherwise |
| category | category | ``compute`` / ``ici`` / ``dcn`` / ``dma`` for device ops; ``step``, ``module``, ``host``, ``other``, ``dcn_transfer`` |
| start_ps, dur_ps | int64 | start from the frame's origin (``attrs["origin_ns"]``, wall clock), duration |
| hlo_op, hlo_module | category | HLO instruction and module where known |
| program_id | UInt64 | XLA program id (pandas nullable: ``<NA>`` unknown; TPU ids are 64-bit fingerprints) |
| step | int32 | step of a device op or number of a step marker (-1 none; ``perfkit.trace.steps``) |
| shape | category | output shape of the op where known |
| group | int32 | a collective's group size as its program's HloProto records it (``Program.group``; 0 unknown) |
| stall_ps | int64 | local DMA stall inside the op (TPU ``dma_stall_duration_ps``) |
| launch_step | int32 | Kineto only: the host ProfilerStep a device op's launch ran in (-1 unknown; absent from XSpaces' frames) |
| device_offset_ps, device_duration_ps | int64 | a TPU op's time on its chip's own clock, as its stats give it (-1 absent); ``start_ps`` and ``dur_ps`` are the host-synchronized clock's, which xprof's trace viewer shows |

Strings are categoricals and numbers numpy columns: about 60 bytes an event, against over a kilobyte
for the same event as a Python dict.
"""

from __future__ import annotations

import contextlib
import filecmp
import re
import sys
import warnings
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from perfkit.common.workers import usable_cores
from perfkit.errors import BadInput, DefinitionNote
from perfkit.trace import classify, kineto, steps, xplane
from perfkit.trace.raw import ROLES, RawTrace, file_host

ROLE_NAMES = {v: k for k, v in ROLES.items()}  # non-op roles are also the category of their events
CATEGORY_VALUES = classify.CATEGORIES + tuple(r for r in ROLES if r != "op")
COLUMNS = ("rank", "host", "device", "line", "name", "kind", "category", "start_ps", "dur_ps", "hlo_op", "hlo_module",
           "program_id", "step", "shape", "group", "stall_ps", "launch_step", "device_offset_ps", "device_duration_ps")
KINETO_ONLY = "launch_step"  # a column only Kineto frames have
REQUIRED = ("rank", "device", "category", "start_ps", "dur_ps", "step")  # every frame has these (_one_run, device_ops)
CATEGORICAL = ("host", "line", "name", "kind", "category", "hlo_op", "hlo_module", "shape")
_RANK_DIR = re.compile(r"rank[-_]?(\d+)$")
_TORCH_TPU_FILE = re.compile(r"(.+)_(\d+)\.xplane\.pb")
_XPLANE_SUFFIX = ".xplane.pb"
_KINETO_SUFFIXES = (".json", ".json.gz")
_VIEWER_COPY = ".trace.json.gz"  # the trace viewer's copy of an XSpace, beside it
# a perfkit run directory's own records: no traces, read or left out, where a run's folder is named
_RUN_RECORDS = frozenset({"run.json", "env.json", "summary.json", "primed.json"})
_SLICE = 1 << 20  # rows per slice where a whole-column temporary would raise the peak
_FEW = 1 << 10  # pd.factorize's hash table starts this big, not one slot per row (it grows as needed)


def trace_files(paths: list[str | Path]) -> list[Path]:
    """Files named on the command line, and the traces under folders: every ``*.xplane.pb``, else
    (a folder without any) every ``*.json`` / ``*.json.gz``."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            xspaces = sorted(p.rglob(f"*{_XPLANE_SUFFIX}"))
            kineto = sorted(f for f in p.rglob("*") if f.name.endswith(_KINETO_SUFFIXES) and f.name not in _RUN_RECORDS)
            if not xspaces and not kineto:
                raise BadInput("no *.xplane.pb or Kineto *.json[.gz] trace under this folder", path=p)
            # JAX's and TensorFlow's profilers write each XSpace's events again beside it, as the trace viewer's
            # <host>.trace.json.gz: the same trace, not one left out
            copies = {x.with_name(x.name.removesuffix(_XPLANE_SUFFIX) + _VIEWER_COPY) for x in xspaces}
            others = [f for f in kineto if f not in copies]
            if xspaces and others:
                warnings.warn(f"{p}: its {len(xspaces)} *.xplane.pb read, its {len(others)} *.json[.gz] left out (a "
                              "folder is read as one kind of trace: name the JSON files to read them)",
                              DefinitionNote, stacklevel=2)
            found += xspaces or kineto
        else:
            raise BadInput("no such file or folder", path=p)
    return found


def xspaces_beside(path: Path) -> list[Path]:
    """The XSpaces a JSON trace was written beside by JAX's profiler, which writes a profile folder's
    ``<host>.xplane.pb`` and, from it, the trace viewer's ``<host>.trace.json.gz`` (its host events only) and, asked
    to, ``perfetto_trace.json.gz``: for the first, its host's XSpace; for the second, the folder's; else none (a
    JSON trace beside an XSpace it was not written from, a torch trace in a folder that holds one, is no copy)."""
    if path.name in ("perfetto_trace.json.gz", "perfetto_trace.json"):  # (a copy unzipped, as a user may)
        return sorted(path.parent.glob(f"*{_XPLANE_SUFFIX}"))
    host = next((path.name.removesuffix(s) for s in (_VIEWER_COPY, _VIEWER_COPY.removesuffix(".gz"))
                 if path.name.endswith(s)), None)
    xspace = path.with_name(f"{host}{_XPLANE_SUFFIX}") if host else None
    return [xspace] if xspace is not None and xspace.is_file() else []


def _rank_hint(path: Path) -> int | None:
    """The rank a file's path names: a ``rank<R>`` folder (perfkit's trial layout), else torch_tpu's
    ``<host>_<rank>.xplane.pb``, where ``<host>`` is the machine the XSpace records (a name that only ends in a
    number, as xprof's ``tpu_inference_2``, names no rank)."""
    for part in reversed(path.parent.parts):
        m = _RANK_DIR.search(part)
        if m:
            return int(m.group(1))
    m = _TORCH_TPU_FILE.fullmatch(path.name)
    return int(m.group(2)) if m and xplane.recorded_host(path) == m.group(1) else None


def is_xplane(path: Path) -> bool:
    return path.name.endswith(_XPLANE_SUFFIX) or path.suffix == ".pb"


def _read(files: list[tuple[Path, int]], workers: int, named: set[Path], columns: tuple[str, ...]
          ) -> list[RawTrace]:
    """Each (path, rank) as a RawTrace for a frame of ``columns``: the XSpaces together (their planes shared
    out over ``workers`` processes), then Kineto files one by one. A JSON file found in a folder (not in
    ``named``) that is whole but no trace is skipped with a note on stderr; a damaged one (truncated, not JSON),
    which may be a rank's trace, is BadInput, as a damaged XSpace is; none readable is BadInput."""
    xplanes = dict(zip((f for f, _ in files if is_xplane(f)), xplane.read_all([f for f in files if is_xplane(f[0])],
                                                                                workers, clock_columns(columns))))
    for path, _ in files:
        if not is_xplane(path) and not path.name.endswith(_KINETO_SUFFIXES):
            raise BadInput("not a trace file: expected *.xplane.pb, *.json or *.json.gz", path=path)
    out, skipped = [], []
    for path, rank in files:
        if path in xplanes:
            out.append(xplanes[path])
            continue
        try:
            out.append(kineto.read(path, rank))
        except kineto.NotATrace as exc:
            if path in named:
                raise
            skipped.append(exc)
    if not out:
        raise skipped[0] if len(skipped) == 1 else BadInput(f"none of the {len(skipped)} JSON files is a trace "
                                                            f"perfkit reads (first: {skipped[0].line()})")
    for exc in skipped:
        print(f"perfkit: skipped {exc.line()}", file=sys.stderr)
    for raw in out:
        for note in _hta_notes(raw):
            warnings.warn(f"{raw.path}: {note}", DefinitionNote, stacklevel=2)
    return out


@contextlib.contextmanager
def notes_left_out():
    """A run's analysis: its trials' traces read without the ``DefinitionNote``s (one per trial file)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DefinitionNote)
        yield


def _hta_notes(raw: RawTrace) -> list[str]:
    """Where a Kineto trace's figures part from HTA's by definition, what parts them, a line each; first, where HTA
    does not read the file, that it does not (a note of HTA's figures of it would be of none)."""
    notes = []
    if raw.host_streams:
        cats = [f"{n} {c or 'uncategorized'}" for c, n in raw.host_streams]
        listed = ", ".join(cats[:3]) + (", ..." if len(cats) > 3 else "")
        notes.append(f"host events with a stream argument ({listed}) are not device ops here; HTA's temporal "
                     "breakdown counts every event with a stream as GPU time")
    if raw.unlaunched:
        notes.append(f"{raw.unlaunched} device ops have no launch in the trace up to its last ProfilerStep's end "
                     "(queued before the profiler started, or launched after): counted here; HTA drops them")
    if raw.streamless:
        notes.append(f"{raw.streamless} device op{' has' if raw.streamless == 1 else 's have'} no stream argument (or "
                     "one that is not a number): counted here; HTA takes only events with one for GPU events")
    if raw.left_streamless:
        named = ", ".join(f"{count} {name}" for name, count in raw.left_streamless[:3])
        total = sum(count for _, count in raw.left_streamless)
        notes.append(f"{total} {'/'.join(kineto.STREAM_ONLY_CATS)} without a stream argument "
                     f"({named}{', ...' if len(raw.left_streamless) > 3 else ''}) not counted, as HTA counts that "
                     "category's events only with a stream: the device's time in them is in none of these figures")
    ops, moved_ps, dropped_ps = raw.between_us
    if ops:
        moved = f"{ops} device op{' starts or ends' if ops == 1 else 's start or end'}"
        # (read before the command's window is known: each amount names the ops it is of, where they differ)
        windows = "" if dropped_ps == moved_ps else (f" with every step kept, {dropped_ps / 1e6:.3f} us with the last "
                                                     "step dropped (the ops launched in it left out, as by HTA's "
                                                     "default)")
        notes.append(f"{moved} between whole us: HTA 0.5.0 rounds each event inward to whole us (start up, end "
                     f"down) by default, which takes {moved_ps / 1e6:.3f} us off the time the device ops run (their "
                     "union: HTA's compute plus non-compute time of this trace, which its idle time gains less the "
                     f"under 2 us its kernel time loses at its ends){windows}; with HTA_DISABLE_NS_ROUNDING=1 it "
                     "reads them unrounded, as perfkit does")
    if not raw.hta_reads:  # (the file's events are what HTA reads in a traceEvents object: they part from those)
        notes.insert(0, "HTA 0.5.0 does not read this file, Chrome's JSON Array Format (the events alone; it reads a "
                     "traceEvents object)" + (": the notes on HTA that follow are of its events in one" if notes else ""))
    return notes


def _last_step_notes(raw: RawTrace) -> list[str]:
    """Where the last step dropped parts a Kineto trace's figures from HTA's (``RawTrace.late_cut``), what parts
    them: said by the analyses that drop it (``timeline.layout``)."""
    moved, later_us = raw.late_cut
    if not moved:
        return []
    ops = f"{moved} device op{' launched after it is' if moved == 1 else 's launched after it are'}"
    return [f"{raw.path}: the last step dropped from the host's last ProfilerStep's start, {ops} left out here; HTA "
            f"cuts {later_us / 1000:.3f} ms later, at the latest ProfilerStep it reads as a CPU event (a GPU-side "
            f"annotation's), and keeps {'it' if moved == 1 else 'them'}"]


def packed_key(codes: list[np.ndarray]) -> np.ndarray:
    """One int64 key per row for a tuple of int columns >= -1 (refactorized when too wide); built in
    place, one array for the whole table."""
    key = codes[0].astype(np.int64)
    key += 1
    for c in codes[1:]:
        bits = (int(c.max(initial=0)) + 1).bit_length()
        if int(key.max(initial=0)).bit_length() + bits > 62:
            key = pd.factorize(key, size_hint=_FEW)[0].astype(np.int64)
        key <<= bits
        key += c  # the low bits are zero: adding c + 1 < 2**bits sets them
        key += 1
    return key


def _small_codes(size: int) -> type:
    return np.int8 if size < 2**7 else np.int16 if size < 2**15 else np.int32


def first_rows(codes: np.ndarray, count: int) -> np.ndarray:
    """The first row (count,) int64 of each of ``count`` codes numbered by first appearance (``codes``
    (n,) as ``pd.factorize`` gives them), in slices: no index array as long as ``codes``."""
    first = np.zeros(count, np.int64)
    for end in range(codes.size, 0, -_SLICE):  # from the back, so earlier rows overwrite later ones
        start = max(end - _SLICE, 0)
        first[codes[start:end][::-1]] = np.arange(end - 1, start - 1, -1)
    return first


def _classify(raw: RawTrace, columns: tuple[str, ...]) -> dict:
    """``category`` and, of ``kind`` and ``shape``, those ``columns`` has, of every event as categoricals, and
    ``group`` where it has it (device ops classified once per distinct identity, the rest by role); of the reader's
    ``hlo_op`` and ``hlo_module`` codes, those ``columns`` has filled in in place (an op's HLO name and its program's
    module where the event had none). Every row is keyed by its role and op identity, so per-identity tables fill whole
    columns: no gathered copies of the op rows."""
    cols, strings = raw.columns, raw.strings
    role, hlo_op, hlo_module, program_id = cols["role"], cols["hlo_op"], cols["hlo_module"], cols["program_id"]
    known = cols["program_known"]
    if program_id.max(initial=0) < 2**31:  # a key part as it is, -1 unknown
        programs = np.where(known, program_id.astype(np.int64), -1)
    else:
        programs = pd.factorize(pd.arrays.IntegerArray(program_id, ~known), size_hint=_FEW)[0]
    key = packed_key([role, cols["name"], hlo_op, cols["hlo_category"], programs])
    del programs
    identity, first = pd.factorize(key, size_hint=_FEW)
    del key
    first_row = first_rows(identity, len(first))
    classes = {}  # identity -> its class, device ops only
    sized = {}  # identity -> its program: collectives whose program the trace holds, where columns has group
    hlo_table, module_table = hlo_op[first_row], hlo_module[first_row]
    for i, r in enumerate(first_row.tolist()):
        if role[r] != ROLES["op"]:
            continue
        text = lambda col: strings.values[cols[col][r]] if cols[col][r] >= 0 else ""  # noqa: E731
        program = raw.programs.get(int(program_id[r])) if known[r] else None
        c = classes[i] = classify.classify(text("name"), text("hlo_op"), program, text("hlo_category"))
        if program is not None and c.category in ("ici", "dcn") and "group" in columns:
            sized[i] = program
        hlo_table[i] = strings.code(c.hlo_op) if c.hlo_op else -1
        if module_table[i] < 0 and program is not None:
            module_table[i] = strings.code(program.module)
    if "hlo_op" in columns:
        np.take(hlo_table, identity, out=hlo_op, mode="clip")  # in place (mode "raise" would buffer)
    if "hlo_module" in columns:
        is_op_identity = role[first_row] == ROLES["op"]
        for start in range(0, role.size, _SLICE):  # other events keep their module
            rows = slice(start, start + _SLICE)
            hlo_module[rows] = np.where(is_op_identity[identity[rows]], module_table[identity[rows]], hlo_module[rows])
    out = {}
    for column in (name for name in ("kind", "shape") if name in columns):  # "" for events that are not device ops
        codes, values = pd.factorize(pd.Index([""] + [getattr(c, column) for c in classes.values()], dtype=object))
        table = np.zeros(len(first), _small_codes(len(values)))
        table[list(classes)] = codes[1:]
        out[column] = pd.Categorical.from_codes(table[identity], categories=values, validate=False)
    if "group" in columns:  # (collectives alone read it: their group sizes are made for no other analysis)
        table = np.zeros(len(first), np.int32)
        for i, program in sized.items():
            table[i] = program.group(classes[i].hlo_op)
        out["group"] = table[identity]
    # categories: compute / ici / dcn / dma for device ops, then the other roles' names
    table = np.array([CATEGORY_VALUES.index(ROLE_NAMES[r]) if r != ROLES["op"] else 0 for r in range(len(ROLES))],
                     np.int8)[role[first_row]]
    table[list(classes)] = [CATEGORY_VALUES.index(c.category) for c in classes.values()]
    out["category"] = pd.Categorical.from_codes(table[identity], categories=pd.Index(CATEGORY_VALUES, dtype=object),
                                                validate=False)
    return out


def _categorical(codes: np.ndarray, values: list[str]) -> pd.Categorical:
    """Codes into ``values`` (-1 missing) as a categorical of the values used (a count, not a sort), its
    codes in the smallest integer type."""
    counts = np.bincount(codes[codes >= 0] if (codes < 0).any() else codes, minlength=len(values))
    used = np.flatnonzero(counts)
    recode = np.full(len(values) + 1, -1, _small_codes(used.size))  # the last entry answers code -1
    recode[used] = np.arange(used.size)
    return pd.Categorical.from_codes(recode[codes], categories=pd.Index(np.array(values, object)[used], dtype=object),
                                     validate=False)


def frame(raw: RawTrace, pattern: re.Pattern | None, shift_ps: int, columns: tuple[str, ...]) -> pd.DataFrame:
    """One file's frame of ``columns``. Consumes ``raw.columns``: its number columns become the frame's,
    and each code column is dropped once its categorical is built (the frame's peak memory)."""
    cols = raw.columns
    if pattern is not None:
        steps.mark(cols, raw.strings.values, pattern)
        if KINETO_ONLY in cols:  # launches are in ProfilerSteps, which number no step now: the last is by time
            cols[KINETO_ONLY].fill(-1)
    demoted = steps.demote_instants(cols) if pattern is None else []
    classes = _classify(raw, columns)
    del cols["hlo_category"]
    step, source = steps.assign(cols, raw.strings.values, pattern)
    if demoted:
        source += f" (the ProfilerSteps on device {', '.join(map(str, demoted))} are instants, not spans)"
    del cols["step"], cols["role"]
    values = raw.strings.values
    n = step.size
    start = cols["start_ps"]
    start += shift_ps  # in place: the reader's arrays become the frame's

    def line():
        codes, names = pd.factorize(pd.Index(raw.lines, dtype=object))  # names may repeat
        return pd.Categorical.from_codes(codes.astype(_small_codes(len(names)))[cols.pop("line")], categories=names)

    build = {  # each made only when asked for, in this order
        "rank": lambda: np.full(n, raw.rank, np.int32),
        "host": lambda: pd.Categorical.from_codes(np.zeros(n, np.int8), categories=pd.Index([raw.host], dtype=object)),
        "device": lambda: cols["device"],
        "line": line,
        "name": lambda: _categorical(cols.pop("name"), values),
        "kind": lambda: classes["kind"],
        "category": lambda: classes["category"],
        "start_ps": lambda: start,
        "dur_ps": lambda: cols["dur_ps"],
        "hlo_op": lambda: _categorical(cols.pop("hlo_op"), values),
        "hlo_module": lambda: _categorical(cols.pop("hlo_module"), values),
        "program_id": lambda: pd.arrays.IntegerArray(cols["program_id"], ~cols.pop("program_known")),
        "step": lambda: step,
        "shape": lambda: classes["shape"],
        "group": lambda: classes["group"],
        "stall_ps": lambda: cols["stall_ps"],
        KINETO_ONLY: lambda: cols[KINETO_ONLY],
        **{c: (lambda c=c: cols.get(c, np.full(n, -1, np.int64))) for c in xplane.DEVICE_CLOCK},  # (-1: not read)
    }
    out = pd.DataFrame({c: build[c]() for c in columns if c != KINETO_ONLY or KINETO_ONLY in cols}, copy=False)
    cols.clear()
    out.attrs["steps_from"] = source
    out.attrs["measured"] = raw.measured
    out.attrs["own_clocks"] = [raw.rank] if own_clock(raw.path, raw.origin_ns) else []
    return out


def own_clock(path: Path, origin_ns: int) -> bool:
    """Whether a file's times (from ``origin_ns``) are on a clock of its own: an XSpace's that count from a
    profile start it does not record (``xplane.profile_start``); every other file's are on its host's wall
    clock."""
    return is_xplane(Path(path)) and origin_ns < xplane.EPOCH_NS


def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Frames with categorical columns stacked, categories merged (plain ``pd.concat`` would turn
    differing categoricals into object columns)."""
    if len(frames) == 1:
        return frames[0]
    out = {c: (union_categoricals([f[c] for f in frames]) if c in CATEGORICAL
               else pd.concat([f[c] for f in frames], ignore_index=True).array) for c in frames[0].columns}
    return pd.DataFrame(out, copy=False)


def _trial(path: Path) -> tuple[Path, str] | None:
    """The run directory and trial folder (``RUN/trials/NN-variant``) a trace file lies in, if any."""
    parts = path.parts
    at = max((i for i, part in enumerate(parts[:-2]) if part == "trials"), default=None)
    return None if at is None else (Path(*parts[:at]), parts[at + 1])


def _apart(first: Path, second: Path, claimed: int | None = None) -> str:
    """What to pass instead of two files that hold one rank's same step: one trial's folder where they are two
    trials of one run (a run directory given whole), else one run's traces, saying so where both files record
    the rank they hold (``claimed``)."""
    a, b = _trial(first), _trial(second)
    if a and b and a[0] == b[0] and a[1] != b[1]:
        run = "in this folder" if a[0] == Path() else a[0]  # (paths given from inside the run directory)
        return (f"trials {a[1]} and {b[1]} of the run {run} (a run directory holds a folder per trial): pass one "
                f"trial's folder ({a[0] / 'trials' / a[1]}), or the run to `perfkit trace attribution {a[0]}` for its "
                "A/B attribution")
    if claimed is not None:
        return _claimed(claimed)
    # (a job's processes on one machine each write a file named for it: read as one rank unless told apart)
    return ("pass one run's (one trial's) traces at a time; its processes' files named for one host are one rank's "
            "unless each is in a rank<R> folder")


def _one_run(frames: list[pd.DataFrame], files: list[Path], claimed: list[bool]) -> None:
    """Refuse traces of two runs, trials or hosts read as one rank's: two files holding the same step of the
    same rank and device, two Kineto files that record one rank (``claimed``: each file's distributedInfo.rank)
    at the same time (two processes claiming it), or one chip's events of no step in two files at the same time
    (one rank's traces in several files are its profiling sessions, one after another, or apart by their steps:
    a CPU profile's clock starts at each session). Their spans would merge into meaningless ones."""
    if len(frames) < 2:
        return
    seen: dict[tuple, int] = {}
    for i, frame in enumerate(frames):
        marks = frame.loc[frame["category"] == "step", ["rank", "device", "step"]].drop_duplicates()
        for key in marks.itertuples(index=False, name=None):
            if key in seen:
                other = seen[key]
                both = key[0] if claimed[i] and claimed[other] else None
                raise BadInput(f"rank {key[0]} step {key[2]} is also in {files[other]}: "
                               + _apart(files[other], files[i], both), path=files[i])
            seen[key] = i
    _claimed_at_once(frames, files, claimed)
    ranks = [set(frame["rank"].unique().tolist()) for frame in frames]
    if sum(map(len, ranks)) == len(set().union(*ranks)):
        return  # no rank in two files
    extents = []
    for i, frame in enumerate(frames):
        unstepped = frame.loc[(frame["device"] >= 0) & (frame["step"] < 0), ["rank", "device", "start_ps", "dur_ps"]]
        extents.append(unstepped.assign(end_ps=unstepped["start_ps"] + unstepped["dur_ps"], file=i)
                       .groupby(["rank", "device", "file"], as_index=False).agg(first=("start_ps", "min"),
                                                                                last=("end_ps", "max")))
    ordered = pd.concat(extents).sort_values(["rank", "device", "first"], kind="stable")
    chip, last, owner = None, 0, 0
    for rank, device, file, first, end in ordered[["rank", "device", "file", "first", "last"]].itertuples(
            index=False, name=None):
        if (rank, device) == chip and first < last:
            raise BadInput(f"rank {rank} device {device}'s events of no step overlap in time those in "
                           f"{files[owner]}: two hosts' or runs' traces taken for one rank's (a rank comes from a "
                           "rank<R> folder, else a <host>_<rank> file name, else the host its file is named for); "
                           "pass them apart, or rename them", path=files[file])
        if (rank, device) != chip or end > last:
            chip, last, owner = (rank, device), end, file


def _claimed(rank: int) -> str:
    return (f"both files record distributedInfo.rank {rank}: two processes' (or runs') traces claiming one rank; "
            "pass one run's traces at a time")


def _claimed_at_once(frames: list[pd.DataFrame], files: list[Path], claimed: list[bool]) -> None:
    """Refuse two Kineto files that record one rank and whose events overlap in time: two processes claiming it
    (one rank's profiling sessions, each a file, run one after another)."""
    extents = sorted((int(f["rank"].iloc[0]), int(f["start_ps"].min()), int((f["start_ps"] + f["dur_ps"]).max()), i)
                     for i, f in enumerate(frames) if claimed[i] and len(f))
    for (rank, _, end, i), (later_rank, start, _, j) in zip(extents, extents[1:]):
        if rank == later_rank and start < end:
            raise BadInput(f"it runs at the same time as {files[i]}: " + _claimed(rank), path=files[j])


def _given_twice(frames: list[pd.DataFrame], files: list[Path], unranked: list[bool | None]) -> None:
    """Refuse two Kineto files, one of them recording no rank (``unranked``; None: an XSpace), that hold the same
    device ops at the same times: one trace under two names (a copy), which ranks by order would read as two ranks
    of the same figures. Two processes' ops never all start and last alike to the picosecond."""
    seen: dict[tuple, int] = {}
    for i, frame in enumerate(frames):
        if unranked[i] is None:
            continue
        ops = frame.loc[frame["device"] >= 0, ["start_ps", "dur_ps"]].to_numpy(np.int64)
        key = (len(ops), hash(np.ascontiguousarray(ops).tobytes()))
        other = seen.setdefault(key, i)
        if other != i and len(ops) and (unranked[i] or unranked[other]) and np.array_equal(
                ops, frames[other].loc[frames[other]["device"] >= 0, ["start_ps", "dur_ps"]].to_numpy(np.int64)):
            raise BadInput(f"it holds the same device ops, at the same times, as {files[other]}: one trace given "
                           "twice, not two ranks; pass it once", path=files[i])


def wanted_columns(columns: Iterable[str] | None) -> tuple[str, ...]:
    """The columns a frame is built with for an analysis reading ``columns`` (None: all), in ``COLUMNS``
    order: those and ``REQUIRED``."""
    unknown = set(columns or ()) - set(COLUMNS)
    if unknown:
        raise ValueError(f"no such events columns: {sorted(unknown)}")
    return COLUMNS if columns is None else tuple(c for c in COLUMNS if c in set(columns) | set(REQUIRED))


def clock_columns(columns: tuple[str, ...]) -> tuple[str, ...]:
    """Of a frame's ``columns``, the chip-clock ones an XSpace reader decodes only where asked
    (``xplane.DEVICE_CLOCK``)."""
    return tuple(c for c in xplane.DEVICE_CLOCK if c in columns)


def ranked_files(paths: list[str | Path]) -> list[tuple[Path, int]]:
    """The trace files at ``paths`` (``trace_files``), each with its rank: the one its path names, else
    one per host its name says (``raw.file_host``), numbered in order."""
    files = trace_files(paths)
    _profile_given_twice(files)
    hosts: dict[str, int] = {}
    out = []
    for f in files:
        hint = _rank_hint(f)
        out.append((f, hint if hint is not None else hosts.setdefault(file_host(f), len(hosts))))
    return out


def _profile_given_twice(files: list[Path]) -> None:
    """Refuse two XSpace files of the same bytes (or one named twice): one profile given twice, which would read as
    two hosts or ranks of the same figures. A profiler writes each process's own host, pids and times into its
    profile, so two processes' never match; only files of one size are compared, each pair to its first
    difference (empty files, no profile, are left to the reader's refusal)."""
    sizes: dict[int, list[Path]] = {}
    for f in files:
        if is_xplane(f) and (size := f.stat().st_size):
            sizes.setdefault(size, []).append(f)
    for same in sizes.values():
        for i, f in enumerate(same):
            for earlier in same[:i]:
                if f == earlier:
                    raise BadInput("named twice: one profile given twice, not two hosts' or ranks'; pass it once",
                                   path=f)
                if filecmp.cmp(earlier, f, shallow=False):
                    raise BadInput(f"it is {earlier} byte for byte: one profile given twice, not two hosts' or "
                                   "ranks'; pass it once", path=f)


def load(paths: list[str | Path], step_pattern: str | None = None, workers: int | None = None,
         columns: Iterable[str] | None = None) -> pd.DataFrame:
    """All events of the traces at ``paths`` (files or folders) in one frame (``COLUMNS``, or those of
    ``columns`` plus ``REQUIRED``, in ``COLUMNS`` order: what an analysis does not read is not built);
    ``attrs``: ``origin_ns`` (wall clock of start_ps 0), ``steps_from``, ``files``, ``measured`` (``["device"]``,
    ``"host"`` among them where a trace had no device events: its host ops stand in, ``"cpu"`` where its device
    ops all ran on the host plane: XLA's CPU devices), ``last_step_notes`` (what parts a Kineto trace's figures from
    HTA's where the last step is dropped: ``timeline.layout`` says it). XSpaces are decoded
    by ``workers`` processes (default: one per core this process may use) when they are big enough."""
    wanted = wanted_columns(columns)
    pattern = None
    if step_pattern:
        try:
            pattern = re.compile(step_pattern)
        except re.error as exc:
            raise BadInput(f"not a regular expression: {exc}", field="--steps") from None
    ranked = ranked_files(paths)
    raws = _read(ranked, workers or usable_cores(), {Path(p) for p in paths if Path(p).is_file()}, wanted)
    files = [r.path for r in raws]
    placed = one_clock(files, [r.origin_ns for r in raws])
    for r in raws if len(raws) > 1 else ():  # (one file's rank 0 ranks nothing against another)
        if not r.rank_recorded:
            warnings.warn(f"{r.path}: it records no rank (distributedInfo.rank): it is rank {r.rank}, from its path "
                          "(a rank<R> folder) or else its host's order among the files given", DefinitionNote,
                          stacklevel=2)
    origin = min(placed)
    frames = [frame(r, pattern, (at - origin) * 1000, wanted) for r, at in zip(raws, placed)]
    for f, path in zip(frames, files):  # the steps asked for, not the whole trace as one unsaid step
        if pattern is not None and f.attrs["steps_from"] == "none":
            raise BadInput(f"--steps /{step_pattern}/: no event's name matches it (device ops are never markers)",
                           path=path)
    if any(KINETO_ONLY in f for f in frames):  # Kineto and XSpaces together: the XSpaces' launches unknown
        frames = [f if KINETO_ONLY in f else f.assign(**{KINETO_ONLY: np.full(len(f), -1, np.int32)}) for f in frames]
    _one_run(frames, files, [r.rank_recorded and not is_xplane(r.path) for r in raws])
    if len(frames) > 1:
        _given_twice(frames, files, [None if is_xplane(r.path) else not r.rank_recorded for r in raws])
    out = concat(frames)
    out.attrs.update(origin_ns=origin, files=[str(f) for f in files],
                     steps_from=sorted({f.attrs["steps_from"] for f in frames}),
                     measured=sorted({f.attrs["measured"] for f in frames}),
                     own_clocks=[rank for f in frames for rank in f.attrs["own_clocks"]],
                     last_step_notes=[note for r in raws for note in _last_step_notes(r)])
    return out


def one_clock(files: list[Path], origins: list[int]) -> list[int]:
    """The files' ``origins`` (ns) on one clock, each within int64 picoseconds of the earliest; else BadInput
    naming the first file past that. Of several files, an XSpace whose origin is not on the wall clock (its
    timestamps count from a profile start it does not record) is noted, and placed as if its profile had started
    with the earliest of the files that record theirs (with the others like it, where none does)."""
    own = [own_clock(f, o) for f, o in zip(files, origins)]
    if len(files) > 1:
        for f, alone in zip(files, own):
            if alone:
                warnings.warn(f"{f}: its timestamps count from its profile's start, which it does not record (no "
                              "Task Environment profile_start_time): it is placed as if its profile had started "
                              "with the other files', not by the clock: whose trace ends first across it and them "
                              "is not known, and the collectives' skews are not measured across them",
                              DefinitionNote, stacklevel=2)
    start = min((o for o, alone in zip(origins, own) if not alone), default=0)
    origins = [start + o if alone else o for o, alone in zip(origins, own)]
    origin = min(origins)
    for f, o in zip(files, origins):
        if (o - origin) * 1000 >= 2**62:
            days = (o - origin) / 86400e9
            apart = f"{days / 365.25:.0f} years" if days > 730 else f"{days:.0f} days"
            raise BadInput(f"starts {apart} after another trace given: pass one "
                           "run's traces at a time", path=f)
    return origins


def run_starts(*columns: np.ndarray) -> np.ndarray:
    """Start index of each run of rows where none of ``columns`` changes."""
    n = columns[0].size
    if not n:
        return np.zeros(0, np.int64)
    changed = np.zeros(n - 1, bool)
    for c in columns:
        changed |= c[1:] != c[:-1]
    return np.concatenate([[0], np.flatnonzero(changed) + 1])


def chip_key(rank: np.ndarray, device: np.ndarray) -> np.ndarray:
    """One int64 per (rank, device) pair (n,) each, ordered as the pairs are (device -1: the host)."""
    return (rank.astype(np.int64) << 32) | (device.astype(np.int64) + 2**31)


def chip_frame(keys: np.ndarray, rank: np.dtype, device: np.dtype) -> pd.DataFrame:
    """The (rank, device) pairs of ``chip_key``'s keys (k,), as columns of dtypes ``rank`` and ``device``."""
    return pd.DataFrame({"rank": (keys >> 32).astype(rank), "device": ((keys & 0xFFFFFFFF) - 2**31).astype(device)})


def is_device_op(events: pd.DataFrame) -> np.ndarray:
    """Which rows (n,) bool of an events frame are device ops (compute / ici / dcn / dma)."""
    return events["category"].isin(classify.CATEGORIES).to_numpy()


def device_ops(events: pd.DataFrame) -> pd.DataFrame:
    """The device ops of an events frame."""
    return events[is_device_op(events)]
