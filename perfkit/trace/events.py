"""Trace files (xplane.pb of TPU / GPU / CPU, Kineto JSON) into one tidy pandas events frame.

One row per event. Columns:

| column | dtype | meaning |
| --- | --- | --- |
| rank | int32 | process rank (Kineto ``distributedInfo.rank``, a ``rank<R>`` folder, else by host) |
| host | category | host name (XSpace hostname, else the file name) |
| device | int32 | device (chip) index; -1 for host activity |
| line | category | XLine / stream / thread the event sits on |
| name | category | event name |
| kind | category | device ops: opcode or kernel kind (``perfkit.trace.classify``); "" otherwise |
| category | category | ``compute`` / ``ici`` / ``dma`` for device ops; ``step``, ``module``, ``host``, ``other`` |
| start_ps, dur_ps | int64 | start from the frame's origin (``attrs["origin_ns"]``, wall clock), duration |
| hlo_op, hlo_module | category | HLO instruction and module where known |
| program_id | int64 | XLA program id (-1 unknown) |
| step | int32 | step of a device op or number of a step marker (-1 none; ``perfkit.trace.steps``) |
| shape | category | output shape of the op where known |
| stall_ps | int64 | local DMA stall inside the op (TPU ``dma_stall_duration_ps``) |

Strings are categoricals and numbers numpy columns: about 60 bytes an event, against over a kilobyte
for the same event as a Python dict.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from perfkit.errors import BadInput
from perfkit.trace import classify, kineto, steps, xplane
from perfkit.trace.raw import ROLES, RawTrace

ROLE_NAMES = {v: k for k, v in ROLES.items()}  # non-op roles are also the category of their events
CATEGORICAL = ("host", "line", "name", "kind", "category", "hlo_op", "hlo_module", "shape")
_RANK_DIR = re.compile(r"rank[-_]?(\d+)$")
_XPLANE_SUFFIX = ".xplane.pb"
_KINETO_SUFFIXES = (".json", ".json.gz")


def trace_files(paths: list[str | Path]) -> list[Path]:
    """Files named on the command line, and the traces under folders: every ``*.xplane.pb``, else
    (a folder without any) every ``*.json`` / ``*.json.gz``."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            planes = sorted(p.rglob(f"*{_XPLANE_SUFFIX}"))
            found += planes or sorted(f for f in p.rglob("*") if f.name.endswith(_KINETO_SUFFIXES))
            if not found:
                raise BadInput("no *.xplane.pb or Kineto *.json[.gz] trace under this folder", path=p)
        else:
            raise BadInput("no such file or folder", path=p)
    return found


def _rank_hint(path: Path) -> int | None:
    for part in reversed(path.parent.parts):
        m = _RANK_DIR.search(part)
        if m:
            return int(m.group(1))
    return None


def _read(path: Path, rank: int) -> RawTrace:
    if path.name.endswith(_XPLANE_SUFFIX) or path.suffix == ".pb":
        return xplane.read(path, rank)
    if path.name.endswith(_KINETO_SUFFIXES):
        return kineto.read(path, rank)
    raise BadInput("not a trace file: expected *.xplane.pb, *.json or *.json.gz", path=path)


def _packed_key(codes: list[np.ndarray]) -> np.ndarray:
    """One int64 key per row for a tuple of non-negative int columns (refactorized when too wide)."""
    key = codes[0].astype(np.int64)
    for c in codes[1:]:
        bits = int(c.max(initial=0)).bit_length()
        if int(key.max(initial=0)).bit_length() + bits > 62:
            key = pd.factorize(key)[0].astype(np.int64)
        key = (key << bits) | c
    return key


def _classify(raw: RawTrace) -> dict[str, np.ndarray]:
    """Codes (into raw.strings) of kind, category, shape, hlo_op and hlo_module for every event."""
    cols, strings = raw.columns, raw.strings
    n = cols["role"].size
    out = {"kind": np.full(n, strings.code(""), np.int32),
           "category": np.array([strings.code(ROLE_NAMES[r]) for r in range(len(ROLES))], np.int32)[cols["role"]],
           "shape": np.full(n, strings.code(""), np.int32),
           "hlo_op": cols["hlo_op"].copy(), "hlo_module": cols["hlo_module"].copy()}
    ops = np.flatnonzero(cols["role"] == ROLES["op"])
    if not ops.size:
        return out
    prog_codes, _ = pd.factorize(cols["program_id"][ops])
    ident = [cols["name"][ops] + 1, cols["hlo_op"][ops] + 1, cols["hlo_category"][ops] + 1, prog_codes + 1]
    op_code, first = pd.factorize(_packed_key([np.asarray(c, np.int64) for c in ident]))
    first_row = np.zeros(len(first), np.int64)
    first_row[op_code[::-1]] = np.arange(ops.size)[::-1]  # any row of each identity will do
    table = []
    for r in ops[first_row]:
        text = lambda col: strings.values[cols[col][r]] if cols[col][r] >= 0 else ""  # noqa: E731
        program = raw.programs.get(int(cols["program_id"][r]))
        c = classify.classify(text("name"), text("hlo_op"), program, text("hlo_category"))
        module = cols["hlo_module"][r] if cols["hlo_module"][r] >= 0 or program is None else strings.code(program.module)
        table.append([strings.code(c.kind), strings.code(c.category), strings.code(c.shape),
                      strings.code(c.hlo_op) if c.hlo_op else -1, module])
    table = np.array(table, np.int32)[op_code].T
    for i, column in enumerate(("kind", "category", "shape", "hlo_op", "hlo_module")):
        out[column][ops] = table[i]
    return out


def _categorical(codes: np.ndarray, values: list[str]) -> pd.Categorical:
    """Codes into ``values`` (-1 missing) as a categorical of the values used (a count, not a sort)."""
    used = np.flatnonzero(np.bincount(codes + 1, minlength=len(values) + 1)[1:])
    recode = np.full(len(values) + 1, -1, np.int32)
    recode[used + 1] = np.arange(used.size, dtype=np.int32)
    return pd.Categorical.from_codes(recode[codes + 1], categories=pd.Index(np.array(values, object)[used], dtype=object),
                                     validate=False)


def _frame(raw: RawTrace, pattern: re.Pattern | None, shift_ps: int) -> pd.DataFrame:
    cols = raw.columns
    classes = _classify(raw)
    step, source = steps.assign(cols, raw.strings.values, pattern)
    values = raw.strings.values
    n = step.size
    line_codes, line_names = pd.factorize(pd.Index(raw.lines, dtype=object))  # names may repeat
    frame = pd.DataFrame({
        "rank": np.full(n, raw.rank, np.int32),
        "host": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=pd.Index([raw.host], dtype=object)),
        "device": cols["device"],
        "line": pd.Categorical.from_codes(line_codes[cols["line"]], categories=line_names),
        "name": _categorical(cols["name"], values),
        "kind": _categorical(classes["kind"], values),
        "category": _categorical(classes["category"], values),
        "start_ps": cols["start_ps"] + shift_ps,
        "dur_ps": cols["dur_ps"],
        "hlo_op": _categorical(classes["hlo_op"], values),
        "hlo_module": _categorical(classes["hlo_module"], values),
        "program_id": cols["program_id"],
        "step": step,
        "shape": _categorical(classes["shape"], values),
        "stall_ps": cols["stall_ps"],
    }, copy=False)
    frame.attrs["steps_from"] = source
    return frame


def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Frames with categorical columns stacked, categories merged (plain ``pd.concat`` would turn
    differing categoricals into object columns)."""
    if len(frames) == 1:
        return frames[0]
    out = {c: (union_categoricals([f[c] for f in frames]) if c in CATEGORICAL
               else np.concatenate([f[c].to_numpy() for f in frames])) for c in frames[0].columns}
    return pd.DataFrame(out, copy=False)


def _one_file_per_step(frames: list[pd.DataFrame], files: list[Path]) -> None:
    """Refuse two traces holding the same step of the same rank and device (two runs or trials mixed):
    their windows would merge into one meaningless span."""
    seen: dict[tuple, Path] = {}
    for frame, path in zip(frames, files):
        marks = frame.loc[frame["category"] == "step", ["rank", "device", "step"]].drop_duplicates()
        for key in marks.itertuples(index=False, name=None):
            if key in seen:
                raise BadInput(f"rank {key[0]} step {key[2]} is also in {seen[key]}: pass one run's (one trial's) "
                               "traces at a time", path=path)
            seen[key] = path


def load(paths: list[str | Path], step_pattern: str | None = None) -> pd.DataFrame:
    """All events of the traces at ``paths`` (files or folders) in one frame (columns above);
    ``attrs``: ``origin_ns`` (wall clock of start_ps 0), ``steps_from``, ``files``."""
    pattern = None
    if step_pattern:
        try:
            pattern = re.compile(step_pattern)
        except re.error as exc:
            raise BadInput(f"not a regular expression: {exc}", field="--steps") from None
    files = trace_files(paths)
    hosts: dict[str, int] = {}
    raws = []
    for f in files:
        hint = _rank_hint(f)
        raws.append(_read(f, hint if hint is not None else hosts.setdefault(f.name.split(".")[0], len(hosts))))
    origin = min(r.origin_ns for r in raws)
    frames = [_frame(r, pattern, (r.origin_ns - origin) * 1000) for r in raws]
    _one_file_per_step(frames, files)
    out = concat(frames)
    out.attrs.update(origin_ns=origin, files=[str(f) for f in files],
                     steps_from=sorted({f.attrs["steps_from"] for f in frames}))
    return out


def device_ops(events: pd.DataFrame) -> pd.DataFrame:
    """The device ops (compute / ici / dma) of an events frame."""
    return events[events["category"].isin(classify.CATEGORIES)]
